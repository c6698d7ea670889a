"""``subroute plan``: a backtest of a proposed configuration over the input history ("terraform plan").

    subroute plan -f NEW.yaml [--input TOPIC ...] [--since TIMESTAMP] [--limit N] [--prune]

Spark reads the input topics in batch (Spark's ``kafka`` format where present, else the project's Python
source, the same choice as the job), and every record is routed twice with the router's own engine inside
``mapInArrow``: under the configuration in force (read from the config topic) and under the proposed one (the
YAML file, validated first). Each Spark partition compiles the two routing tables once and routes its records
with one ``Router`` per configuration, an Arrow batch at a time as the worker routes a batch:
``Router.route_batch`` evaluates each table's native plan once per batch (decoding and every expression in
Rust, with the GIL released), then makes each record's decisions in Python, exactly as ``Router.route`` would
record by record (``route_columns``). The result is, per app, a table ``old destination -> new destination:
count`` and the records that would match no consumer subscription under the proposed configuration. Nothing
is written anywhere: the config topic is only read. Apps that read properties from the body are routed on the
record values; for Avro in Confluent's wire format each partition fetches the writer schemas by id from the
Schema Registry before a batch is decided, as the worker does (``--schema-registry-url``; required then).

What the answers are, and are not:

* Capacity and presence: routing runs with an empty snapshot, as if every group had room and consumers
  attached; with ``max_unconfirmed``, ``fast``/``proportional`` fairness, ``spillover`` or groups whose consumers
  are away the live router may choose differently (or make the record wait).
* Round-robin: each Spark partition rotates on its own, so splits among equal-priority groups are indicative
  (the totals per priority level are exact). Message groups (``group_by``) are placed by rendezvous hashing,
  which is exact.
* Time: a record is routed as the worker would when it arrives (``now`` = the record's timestamp), so nothing
  expires; ``--evaluate-at now`` routes it as if it arrived now (expired records go to the dead-letter topic,
  as pending records would when re-evaluated).
* ``--limit N`` keeps the N most recent records of each topic (by record timestamp, after ``--since``); only
  the last N offsets of every partition are read.
* ``--since`` filters by record timestamp (some brokers answer time lookups wrongly, so offsets are not used).

This module imports pyspark only when Spark is needed, so the CLI can validate a file without it.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from subroute import wire
from subroute.config.avro_schema import needs_schema_registry
from subroute.config.codec import ConfigValue, key_of
from subroute.config.model import AppConfig, Config, GroupConfig
from subroute.config.validation import ConfigError, validate_group, validate_state
from subroute.config.yaml import load_yaml_source
from subroute.kafka.schema_registry import RegistrySettings, RegistryUnavailable
from subroute.ops.settings import Settings, SettingsError
from subroute.routing.decisions import Action, Decision, Lag, MessageView, Router, RoutingTable
from subroute.routing.native_routing import build_table
from subroute.topic_patterns import input_matches

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.types import StructType

PENDING = "(pending)"
FILTERED = "(filtered)"
ABSENT = "(app absent)"
EVALUATE_AT = ("arrival", "now")
DEFAULT_EXAMPLES = 5

# No capacity snapshot: every group has room (see the module docstring).
EMPTY_LAG: Lag = MappingProxyType({})


Transition = tuple[str, str]  # (old destination, new destination)
Decisions = Mapping[str, Decision]  # app -> its decision for one record


# --- the result ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Example:
    """A record that would match no consumer subscription of ``apps`` under the proposed configuration."""

    topic: str
    partition: int
    offset: int
    apps: tuple[str, ...]
    headers: wire.HeadersIn


@dataclass
class PlanResult:
    current_version: int
    proposed: str  # where the proposed configuration came from
    topics: dict[str, int]  # topic read -> records planned from it
    missing_topics: tuple[str, ...] = ()  # asked for, or named by a config, but not on the cluster
    source_format: str = ""
    tables: dict[str, dict[Transition, int]] = field(default_factory=dict)  # app -> transition -> records
    unmatched: int = 0  # records with at least one app whose new destination is (pending)
    examples: list[Example] = field(default_factory=list)
    dropped_groups: tuple[str, ...] = ()  # kept groups that no longer fit their (changed) app
    evaluate_at: str = "arrival"
    since_ms: int | None = None
    limit: int | None = None
    prune: bool = False
    config_topic: str = ""

    @property
    def records(self) -> int:
        return sum(self.topics.values())

    def moved(self, app: str) -> int:
        return sum(n for (old, new), n in self.tables.get(app, {}).items() if old != new)


# --- configurations -----------------------------------------------------------------------------------------


def config_values(config: Config) -> dict[str, ConfigValue]:
    values: dict[str, ConfigValue] = {key_of(a): a for a in config.apps.values()}
    values.update({key_of(g): g for g in config.groups.values()})
    return values


def load_proposed(path: str) -> tuple[dict[str, ConfigValue], list[ConfigError]]:
    """The file's desired state and every shape and validation error (expression errors carry a caret)."""
    parsed = load_yaml_source(path)
    errors = parsed.errors + validate_state(parsed.values.values())
    return parsed.values, errors


