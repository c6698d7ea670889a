"""The routing report: what the job landed per app and group, how long routing took, and what waits in Kafka.

Latency is end to end through the router: the producer's timestamp (kept on the routed record) to the
``subroute.routed-at`` header. Pending and dead-letter counts are the records those topics hold
(end offset minus log start), read from Kafka, not from Parquet.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pyspark.errors import AnalysisException
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from subroute import wire
from subroute.ops.settings import Settings
from subroute.spark import kafka_source

PERCENTILES = (0.5, 0.95, 0.99)


@dataclass(frozen=True)
class GroupStats:
    app: str
    group: str
    messages: int
    latency_ms: tuple[float | None, ...]  # at PERCENTILES; None without routed-at headers


@dataclass(frozen=True)
class Report:
    groups: list[GroupStats]
    pending: dict[str, int]  # app -> records on its pending topic
    dead_letters: dict[str, int]  # app -> records on its dead-letter topic

    def messages(self) -> dict[tuple[str, str], int]:
        return {(g.app, g.group): g.messages for g in self.groups}


def landed_stats(spark: SparkSession, output: str) -> list[GroupStats]:
    try:
        # Partition values stay text: an app called "2024" must not turn into a number.
        previous = spark.conf.get("spark.sql.sources.partitionColumnTypeInference.enabled") or "true"
        spark.conf.set("spark.sql.sources.partitionColumnTypeInference.enabled", "false")
        try:
            frame = spark.read.parquet(output).select("app", "group", "timestamp", "routed_at")
        finally:
            spark.conf.set("spark.sql.sources.partitionColumnTypeInference.enabled", previous)
    except AnalysisException as exc:
        if exc.getCondition() in ("PATH_NOT_FOUND", "UNABLE_TO_INFER_SCHEMA"):
            return []
        raise
    latency = F.unix_millis("routed_at") - F.unix_millis("timestamp")
    rows = (
        frame.groupBy("app", "group")
        .agg(
            F.count("*").alias("messages"),
            F.percentile_approx(latency, list(PERCENTILES), 10_000).alias("latency"),
        )
        .orderBy("app", "group")
        .collect()
    )
    return [
        GroupStats(
            row["app"],
            row["group"],
            row["messages"],
            tuple(float(v) for v in row["latency"]) if row["latency"] else tuple(None for _ in PERCENTILES),
        )
        for row in rows
    ]


def topic_sizes(settings: Settings, topics: list[str]) -> dict[str, int]:
    """Records each topic holds now; topics that do not exist are left out."""
    consumer = kafka_source.consumer_for(settings.client_properties())
    try:
        existing = consumer.list_topics(timeout=10).topics
        partitions = [(t, p) for t in topics if t in existing for p in existing[t].partitions]
        ends = kafka_source.end_offsets(consumer, partitions)
        starts = kafka_source.low_offsets(consumer, partitions)
    finally:
        consumer.close()
    sizes: dict[str, int] = {}
    for (topic, partition), end in ends.items():
        sizes[topic] = sizes.get(topic, 0) + max(0, end - starts[(topic, partition)])
    return sizes


def _apps_with_topics(settings: Settings) -> set[str]:
    """Apps that have a pending or dead-letter topic under the prefix, landed or not."""
    consumer = kafka_source.consumer_for(settings.client_properties())
    try:
        topics = consumer.list_topics(timeout=10).topics
    finally:
        consumer.close()
    head = f"{settings.topic_prefix}."
    apps = set()
    for topic in topics:
        for suffix in (".pending", ".dlq"):
            if topic.startswith(head) and topic.endswith(suffix):
                app = topic[len(head) : -len(suffix)]
                if app and "." not in app:
                    apps.add(app)
    return apps


def build_report(spark: SparkSession, output: str, settings: Settings) -> Report:
    groups = landed_stats(spark, output)
    apps = sorted({g.app for g in groups if g.app} | _apps_with_topics(settings))
    prefix = settings.topic_prefix
    pending_topics = {app: wire.pending_topic(prefix, app) for app in apps}
    dlq_topics = {app: wire.dlq_topic(prefix, app) for app in apps}
    sizes = topic_sizes(settings, [*pending_topics.values(), *dlq_topics.values()])
    return Report(
        groups,
        {app: sizes.get(topic, 0) for app, topic in pending_topics.items()},
        {app: sizes.get(topic, 0) for app, topic in dlq_topics.items()},
    )


def report_document(report: Report) -> dict[str, object]:
    """The report as plain data (``spark report -o json|yaml``): every figure ``format_report`` shows."""
    apps = sorted(set(report.pending) | set(report.dead_letters))
    return {
        "groups": [
            {
                "app": g.app,
                "group": g.group,
                "messages": g.messages,
                "latency_ms": {
                    f"p{round(p * 100)}": v for p, v in zip(PERCENTILES, g.latency_ms, strict=True)
                },
            }
            for g in report.groups
        ],
        "apps": [
            {
                "app": app,
                "pending": report.pending.get(app, 0),
                "dead_letters": report.dead_letters.get(app, 0),
            }
            for app in apps
        ],
    }


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}"


def format_report(report: Report) -> str:
    header = ("app", "group", "messages", *(f"p{round(p * 100)} ms" for p in PERCENTILES))
    rows = [(g.app, g.group, str(g.messages), *(_ms(v) for v in g.latency_ms)) for g in report.groups]
    lines = ["Routed messages landed by Spark (latency: producer timestamp -> routed-at)"]
    lines.extend(_table(header, rows) if rows else ["  (nothing landed yet)"])
    lines.append("")
    # Topic sizes: a pending record re-parked after a config change counts once per parking.
    lines.append("Records on the pending and dead-letter topics")
    apps = sorted(set(report.pending) | set(report.dead_letters))
    waiting = [(app, str(report.pending.get(app, 0)), str(report.dead_letters.get(app, 0))) for app in apps]
    lines.extend(_table(("app", "pending", "dead letters"), waiting) if waiting else ["  (no apps)"])
    return "\n".join(lines)


def _table(header: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> list[str]:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    return [
        "  " + "  ".join(str(r[i]).ljust(widths[i]) for i in range(len(header))).rstrip()
        for r in [header, *rows]
    ]
