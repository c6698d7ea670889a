"""The Spark session the job runs in, and how to tell that Spark's own Kafka connector is missing."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from pyspark.errors import PySparkException
from pyspark.sql import SparkSession

from subroute.spark import kafka_source


def build_session(
    master: str | None = None, app_name: str = "subroute-spark", jars: Sequence[str] = ()
) -> SparkSession:
    """A session for the job; ``master`` given (local mode) also turns the UI off and shrinks shuffles.

    ``jars`` go on the classpath (``spark.jars``): Spark's Kafka connector and its dependencies, for example.
    """
    builder = SparkSession.builder.appName(app_name).config("spark.sql.session.timeZone", "UTC")
    if jars:
        builder = builder.config("spark.jars", ",".join(jars))
    if master is not None:
        # Local Python workers must run this interpreter (pyarrow, confluent-kafka), not whatever python3 is.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        builder = (
            builder.master(master)
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.sql.shuffle.partitions", "2")
        )
    session = builder.getOrCreate()
    kafka_source.register(session)
    return session


def kafka_format_missing(exc: Exception) -> bool:
    condition = exc.getCondition() if isinstance(exc, PySparkException) else None
    text = str(exc)
    return condition in ("KAFKA_DATA_SOURCE_NOT_ENABLED", "DATA_SOURCE_NOT_FOUND") or (
        "KAFKA_DATA_SOURCE_NOT_ENABLED" in text or "Failed to find data source: kafka" in text
    )
