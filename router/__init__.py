"""subroute's router service: the wire format, settings, config store, worker loop, Kafka I/O, consumer client,
operator actions, metrics, CLI (README, Code map: the rooms in their layers)."""
