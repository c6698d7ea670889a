"""The structured-streaming job: routed group topics -> Parquet partitioned by app, group and date -> confirms.

    spark-submit spark/job.py --bootstrap-servers HOST:9092 --output /data/routed [--trigger "30 seconds"]
    subroute spark run --output /data/routed            (local mode, same arguments)

Spark's ``kafka`` format is used where the cluster has ``spark-sql-kafka-0-10``; otherwise the project's
Python source (``subroute.spark.kafka_source``), which has the same schema, so everything downstream is shared.
After a micro-batch is in Parquet, its offsets are committed to Kafka (see ``subroute.spark.commits``).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka.admin import AdminClient
from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming.query import StreamingQuery

from subroute import wire
from subroute.kafka.clients import admin_client
from subroute.ops.settings import Settings, add_common_arguments, parse_key_values
from subroute.spark import avro, commits, kafka_source
from subroute.spark.flags import add_job_arguments
from subroute.spark.session import build_session, kafka_format_missing
from subroute.spark.settled import SettledRecords

AVAILABLE_NOW = "available-now"
PARTITION_COLUMNS = ("app", "group", "date")
_MS_PER_DAY = 86_400_000


def group_topics_pattern(prefix: str, apps: Sequence[str] = ()) -> str:
    """Every group topic under ``prefix`` (of ``apps`` when given), with its priority-band topics (``.p1`` to
    ``.p9``): not the pending and dead-letter topics.

    Valid for Python's re and Java's Pattern alike (Spark's ``kafka`` format matches with the latter).
    """
    app = "|".join(re.escape(a) for a in apps) if apps else "[A-Za-z0-9_-]+"
    return rf"{re.escape(prefix)}\.(?:{app})\.(?!(?:pending|dlq)(?:\.|$))[A-Za-z0-9_-]+(?:\.p[1-9])?"


@dataclass(frozen=True)
class JobConfig:
    settings: Settings
    output: str
    checkpoint: str
    topics: tuple[str, ...] = ()
    pattern: str | None = None  # neither: every group topic under the prefix
    starting_offsets: str = "earliest"
    max_offsets_per_trigger: int | None = None
    trigger: str = AVAILABLE_NOW  # or a processing-time interval such as "30 seconds"
    avro_schemas: Mapping[str, str] = field(default_factory=dict)  # app -> .avsc path or schemas/ name
    schema_registry: avro.Registry | None = None  # writer schemas of wire-format values
    commit_group: str | None = None  # None: each group topic confirms to its group's own consumer group
    commit: bool = True
    source: str = "auto"  # auto | kafka | python

    @property
    def commit_policy(self) -> commits.CommitPolicy:
        return commits.CommitPolicy(self.settings.topic_prefix, self.commit_group, self.commit)


def source_options(config: JobConfig) -> dict[str, str]:
    """Options both Kafka formats understand: Spark's names, client properties under ``kafka.``."""
    options = {f"kafka.{key}": value for key, value in config.settings.client_properties().items()}
    options["includeHeaders"] = "true"
    options["startingOffsets"] = config.starting_offsets
    if config.topics:
        options["subscribe"] = ",".join(config.topics)
    else:
        options["subscribePattern"] = config.pattern or group_topics_pattern(config.settings.topic_prefix)
    if config.max_offsets_per_trigger is not None:
        options["maxOffsetsPerTrigger"] = str(config.max_offsets_per_trigger)
    return options


def source(spark: SparkSession, config: JobConfig) -> tuple[DataFrame, str]:
    """The Kafka stream and the format that reads it: Spark's ``kafka`` when present, else the Python one."""
    options = source_options(config)
    if config.source in ("auto", "kafka"):
        try:
            return spark.readStream.format("kafka").options(**options).load(), "kafka"
        except Exception as exc:
            if config.source == "kafka" or not kafka_format_missing(exc):
                raise
    kafka_source.register(spark)
    return spark.readStream.format(kafka_source.FORMAT).options(**options).load(), kafka_source.FORMAT


def header(name: str) -> Column:
    """The first value of header ``name`` as text (null when absent)."""
    matching = F.filter("headers", lambda h: h["key"] == F.lit(name))
    return F.get(matching, 0)["value"].cast("string")


def routed_columns(frame: DataFrame, prefix: str) -> DataFrame:
    """Routing headers as columns; app and group fall back to the topic name when a header is missing."""
    topic_parts = rf"^{re.escape(prefix)}\.([A-Za-z0-9_-]+)\.([A-Za-z0-9_-]+)(?:\.p[1-9])?$"
    routed_ms = header(wire.ROUTED_AT).try_cast("long")
    day_ms = F.coalesce(routed_ms, F.unix_millis("timestamp"))
    return frame.select(
        "topic",
        "partition",
        "offset",
        "timestamp",
        "key",
        "value",
        "headers",
        F.coalesce(header(wire.APP), F.nullif(F.regexp_extract("topic", topic_parts, 1), F.lit(""))).alias(
            "app"
        ),
        F.coalesce(header(wire.GROUP), F.nullif(F.regexp_extract("topic", topic_parts, 2), F.lit(""))).alias(
            "group"
        ),
        header(wire.SUBSCRIPTION).alias("subscription"),
        header(wire.SOURCE).alias("source"),
        header(wire.CONFIG_VERSION).alias("config_version"),
        F.timestamp_millis(routed_ms).alias("routed_at"),
        # Calendar day in UTC whatever the session's time zone: partitions must not move with it.
        F.date_from_unix_date(F.floor(day_ms / _MS_PER_DAY).cast("int")).alias("date"),
    )


class BatchSink:
    """foreachBatch: write a micro-batch to Parquet, then confirm its offsets to Kafka.

    Spark re-runs a batch whose commit it did not record; a marker per landed batch (in the checkpoint)
    keeps such a re-run from writing the rows twice, while it still commits the offsets. A crash in the
    middle of a write can leave part of a batch behind: rows carry (topic, partition, offset) to dedupe.
    """

    def __init__(self, config: JobConfig) -> None:
        self.config = config
        self.schemas = {app: avro.load_schema(spec) for app, spec in config.avro_schemas.items()}
        self.rows = 0
        self.batches = 0
        self.committed: dict[str, dict[tuple[str, int], int]] = {}
        self.settled = SettledRecords(config.settings)  # the operator's `queue ack` entries: not landed
        self._admin: AdminClient | None = None

    @property
    def admin(self) -> AdminClient:
        if self._admin is None:
            self._admin = admin_client(self.config.settings)
        return self._admin

    def close(self) -> None:
        """Once the query has stopped: let the admin client go (it has no close of its own). Spark's callback
        server keeps the sink itself referenced after the query, so the client would stay connected."""
        self._admin = None
        self.settled.close()

    def _marker(self, spark: SparkSession, batch_id: int) -> tuple[Any, Any]:
        jvm = spark.sparkContext._jvm
        assert jvm is not None
        path = jvm.org.apache.hadoop.fs.Path(f"{self.config.checkpoint.rstrip('/')}/subroute-sink/{batch_id}")
        return path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration()), path

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        batch = batch.persist(StorageLevel.MEMORY_AND_DISK)
        try:
            summary = (
                batch.groupBy("topic", "partition")
                .agg(
                    F.max("offset").alias("last"),
                    F.count("*").alias("rows"),
                    F.collect_set("app").alias("apps"),
                    F.collect_set(F.struct("app", "group")).alias("groups"),
                )
                .collect()
            )
            if not summary:
                return
            filesystem, marker = self._marker(batch.sparkSession, batch_id)
            if not filesystem.exists(marker):
                pairs = {
                    (g["app"], g["group"])
                    for row in summary
                    for g in row["groups"]
                    if g["app"] and g["group"]
                }
                covered = self.settled.covered(batch, pairs, self.admin)
                landing = (
                    batch
                    if covered is None
                    else batch.join(covered, ["topic", "partition", "offset"], "left_anti")
                )
                self._write(landing, {app for row in summary for app in row["apps"]})
                filesystem.create(marker, True).close()
            self.rows += sum(row["rows"] for row in summary)
            self.batches += 1
            next_offsets = {(row["topic"], row["partition"]): row["last"] + 1 for row in summary}
            for group, partitions in commits.commit(
                self.admin, self.config.commit_policy, next_offsets
            ).items():
                self.committed.setdefault(group, {}).update(
                    {(p.topic, p.partition): p.offset for p in partitions}
                )
        finally:
            batch.unpersist()

    def _write(self, batch: DataFrame, apps: set[str]) -> None:
        def append(frame: DataFrame) -> None:
            frame.write.mode("append").partitionBy(*PARTITION_COLUMNS).parquet(self.config.output)

        # Apps with a payload schema get a typed `payload` column; their files differ in schema from the
        # rest, so each is its own write (read them back per app, or with mergeSchema).
        with_schema = [app for app in self.schemas if app in apps]
        for app in with_schema:
            frame = batch.filter(F.col("app") == app)
            payload = avro.payload_column(F.col("value"), self.schemas[app], self.config.schema_registry, app)
            append(frame.withColumn("payload", payload))
        if apps - set(with_schema) or not apps:
            rest = (
                batch.filter(F.col("app").isNull() | ~F.col("app").isin(with_schema))
                if with_schema
                else batch
            )
            append(rest)


