"""The Kafka edge's clients: built from Settings, topic creation, reading a topic (or one record) back.

With the worker, the config store and the consumer client, this is the only code that imports
confluent-kafka (tests/unit/test_import_rules.py holds that); the CLI and the dev tools come through here.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka import KafkaError as KafkaError  # re-exported: what callers inspect
from confluent_kafka import KafkaException as KafkaException  # re-exported: what callers catch
from confluent_kafka.admin import AdminClient as AdminClient  # re-exported for type hints elsewhere
from confluent_kafka.admin import (  # type: ignore[attr-defined]  # NewTopic, ConfigResource: not in the stubs' exports
    ConfigResource,
    NewTopic,
)

from subroute.ops.settings import Settings


@dataclass(frozen=True)
class TopicSpec:
    name: str
    partitions: int = 1
    config: Mapping[str, str] = field(default_factory=dict)
    replication_factor: int = -1  # -1: the broker's default.replication.factor


def admin_client(settings: Settings) -> AdminClient:
    config = settings.client_config()
    # An AdminClient hands librdkafka's log to a Python logger only from poll(), which nothing calls on the
    # long-lived ones (capacity, topic layout), and librdkafka's own log goes raw to stderr: so none. What an
    # admin call meets reaches its caller as an error, and the consumers and producers beside it (whose log goes
    # through Python logging) report the same broker trouble.
    config.pop("logger", None)
    config["log_level"] = 0
    return AdminClient(config)


def producer(settings: Settings, **overrides: object) -> Producer:
    config: dict[str, object] = {"linger.ms": 5, "enable.idempotence": True, "acks": "all"}
    config.update(overrides)
    return Producer(settings.client_config(config))


def close_producer(producer: Producer) -> None:
    """Close ``producer`` once nothing is left for it to deliver (the caller flushed first), so that it keeps no
    connection to the cluster. One still holding records (the cluster unreachable past the flush) is left to
    go with its last reference: closing it would wait out ``message.timeout.ms``."""
    if len(producer) == 0:
        producer.close()


def reader(settings: Settings, group_id: str, **overrides: object) -> Consumer:
    """A consumer that never commits: to assign partitions, read records or look up a group's commits."""
    return Consumer(settings.client_config({"group.id": group_id, "enable.auto.commit": False, **overrides}))


def read_record(
    settings: Settings, topic: str, partition: int, offset: int, timeout: float = 10.0
) -> Message | None:
    """The record at ``topic/partition/offset``, or None when there is none: at once when the partition does not
    exist or the offset is outside its log, or when the next record read is past it (a transaction marker or a
    compacted record); otherwise after ``timeout`` seconds."""
    consumer = reader(settings, "subroute-read-record")
    try:
        metadata = consumer.list_topics(topic, timeout=timeout).topics.get(topic)
        if metadata is None or metadata.error is not None or partition not in metadata.partitions:
            return None
        where = TopicPartition(topic, partition, offset)
        low, high = watermarks(consumer, [where], timeout)[(topic, partition)]
        if not low <= offset < high:
            return None
        consumer.assign([where])
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None or message.error() is not None:
                continue
            return message if message.offset() == offset else None
        return None
    finally:
        consumer.close()


def group_backlog(settings: Settings, group_id: str, topic: str) -> int:
    """Records of ``topic`` past ``group_id``'s committed offsets (end offset - committed, summed)."""
    consumer = reader(settings, group_id)
    try:
        partitions = [
            TopicPartition(topic, p) for p in consumer.list_topics(topic, timeout=5).topics[topic].partitions
        ]
        committed = {tp.partition: tp.offset for tp in consumer.committed(partitions, timeout=5)}
        ends = end_offsets(consumer, partitions)
        return sum(max(0, ends[p] - max(committed.get(p, 0), 0)) for p in ends)
    finally:
        consumer.close()


def existing_topics(admin: AdminClient, timeout: float = 10.0) -> dict[str, int]:
    """Topic name -> partition count."""
    metadata = admin.list_topics(timeout=timeout)
    return {name: len(topic.partitions) for name, topic in metadata.topics.items() if topic.error is None}


def topic_settings(admin: AdminClient, topic: str, timeout: float = 15.0) -> tuple[int, dict[str, str]]:
    """An existing topic's partition count and configuration (``cleanup.policy``, ``retention.ms``, ...)."""
    partitions = existing_topics(admin, timeout)[topic]
    resource = ConfigResource("topic", topic)
    entries = admin.describe_configs([resource])[resource].result(timeout)
    return partitions, {name: entry.value for name, entry in entries.items() if entry.value is not None}


def ensure_topics(admin: AdminClient, specs: Iterable[TopicSpec], timeout: float = 15.0) -> list[str]:
    """Create the topics that do not exist yet; return the names created. Existing topics are left alone."""
    present = existing_topics(admin)
    wanted = [spec for spec in specs if spec.name not in present]
    if not wanted:
        return []
    futures = admin.create_topics(
        [
            NewTopic(
                s.name,
                num_partitions=s.partitions,
                replication_factor=s.replication_factor,
                config=dict(s.config),
            )
            for s in wanted
        ],
        operation_timeout=timeout,
    )
    created: list[str] = []
    for name, future in futures.items():
        try:
            future.result(timeout=timeout)
            created.append(name)
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise
    _wait_for_metadata(admin, [s.name for s in wanted], timeout)
    return created


