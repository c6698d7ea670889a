"""A Spark data source over confluent-kafka that stands in for Spark's own ``kafka`` format.

pyspark ships no ``spark-sql-kafka`` connector, so ``format("subroute-kafka")`` offers the same columns
(``key, value, topic, partition, offset, timestamp, timestampType`` and, with ``includeHeaders``, ``headers``)
and the same option names: ``subscribe``, ``subscribePattern``, ``startingOffsets``, ``endingOffsets``,
``maxOffsetsPerTrigger``, ``failOnDataLoss``, ``includeHeaders``, ``kafkaConsumer.pollTimeoutMs``, and
``kafka.<property>`` passed to librdkafka. Offsets live in Spark's checkpoint, shaped like Spark's own
(``{"topic": {"partition": next_offset}}``). One Spark partition per Kafka partition that has data.

Not supported: ``assign``, time-based start or end offsets, ``minPartitions``.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Message, TopicPartition
from pyspark.sql import SparkSession
from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
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

FORMAT = "subroute-kafka"

# Spark's JSON offset conventions for startingOffsets / endingOffsets.
EARLIEST = -2
LATEST = -1

_ROWS_PER_ARROW_BATCH = 10_000
_METADATA_TIMEOUT = 10.0

TopicPartitionKey = tuple[str, int]
Offsets = dict[TopicPartitionKey, int]


def kafka_schema(include_headers: bool = True) -> StructType:
    """Spark's Kafka source schema (KafkaRecordToRowConverter): every field nullable."""
    fields = [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
    if include_headers:
        header = StructType([StructField("key", StringType()), StructField("value", BinaryType())])
        fields.append(StructField("headers", ArrayType(header)))
    return StructType(fields)


def offsets_to_json(offsets: Offsets) -> dict[str, dict[str, int]]:
    """Spark compares offsets as JSON text: always emit topics and partitions in one order."""
    result: dict[str, dict[str, int]] = {}
    for topic, partition in sorted(offsets):
        result.setdefault(topic, {})[str(partition)] = offsets[(topic, partition)]
    return result


def offsets_from_json(value: Mapping[str, Mapping[str, int]]) -> Offsets:
    return {(topic, int(p)): int(o) for topic, parts in value.items() for p, o in parts.items()}


def _flag(options: Mapping[str, str], name: str, default: bool) -> bool:
    raw = options.get(name)
    if raw is None:
        return default
    if raw.strip().lower() not in ("true", "false"):
        raise ValueError(f"option {name} wants true or false, got {raw!r}")
    return raw.strip().lower() == "true"


@dataclass(frozen=True)
class SourceOptions:
    """The data source options as plain values: readers are pickled to executors."""

    client_config: Mapping[str, str]
    subscribe: tuple[str, ...] = ()
    subscribe_pattern: str | None = None
    starting_offsets: str | None = None  # None: Spark's default (latest streaming, earliest batch)
    ending_offsets: str = "latest"
    max_offsets_per_trigger: int | None = None
    include_headers: bool = False
    fail_on_data_loss: bool = True
    poll_timeout: float = 120.0

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> SourceOptions:
        # Spark hands options over with lower-cased keys.
        opts = {key.lower(): value for key, value in options.items()}
        client = {key[len("kafka.") :]: value for key, value in opts.items() if key.startswith("kafka.")}
        if "bootstrap.servers" not in client:
            raise ValueError("option kafka.bootstrap.servers is required")
        subscribe = tuple(t.strip() for t in opts.get("subscribe", "").split(",") if t.strip())
        pattern = opts.get("subscribepattern") or None
        if bool(subscribe) == bool(pattern):
            raise ValueError("give exactly one of the options subscribe and subscribePattern")
        if pattern is not None:
            re.compile(pattern)
        max_offsets = opts.get("maxoffsetspertrigger")
        if max_offsets is not None and int(max_offsets) <= 0:
            raise ValueError(f"maxOffsetsPerTrigger must be positive, got {max_offsets}")
        return cls(
            client_config=client,
            subscribe=subscribe,
            subscribe_pattern=pattern,
            starting_offsets=opts.get("startingoffsets"),
            ending_offsets=opts.get("endingoffsets", "latest"),
            max_offsets_per_trigger=int(max_offsets) if max_offsets is not None else None,
            include_headers=_flag(opts, "includeheaders", False),
            fail_on_data_loss=_flag(opts, "failondataloss", True),
            poll_timeout=int(opts.get("kafkaconsumer.polltimeoutms", "120000")) / 1000.0,
        )


def consumer_for(client_config: Mapping[str, str], fail_on_data_loss: bool = True) -> Consumer:
    """An assign-only consumer: no group join, no commits (offsets are Spark's business)."""
    config: dict[str, Any] = {"group.id": "subroute-spark-source"}
    config.update(client_config)
    config.update(
        {
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "enable.partition.eof": True,
            # A start below the log start means records were deleted: fail like Spark's failOnDataLoss.
            "auto.offset.reset": "error" if fail_on_data_loss else "earliest",
        }
    )
    return Consumer(config)


def discover(consumer: Consumer, options: SourceOptions) -> list[TopicPartitionKey]:
    """The partitions the options subscribe to, as the cluster metadata shows them now."""
    metadata = consumer.list_topics(timeout=_METADATA_TIMEOUT)
    if options.subscribe_pattern is not None:
        pattern = re.compile(options.subscribe_pattern)
        # Java's Pattern.matches(), which Spark uses, matches the whole name.
        topics = [t for t in metadata.topics if pattern.fullmatch(t) and not t.startswith("__")]
    else:
        topics = [t for t in options.subscribe if t in metadata.topics]
    result: list[TopicPartitionKey] = []
    for topic in sorted(topics):
        info = metadata.topics[topic]
        if info.error is None:
            result.extend((topic, p) for p in sorted(info.partitions))
    return result


def low_offsets(consumer: Consumer, partitions: Sequence[TopicPartitionKey]) -> Offsets:
    return {
        (t, p): consumer.get_watermark_offsets(TopicPartition(t, p), timeout=_METADATA_TIMEOUT)[0]
        for t, p in partitions
    }


def end_offsets(
    consumer: Consumer, partitions: Sequence[TopicPartitionKey], timeout: float = 30.0
) -> Offsets:
    """High watermarks as fetch responses report them.

    ListOffsets alone can be short by up to one batch on some brokers (Tansu), so start reading where it
    points and take the offset of the partition-EOF event, which comes from a fetch response.
    """
    if not partitions:
        return {}
    listed = {
        (t, p): consumer.get_watermark_offsets(TopicPartition(t, p), timeout=_METADATA_TIMEOUT)[1]
        for t, p in partitions
    }
    ends = dict(listed)
    consumer.assign([TopicPartition(t, p, offset) for (t, p), offset in listed.items()])
    pending = set(listed)
    deadline = time.monotonic() + timeout
    try:
        while pending:
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"no end of partition reported within {timeout:.0f}s for {sorted(pending)}"
                )
            for message in consumer.consume(1000, timeout=0.1):
                topic, partition, offset = _where(message)
                key = (topic, partition)
                error = message.error()
                if error is None:
                    ends[key] = max(ends[key], offset + 1)
                elif error.code() == KafkaError._PARTITION_EOF:
                    ends[key] = max(ends[key], offset)
                    pending.discard(key)
                else:
                    raise KafkaException(error)
    finally:
        consumer.unassign()
    return ends


