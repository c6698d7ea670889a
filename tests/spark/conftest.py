"""One local Spark session for every Spark test: starting one costs about ten seconds.

The session has Spark's own Kafka connector (``spark-sql-kafka-0-10``, resolved from Maven Central by
jars/pom.xml) on its classpath, so the job's two sources, Spark's ``kafka`` and the project's Python one, run
side by side on the same topics (on Apache Kafka; see below for Tansu).
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# Without the 'spark' extra (pyspark, pyarrow) there is nothing here to run.
if importlib.util.find_spec("pyspark") is None:
    collect_ignore_glob = ["test_*.py"]


@pytest.fixture(scope="session")
def spark_session(kafka) -> Iterator[SparkSession]:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from subroute.dev import jars as dev_jars
    from subroute.spark.session import build_session

    # Spark's connector reads up to the end offset ListOffsets reports, which Tansu answers short by up to a batch
    # (docs/brokers.md): on Tansu the session goes without it, and the job uses its Python source, as it does on
    # any cluster without the connector. That fallback is then what the tests check.
    connector = [] if kafka.is_tansu else [str(jar) for jar in dev_jars.jar_files("spark-kafka")]
    session = build_session(master="local[2]", app_name="subroute-tests", jars=connector)
    try:
        yield session
    finally:
        session.stop()