@dataclass(frozen=True)
class RunResult:
    source_format: str
    rows: int
    batches: int
    seconds: float
    committed: dict[str, dict[tuple[str, int], int]]


def start(
    spark: SparkSession, config: JobConfig, sink: BatchSink | None = None
) -> tuple[StreamingQuery, str]:
    frame, source_format = source(spark, config)
    writer = (
        routed_columns(frame, config.settings.topic_prefix)
        .writeStream.foreachBatch(sink or BatchSink(config))
        .option("checkpointLocation", config.checkpoint)
    )
    if config.trigger == AVAILABLE_NOW:
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=config.trigger)
    return writer.start(), source_format


def run(spark: SparkSession, config: JobConfig, timeout: float | None = None) -> RunResult:
    """Run until the available data is landed (availableNow), or until ``timeout`` / Ctrl-C otherwise."""
    from subroute.spark.progress import SparkProgress

    sink = BatchSink(config)
    began = time.monotonic()
    query, source_format = start(spark, config, sink)

    # on a terminal, a bar: the running stages' tasks, and the rows and micro-batches landed so far
    def figures() -> dict[str, object]:
        return {"rows": sink.rows, "batches": sink.batches}

    try:
        with SparkProgress(spark, "spark run", figures=figures):
            if timeout is None:
                query.awaitTermination()
            elif not query.awaitTermination(round(timeout)):
                query.stop()
    except KeyboardInterrupt:
        query.stop()
    finally:
        sink.close()
    return RunResult(source_format, sink.rows, sink.batches, time.monotonic() - began, sink.committed)