def proposed_config(
    current: Config, desired: Mapping[str, ConfigValue], *, prune: bool
) -> tuple[Config, tuple[str, ...]]:
    """The configuration ``config apply [--prune] -f FILE`` would put in force, as the config store builds it.

    Without ``prune`` records the file does not name are kept. A kept group that does not fit its app any
    more (the file changed the app's properties) is left out, as the router leaves it out; its key is returned.
    """
    values: dict[str, ConfigValue] = {} if prune else config_values(current)
    values.update(desired)
    apps = {v.name: v for v in values.values() if isinstance(v, AppConfig)}
    groups: dict[tuple[str, str], GroupConfig] = {}
    dropped: list[str] = []
    for key, value in values.items():
        if not isinstance(value, GroupConfig):
            continue
        app = apps.get(value.app)
        if app is None or validate_group(value, app):
            dropped.append(key)
        else:
            groups[(value.app, value.name)] = value
    return Config(current.version, MappingProxyType(apps), MappingProxyType(groups)), tuple(sorted(dropped))


def input_topics(configs: Sequence[Config], existing: Sequence[str]) -> tuple[list[str], list[str]]:
    """(existing topics any app of ``configs`` reads, topic names they give that do not exist)."""
    inputs = {i for config in configs for app in config.apps.values() for i in app.inputs}
    visible = [t for t in existing if not t.startswith("__")]
    found = sorted(t for t in visible if any(input_matches(i, t) for i in inputs))
    missing = sorted(i for i in inputs if not i.startswith("^") and i not in existing)
    return found, missing


def parse_since(text: str) -> int:
    """Epoch milliseconds, or an ISO 8601 timestamp (UTC unless it says otherwise)."""
    value = text.strip()
    if value.isdigit():
        return int(value)
    try:
        moment = dt.datetime.fromisoformat(value)
    except ValueError as exc:
        raise SettingsError(
            f"--since {text!r}: give epoch milliseconds or an ISO timestamp such as 2024-05-01T12:00:00Z"
        ) from exc
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    return int(moment.timestamp() * 1000)


# --- routing (runs on the executors) ------------------------------------------------------------------------


def summary_schema() -> StructType:
    """What mapInArrow hands back: a few rows per Spark partition, never one per record.

    ``kind`` says which fields are set: ``topic`` (topic, count: records read), ``transition`` (app, old,
    new, count), ``unmatched`` (count: records with an app whose new destination is pending) and
    ``example`` (topic, partition, offset, apps, headers: the first few unmatched records of the partition).
    """
    from pyspark.sql.types import (
        ArrayType,
        BinaryType,
        IntegerType,
        LongType,
        StringType,
        StructField,
        StructType,
    )

    header = StructType([StructField("key", StringType()), StructField("value", BinaryType())])
    return StructType(
        [
            *(StructField(name, StringType()) for name in ("kind", "app", "old", "new", "topic")),
            StructField("count", LongType()),
            StructField("partition", IntegerType()),
            StructField("offset", LongType()),
            StructField("apps", ArrayType(StringType())),
            StructField("headers", ArrayType(header)),
        ]
    )


def destination(decision: Decision | None) -> str:
    if decision is None:
        return ABSENT
    if decision.action is Action.ROUTE:
        return decision.group or "?"
    if decision.action is Action.PENDING:
        return PENDING
    if decision.action is Action.FILTERED:
        return FILTERED
    if decision.action is Action.DROP:
        return f"(dropped: {decision.reason or 'unknown'})"
    return f"(dead-letter: {decision.reason or 'unknown'})"


