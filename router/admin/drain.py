"""Draining a deleted group: its unconsumed records go back through the app's pending topic.

``subroute config delete group APP GROUP --drain`` removes the group from the configuration first, so the router
no longer routes to it, then calls ``drain_group``. Each pass reads the group topic and its band topics (.p1-.p9)
from the group's committed offsets (consumer group ``<prefix>.<app>.<group>``) to their end and re-publishes
every record to ``<prefix>.<app>.pending`` with ``subroute.pending-reason: replaced`` (key, value, headers,
timestamp and the original ``subroute.source`` kept), and commits the group's offsets to that end **in the same
Kafka transaction** (``send_offsets_to_transaction``): either the copies and the commit are there, or neither,
so a killed or repeated drain never re-publishes a record twice and never loses one. The router takes a
``replaced`` record up at once (it carries the older config version it was routed under) and routes it under the
configuration in force.

A worker that has not read the deletion yet may still route a few records to the group; a drain therefore
repeats passes, ``settle`` seconds apart, until a pass finds nothing.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import cast

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    ConsumerGroupState,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient

from subroute import wire
from subroute.admin.transfer import Copy, copy_in_transaction, transactional_producer
from subroute.errors import SubrouteError
from subroute.kafka import clients
from subroute.ops.settings import Settings

# The group's reader: committed records only (an aborted routing transaction is nothing to drain), and an EOF
# event per partition, which says where its end was.
_READER = {"isolation.level": "read_committed", "enable.partition.eof": True, "auto.offset.reset": "earliest"}


@dataclass
class DrainResult:
    """What a drain re-published, by source topic, and how many passes it took."""

    republished: dict[str, int] = field(default_factory=dict)
    passes: int = 0

    @property
    def total(self) -> int:
        return sum(self.republished.values())


class GroupInUse(SubrouteError, RuntimeError):
    """The group's consumer group has live members: they may still process what a drain would re-publish."""


def live_members(settings: Settings, group_id: str, timeout: float = 10.0) -> int | None:
    """Members of the consumer group ``group_id`` now (0 when it does not exist or is empty); None when the
    broker calls the group live (STABLE) but lists no member: membership is not reported (docs/brokers.md), so
    whether consumers are attached cannot be told, and a drain must not assume they are not."""
    admin: AdminClient = clients.admin_client(settings)
    future = admin.describe_consumer_groups([group_id], request_timeout=timeout)[group_id]
    try:
        description = future.result(timeout)
    except KafkaException as exc:
        if exc.args[0].code() == KafkaError.GROUP_ID_NOT_FOUND:
            return 0
        raise
    members = len(description.members or [])
    if not members and description.state == ConsumerGroupState.STABLE:
        return None
    return members


def in_use_reason(group_id: str, members: int | None) -> str:
    """Why a drain is refused for a group with ``members`` (None: not reported)."""
    if members is None:
        return (
            f"consumer group {group_id} is live but the broker lists none of its members: whether its consumers "
            "still read cannot be told, so --drain is refused"
        )
    return (
        f"consumer group {group_id} has {members} live member(s): stop the group's consumers first, or they may "
        "process the drained messages a second time"
    )


def drain_group(
    settings: Settings,
    app: str,
    group: str,
    *,
    settle: float = 3.0,
    max_passes: int = 20,
    timeout: float = 60.0,
) -> DrainResult:
    """Re-publish the group's unconsumed records to the app's pending topic, committing the group's offsets to
    the end in the same transaction; repeat every ``settle`` seconds until a pass finds nothing.

    Raises ``GroupInUse`` when the group has live consumers (they would process the records a second time), and
    ``KafkaException`` / ``TimeoutError`` when Kafka fails (then nothing of the failed pass is visible and the
    drain can be run again)."""
    group_id = wire.consumer_group_id(settings.topic_prefix, app, group)
    members = live_members(settings, group_id)
    if members is None or members:
        raise GroupInUse(in_use_reason(group_id, members))
    # One id per group: a second drain of the same group fences the first (and aborts its open pass).
    producer = transactional_producer(settings, f"{group_id}.drain", timeout)
    consumer = clients.reader(settings, group_id, **_READER)
    result = DrainResult()
    try:
        while result.passes < max_passes:
            moved = _drain_pass(settings, app, group, consumer, producer, result, timeout)
            result.passes += 1
            if not moved and result.passes > 1:
                break
            time.sleep(settle)
    finally:
        consumer.close()
    return result