ENV_SCHEMA_REGISTRY_URL = "SUBROUTE_SCHEMA_REGISTRY_URL"


def config_from_args(args: argparse.Namespace, environ: Mapping[str, str] | None = None) -> JobConfig:
    settings = Settings.from_args(args, environ)
    env = os.environ if environ is None else environ
    registry_url = args.schema_registry_url or env.get(ENV_SCHEMA_REGISTRY_URL) or None
    registry_config = parse_key_values(args.schema_registry_config, "--schema-registry-config")
    if registry_config and registry_url is None:
        raise ValueError("--schema-registry-config needs --schema-registry-url")
    if sum(bool(x) for x in (args.topic, args.pattern, args.app)) > 1:
        raise ValueError("give at most one of --topic, --pattern and --app")
    pattern = args.pattern or (group_topics_pattern(settings.topic_prefix, args.app) if args.app else None)
    output = args.output.rstrip("/")
    return JobConfig(
        settings=settings,
        output=output,
        checkpoint=args.checkpoint or f"{output}/_checkpoint",
        topics=tuple(args.topic or ()),
        pattern=pattern,
        starting_offsets=args.starting_offsets,
        max_offsets_per_trigger=args.max_offsets_per_trigger,
        trigger=args.trigger,
        avro_schemas=parse_key_values(args.avro_schema, "--avro-schema"),
        schema_registry=avro.Registry.of(registry_url, registry_config) if registry_url else None,
        commit_group=args.group_id,
        commit=not args.no_commit,
        source=args.source,
    )


def describe(result: RunResult) -> str:
    rate = result.rows / result.seconds if result.seconds > 0 else 0.0
    return (
        f"landed {result.rows} records in {result.batches} micro-batches in {result.seconds:.1f}s "
        f"({rate:.0f} records/s, source {result.source_format}); "
        f"confirmed to {len(result.committed)} consumer group(s)"
    )


def main(argv: Sequence[str] | None = None) -> int:
    """``spark-submit spark/job.py ...``: the master comes from spark-submit."""
    parser = argparse.ArgumentParser(prog="spark/job.py", description=__doc__.splitlines()[0])
    add_common_arguments(parser)
    add_job_arguments(parser)
    config = config_from_args(parser.parse_args(argv))
    spark = build_session()
    print(describe(run(spark, config)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
