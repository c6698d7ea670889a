"""One local Spark session for every Spark test: starting one costs about ten seconds."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

pyspark = pytest.importorskip("pyspark", reason="the Spark tests need the 'spark' extra (pyspark, pyarrow)")

from pyspark.sql import SparkSession  # noqa: E402


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from spark.job import build_session

    session = build_session(master="local[2]", app_name="subroute-tests")
    try:
        yield session
    finally:
        session.stop()
