"""The Spark job honours the operator's settle entries (``subroute queue ack``): a record an entry covers (below
its recorded end, matching its filter) is not landed; records past the end, or that its filter does not match,
are; every offset is confirmed, covered ones included (they are settled)."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from confluent_kafka import Producer
from pyspark.sql import SparkSession
from routed_records import produce_routed

from subroute import wire
from subroute.client.settle_feed import ensure_settle_topic
from subroute.client.settles import SettleEntry
from subroute.kafka.clients import close_producer
from subroute.spark.job import JobConfig, run
from tests.integration.harness import Env, apply, make_env

pytestmark = [pytest.mark.spark, pytest.mark.kafka]

CONFIG = """
apps:
  audit:
    inputs: [INPUT]
    properties: {Region: string}
    groups:
      all: {}
"""


def _write_entries(env: Env, entries: list[SettleEntry]) -> None:
    ensure_settle_topic(env.settings)
    producer = Producer(env.settings.client_config({}))
    for entry in entries:
        producer.produce(wire.settle_topic(env.prefix), key=entry.key.encode(), value=entry.to_json())
    assert producer.flush(30) == 0
    close_producer(producer)


def test_covered_records_are_not_landed_and_are_confirmed(
    spark_session: SparkSession, kafka, tmp_path: Path
) -> None:
    env = make_env(kafka.bootstrap_servers, f"ss{uuid.uuid4().hex[:8]}")
    assert apply(env, CONFIG) == 0
    topic = wire.group_topic(env.prefix, "audit", "all")
    produce_routed(env.bootstrap, topic, [f"audit {i}".encode() for i in range(10)], app="audit", group="all")
    eu = SettleEntry("audit", "all", "1-eu", 'Region == "EU"', {(topic, 0): 4})  # offsets 0-3 match
    us = SettleEntry("audit", "all", "2-us", 'Region == "US"', {(topic, 0): 10})  # matches none
    _write_entries(env, [eu, us])

    output = str(tmp_path / "out")
    result = run(spark_session, JobConfig(env.settings, output, f"{output}/_checkpoint"))

    landed = spark_session.read.option("basePath", output).parquet(f"{output}/app=audit")
    assert sorted(row["offset"] for row in landed.select("offset").collect()) == list(range(4, 10))
    assert result.rows == 10  # every record read and confirmed, the settled ones included
    assert result.committed[wire.consumer_group_id(env.prefix, "audit", "all")][(topic, 0)] == 10