@dataclass
class PartitionSummary:
    """What one partition iterator learns; records arrive in (topic, partition, offset) order."""

    examples_wanted: int
    topics: Counter[str] = field(default_factory=Counter)
    transitions: Counter[tuple[str, str, str]] = field(default_factory=Counter)  # (app, old, new)
    unmatched: int = 0
    examples: list[Example] = field(default_factory=list)

    def add(
        self, topic: str, partition: int, offset: int, headers: wire.HeadersIn, old: Decisions, new: Decisions
    ) -> None:
        self.topics[topic] += 1
        pending: list[str] = []
        for app in sorted(old.keys() | new.keys()):
            after = destination(new.get(app))
            self.transitions[(app, destination(old.get(app)), after)] += 1
            if after == PENDING:
                pending.append(app)
        if pending:
            self.unmatched += 1
            if len(self.examples) < self.examples_wanted:
                self.examples.append(Example(topic, partition, offset, tuple(pending), headers))

    def rows(self) -> dict[str, list[Any]]:
        columns = ("kind", "app", "old", "new", "topic", "count", "partition", "offset", "apps", "headers")
        out: dict[str, list[Any]] = {name: [] for name in columns}

        def row(**values: Any) -> None:
            for name in columns:
                out[name].append(values.get(name))

        for topic, count in self.topics.items():
            row(kind="topic", topic=topic, count=count)
        for (app, old, new), count in self.transitions.items():
            row(kind="transition", app=app, old=old, new=new, count=count)
        row(kind="unmatched", count=self.unmatched)
        for e in self.examples:
            headers = [{"key": k, "value": v} for k, v in e.headers]
            row(
                kind="example",
                topic=e.topic,
                partition=e.partition,
                offset=e.offset,
                apps=list(e.apps),
                headers=headers,
            )
        return out