def _where(message: Message) -> tuple[str, int, int]:
    """Topic, partition and offset of a fetched record or partition event (always set for those)."""
    topic, partition, offset = message.topic(), message.partition(), message.offset()
    assert topic is not None and partition is not None and offset is not None
    return topic, partition, offset


def resolve_offsets(
    spec: str, partitions: Sequence[TopicPartitionKey], consumer: Consumer, what: str
) -> Offsets:
    """``earliest``, ``latest`` or Spark's JSON (-2 earliest, -1 latest) to concrete offsets.

    Partitions the JSON leaves out start at the earliest offset, as partitions discovered later do.
    """
    text = spec.strip()
    if text.lower() == "earliest":
        wanted = dict.fromkeys(partitions, EARLIEST)
    elif text.lower() == "latest":
        wanted = dict.fromkeys(partitions, LATEST)
    else:
        try:
            given = offsets_from_json(json.loads(text))
        except (ValueError, AttributeError, TypeError) as exc:
            raise ValueError(
                f'{what} must be earliest, latest or JSON like {{"t":{{"0":5}}}}: {spec!r}'
            ) from exc
        wanted = {tp: given.get(tp, EARLIEST) for tp in partitions}
    lows = low_offsets(consumer, [tp for tp, o in wanted.items() if o == EARLIEST])
    highs = end_offsets(consumer, [tp for tp, o in wanted.items() if o == LATEST])
    return {tp: lows[tp] if o == EARLIEST else highs[tp] if o == LATEST else o for tp, o in wanted.items()}


