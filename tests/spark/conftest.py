"""One local Spark session for every Spark test: starting one costs about ten seconds."""

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
def spark_session() -> Iterator[SparkSession]:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from spark.job import build_session

    session = build_session(master="local[2]", app_name="subroute-tests")
    try:
        yield session
    finally:
        session.stop()