def count_drainable(settings: Settings, app: str, group: str, timeout: float = 60.0) -> dict[str, int]:
    """What a drain would re-publish now, by source topic: the group's committed records past its committed
    offsets (transaction markers and aborted records are not messages). Reads only (``--drain --dry-run``)."""
    group_id = wire.consumer_group_id(settings.topic_prefix, app, group)
    consumer = clients.reader(settings, group_id, **_READER)
    counted: dict[str, int] = {}
    try:
        for message in _unconsumed(settings, app, group, consumer, {}, timeout):
            topic = cast(str, message.topic())
            counted[topic] = counted.get(topic, 0) + 1
    finally:
        consumer.close()
    return counted


def _unconsumed(
    settings: Settings,
    app: str,
    group: str,
    consumer: Consumer,
    ends: dict[tuple[str, int], int],
    timeout: float,
) -> Iterator[Message]:
    """The records of the group topic and its bands from the group's committed offsets to their end; ``ends``
    gets each partition's end position (read or not)."""
    metadata = consumer.list_topics(timeout=10)
    topics = [t for t in wire.band_topics(settings.topic_prefix, app, group) if t in metadata.topics]
    partitions = [TopicPartition(t, p) for t in topics for p in metadata.topics[t].partitions]
    if not partitions:
        return
    starts = [
        TopicPartition(tp.topic, tp.partition, tp.offset if tp.offset >= 0 else OFFSET_BEGINNING)
        for tp in consumer.committed(partitions, timeout=10)
    ]
    try:
        consumer.assign(starts)
        remaining = {(tp.topic, tp.partition) for tp in starts}
        deadline = time.monotonic() + timeout
        while remaining:
            if time.monotonic() > deadline:
                raise TimeoutError(f"could not read {sorted(remaining)} to their end in {timeout:.0f} s")
            for message in consumer.consume(500, timeout=0.5):
                where = (cast(str, message.topic()), cast(int, message.partition()))
                error = message.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        remaining.discard(where)
                        ends[where] = cast(int, message.offset())
                        continue
                    raise KafkaException(error)
                ends[where] = cast(int, message.offset()) + 1
                yield message
    finally:
        consumer.unassign()


def _drain_pass(
    settings: Settings,
    app: str,
    group: str,
    consumer: Consumer,
    producer: Producer,
    result: DrainResult,
    timeout: float,
) -> int:
    """One transaction: every record from the committed offsets to the end, then the commit of that end."""
    pending = wire.pending_topic(settings.topic_prefix, app)
    ends: dict[tuple[str, int], int] = {}
    copied: dict[str, int] = {}

    def copies() -> Iterator[Copy]:
        for message in _unconsumed(settings, app, group, consumer, ends, timeout):
            topic = cast(str, message.topic())
            copied[topic] = copied.get(topic, 0) + 1
            yield _replaced(pending, message)

    def positions() -> list[TopicPartition]:
        # Every partition's end, read or not, committed with the copies: a later pass (or drain) starts there.
        return [TopicPartition(t, p, offset) for (t, p), offset in sorted(ends.items()) if offset >= 0]

    if not copy_in_transaction(producer, consumer, copies(), positions, timeout):
        return 0  # no group topic yet: nothing to drain, nothing to commit
    for topic, count in copied.items():
        result.republished[topic] = result.republished.get(topic, 0) + count
    return sum(copied.values())


def _replaced(pending: str, message: Message) -> Copy:
    """The record as it was (key, value, headers with its subroute.source, timestamp: expiration keeps counting
    from the original time), marked ``replaced`` and with a ``replaced`` event in its history, as the consumer
    client's replace writes it."""
    drained = wire.event(
        wire.REPLACED,
        int(time.time() * 1000),
        topic=message.topic(),
        partition=message.partition(),
        offset=message.offset(),
        reason=wire.GROUP_DELETED,
    )
    updates: dict[str, bytes | None] = {wire.PENDING_REASON: wire.REPLACED.encode(), wire.DLQ_REASON: None}
    consumed = cast(wire.Headers, message.headers() or [])  # consumed headers are bytes
    _kind, timestamp = message.timestamp()
    return Copy(
        pending, message.key(), message.value(), wire.with_event(consumed, drained, updates), timestamp
    )