def rate_limit(starts: Offsets, ends: Offsets, max_rows: int) -> Offsets:
    """Spread ``max_rows`` over the partitions in proportion to their backlog, like Spark's Kafka source."""
    sizes = {tp: max(0, end - starts[tp]) for tp, end in ends.items()}
    total = sum(sizes.values())
    if total <= max_rows:
        return dict(ends)
    limited: Offsets = {}
    for tp, end in ends.items():
        prorate = max_rows * (sizes[tp] / total)
        step = math.ceil(prorate) if prorate < 1 else math.floor(prorate)
        limited[tp] = min(end, starts[tp] + step)
    return limited


class KafkaPartition(InputPartition):
    """One Kafka partition's offset range ``[start, end)``; start may be EARLIEST for a new partition."""

    def __init__(self, topic: str, partition: int, start: int, end: int) -> None:
        super().__init__((topic, partition, start, end))
        self.topic = topic
        self.partition = partition
        self.start = start
        self.end = end


class _ArrowRows:
    """Collects records column by column: Arrow batches cross to the JVM far faster than tuples."""

    def __init__(self, include_headers: bool) -> None:
        self.include_headers = include_headers
        self.schema = to_arrow_schema(kafka_schema(include_headers), timezone="UTC")
        self._reset()

    def _reset(self) -> None:
        self.keys: list[bytes | None] = []
        self.values: list[bytes | None] = []
        self.topics: list[str] = []
        self.partitions: list[int] = []
        self.offsets: list[int] = []
        self.timestamps: list[int | None] = []
        self.timestamp_types: list[int] = []
        self.headers: list[list[tuple[str, bytes | None]]] = []

    def __len__(self) -> int:
        return len(self.offsets)

    def add(self, message: Message) -> None:
        topic, partition, offset = _where(message)
        key, value = message.key(), message.value()
        # Deserializer-free consumers hand out bytes; the str in the stubs is for other configurations.
        self.keys.append(key.encode() if isinstance(key, str) else key)
        self.values.append(value.encode() if isinstance(value, str) else value)
        self.topics.append(topic)
        self.partitions.append(partition)
        self.offsets.append(offset)
        kind, millis = message.timestamp()
        # librdkafka: 0 none, 1 CreateTime, 2 LogAppendTime; Spark (Java client): -1, 0, 1.
        self.timestamp_types.append(kind - 1)
        self.timestamps.append(millis * 1000 if kind != 0 and millis >= 0 else None)
        if self.include_headers:
            headers = message.headers() or []
            assert isinstance(headers, list)  # librdkafka hands out a list of (key, value) pairs
            self.headers.append([(k, v.encode() if isinstance(v, str) else v) for k, v in headers])

    def flush(self) -> pa.RecordBatch:
        columns = [
            pa.array(self.keys, pa.binary()),
            pa.array(self.values, pa.binary()),
            pa.array(self.topics, pa.string()),
            pa.array(self.partitions, pa.int32()),
            pa.array(self.offsets, pa.int64()),
            pa.array(self.timestamps, self.schema.field("timestamp").type),
            pa.array(self.timestamp_types, pa.int32()),
        ]
        if self.include_headers:
            columns.append(pa.array(self.headers, self.schema.field("headers").type))
        batch = pa.RecordBatch.from_arrays(columns, schema=self.schema)
        self._reset()
        return batch


def read_partition(options: SourceOptions, part: KafkaPartition) -> Iterator[pa.RecordBatch]:
    """The records of ``[part.start, part.end)`` as Arrow batches. Gaps (transaction markers) are allowed."""
    if part.start >= 0 and part.start >= part.end:
        return
    consumer = consumer_for(options.client_config, options.fail_on_data_loss)
    try:
        start = part.start if part.start >= 0 else OFFSET_BEGINNING
        consumer.assign([TopicPartition(part.topic, part.partition, start)])
        rows = _ArrowRows(options.include_headers)
        position = max(part.start, 0)
        last_progress = time.monotonic()
        done = False
        while not done:
            # consume(n) waits for n messages or the timeout: ask for no more than remain.
            wanted = max(1, min(part.end - position, _ROWS_PER_ARROW_BATCH))
            messages = consumer.consume(wanted, timeout=0.5)
            for message in messages:
                error = message.error()
                if error is not None:
                    if error.code() != KafkaError._PARTITION_EOF:
                        raise KafkaException(error)
                    done = _where(message)[2] >= part.end
                    continue
                offset = _where(message)[2]
                if offset >= part.end:
                    done = True
                    break
                rows.add(message)
                position = offset + 1
                if position >= part.end:
                    done = True
                    break
                if len(rows) >= _ROWS_PER_ARROW_BATCH:
                    yield rows.flush()
            if messages:
                last_progress = time.monotonic()
            elif time.monotonic() - last_progress > options.poll_timeout:
                raise TimeoutError(
                    f"{part.topic}/{part.partition}: nothing arrived for {options.poll_timeout:.0f}s "
                    f"at offset {position}, planned end {part.end} (kafkaConsumer.pollTimeoutMs)"
                )
        if len(rows):
            yield rows.flush()
    finally:
        consumer.close()


