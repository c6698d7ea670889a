"""The Spark job end to end on the real broker: Parquet contents, confirms, checkpoint restarts, the report."""

from __future__ import annotations

import argparse
import math
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from routed_records import BASE_DATE, Produced, create_topics, produce_routed, sample_orders

from subroute.cli import spark as cli
from subroute.ops.settings import Settings
from subroute.spark import commits, job
from subroute.spark.job import (
    BatchSink,
    JobConfig,
    RunResult,
    config_from_args,
    group_topics_pattern,
    routed_columns,
    run,
    source,
    start,
)
from subroute.spark.kafka_source import FORMAT
from subroute.spark.report import PERCENTILES, build_report, format_report
from tests.kafka_clients import open_clients

pytestmark = [pytest.mark.spark, pytest.mark.kafka]

DATA_COLUMNS = {
    "topic",
    "partition",
    "offset",
    "timestamp",
    "key",
    "value",
    "headers",
    "subscription",
    "source",
    "config_version",
    "routed_at",
    "app",
    "group",
    "date",
}


# The job's two sources: Spark's own connector and the project's Python data source.
SOURCES = ("kafka", "python")
NO_CONNECTOR_ON_TANSU = "Spark's connector trusts ListOffsets, which Tansu answers short (docs/brokers.md)"


@dataclass(frozen=True)
class Landed:
    """The same topics landed once per source, each run to its own output.

    The first source (the connector, which the job picks wherever it is on the classpath; on Tansu the Python
    source alone) confirms to each group's own consumer group, the second to ``python_source_group``.
    """

    prefix: str
    outputs: dict[str, str]  # source -> Parquet output
    results: dict[str, RunResult]
    orders: dict[tuple[str, int, int], dict[str, object]]  # (topic, partition, offset) -> decoded payload
    produced: list[Produced]
    sinks: list[BatchSink]  # the runs' sinks, kept alive here as Spark's callback server may keep them

    @property
    def first(self) -> str:
        return next(iter(self.outputs))

    @property
    def output(self) -> str:
        return self.outputs[self.first]

    @property
    def python_source_group(self) -> str:
        return f"{self.prefix}.python-source"


