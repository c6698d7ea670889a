"""The data plane's decisions, pure functions of (message properties, compiled plan, capacity snapshot): typed
header decoding, the routing table and each app's decision, priority bands, explain, which groups capacity
and presence are measured for (the worker measures them), and the native core (``native/``, Rust) that evaluates the shared plan."""
