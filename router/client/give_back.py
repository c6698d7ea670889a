"""The write side of the consumer client: messages the application gives back.

A given-back message (cancelled, expired, its lease run out, expired on delivery, sent back as replaced) is
settled by one record, decided once when it is given back: a copy on its own topic for another member of the
group, a dead letter, or a record on the app's pending topic. Every retry writes that same record.

The message is settled when that record is acknowledged, never before: until then it stays outstanding (it
keeps a backlog slot and its offset stays uncommitted) in ``Settling``. A write that fails, whether produce()
raises (BufferError, KafkaException) or the delivery report carries an error, is written again after a bounded
backoff (delivery.retry_delay: 0.2 s doubling to 5 s), for as long as it takes; a crash or a revoke meanwhile
leaves the offset uncommitted, so the next owner delivers the message again (nothing lost). Only one write of a
message is under way at a time and only its report settles it, so a message is never settled twice.
"""

from __future__ import annotations

import logging
import time
import zlib
from collections.abc import Callable, Set
from dataclasses import dataclass
from typing import Any, cast

from confluent_kafka import KafkaError, KafkaException, Message

from subroute import wire
from subroute.client.delivery import (
    TP,
    GroupKey,
    Settling,
    after_failure,
    redelivery_partition,
)
from subroute.client.messages import QueueMessage, QueueStats, now_ms, where
from subroute.client.replace import routed_version
from subroute.config.model import AppConfig
from subroute.kafka import clients
from subroute.ops.settings import Settings
from subroute.routing.expiration import is_expired, should_drop
from subroute.wire import (
    CANCELS,
    EXPIRED,
    MOVED_FROM,
    REPLACED,
    Headers,
    dead_letter_headers,
    event,
    header_value,
    replace_headers,
    with_event,
)

log = logging.getLogger(__name__)

# How long the group topic's partition count is trusted before it is looked up again (partitions can be added).
PARTITIONS_TTL = 30.0


@dataclass(slots=True, eq=False)
class GivenBack:
    """A message the application gave back and the one record that settles it: a copy on its own topic (in a
    partition of another member when there is one, see ``GiveBackWriter._copy_partition``), or a dead letter.
    Decided once, when it is given back; every retry writes the same record."""

    message: QueueMessage
    topic: str
    partition: int | None
    headers: Headers
    dead_letter_reason: str | None  # None: a copy back to the queue (or, ``replaced``, to the pending topic)
    group: GroupKey | None = None  # a grouped copy: the group's later messages wait for it
    replaced: bool = False  # sent back to the app's pending topic for the router to route it again
    moved: bool = (
        False  # a grouped copy in another member's partition: the group waits until it is settled there
    )


