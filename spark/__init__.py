"""The Spark side of subroute: a Kafka data source for Spark, the job that lands routed topics in Parquet,
and the routing report. Modules that need pyspark import it themselves, so ``subroute.spark.cli`` loads without it."""
