"""subroute's router service: settings, config store, worker loop, Kafka I/O, consumer client, metrics, CLI."""