def _committed(bootstrap: str, group: str, partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    request = ConsumerGroupTopicPartitions(group, [TopicPartition(t, p) for t, p in partitions])
    result = next(iter(admin.list_consumer_group_offsets([request]).values())).result(timeout=30)
    return {(tp.topic, tp.partition): tp.offset for tp in result.topic_partitions}


def _spark_kafka_present(spark: SparkSession) -> bool:
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    return bool(
        jvm.org.apache.spark.util.Utils.classIsLoadable("org.apache.spark.sql.kafka010.KafkaSourceProvider")
    )


def _read_app(spark: SparkSession, output: str, app: str) -> DataFrame:
    return spark.read.option("basePath", output).parquet(f"{output}/app={app}")


def _produce_plain(bootstrap: str, topic: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(count):
        producer.produce(topic, value=f"waiting {i}".encode())
    producer.flush(30)


@pytest.fixture(scope="module")
def landed(spark_session: SparkSession, kafka, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Landed]:
    """Two apps' group topics (orders with Avro payloads, audit without), pending and dead letters; one run."""
    prefix = f"sj{uuid.uuid4().hex[:8]}"
    bootstrap = kafka.bootstrap_servers
    create_topics(
        bootstrap,
        {
            f"{prefix}.orders.fast": 2,
            f"{prefix}.orders.bulk": 1,
            f"{prefix}.audit.all": 1,
            f"{prefix}.orders.pending": 1,
            f"{prefix}.orders.dlq": 1,
            f"{prefix}.audit.dlq": 1,
        },
    )
    fast_orders, fast_values = sample_orders(120, seed=1)
    bulk_orders, bulk_values = sample_orders(60, seed=2)
    produced_fast = produce_routed(
        bootstrap, f"{prefix}.orders.fast", fast_values, app="orders", group="fast", partitions=2
    )
    # The last bulk value is not Avro: it must land with a null payload, not stop the job.
    produced_bulk = produce_routed(
        bootstrap, f"{prefix}.orders.bulk", [*bulk_values, b"\xff"], app="orders", group="bulk"
    )
    produced_audit = produce_routed(
        bootstrap, f"{prefix}.audit.all", [f"audit {i}".encode() for i in range(40)], app="audit", group="all"
    )
    _produce_plain(bootstrap, f"{prefix}.orders.pending", 7)
    _produce_plain(bootstrap, f"{prefix}.orders.dlq", 3)
    _produce_plain(bootstrap, f"{prefix}.audit.dlq", 2)

    root = tmp_path_factory.mktemp("landed")
    outputs = {name: str(root / name) for name in (("python",) if kafka.is_tansu else SOURCES)}
    sinks: list[BatchSink] = []

    class Kept(BatchSink):
        def __init__(self, config: JobConfig) -> None:
            super().__init__(config)
            sinks.append(self)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(job, "BatchSink", Kept)
        results = {
            name: run(
                spark_session,
                JobConfig(
                    Settings(bootstrap, prefix),
                    outputs[name],
                    f"{outputs[name]}/_checkpoint",
                    avro_schemas={"orders": "order"},
                    source=name,
                    commit_group=None if name == next(iter(outputs)) else f"{prefix}.python-source",
                ),
            )
            for name in outputs
        }
    orders = {
        (p.topic, p.partition, p.offset): order
        for p, order in zip([*produced_fast, *produced_bulk], [*fast_orders, *bulk_orders], strict=False)
    }
    yield Landed(prefix, outputs, results, orders, [*produced_fast, *produced_bulk, *produced_audit], sinks)


@pytest.mark.parametrize("source_name", SOURCES)
def test_lands_exactly_the_routed_records(
    spark_session: SparkSession, landed: Landed, source_name: str
) -> None:
    if source_name not in landed.outputs:
        pytest.skip(NO_CONNECTOR_ON_TANSU)
    assert landed.results[source_name].source_format == ("kafka" if source_name == "kafka" else FORMAT)
    output = landed.outputs[source_name]
    orders = _read_app(spark_session, output, "orders").withColumn("routed_ms", F.unix_millis("routed_at"))
    audit = _read_app(spark_session, output, "audit")
    assert set(orders.columns) == DATA_COLUMNS | {"payload", "routed_ms"}
    assert set(audit.columns) == DATA_COLUMNS  # no payload schema given for audit

    rows = orders.collect() + audit.collect()
    by_position = {(r.topic, r.partition, r.offset): r for r in rows}
    assert len(rows) == len(by_position) == len(landed.produced) == 221
    assert set(by_position) == {(p.topic, p.partition, p.offset) for p in landed.produced}
    for produced in landed.produced:
        row = by_position[(produced.topic, produced.partition, produced.offset)]
        app, group = produced.topic.split(".")[1:]
        assert (row.app, row.group) == (app, group)
        assert row.subscription == f"{app}/{group}/0"
        assert row.config_version == "7"
        assert row.source.startswith("orders/0/")
        assert row.date == BASE_DATE
        assert (None if row.key is None else bytes(row.key)) == produced.key
        assert bytes(row.value) == produced.value
        assert row.headers[0].key == "Region"  # all headers kept, not only the routing ones
        if app == "orders":
            assert row.routed_ms == produced.routed_at_ms
            expected = landed.orders.get((produced.topic, produced.partition, produced.offset))
            assert (None if row.payload is None else row.payload.asDict()) == expected


def test_both_sources_land_identical_parquet(spark_session: SparkSession, landed: Landed) -> None:
    if len(landed.outputs) < 2:
        pytest.skip(NO_CONNECTOR_ON_TANSU)
    for app in ("orders", "audit"):
        via_kafka, via_python = (_read_app(spark_session, landed.outputs[name], app) for name in SOURCES)
        assert via_kafka.schema == via_python.schema
        assert via_kafka.count() == via_python.count() > 0
        # Every column of every row, the Kafka positions (topic, partition, offset) among them, both ways.
        assert via_kafka.exceptAll(via_python).count() == 0
        assert via_python.exceptAll(via_kafka).count() == 0


def test_a_finished_run_leaves_no_kafka_client_open(landed: Landed) -> None:
    # The sink commits offsets with an admin client; Spark's callback server may keep the sink after the query,
    # so a client the run did not let go stays connected (and prints Connection refused once the broker is gone).
    assert len(landed.sinks) == len(landed.outputs)
    admins = [vars(sink)["_admin"] for sink in landed.sinks]  # None once let go
    assert [text for client, text in open_clients() if any(client is admin for admin in admins)] == []


def test_commits_equal_what_was_processed(landed: Landed, kafka) -> None:
    prefix = landed.prefix
    expected = {
        f"{prefix}.orders.fast": {(f"{prefix}.orders.fast", 0): 60, (f"{prefix}.orders.fast", 1): 60},
        f"{prefix}.orders.bulk": {(f"{prefix}.orders.bulk", 0): 61},
        f"{prefix}.audit.all": {(f"{prefix}.audit.all", 0): 40},
    }
    assert landed.results[landed.first].committed == expected
    for group, offsets in expected.items():
        assert _committed(kafka.bootstrap_servers, group, list(offsets)) == offsets
    if landed.first == "python":
        return  # Tansu: the connector did not run
    # The Python source's run committed the same positions, to its own group.
    every_offset = {tp: offset for offsets in expected.values() for tp, offset in offsets.items()}
    assert landed.results["python"].committed == {landed.python_source_group: every_offset}
    assert _committed(kafka.bootstrap_servers, landed.python_source_group, list(every_offset)) == every_offset
    # Nothing read from, so nothing confirmed on, the pending and dead-letter topics.
    pending = [(f"{prefix}.orders.pending", 0)]
    assert _committed(kafka.bootstrap_servers, f"{prefix}.spark", pending)[pending[0]] < 0


def test_report_counts_and_latency(spark_session: SparkSession, landed: Landed, kafka) -> None:
    report = build_report(spark_session, landed.output, Settings(kafka.bootstrap_servers, landed.prefix))

    assert report.messages() == {("audit", "all"): 40, ("orders", "bulk"): 61, ("orders", "fast"): 120}
    assert report.pending == {"audit": 0, "orders": 7}
    assert report.dead_letters == {"audit": 2, "orders": 3}
    fast = next(g for g in report.groups if (g.app, g.group) == ("orders", "fast"))
    latencies = sorted(1 + i % 100 for i in range(120))
    for quantile, value in zip(PERCENTILES, fast.latency_ms, strict=True):
        exact = latencies[math.ceil(quantile * len(latencies)) - 1]
        assert value is not None and abs(value - exact) <= 1
    text = format_report(report)
    assert "orders  fast   120" in text
    assert "orders  7        3" in text


def test_restart_from_checkpoint_neither_loses_nor_duplicates(
    spark_session: SparkSession, kafka, unique: str, tmp_path: Path
) -> None:
    bootstrap = kafka.bootstrap_servers
    topic = f"{unique}.orders.g1"
    create_topics(bootstrap, {topic: 2})
    config = JobConfig(Settings(bootstrap, unique), str(tmp_path / "out"), str(tmp_path / "checkpoint"))
    first = produce_routed(
        bootstrap, topic, [f"a{i}".encode() for i in range(50)], app="orders", group="g1", partitions=2
    )

    assert run(spark_session, config).rows == 50
    second = produce_routed(
        bootstrap, topic, [f"b{i}".encode() for i in range(30)], app="orders", group="g1", partitions=2
    )
    assert run(spark_session, config).rows == 30
    assert run(spark_session, config).rows == 0  # nothing new: nothing read again

    rows = spark_session.read.parquet(config.output).select("partition", "offset", "value").collect()
    assert sorted((r.partition, r.offset) for r in rows) == sorted(
        (p.partition, p.offset) for p in first + second
    )
    assert sorted(bytes(r.value) for r in rows) == sorted(p.value for p in first + second)
    assert _committed(bootstrap, topic, [(topic, 0), (topic, 1)]) == {(topic, 0): 40, (topic, 1): 40}


def test_a_batch_spark_replays_is_not_written_twice(
    spark_session: SparkSession, kafka, unique: str, tmp_path: Path
) -> None:
    """Spark replays a batch whose commit it did not record (crash after the sink): land it once."""
    bootstrap = kafka.bootstrap_servers
    topic = f"{unique}.audit.g"
    create_topics(bootstrap, {topic: 1})
    produce_routed(bootstrap, topic, [f"r{i}".encode() for i in range(12)], app="audit", group="g")
    config = JobConfig(Settings(bootstrap, unique), str(tmp_path / "out"), str(tmp_path / "checkpoint"))
    batch = routed_columns(
        spark_session.read.format(FORMAT)
        .options(**{"kafka.bootstrap.servers": bootstrap, "subscribe": topic, "includeHeaders": "true"})
        .load(),
        unique,
    )

    BatchSink(config)(batch, 0)
    replay = BatchSink(config)  # a fresh sink, as after a driver restart
    replay(batch, 0)

    assert spark_session.read.parquet(config.output).count() == 12
    assert replay.committed == {topic: {(topic, 0): 12}}  # the replay still confirms
    BatchSink(config)(batch, 1)  # a different batch id is new data to the sink
    assert spark_session.read.parquet(config.output).count() == 24


def test_processing_time_trigger_keeps_landing(
    spark_session: SparkSession, kafka, unique: str, tmp_path: Path
) -> None:
    bootstrap = kafka.bootstrap_servers
    topic = f"{unique}.audit.live"
    create_topics(bootstrap, {topic: 1})
    config = JobConfig(
        Settings(bootstrap, unique), str(tmp_path / "out"), str(tmp_path / "checkpoint"), trigger="1 second"
    )
    sink = BatchSink(config)
    query, _ = start(spark_session, config, sink)
    try:
        for round_ in range(2):  # two separate arrivals, each landed without restarting the query
            produce_routed(
                bootstrap, topic, [f"{round_}-{i}".encode() for i in range(10)], app="audit", group="live"
            )
            deadline = time.monotonic() + 60
            while sink.rows < 10 * (round_ + 1) and time.monotonic() < deadline:
                assert query.exception() is None
                time.sleep(0.2)
            assert sink.rows == 10 * (round_ + 1)
    finally:
        query.stop()
        sink.close()  # its admin client: Spark's callback server keeps the sink
    assert spark_session.read.parquet(config.output).count() == 20
    assert _committed(bootstrap, topic, [(topic, 0)]) == {(topic, 0): 20}


def test_source_prefers_spark_kafka_and_both_have_one_schema(
    spark_session: SparkSession, kafka, unique: str
) -> None:
    settings = Settings(kafka.bootstrap_servers, unique)
    # The test session has the connector on Apache Kafka and goes without it on Tansu (conftest.py).
    present = _spark_kafka_present(spark_session)
    assert present != kafka.is_tansu
    frame, used = source(spark_session, JobConfig(settings, "/unused", "/unused"))
    assert used == ("kafka" if present else FORMAT)
    assert frame.isStreaming
    forced, used = source(spark_session, JobConfig(settings, "/unused", "/unused", source="python"))
    assert used == FORMAT and forced.schema == frame.schema
    if not present:
        with pytest.raises(
            Exception, match=r"KAFKA_DATA_SOURCE_NOT_ENABLED|Failed to find data source: kafka"
        ):
            source(spark_session, JobConfig(settings, "/unused", "/unused", source="kafka"))


def test_group_topics_and_their_consumer_groups() -> None:
    policy = commits.CommitPolicy("sub.route")
    assert policy.group_for("sub.route.orders.fast") == "sub.route.orders.fast"
    assert policy.group_for("sub.route.orders.fast.p7") == "sub.route.orders.fast"  # a band: the same group
    assert policy.group_for("sub.route.orders.fast.p0") == "sub.route.spark"
    assert policy.group_for("sub.route.orders.pending") == "sub.route.spark"
    assert policy.group_for("other.orders.fast") == "sub.route.spark"
    assert commits.CommitPolicy("sub.route", "mine").group_for("sub.route.orders.fast") == "mine"
    import re

    pattern = re.compile(group_topics_pattern("sub.route"))
    matching = [
        "sub.route.orders.fast",
        "sub.route.a-b.pending_x",
        "sub.route.orders.fast.p1",
        "sub.route.o.g.p9",
    ]
    others = [
        "sub.route.orders.pending",
        "sub.route.orders.dlq",
        "sub.route.config",
        "subXroute.a.b",
        "sub.route.a.b.c",
        "sub.route.a.b.p0",
        "sub.route.a.b.p10",
        "sub.route.a.pending.p1",
    ]
    assert [t for t in matching + others if pattern.fullmatch(t)] == matching
    only = re.compile(group_topics_pattern("p", ["orders"]))
    assert only.fullmatch("p.orders.g") and not only.fullmatch("p.audit.g")


def test_cli_arguments_make_the_job_config() -> None:
    parser = argparse.ArgumentParser()
    cli.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(
        [
            "spark",
            "run",
            "--bootstrap-servers",
            "h:1",
            "--topic-prefix",
            "p",
            "--output",
            "/data/out/",
            "--app",
            "orders",
            "--avro-schema",
            "orders=order",
            "--trigger",
            "30 seconds",
            "--kafka-config",
            "security.protocol=SSL",
        ]
    )
    config = config_from_args(args, environ={})
    assert args.func is not None
    assert (config.output, config.checkpoint) == ("/data/out", "/data/out/_checkpoint")
    assert config.pattern == group_topics_pattern("p", ["orders"])
    assert config.avro_schemas == {"orders": "order"}
    assert config.trigger == "30 seconds"
    assert config.settings.client_config()["security.protocol"] == "SSL"
    assert config.commit_policy.group_for("p.orders.g") == "p.orders.g"