def plan_partitions(starts: Offsets, ends: Offsets) -> list[KafkaPartition]:
    """One input partition per Kafka partition with records in range; new partitions start at EARLIEST."""
    planned = []
    for (topic, partition), end in sorted(ends.items()):
        start = starts.get((topic, partition), EARLIEST)
        if (start == EARLIEST and end > 0) or 0 <= start < end:
            planned.append(KafkaPartition(topic, partition, start, end))
    return planned


class KafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        # Set by prepareForTriggerAvailableNow: the ends this availableNow run must not pass (JSON form).
        self.target: dict[str, dict[str, int]] | None = None

    def initialOffset(self) -> dict[str, Any]:
        consumer = consumer_for(self.options.client_config)
        try:
            partitions = discover(consumer, self.options)
            spec = self.options.starting_offsets or "latest"
            return offsets_to_json(resolve_offsets(spec, partitions, consumer, "startingOffsets"))
        finally:
            consumer.close()

    def _current_ends(self) -> tuple[Offsets, Offsets]:
        """(latest ends of every subscribed partition, earliest offsets of those)."""
        consumer = consumer_for(self.options.client_config)
        try:
            partitions = discover(consumer, self.options)
            return end_offsets(consumer, partitions), low_offsets(consumer, partitions)
        finally:
            consumer.close()

    def prepareForTriggerAvailableNow(self) -> None:
        ends, _ = self._current_ends()
        self.target = offsets_to_json(ends)

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.options.max_offsets_per_trigger is None:
            return ReadAllAvailable()
        return ReadMaxRows(self.options.max_offsets_per_trigger)

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        begin = offsets_from_json(start)
        if self.target is not None:
            ends = offsets_from_json(self.target)
            lows: Offsets = {}
            new = [tp for tp in ends if tp not in begin]
            if new:
                consumer = consumer_for(self.options.client_config)
                try:
                    lows = low_offsets(consumer, new)
                finally:
                    consumer.close()
        else:
            ends, lows = self._current_ends()
        starts = {tp: begin.get(tp, lows.get(tp, 0)) for tp in ends}
        # Never move a partition backwards, and keep partitions that vanished from the metadata.
        ends = {tp: max(end, starts[tp]) for tp, end in ends.items()}
        if isinstance(limit, ReadMaxRows):
            ends = rate_limit(starts, ends, limit.max_rows)
        merged = dict(begin)
        merged.update(ends)
        return offsets_to_json(merged)

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        return plan_partitions(offsets_from_json(start), offsets_from_json(end))

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, KafkaPartition)
        return read_partition(self.options, partition)

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to do: offsets live in Spark's checkpoint; the job confirms to Kafka after its sink."""


class KafkaBatchReader(DataSourceReader):
    def __init__(self, options: SourceOptions) -> None:
        self.options = options

    def partitions(self) -> Sequence[InputPartition]:
        consumer = consumer_for(self.options.client_config)
        try:
            found = discover(consumer, self.options)
            spec = self.options.starting_offsets or "earliest"
            starts = resolve_offsets(spec, found, consumer, "startingOffsets")
            ends = resolve_offsets(self.options.ending_offsets, found, consumer, "endingOffsets")
        finally:
            consumer.close()
        planned: Sequence[InputPartition] = plan_partitions(starts, ends)
        # Spark wants at least one partition even when nothing is to be read.
        return planned or [KafkaPartition("", 0, 0, 0)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, KafkaPartition)
        return read_partition(self.options, partition)


class KafkaDataSource(DataSource):
    """``spark.readStream.format("subroute-kafka")`` and ``spark.read.format("subroute-kafka")``."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def _options(self) -> SourceOptions:
        return SourceOptions.parse(self.options)

    def schema(self) -> StructType:
        return kafka_schema(self._options().include_headers)

    def reader(self, schema: StructType) -> DataSourceReader:
        return KafkaBatchReader(self._options())

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return KafkaStreamReader(self._options())


def register(spark: SparkSession) -> None:
    spark.dataSource.register(KafkaDataSource)
