"""Development tooling, not the product: a local broker (Apache Kafka or Tansu), the jars it runs from, the demo
and its sample data."""
