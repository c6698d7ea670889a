"""The Spark side of subroute: a Kafka data source for Spark, the job that lands routed topics in Parquet,
the routing report and the backtest of a proposed configuration (``plan``). Modules that need pyspark import it
themselves, so the command line (``subroute.cli.spark``, ``subroute.cli.plan``) loads without it."""