class GiveBackWriter:
    """Writes the records that settle given-back messages, with its own producer, and tells its owner when one
    is settled: ``settled(message)`` for a dead letter, a pending record, an ungrouped copy or an expired message
    dropped without a write; ``copied(given, group, partition, offset)`` for a grouped copy, whose original
    stays unsettled until the copy is. ``hold(group)`` is called when a grouped copy is given back, before its
    first write: the group's later messages wait from then on.

    Not locked itself: its owner calls every method under one lock, and serves the delivery reports (``serve``,
    ``flush``, and the flush of a write given a ``wait``) under it too, so the callbacks run under that lock.
    ``stats`` is the owner's, counted here for what is written."""

    def __init__(
        self,
        settings: Settings,
        app: str,
        app_config: AppConfig,
        stats: QueueStats,
        *,
        hold: Callable[[GroupKey], None],
        settled: Callable[[QueueMessage], None],
        copied: Callable[[GivenBack, GroupKey, int, int], None],
    ) -> None:
        self.app = app
        self.app_config = app_config
        self._prefix = settings.topic_prefix
        self._grouped = app_config.group_by is not None
        self._stats = stats
        self._hold = hold
        self._settled = settled
        self._copied = copied
        self._settling: Settling[GivenBack] = Settling()
        self._partition_counts: dict[str, tuple[int, float]] = {}  # topic -> (partitions, looked up at)
        self._turn = 0  # spreads the copies of failed deliveries over the other members' partitions
        self._producer = clients.producer(settings)

    # --- what settles a given-back message ------------------------------------------------------------------------

    def fail(self, message: QueueMessage, *, explicit: bool, assigned: Set[TP], wait: float) -> None:
        """A failed delivery (cancel or lease expiry): another attempt, or the dead-letter topic. ``assigned``:
        the partitions this member owns (a copy goes to another member's)."""
        config = self.app_config
        outcome = after_failure(
            message.deliveries,
            message.cancels,
            explicit_cancel=explicit,
            max_cancels=config.max_cancels,
            max_deliveries=config.max_deliveries,
        )
        at_ms = now_ms()
        failure = event(
            wire.CANCEL if explicit else wire.LEASE_EXPIRED,
            at_ms,
            **where(message),
            deliveries=outcome.deliveries,
            cancels=outcome.cancels,
        )
        if is_expired(config, message.headers, message.timestamp, at_ms):
            self.expired(message, failure, wait=wait)
            return
        if outcome.dead_letter_reason is not None:
            self.dead_letter(message, outcome.dead_letter_reason, failure, wait=wait)
            return
        headers = with_event(
            message.headers,
            failure,
            {wire.DELIVERIES: str(outcome.deliveries).encode(), CANCELS: str(outcome.cancels).encode()},
        )
        group: GroupKey | None = None
        moved = False
        if self._grouped and message.key is not None:
            # Qpid gives a group to one consumer at a time, in order. The group's later messages here wait from
            # now on (while the copy is being written too) until the copy is settled: read back and delivered
            # here first when it stays in this partition, or processed by the other member it went to
            # (``QueueConsumer._check_moved``), so the group is never processed by two members at once.
            group = (message.topic, message.partition, message.key)
            if header_value(message.headers, MOVED_FROM) is not None:
                # Moved here once already; its first holder waits for it to be settled in this partition. Moved
                # again, and back to that holder's partition, it would queue behind the very messages that wait
                # for it: it stays here, redelivered by this member.
                partition = message.partition
            else:
                # One partition per group key (not in turns): two copies of one group go to the same member,
                # in order.
                partition = self._copy_partition(message, assigned, turn=zlib.crc32(message.key))
            if partition != message.partition:
                moved = True
                headers = replace_headers(headers, {MOVED_FROM: wire.source_of(*message.id).encode()})
        else:
            partition = self._copy_partition(message, assigned)
        given = GivenBack(message, message.topic, partition, headers, None, group, moved=moved)
        self._give_back(given, wait=wait)

    def expired(self, message: QueueMessage, cause: dict[str, object], *, wait: float) -> None:
        """An expired message leaves the queue as the app's ``on_expire`` says: a dead letter (reason
        ``expired``), or, with ``drop``, removed at once like an acknowledged one (AMPS: expiration "is a normal
        way for the message to leave the queue"), counted in ``stats.expired``."""
        if not should_drop(self.app_config):
            self.dead_letter(message, EXPIRED, cause, wait=wait)
            return
        self._stats.expired["drop"] = self._stats.expired.get("drop", 0) + 1
        self._settled(message)

    def dead_letter(
        self, message: QueueMessage, reason: str, cause: dict[str, object], *, wait: float
    ) -> None:
        headers = with_event(message.headers, cause)
        headers = dead_letter_headers(headers, reason, event(wire.DEAD_LETTER, now_ms(), reason=reason))
        dlq = wire.dlq_topic(self._prefix, self.app)
        self._give_back(GivenBack(message, dlq, None, headers, reason), wait=wait)

    def replace(self, message: QueueMessage, *, current: int, wait: float) -> None:
        """Back through the app's pending topic, reason ``replaced`` (``current``: the config version in force).
        The record keeps the config version it was routed under, which is older than the one in force, so the
        router takes it up at once (a parked record is due under any newer version) and routes it under its
        current configuration; the router strips the routing and reason headers then and marks it
        ``subroute.redriven: pending``. Counts of failed deliveries are kept: a replace is no failure."""
        headers = with_event(
            message.headers,
            event(
                REPLACED,
                now_ms(),
                **where(message),
                version=routed_version(message.headers),
                current=current,
            ),
            {wire.PENDING_REASON: REPLACED.encode()},
        )
        pending = wire.pending_topic(self._prefix, self.app)
        self._give_back(GivenBack(message, pending, None, headers, None, replaced=True), wait=wait)

    def _copy_partition(self, message: QueueMessage, assigned: Set[TP], turn: int | None = None) -> int:
        """Where the copy of a failed delivery goes: a partition of the same topic (group topic or band) owned by
        another member, so that member gets it (AMPS: the message "is available to another subscriber"), or its
        own partition when this member owns them all (``delivery.redelivery_partition``). ``turn`` picks among
        the other members' partitions (default: in turns, spreading the copies).

        Why the group topic and not a retry topic: a copy on the group topic is counted in the group's lag, which
        is the router's capacity and backlog measure (a retry topic would be invisible to it), keeps its band,
        and needs no topic, subscription or assignment beyond the ones the group has. The other members'
        partitions are known without asking the group coordinator: within a consumer group every partition is
        assigned to exactly one member, so those not assigned here belong to the others."""
        if turn is None:
            self._turn += 1
            turn = self._turn
        mine = {p for t, p in assigned if t == message.topic}
        return redelivery_partition(message.partition, self._partition_count(message.topic), mine, turn)

    def _partition_count(self, topic: str) -> int:
        """The topic's partition count from the metadata, cached for ``PARTITIONS_TTL``; 0 when it cannot be
        looked up (the copy then stays in its partition: never lost for want of metadata)."""
        now = time.monotonic()
        cached = self._partition_counts.get(topic)
        if cached is not None and now - cached[1] < PARTITIONS_TTL:
            return cached[0]
        try:
            metadata = self._producer.list_topics(topic, timeout=5)
        except KafkaException as exc:
            log.warning(
                "could not look up the partitions of a topic", extra={"topic": topic, "error": str(exc)}
            )
            return cached[0] if cached is not None else 0
        found = metadata.topics.get(topic)
        if found is None or found.error is not None or not found.partitions:
            return cached[0] if cached is not None else 0
        count = len(found.partitions)
        self._partition_counts[topic] = (count, now)
        return count

    # --- writing it until it is acknowledged ------------------------------------------------------------------

    def _give_back(self, given: GivenBack, *, wait: float) -> None:
        self._settling.add(given.message.id, given, time.monotonic())
        if given.group is not None:
            self._hold(given.group)
        self._write(given, wait=wait)

    def retry_due(self) -> None:
        """Write again the given-back messages whose backoff has passed."""
        for _, given in self._settling.due(time.monotonic()):
            self._write(given, wait=0.0)  # its delivery report is served by a later producer poll

    def _write(self, given: GivenBack, *, wait: float) -> None:
        message = given.message
        key = message.id
        token = self._settling.start(key)
        if token is None:
            return  # settled or abandoned meanwhile, or a write of it is under way

        def report(error: KafkaError | None, written: Message) -> None:
            self._on_written(key, token, error, written)

        kwargs: dict[str, Any] = {
            "value": message.value,
            "key": message.key,
            "headers": given.headers,
            "on_delivery": report,
        }
        if given.partition is not None:
            kwargs["partition"] = given.partition
        if message.timestamp > 0:
            kwargs["timestamp"] = message.timestamp
        try:
            self._producer.produce(given.topic, **kwargs)
        except (BufferError, KafkaException) as exc:
            self._write_failed(key, token, str(exc))
            return
        if wait > 0:
            self._producer.flush(wait)
        else:
            self._producer.poll(0)

    def _write_failed(self, key: tuple[str, int, int], token: int, error: str) -> None:
        delay = self._settling.failed(key, token, time.monotonic())
        given = self._settling.get(key)
        if delay is None or given is None:
            return  # abandoned meanwhile (its partition was revoked)
        self._stats.failed_writes += 1
        log.warning(
            "could not write a given-back message; writing it again later",
            extra={
                "fields": {
                    "topic": given.topic,
                    "message": "/".join(map(str, key)),
                    "dead_letter_reason": given.dead_letter_reason,
                    "failures": self._settling.failures(key),
                    "retry_in_s": round(delay, 3),
                    "error": error,
                }
            },
        )

    def _on_written(
        self, key: tuple[str, int, int], token: int, error: KafkaError | None, written: Message
    ) -> None:
        if error is not None:
            self._write_failed(key, token, str(error))
            return
        done = self._settling.written(key, token)
        if done is None:
            return  # a write abandoned with its partition: the next owner delivers the message again
        if done.dead_letter_reason is not None:
            reason = done.dead_letter_reason
            self._stats.dead_lettered[reason] = self._stats.dead_lettered.get(reason, 0) + 1
            if reason == EXPIRED:
                self._stats.expired["dead-letter"] = self._stats.expired.get("dead-letter", 0) + 1
        if done.replaced:
            self._stats.replaced += 1
        if done.group is not None:
            self._copied(done, done.group, cast(int, written.partition()), cast(int, written.offset()))
            return
        self._settled(done.message)

    # --- the producer and what is under way -----------------------------------------------------------------------

    def serve(self) -> None:
        """Serve the delivery reports that have come in: they settle (and commit) given-back messages."""
        self._producer.poll(0)

    def flush(self, timeout: float) -> None:
        """Wait up to ``timeout`` for the writes under way; their reports settle their messages."""
        self._producer.flush(timeout)

    def close(self) -> None:
        clients.close_producer(self._producer)

    def next_due(self) -> float | None:
        """When the next retry may start (monotonic; None: none waits)."""
        return self._settling.next_due()

    def drop_partition(self, topic: str, partition: int) -> None:
        """Abandon the given-back messages of a revoked partition: the next owner delivers them again."""
        self._settling.drop_partition(topic, partition)

    def __len__(self) -> int:
        """Given-back messages whose record is not acknowledged yet."""
        return len(self._settling)