def _wait_for_metadata(admin: AdminClient, topics: list[str], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        present = existing_topics(admin)
        if all(t in present for t in topics):
            return
        time.sleep(0.1)
    raise TimeoutError(f"topics not visible after creation: {topics}")


def read_to_end(
    settings: Settings, topic: str, *, idle_timeout: float = 1.0, max_wait: float = 30.0
) -> Iterator[Message]:
    """Every record of every partition of ``topic`` from the beginning to its end (``read_topics_to_end``)."""
    return read_topics_to_end(settings, [topic], idle_timeout=idle_timeout, max_wait=max_wait)


def read_topics_to_end(
    settings: Settings, topics: Sequence[str], *, idle_timeout: float = 1.0, max_wait: float = 30.0
) -> Iterator[Message]:
    """Every record of every partition of ``topics`` from the beginning to its end, without a consumer group;
    topics that do not exist are skipped. One consumer reads them all: what it costs is mostly the consumer's
    start and a first fetch, once rather than once per topic.

    "The end" is the high watermark the fetch responses report (ListOffsets can be short on some brokers):
    a partition is done when the position reaches it, or when nothing arrives for ``idle_timeout``.
    """
    consumer = Consumer(
        settings.client_config(
            {"group.id": "subroute-reader", "enable.auto.commit": False, "enable.partition.eof": True}
        )
    )
    try:
        partitions: list[TopicPartition] = []
        for topic in dict.fromkeys(topics):
            info = consumer.list_topics(topic, timeout=10).topics.get(topic)
            if info is not None and info.error is None:
                partitions += [TopicPartition(topic, p, OFFSET_BEGINNING) for p in info.partitions]
        if not partitions:
            return
        consumer.assign(partitions)
        pending: set[tuple[str | None, int | None]] = {(p.topic, p.partition) for p in partitions}
        deadline = time.monotonic() + max_wait
        last_activity = time.monotonic()
        while pending and time.monotonic() < deadline:
            batch = consumer.consume(1000, timeout=0.2)
            if not batch and time.monotonic() - last_activity > idle_timeout:
                break
            for message in batch:
                last_activity = time.monotonic()
                error = message.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        pending.discard((message.topic(), message.partition()))
                        continue
                    raise KafkaException(error)
                yield message
    finally:
        consumer.close()


def read_ranges(
    settings: Settings, ranges: Mapping[tuple[str, int], tuple[int, int]], *, max_wait: float = 30.0
) -> Iterator[Message]:
    """The records of each ``(topic, partition)`` from its start offset up to its end offset (not included), in
    offset order per partition, without a consumer group. It reads uncommitted records too (aborted ones
    included): an open transaction of a killed exactly-once worker would otherwise hold the read until it times
    out. A partition is done at its end offset or at the end of what it holds; everything stops after
    ``max_wait`` seconds."""
    wanted = {where: span for where, span in ranges.items() if span[0] < span[1]}
    if not wanted:
        return
    consumer = reader(settings, "subroute-reader", **{"enable.partition.eof": True})
    try:
        consumer.assign(
            [TopicPartition(topic, partition, start) for (topic, partition), (start, _) in wanted.items()]
        )
        pending = set(wanted)
        deadline = time.monotonic() + max_wait
        while pending and time.monotonic() < deadline:
            for message in consumer.consume(1000, timeout=0.2):
                where = (message.topic() or "", message.partition() or 0)
                error = message.error()
                if error is not None:
                    if error.code() != KafkaError._PARTITION_EOF:
                        raise KafkaException(error)
                    pending.discard(where)
                    continue
                end = wanted[where][1] if where in pending else -1
                offset = message.offset() or 0
                if offset >= end:
                    pending.discard(where)
                    continue
                yield message
                if offset + 1 >= end:
                    pending.discard(where)
    finally:
        consumer.close()


def end_offsets(reader: Consumer, partitions: list[TopicPartition], timeout: float = 2.0) -> dict[int, int]:
    """End offsets (high watermarks) of partitions of one topic, by partition, as fetch responses report them
    (``watermarks``)."""
    return {partition: high for (_, partition), (_, high) in watermarks(reader, partitions, timeout).items()}


def watermarks(
    reader: Consumer, partitions: list[TopicPartition], timeout: float = 2.0
) -> dict[tuple[str, int], tuple[int, int]]:
    """(log start, end) of each partition, of any topics; the end as fetch responses report it.

    ListOffsets alone can be one batch short on some brokers (docs/brokers.md), so each partition is fetched
    from just before its listed end, and the high watermark is taken from the fetch response. All partitions
    are fetched at once: a fetch of an empty partition waits out the broker's fetch wait, once, not once per
    topic. ``reader`` must not auto-commit: it is assigned and read here.
    """
    listed = {
        (tp.topic, tp.partition): reader.get_watermark_offsets(tp, timeout=timeout) for tp in partitions
    }
    reader.assign(
        [
            TopicPartition(tp.topic, tp.partition, max(listed[(tp.topic, tp.partition)][1] - 1, 0))
            for tp in partitions
        ]
    )
    try:
        found: dict[tuple[str, int], int] = {}
        deadline = time.monotonic() + timeout
        while len(found) < len(partitions) and time.monotonic() < deadline:
            reader.consume(100, timeout=0.05)
            for tp in partitions:
                key = (tp.topic, tp.partition)
                _, high = reader.get_watermark_offsets(tp, cached=True)
                if high is not None and high >= 0 and key not in found:
                    found[key] = max(high, listed[key][1])
        # no fetch answered in time: the listed end is the best we have
        return {key: (max(low, 0), found.get(key, high)) for key, (low, high) in listed.items()}
    finally:
        reader.unassign()
