"""A group topic added after the others (the demo's redrive into a new group) is landed with the rest.

Redriven records keep their original producer timestamps, so the new topic holds records older than those
already on the other topics, and carries a ``subroute.redriven`` header; the job's default pattern must
still find the topic, on a fresh checkpoint and on a re-run from an existing one.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from confluent_kafka import Producer
from pyspark.sql import SparkSession
from routed_records import BASE_TIMESTAMP_MS, create_topics, produce_routed

from subroute import wire
from subroute.ops.settings import Settings
from subroute.spark.job import JobConfig, run

pytestmark = [pytest.mark.spark, pytest.mark.kafka]

NOW_MS = BASE_TIMESTAMP_MS  # the records routed first
HOUR_MS = 3_600_000


def _produce_redriven(bootstrap: str, topic: str, app: str, group: str, count: int, partitions: int) -> None:
    """Records as a redrive writes them: original (older, out of order) timestamps, the redriven header."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    rng = random.Random(7)
    for i in range(count):
        original = NOW_MS - 26 * HOUR_MS + rng.randrange(HOUR_MS)  # the day before, shuffled
        producer.produce(
            topic,
            value=f"late {i}".encode(),
            key=f"k{i}".encode(),
            partition=i % partitions,
            timestamp=original,
            headers=[
                (wire.APP, app.encode()),
                (wire.GROUP, group.encode()),
                (wire.SUBSCRIPTION, f"{app}/{group}/0".encode()),
                (wire.ROUTED_AT, str(NOW_MS + 60_000 + i).encode()),
                (wire.REDRIVEN, b"pending"),
            ],
        )
    assert producer.flush(30) == 0


def _landed(spark: SparkSession, output: str) -> dict[str, int]:
    rows = spark.read.parquet(output).groupBy("topic").count().collect()
    return {row["topic"]: row["count"] for row in rows}


def test_a_group_topic_added_later_with_older_records_is_landed(
    spark_session: SparkSession, kafka, unique: str, tmp_path: Path
) -> None:
    bootstrap = kafka.bootstrap_servers
    early = {f"{unique}.shop.eu": 2, f"{unique}.shop.us": 3}
    create_topics(bootstrap, early)
    for topic, partitions in early.items():
        group = topic.rsplit(".", 1)[1]
        produce_routed(
            bootstrap,
            topic,
            [b"x"] * 40,
            app="shop",
            group=group,
            partitions=partitions,
            base_timestamp_ms=NOW_MS,
        )
    # Pending and dead-letter topics are not group topics: they must stay out.
    create_topics(bootstrap, {f"{unique}.shop.pending": 1})
    # The new group, created (by config apply) after the others, filled by the redrive.
    late = f"{unique}.shop.apac"
    create_topics(bootstrap, {late: 3})
    _produce_redriven(bootstrap, late, "shop", "apac", 30, 3)

    config = JobConfig(Settings(bootstrap, unique), str(tmp_path / "out"), str(tmp_path / "checkpoint"))
    result = run(spark_session, config)

    assert result.rows == 110
    assert _landed(spark_session, config.output) == {
        f"{unique}.shop.eu": 40,
        f"{unique}.shop.us": 40,
        late: 30,
    }
    assert set(result.committed) == {f"{unique}.shop.eu", f"{unique}.shop.us", late}
    assert sum(result.committed[late].values()) == 30

    # Another group appears after a run: the next run from the same checkpoint picks it up, and only it.
    later = f"{unique}.shop.latam"
    create_topics(bootstrap, {later: 2})
    _produce_redriven(bootstrap, later, "shop", "latam", 12, 2)
    again = run(spark_session, config)

    assert again.rows == 12
    assert set(again.committed) == {later}
    assert _landed(spark_session, config.output)[later] == 12