def route_records(
    current: Config,
    proposed: Config,
    at_ms: int | None,
    examples: int,
    schema_registry: RegistrySettings | None = None,
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The ``mapInArrow`` function. The two configs travel in its closure (plain frozen values, pickled once);
    each partition iterator compiles one routing table per configuration, keeps one Router for each, and
    yields one summary batch at its end. Avro in Confluent's wire format is read with the writer schemas of
    ``schema_registry``, fetched before each batch is decided as the worker fetches them (worker/schemas.py),
    once per id and partition; a registry that cannot be read fails the plan (``RegistryUnavailable``)."""

    def route(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pyarrow as pa
        from pyspark.sql.pandas.types import to_arrow_schema

        from subroute.routing import native_avro
        from subroute.worker.schemas import BatchSchemas

        tables = (build_table(current), build_table(proposed))
        routers = (Router(), Router())
        for router in routers:
            router.read_body = native_avro.read_body  # Avro bodies read natively, as the worker reads them
        schemas = BatchSchemas(schema_registry)
        summary = PartitionSummary(examples)
        for batch in batches:
            columns = batch.to_pydict()
            values = columns.get("value") or [None] * len(columns["topic"])
            for table, router in zip(tables, routers, strict=True):
                router.writer_of = schemas.prepare(table, list(zip(columns["topic"], values, strict=True)))
            route_columns(tables, routers, columns, at_ms, summary)
        schema = to_arrow_schema(summary_schema(), timezone="UTC")
        yield pa.RecordBatch.from_pydict(summary.rows(), schema=schema)

    return route


def route_columns(
    tables: tuple[RoutingTable, RoutingTable],
    routers: tuple[Router, Router],
    columns: Mapping[str, Sequence[Any]],
    at_ms: int | None,
    summary: PartitionSummary,
) -> None:
    """Route one batch of records (``columns``: topic, partition, offset, ts_ms, headers, and value when an app
    reads properties from the body, as Arrow gives them) under the ``(current, proposed)`` tables with their routers, and add each record to ``summary``.

    One ``Router.route_batch`` per table: its decisions are ``Router.route``'s for each record in turn, and
    the round-robin cursors move as they would. On arrival (``at_ms`` None) a record is routed at its own
    timestamp, where nothing has expired (no expiration is negative: ``now - timestamp > limit`` never
    holds); the records then go with timestamp 0, which skips expiration as well, so that one ``now`` serves
    the whole batch.
    """
    headers = [tuple((h["key"], h["value"]) for h in raw or ()) for raw in columns["headers"]]
    topics = columns["topic"]
    values = columns.get("value") or [None] * len(topics)
    if at_ms is None:
        views = [
            MessageView(topic, h, 0, value) for topic, h, value in zip(topics, headers, values, strict=True)
        ]
        now_ms = 0
    else:
        views = [
            MessageView(topic, h, ts_ms or 0, value)
            for topic, h, ts_ms, value in zip(topics, headers, columns["ts_ms"], values, strict=True)
        ]
        now_ms = at_ms
    old_results = routers[0].route_batch(tables[0], views, EMPTY_LAG, now_ms)
    new_results = routers[1].route_batch(tables[1], views, EMPTY_LAG, now_ms)
    for topic, partition, offset, h, old, new in zip(
        topics, columns["partition"], columns["offset"], headers, old_results, new_results, strict=True
    ):
        summary.add(
            topic, partition, offset, h, {d.app: d for d in old.decisions}, {d.app: d for d in new.decisions}
        )


# --- reading and planning (driver) --------------------------------------------------------------------------


def _client_config(settings: Settings) -> dict[str, str]:
    return settings.client_properties()


def _existing_topics(settings: Settings) -> list[str]:
    from subroute.spark import kafka_source

    consumer = kafka_source.consumer_for(_client_config(settings))
    try:
        return sorted(consumer.list_topics(timeout=10.0).topics)
    finally:
        consumer.close()


def offset_range(settings: Settings, topics: Sequence[str], limit: int | None) -> tuple[str, str]:
    """(startingOffsets, endingOffsets) for the batch read: all of it, or the last ``limit`` per partition.

    The ends are pinned (read from fetches, which some brokers report more truly than ListOffsets), so the
    read is one consistent snapshot even while producers keep writing.
    """
    if limit is None:
        return "earliest", "latest"
    from subroute.spark import kafka_source

    consumer = kafka_source.consumer_for(_client_config(settings))
    try:
        options = kafka_source.SourceOptions(client_config=_client_config(settings), subscribe=tuple(topics))
        partitions = kafka_source.discover(consumer, options)
        ends = kafka_source.end_offsets(consumer, partitions)
        lows = kafka_source.low_offsets(consumer, partitions)
    finally:
        consumer.close()
    starts = {tp: max(lows[tp], ends[tp] - limit) for tp in partitions}
    return (
        json.dumps(kafka_source.offsets_to_json(starts)),
        json.dumps(kafka_source.offsets_to_json(ends)),
    )


def read_history(
    spark: SparkSession,
    settings: Settings,
    topics: Sequence[str],
    *,
    limit: int | None = None,
    source: str = "auto",
) -> tuple[DataFrame, str]:
    """The topics' records as a batch DataFrame with the Kafka source schema, and the format that read them."""
    from subroute.spark import kafka_source
    from subroute.spark.session import kafka_format_missing

    starting, ending = offset_range(settings, topics, limit)
    options = {f"kafka.{key}": value for key, value in _client_config(settings).items()}
    options.update(
        {
            "subscribe": ",".join(topics),
            "includeHeaders": "true",
            "startingOffsets": starting,
            "endingOffsets": ending,
        }
    )
    if source in ("auto", "kafka"):
        try:
            return spark.read.format("kafka").options(**options).load(), "kafka"
        except Exception as exc:
            if source == "kafka" or not kafka_format_missing(exc):
                raise
    kafka_source.register(spark)
    return spark.read.format(kafka_source.FORMAT).options(**options).load(), kafka_source.FORMAT


def select_records(
    frame: DataFrame, since_ms: int | None, limit: int | None, with_value: bool = False
) -> DataFrame:
    """What routing needs of each record, after ``--since`` and ``--limit`` (the N most recent per topic): the
    value too ``with_value`` (an app reads properties from the body; otherwise it is left in Kafka's files)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    columns: list[Column | str] = ["topic", "partition", "offset", F.unix_millis("timestamp").alias("ts_ms")]
    records = frame.select(*columns, "headers", *(["value"] if with_value else []))
    if since_ms is not None:
        records = records.filter(F.col("ts_ms") >= F.lit(since_ms))
    if limit is not None:
        recent = Window.partitionBy("topic").orderBy(
            F.col("ts_ms").desc_nulls_last(), F.col("partition"), F.col("offset").desc()
        )
        records = (
            records.withColumn("_n", F.row_number().over(recent)).filter(F.col("_n") <= limit).drop("_n")
        )
    # Route each Kafka partition in offset order (round-robin rotates in arrival order, as the worker does).
    return records.sortWithinPartitions("topic", "partition", "offset")


def compute_plan(
    spark: SparkSession,
    settings: Settings,
    current: Config,
    proposed: Config,
    *,
    inputs: Sequence[str] = (),
    since_ms: int | None = None,
    limit: int | None = None,
    evaluate_at: str = "arrival",
    examples: int = DEFAULT_EXAMPLES,
    source: str = "auto",
    schema_registry: RegistrySettings | None = None,
) -> PlanResult:
    """Route the input history under both configurations and count the transitions (reads Kafka only, and the
    Schema Registry for apps reading Avro in Confluent's wire format: SettingsError without one,
    RegistryUnavailable when it cannot be read)."""
    if limit is not None and limit <= 0:
        raise SettingsError(f"--limit must be positive, got {limit}")
    if evaluate_at not in EVALUATE_AT:
        raise SettingsError(f"--evaluate-at must be one of {', '.join(EVALUATE_AT)}, got {evaluate_at!r}")
    existing = _existing_topics(settings)
    if inputs:
        topics = sorted({t for t in inputs if t in existing})
        missing = sorted({t for t in inputs if t not in existing})
    else:
        topics, missing = input_topics((current, proposed), existing)
    result = PlanResult(
        current_version=current.version,
        proposed="",
        topics={},
        missing_topics=tuple(missing),
        evaluate_at=evaluate_at,
        since_ms=since_ms,
        limit=limit,
        config_topic=settings.config_topic,
    )
    if not topics:
        return result
    framed = sorted(
        {
            app.name
            for config in (current, proposed)
            for app in config.apps.values()
            if needs_schema_registry(app) and any(input_matches(i, t) for i in app.inputs for t in topics)
        }
    )
    if framed and schema_registry is None:
        # Refused before reading: every record of these apps would be undecodable, its fields absent.
        raise SettingsError(
            f"app(s) {', '.join(framed)} read Avro in Confluent's wire format: give --schema-registry-url "
            "(or SUBROUTE_SCHEMA_REGISTRY_URL) to read their writer schemas"
        )
    frame, result.source_format = read_history(spark, settings, topics, limit=limit, source=source)
    at_ms = int(time.time() * 1000) if evaluate_at == "now" else None
    # Body properties are read from the value, as the worker reads them (routing/body.py).
    with_value = any(app.paths for config in (current, proposed) for app in config.apps.values())
    records = select_records(frame, since_ms, limit, with_value)
    summaries = records.mapInArrow(
        route_records(current, proposed, at_ms, max(examples, 0), schema_registry), summary_schema()
    )
    result.topics = dict.fromkeys(topics, 0)
    found: list[Example] = []
    try:
        rows = summaries.collect()  # one action; a few rows per Spark partition
    except Exception as exc:
        failure = _registry_failure(exc, schema_registry)
        if failure is None:
            raise
        raise failure from None  # Spark's own error is the Python worker's traceback: the message says it all
    for row in rows:
        kind = row["kind"]
        if kind == "topic":
            result.topics[row["topic"]] = result.topics.get(row["topic"], 0) + row["count"]
        elif kind == "transition":
            table = result.tables.setdefault(row["app"], {})
            table[(row["old"], row["new"])] = table.get((row["old"], row["new"]), 0) + row["count"]
        elif kind == "unmatched":
            result.unmatched += row["count"]
        else:
            headers = tuple(
                (h["key"], None if h["value"] is None else bytes(h["value"])) for h in row["headers"]
            )
            found.append(Example(row["topic"], row["partition"], row["offset"], tuple(row["apps"]), headers))
    result.tables = {app: dict(sorted(t.items())) for app, t in sorted(result.tables.items())}
    # Each partition sent its first examples in offset order: the smallest overall are among them.
    result.examples = sorted(found, key=lambda e: (e.topic, e.partition, e.offset))[: max(examples, 0)]
    return result


def _registry_failure(exc: Exception, registry: RegistrySettings | None) -> RegistryUnavailable | None:
    """The executor's RegistryUnavailable, from the Spark error that carries it (as text: Spark hands the driver
    the Python worker's traceback, not the exception), or None when the plan failed for another reason."""
    if registry is None:
        return None
    found = re.search(rf"{RegistryUnavailable.__name__}: (schema id (\d+): .*)", str(exc))
    if found is None:
        return None
    failure = RegistryUnavailable(registry.url, int(found[2]), "")
    failure.args = (found[1],)  # the executor's words, which name the reason
    return failure


# --- output -------------------------------------------------------------------------------------------------


def _show_header_value(value: bytes | None) -> str:
    return "(null)" if value is None else value.decode("utf-8", "backslashreplace")


def _show_time(ms: int) -> str:
    return (
        dt.datetime.fromtimestamp(ms / 1000, dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    )


def format_plan(result: PlanResult) -> str:
    lines: list[str] = []
    mode = (
        "--prune: the file is the whole configuration"
        if result.prune
        else "records the file does not name are kept"
    )
    lines.append(f"current:  config version {result.current_version} from {result.config_topic}")
    lines.append(f"proposed: {result.proposed} ({mode})")
    for key in result.dropped_groups:
        lines.append(f"  note: {key} would be left out: it no longer fits its app")
    window = []
    if result.since_ms is not None:
        window.append(f"since {_show_time(result.since_ms)}")
    if result.limit is not None:
        window.append(f"the {result.limit} most recent per topic")
    read = ", ".join(f"{topic} ({count})" for topic, count in result.topics.items()) or "nothing"
    source = f"; source {result.source_format}" if result.source_format else ""
    lines.append(
        f"input:    {result.records} record(s){' ' + ', '.join(window) if window else ''}: {read}{source}"
    )
    if result.missing_topics:
        lines.append(f"  note: not on the cluster, not read: {', '.join(result.missing_topics)}")
    when = (
        "as of each record's arrival (its timestamp)"
        if result.evaluate_at == "arrival"
        else "as if every record arrived now (expiration applies)"
    )
    lines.append(
        f"routing:  {when}; empty lag snapshot (capacity ignored: every group has room); "
        "round-robin splits are indicative (one rotation per Spark partition)"
    )
    lines.append("")
    if not result.tables:
        lines.append("no app reads these records under either configuration")
    for app, table in result.tables.items():
        total = sum(table.values())
        lines.append(f"app {app}: {total} record(s), {result.moved(app)} change destination")
        width = max(len(old) for old, _ in table)
        for (old, new), count in table.items():
            mark = " " if old == new else "~"
            lines.append(f"  {mark} {old:<{width}} -> {new}: {count}")
        lines.append("")
    if result.unmatched:
        lines.append(
            f"unmatched: {result.unmatched} record(s) would match no consumer subscription under the "
            "proposed configuration (they would wait on the pending topic)"
        )
        for example in result.examples:
            headers = " ".join(f"{k}={_show_header_value(v)}" for k, v in example.headers) or "(no headers)"
            lines.append(
                f"  {example.topic}/{example.partition}/{example.offset} "
                f"[{', '.join(example.apps)}] {headers}"
            )
        if result.unmatched > len(result.examples):
            lines.append(f"  ... and {result.unmatched - len(result.examples)} more")
    else:
        lines.append("unmatched: none: every record passing an app filter matches a consumer subscription")
    lines.append(f"nothing was written to {result.config_topic}")
    return "\n".join(lines)


def plan_document(result: PlanResult) -> dict[str, Any]:
    """The plan as plain data (``plan -o json|yaml``): every fact ``format_plan`` prints."""
    return {
        "current_version": result.current_version,
        "config_topic": result.config_topic,
        "proposed": result.proposed,
        "prune": result.prune,
        "dropped_groups": list(result.dropped_groups),
        "since_ms": result.since_ms,
        "limit": result.limit,
        "evaluate_at": result.evaluate_at,
        "source_format": result.source_format,
        "records": result.records,
        "topics": dict(result.topics),
        "missing_topics": list(result.missing_topics),
        "apps": {
            app: {
                "records": sum(table.values()),
                "moved": result.moved(app),
                "transitions": [{"from": old, "to": new, "records": n} for (old, new), n in table.items()],
            }
            for app, table in result.tables.items()
        },
        "unmatched": result.unmatched,
        "examples": [
            {
                "topic": e.topic,
                "partition": e.partition,
                "offset": e.offset,
                "apps": list(e.apps),
                "headers": [[k, None if v is None else _show_header_value(v)] for k, v in e.headers],
            }
            for e in result.examples
        ],
        "written": False,
    }
