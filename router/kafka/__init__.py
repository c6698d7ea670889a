"""The Kafka edge: clients built from settings, topic creation from plain specs, reading a topic to its end,
consumer groups seen from outside."""
