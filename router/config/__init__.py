"""The control plane: the YAML format, validation and limits, the Avro codec of config records, diffs, the topics
a config needs (pure), and the store that reads the compacted config topic to its end and follows it."""
