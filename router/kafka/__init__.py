"""The Kafka edge: clients built from settings, topic creation, reading a topic to its end."""
