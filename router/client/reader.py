"""The read side of the consumer client: the group's Kafka consumer on its group topic and band topics, and the
records fetched but not delivered yet, handed out in delivery order.

Delivery order: the highest priority band first, fetch order within a band, and a message group's later
records held back while one of its messages is given back (Qpid: one consumer at a time holds a group, in
order). Records the router delivered twice (an at-least-once router's redeliveries, same ``subroute.source``)
are recognised here, also across a restart of the member (``seed_dedup`` reads back what it delivered).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Mapping
from typing import cast

from confluent_kafka import OFFSET_INVALID, Consumer, KafkaError, KafkaException, Message, TopicPartition

from subroute import wire
from subroute.client.delivery import (
    TP,
    BandBuffer,
    DuplicateFilter,
    GroupHoldBack,
    GroupKey,
)
from subroute.client.messages import QueueMessage
from subroute.config.model import AppConfig
from subroute.kafka import clients
from subroute.ops.settings import Settings
from subroute.wire import Headers, is_resent, source_position

log = logging.getLogger(__name__)

Rebalance = Callable[[Consumer, list[TopicPartition]], None]


def group_consumer(
    settings: Settings,
    app: str,
    group: str,
    app_config: AppConfig,
    *,
    group_id: str,
    consumer_config: Mapping[str, object],
    on_assign: Rebalance,
    on_revoke: Rebalance,
    on_lost: Rebalance,
) -> Consumer:
    """A member of the group's Kafka consumer group, subscribed to the group topic and its band topics (created
    first when the app has a priority expression), committing only what its owner commits."""
    if app_config.priority is not None:
        _ensure_band_topics(settings, app, group, app_config)
    consumer = Consumer(
        settings.client_config(
            {
                **consumer_config,
                "group.id": group_id,
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
                "auto.offset.reset": "earliest",
                "partition.assignment.strategy": "cooperative-sticky",
            },
            defaults={
                "session.timeout.ms": 10_000,
                # Band topics created after subscribing are found by the next metadata refresh.
                "topic.metadata.refresh.interval.ms": 5_000,
                "fetch.wait.max.ms": 100,
            },
        )
    )
    consumer.subscribe(
        [wire.topic_regex(settings.topic_prefix, app, group)],
        on_assign=on_assign,
        on_revoke=on_revoke,
        on_lost=on_lost,
    )
    return consumer


def _ensure_band_topics(settings: Settings, app: str, group: str, app_config: AppConfig) -> None:
    """An app with a priority expression has ten band topics per group; create the missing ones like the
    group topic (the router may not have written to a band yet)."""
    admin = clients.admin_client(settings)
    existing = clients.existing_topics(admin)
    base = wire.group_topic(settings.topic_prefix, app, group)
    partitions = existing.get(base) or app_config.partitions or 1
    clients.ensure_topics(
        admin,
        [clients.TopicSpec(t, partitions) for t in wire.band_topics(settings.topic_prefix, app, group)],
    )


class GroupReader:
    """Fetches from ``consumer`` (the owner's ``group_consumer``) and keeps what it fetched until it is
    delivered: at most ``max_buffered`` records a partition before the partition is paused. ``dedup_window``:
    how many router deliveries a partition remembers to drop duplicates by (None: no duplicate dropping).

    Not locked itself: its owner calls it under its lock, except ``fetch``, which waits for the broker."""

    def __init__(
        self,
        consumer: Consumer,
        settings: Settings,
        app: str,
        group: str,
        app_config: AppConfig,
        *,
        group_id: str,
        max_buffered: int,
        dedup_window: int | None,
    ) -> None:
        self.settings = settings
        self.app = app
        self.group = group
        self.max_buffered = max_buffered
        self._consumer = consumer
        self._prefix = settings.topic_prefix
        self._group_id = group_id
        self._grouped = app_config.group_by is not None
        self._dedup = DuplicateFilter(dedup_window) if dedup_window is not None else None
        self._holdback: GroupHoldBack[QueueMessage] = GroupHoldBack()
        self._buffer: BandBuffer[QueueMessage] = BandBuffer(len(wire.BANDS))
        self._buffered: dict[TP, int] = {}
        self._paused: set[TP] = set()

    # --- fetching -----------------------------------------------------------------------------------------------

    def resume_drained(self) -> None:
        """Resume the paused partitions whose buffer has drained to half of ``max_buffered``."""
        drained = [tp for tp in self._paused if self._buffered.get(tp, 0) <= self.max_buffered // 2]
        if drained:
            self._consumer.resume([TopicPartition(*tp) for tp in drained])
            self._paused.difference_update(drained)

    def fetch(self, wait: float) -> list[Message]:
        """Wait for one record at most ``wait``, then take what else is here: consume(n, timeout) waits for n
        records or the whole timeout, a delay per delivery. Rebalance callbacks run in here."""
        first = self._consumer.poll(wait)
        return [first, *self._consumer.consume(499, timeout=0)] if first is not None else []

    def messages(self, fetched: list[Message]) -> Iterator[QueueMessage]:
        """The records of ``fetched``, each with its band; errors logged and left out (fatal ones raised)."""
        for raw in fetched:
            error = raw.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    continue
                if error.fatal():
                    raise KafkaException(error)
                log.warning("consume error", extra={"error": str(error)})
                continue
            band = wire.band_of_topic(self._prefix, self.app, self.group, cast(str, raw.topic())) or 0
            yield QueueMessage.of(raw, band)

    def admits(self, message: QueueMessage) -> bool:
        """False for a router redelivery of a record this group was delivered already (its ``subroute.source``
        seen before; copies the client re-published are never duplicates); True otherwise, and remembered."""
        if self._dedup is None or is_resent(message.headers):
            return True
        source = source_position(message.headers)
        return source is None or self._dedup.admit((message.topic, message.partition), source)

    def buffer(self, message: QueueMessage) -> None:
        """Keep a fetched record until it is delivered; pause its partition at ``max_buffered``."""
        tp = (message.topic, message.partition)
        self._buffer.push(message.band, message)
        count = self._buffered.get(tp, 0) + 1
        self._buffered[tp] = count
        if count >= self.max_buffered and tp not in self._paused:
            self._consumer.pause([TopicPartition(*tp)])
            self._paused.add(tp)

    # --- delivery order -----------------------------------------------------------------------------------------

    def next(self) -> QueueMessage | None:
        """The next record to deliver (None: none): the highest band first; a record of a group that waits for
        a given-back message is held (and handed out after it, in order)."""
        while True:
            popped = self._buffer.pop()
            if popped is None:
                return None
            band, message = popped
            tp = (message.topic, message.partition)
            self._buffered[tp] = self._buffered.get(tp, 1) - 1
            if self._grouped and message.key is not None:
                now, released = self._holdback.route((*tp, message.key), message.offset, message)
                if released:
                    self._buffer.push_front(band, released)
                    self._buffered[tp] += len(released)
                if now is None:
                    continue  # a cancelled message of its group has not come back yet
            return message

    def put_back(self, message: QueueMessage) -> None:
        """A record ``next`` gave that cannot be delivered yet: first in line again."""
        self._requeue([message])

    def hold(self, group: GroupKey) -> None:
        """A message of ``group`` was given back as a copy: the group's later records wait from now on."""
        self._holdback.expect_unwritten(group)

    def copy_written(self, group: GroupKey, offset: int) -> None:
        """The copy is at ``offset`` of the group's partition: delivered first when it is read back (now, if it
        was fetched already), then the records held behind it."""
        self._requeue(self._holdback.written(group, offset))

    def copy_moved(self, group: GroupKey) -> None:
        """The copy was written to another member's partition: the group waits until ``moved_copy_settled``."""
        self._holdback.written_elsewhere(group)

    def moved_copy_settled(self, group: GroupKey) -> None:
        """The member that got the copy settled it: the records held behind it are delivered here, in order."""
        self._requeue(self._holdback.settled_elsewhere(group))

    def _requeue(self, messages: list[QueueMessage]) -> None:
        if messages:
            tp = (messages[0].topic, messages[0].partition)
            self._buffer.push_front(messages[0].band, messages)
            self._buffered[tp] = self._buffered.get(tp, 0) + len(messages)

    def forget(self, partitions: set[TP]) -> None:
        """Forget revoked partitions: their buffered and held records belong to the next owner now."""
        for tp in partitions:
            self._paused.discard(tp)
            self._buffered.pop(tp, None)
            self._holdback.forget(*tp)
            if self._dedup is not None:
                self._dedup.forget(tp)
        self._buffer.remove_if(lambda m: (m.topic, m.partition) in partitions)

    def __len__(self) -> int:
        """Fetched records not delivered yet (waiting for backlog room, a higher band, or a held group)."""
        return len(self._buffer) + self._holdback.held_count()

    # --- duplicates across a restart --------------------------------------------------------------------------

    def seed_dedup(self, commits: list[TopicPartition]) -> None:
        """Best effort: without a seed a restart may let a duplicate through."""
        if self._dedup is not None and commits:
            try:
                self._seed_dedup(commits)
            except KafkaException as exc:
                log.warning(
                    "could not read back recent records for duplicate detection", extra={"error": str(exc)}
                )

    def _seed_dedup(self, committed: list[TopicPartition]) -> None:
        """Read back up to ``dedup_window`` records before the committed offset of each new partition, so a
        restarted member still recognises what the previous one delivered."""
        assert self._dedup is not None
        starts: dict[TP, tuple[int, int]] = {}
        for tp in committed:
            if tp.offset is None or tp.offset <= 0 or tp.offset == OFFSET_INVALID:
                continue
            key = (tp.topic, tp.partition)
            starts[key] = (max(0, tp.offset - self._dedup.window), tp.offset)
        if not starts:
            return
        reader = Consumer(
            self.settings.client_config(
                {
                    "group.id": f"{self._group_id}.dedup-seed",  # never joins, never commits
                    "enable.auto.commit": False,
                    "enable.partition.eof": True,
                    "auto.offset.reset": "earliest",
                }
            )
        )
        try:
            reader.assign([TopicPartition(t, p, start) for (t, p), (start, _) in starts.items()])
            remaining = set(starts)
            deadline = time.monotonic() + 15
            while remaining and time.monotonic() < deadline:
                for raw in reader.consume(1000, timeout=0.5):
                    key = (cast(str, raw.topic()), cast(int, raw.partition()))
                    error = raw.error()
                    if error is not None:
                        if error.code() == KafkaError._PARTITION_EOF:
                            remaining.discard(key)
                        continue
                    offset = cast(int, raw.offset())
                    if key not in remaining or offset >= starts[key][1]:
                        remaining.discard(key)
                        continue
                    headers = cast(Headers, raw.headers() or [])
                    source = source_position(headers)
                    if source is not None and not is_resent(headers):
                        self._dedup.observe(key, source)
                    if offset + 1 >= starts[key][1]:
                        remaining.discard(key)
        finally:
            reader.close()
