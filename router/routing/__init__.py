"""The data plane's decisions, pure functions of (message properties, compiled plan, capacity snapshot): typed
header decoding, the routing table and each app's decision, priority bands, explain, lag-based capacity, and
the native core (``native/``, Rust) that evaluates the shared plan."""
