"""The Python Kafka data source against the real broker: Spark's schema, exact records, offset ranges."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)
from routed_records import BASE_TIMESTAMP_MS, create_topics

from subroute.spark.kafka_source import FORMAT, offsets_from_json, offsets_to_json, rate_limit

pytestmark = [pytest.mark.spark, pytest.mark.kafka]

# Spark's Kafka source schema (spark-sql-kafka-0-10, KafkaRecordToRowConverter), written out literally.
SPARK_KAFKA_SCHEMA = StructType(
    [
        StructField("key", BinaryType(), True),
        StructField("value", BinaryType(), True),
        StructField("topic", StringType(), True),
        StructField("partition", IntegerType(), True),
        StructField("offset", LongType(), True),
        StructField("timestamp", TimestampType(), True),
        StructField("timestampType", IntegerType(), True),
    ]
)
SPARK_KAFKA_SCHEMA_WITH_HEADERS = StructType(
    [
        *SPARK_KAFKA_SCHEMA.fields,
        StructField(
            "headers",
            ArrayType(
                StructType(
                    [StructField("key", StringType(), True), StructField("value", BinaryType(), True)]
                ),
                True,
            ),
            True,
        ),
    ]
)


def _read(spark: SparkSession, bootstrap: str, **options: str) -> DataFrame:
    return spark.read.format(FORMAT).option("kafka.bootstrap.servers", bootstrap).options(**options).load()


def test_schema_equals_spark_kafka_source_schema(spark_session: SparkSession, kafka, unique: str) -> None:
    with_headers = _read(spark_session, kafka.bootstrap_servers, subscribe=unique, includeHeaders="true")
    without = _read(spark_session, kafka.bootstrap_servers, subscribe=unique)
    assert with_headers.schema == SPARK_KAFKA_SCHEMA_WITH_HEADERS
    assert without.schema == SPARK_KAFKA_SCHEMA
    streaming = (
        spark_session.readStream.format(FORMAT)
        .options(**{"kafka.bootstrap.servers": kafka.bootstrap_servers, "subscribe": unique})
        .option("includeHeaders", "true")
        .load()
    )
    assert streaming.schema == SPARK_KAFKA_SCHEMA_WITH_HEADERS


def test_batch_read_returns_every_record_byte_for_byte(
    spark_session: SparkSession, kafka, unique: str
) -> None:
    topic = f"{unique}.raw"
    create_topics(kafka.bootstrap_servers, {topic: 3})
    producer = Producer({"bootstrap.servers": kafka.bootstrap_servers, "linger.ms": 5})
    expected = set()
    base = BASE_TIMESTAMP_MS
    for i in range(300):
        key = None if i % 7 == 0 else f"k{i}".encode()
        value = None if i % 11 == 0 else bytes([i % 256]) * (i % 5)  # null, empty and binary values
        headers: list[tuple[str, bytes | None]] = [("a", b"1"), ("a", b"2"), ("n", None)] if i % 2 else []
        producer.produce(topic, value=value, key=key, headers=headers, partition=i % 3, timestamp=base + i)
        expected.add((key, value, i % 3, base + i, tuple(headers)))
    producer.flush(30)

    frame = _read(spark_session, kafka.bootstrap_servers, subscribe=topic, includeHeaders="true")
    rows = frame.withColumn("millis", F.unix_millis("timestamp")).collect()

    got = {
        (
            None if r.key is None else bytes(r.key),
            None if r.value is None else bytes(r.value),
            r.partition,
            r.millis,
            tuple((h.key, None if h.value is None else bytes(h.value)) for h in r.headers),
        )
        for r in rows
    }
    assert len(rows) == 300
    assert got == expected
    assert {r.topic for r in rows} == {topic}
    assert {r.timestampType for r in rows} == {0}  # CreateTime
    per_partition = sorted((r.partition, r.offset) for r in rows)
    assert per_partition == sorted((p, o) for p in range(3) for o in range(100))


def test_batch_offset_range_and_pattern(spark_session: SparkSession, kafka, unique: str) -> None:
    topics = [f"{unique}.a", f"{unique}.b", f"{unique}.other"]
    create_topics(kafka.bootstrap_servers, dict.fromkeys(topics, 1))
    producer = Producer({"bootstrap.servers": kafka.bootstrap_servers})
    for topic in topics:
        for i in range(10):
            producer.produce(topic, value=str(i).encode())
    producer.flush(30)

    ranged = _read(
        spark_session,
        kafka.bootstrap_servers,
        subscribePattern=rf"{unique}\.(a|b)",
        startingOffsets=f'{{"{unique}.a": {{"0": 3}}, "{unique}.b": {{"0": -2}}}}',
        endingOffsets=f'{{"{unique}.a": {{"0": 5}}, "{unique}.b": {{"0": -1}}}}',
    ).collect()

    assert sorted((r.topic, r.offset) for r in ranged) == [(f"{unique}.a", 3), (f"{unique}.a", 4)] + [
        (f"{unique}.b", o) for o in range(10)
    ]


def test_stream_honours_max_offsets_per_trigger(
    spark_session: SparkSession, kafka, unique: str, tmp_path
) -> None:
    topic = f"{unique}.limited"
    create_topics(kafka.bootstrap_servers, {topic: 2})
    producer = Producer({"bootstrap.servers": kafka.bootstrap_servers, "linger.ms": 5})
    for i in range(250):
        producer.produce(topic, value=str(i).encode(), partition=i % 2)
    producer.flush(30)
    batches: list[list[tuple[int, int]]] = []

    def collect(frame: DataFrame, batch_id: int) -> None:
        batches.append([(r.partition, r.offset) for r in frame.select("partition", "offset").collect()])

    query = (
        spark_session.readStream.format(FORMAT)
        .option("kafka.bootstrap.servers", kafka.bootstrap_servers)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "100")
        .load()
        .writeStream.foreachBatch(collect)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)

    sizes = [len(b) for b in batches if b]
    assert sizes == [100, 100, 50]
    landed = [item for b in batches for item in b]
    assert sorted(landed) == sorted((p, o) for p in range(2) for o in range(125))


def test_rate_limit_spreads_by_backlog() -> None:
    starts = {("t", 0): 0, ("t", 1): 10, ("t", 2): 5}
    ends = {("t", 0): 300, ("t", 1): 110, ("t", 2): 5}
    limited = rate_limit(starts, ends, 100)
    assert limited == {("t", 0): 75, ("t", 1): 35, ("t", 2): 5}
    assert rate_limit(starts, ends, 10_000) == ends
    # A partition with a tiny share still moves (Spark rounds shares below one up).
    assert rate_limit({("t", 0): 0, ("t", 1): 0}, {("t", 0): 1000, ("t", 1): 1}, 10)[("t", 1)] == 1


def test_offsets_json_is_canonical() -> None:
    offsets = {("b", 10): 1, ("b", 2): 7, ("a", 0): 3}
    as_json = offsets_to_json(offsets)
    assert list(as_json) == ["a", "b"]
    assert list(as_json["b"]) == ["2", "10"]
    assert offsets_from_json(as_json) == offsets
