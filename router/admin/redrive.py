"""Dead letters: reading an app's dead-letter topic, and redriving them to their group topics once each.

A redrive commits a consumer group on the dead-letter topic, so a dead letter is redriven once: a full redrive
commits ``<prefix>.<app>.dlq-redrive``, a redrive with a reason R commits ``<prefix>.<app>.dlq-redrive.R``
(records of other reasons stay where they are). A record is redriven when its offset is below either position.
(Commit metadata would be one group, but Tansu drops it.)

The topic is read in bounded batches (``BATCH_RECORDS`` records or ``BATCH_BYTES`` of keys and values, with a
small fetch queue), so memory does not grow with the topic. Each batch is one Kafka transaction: its copies and
the redrive group's new position are committed together (admin/transfer.py; transactional id = the redrive group's id). A redrive
killed at any point leaves whole batches done and the rest to do; the next run aborts the killed one's open
transaction and goes on from the committed position, so a ``read_committed`` reader sees each dead letter once.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import cast

from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_INVALID,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)

from subroute import wire
from subroute.admin.transfer import Copy, copy_in_transaction, transactional_producer
from subroute.client import QueueError
from subroute.ops.settings import Settings

BATCH_RECORDS = 1000  # dead letters per batch (one transaction, one progress line)
BATCH_BYTES = 4 * 1024 * 1024  # keys and values per batch: large dead letters make smaller batches
FETCH_QUEUE_KB = 4 * 1024  # what the reader fetches ahead (librdkafka's default is 64 MB)
TRANSACTION_TIMEOUT = 60.0  # seconds for one batch's commit


# --- reading the dead-letter topic --------------------------------------------------------------------------------


@dataclass
class DeadLetter:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: wire.Headers
    timestamp: int

    @classmethod
    def of(cls, message: Message) -> DeadLetter:
        return cls(
            cast(int, message.partition()),
            cast(int, message.offset()),
            message.key(),
            message.value(),
            cast(wire.Headers, message.headers() or []),
            message.timestamp()[1],
        )

    @property
    def reason(self) -> str:
        return wire.reason_of(self.headers)


@dataclass
class RedriveState:
    """Per dead-letter partition: the position of the full redrives, and of the redrives of each reason."""

    positions: dict[int, int] = field(default_factory=dict)
    by_reason: dict[str, dict[int, int]] = field(default_factory=dict)

    def redriven(self, letter: DeadLetter) -> bool:
        reason = self.by_reason.get(letter.reason, {})
        return letter.offset < max(self.positions.get(letter.partition, 0), reason.get(letter.partition, 0))


def _reader(settings: Settings, app: str, reason: str | None = None) -> Consumer:
    return Consumer(
        settings.client_config(
            {
                "group.id": wire.redrive_group_id(settings.topic_prefix, app, reason),
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
                "enable.partition.eof": True,
                "auto.offset.reset": "earliest",
                "queued.max.messages.kbytes": FETCH_QUEUE_KB,
                "fetch.max.bytes": FETCH_QUEUE_KB * 1024 // 2,
            }
        )
    )


def _committed(consumer: Consumer, topic: str, partitions: list[int]) -> dict[int, int]:
    if not partitions:
        return {}
    found = consumer.committed([TopicPartition(topic, p) for p in partitions], timeout=10)
    return {tp.partition: tp.offset for tp in found if tp.offset >= 0 and tp.offset != OFFSET_INVALID}


class DeadLetterTopic:
    """An app's dead-letter topic, read in bounded batches, and how far its redrives have gone.

    ``reason`` picks the redrive group whose consumer reads (and whose position a redrive commits): the full
    redrive's, or that of one reason.
    """

    def __init__(self, settings: Settings, app: str, reason: str | None = None) -> None:
        self.settings = settings
        self.app = app
        self.topic = wire.dlq_topic(settings.topic_prefix, app)
        self.consumer = _reader(settings, app, reason)
        info = self.consumer.list_topics(self.topic, timeout=10).topics.get(self.topic)
        self.partitions = [] if info is None or info.error is not None else sorted(info.partitions)
        self.state = RedriveState(_committed(self.consumer, self.topic, self.partitions))
        if reason is not None:
            self.note_reasons({reason})

    def close(self) -> None:
        self.consumer.close()

    def __enter__(self) -> DeadLetterTopic:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def note_reasons(self, reasons: set[str]) -> None:
        """Read the positions of the per-reason redrive groups for the reasons not known yet."""
        for reason in sorted(reasons - set(self.state.by_reason)):
            if not wire.REASON_PATTERN.match(reason):
                self.state.by_reason[reason] = {}
                continue
            consumer = _reader(self.settings, self.app, reason)
            try:
                self.state.by_reason[reason] = _committed(consumer, self.topic, self.partitions)
            finally:
                consumer.close()

    def batches(self, starts: dict[int, int]) -> Iterator[list[DeadLetter]]:
        """The records from ``starts`` to the end each partition's fetches report (or until none arrives for
        5 s), in batches of at most ``BATCH_RECORDS`` records and about ``BATCH_BYTES``; the reasons of each
        batch are in ``state`` when it is yielded."""
        if not starts:
            return
        self.consumer.assign([TopicPartition(self.topic, p, o) for p, o in starts.items()])
        remaining = set(starts)
        batch: list[DeadLetter] = []
        size = seen_records = seen_bytes = 0
        idle_since = time.monotonic()
        while remaining and time.monotonic() - idle_since < 5.0:
            # consume(n) keeps fetching until it has n records, so n is what fits in the batch's bytes at the
            # average size seen so far (a few records to start with).
            fits = (BATCH_BYTES - size) * seen_records // seen_bytes if seen_bytes else 16
            for message in self.consumer.consume(max(1, min(BATCH_RECORDS - len(batch), fits)), timeout=0.5):
                idle_since = time.monotonic()
                error = message.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        remaining.discard(cast(int, message.partition()))
                    continue
                letter = DeadLetter.of(message)
                batch.append(letter)
                letter_size = len(letter.value or b"") + len(letter.key or b"") + 1
                size += letter_size
                seen_records += 1
                seen_bytes += letter_size
            if len(batch) >= BATCH_RECORDS or size >= BATCH_BYTES:
                self.note_reasons({letter.reason for letter in batch})
                yield batch
                batch, size = [], 0
        if batch:
            self.note_reasons({letter.reason for letter in batch})
            yield batch

    def letters(self, *, from_start: bool) -> Iterator[DeadLetter]:
        """Every dead letter (or those from the full redrive's position), one batch in memory at a time."""
        starts = {
            p: OFFSET_BEGINNING if from_start else self.state.positions.get(p, OFFSET_BEGINNING)
            for p in self.partitions
        }
        for batch in self.batches(starts):
            yield from batch


def waiting(settings: Settings, app: str, ends: dict[int, int], limit: int | None = None) -> tuple[int, bool]:
    """The dead letters of ``app`` not redriven yet (``dlq list``'s "waiting", by the same rule), read from the
    full redrive's position to ``ends`` (by partition); and whether that is all of them (False: ``limit``
    records were read first, the count is a floor)."""
    if not any(ends.values()):
        return 0, True
    count = read = 0
    with DeadLetterTopic(settings, app) as dead_letters:
        starts = {
            p: position
            for p in dead_letters.partitions
            if (position := dead_letters.state.positions.get(p, 0)) < ends.get(p, 0)
        }
        for batch in dead_letters.batches(starts):
            for letter in batch:
                count += not dead_letters.state.redriven(letter)
            read += len(batch)
            if limit is not None and read >= limit:
                return count, False
    return count, True


@dataclass
class RedriveProgress:
    read: int = 0
    redriven: int = 0
    skipped: int = 0  # already redriven, or of another reason
    dry_run: bool = False  # counted, not sent: says "would redrive"

    def __str__(self) -> str:
        sent = f"{self.redriven} would be redriven" if self.dry_run else f"{self.redriven} redriven"
        return f"{self.read} read, {sent}, {self.skipped} skipped"


def redrive(
    settings: Settings,
    app: str,
    groups: Sequence[str],
    reason: str | None = None,
    progress: Callable[[RedriveProgress], None] | None = None,
    *,
    dry_run: bool = False,
) -> dict[str, int]:
    """Send the dead letters of ``app`` not redriven yet (of ``reason`` only, when given) back to their group
    topics with the delivery count reset: records per target topic.

    ``dry_run``: read them and count where each would go, and write nothing: no producer (its transactional id
    would fence a redrive running now), no copy, no commit.

    Batch by batch, each one transaction with the redrive position (``progress`` is called after each). If a
    batch fails (QueueError), nothing of it is committed; the batches before it are, and running the redrive
    again goes on from there.
    """
    prefix = settings.topic_prefix
    sent: dict[str, int] = {}
    done = RedriveProgress(dry_run=dry_run)
    with DeadLetterTopic(settings, app, reason) as dead_letters:
        state = dead_letters.state
        starts = {}
        for partition in dead_letters.partitions:
            position = state.positions.get(partition, 0)
            if reason is not None:
                position = max(position, state.by_reason[reason].get(partition, 0))
            starts[partition] = position or OFFSET_BEGINNING

        def target(letter: DeadLetter) -> str | None:
            """Where ``letter`` goes; None when it is skipped (already redriven, or of another reason)."""
            if state.redriven(letter) or (reason is not None and letter.reason != reason):
                done.skipped += 1
                return None
            return redrive_target(prefix, app, letter.headers, groups)

        producer = None
        if not dry_run:
            try:
                producer = transactional_producer(
                    settings, wire.redrive_group_id(prefix, app, reason), TRANSACTION_TIMEOUT
                )
            except KafkaException as exc:
                raise QueueError(f"redrive could not start its transactions: {exc}") from exc
        for batch in dead_letters.batches(starts):
            if producer is None:
                counts: dict[str, int] = {}
                for letter in batch:
                    if (to := target(letter)) is not None:
                        counts[to] = counts.get(to, 0) + 1
            else:
                counts = _redrive_batch(producer, dead_letters, batch, target, done)
            done.read += len(batch)
            done.redriven += sum(counts.values())
            for to, count in counts.items():
                sent[to] = sent.get(to, 0) + count
            if progress is not None:
                progress(done)
    return sent


def _redrive_batch(
    producer: Producer,
    dead_letters: DeadLetterTopic,
    batch: list[DeadLetter],
    target: Callable[[DeadLetter], str | None],
    done: RedriveProgress,
) -> dict[str, int]:
    """One batch, one transaction: its copies and the redrive group's position past it; the copies per target
    topic. Raises QueueError when Kafka fails (the batch is then not committed)."""
    now_ms = int(time.time() * 1000)
    ends: dict[int, int] = {}
    copied: dict[str, int] = {}

    def copies() -> Iterator[Copy]:
        for letter in batch:
            ends[letter.partition] = letter.offset + 1
            to = target(letter)
            if to is not None:
                copied[to] = copied.get(to, 0) + 1
                # A new timestamp: the message re-enters the queue now (an expired one would expire again).
                yield Copy(to, letter.key, letter.value, redrive_headers(letter.headers, now_ms, to))

    def positions() -> list[TopicPartition]:
        return [TopicPartition(dead_letters.topic, p, o) for p, o in sorted(ends.items())]

    try:
        copy_in_transaction(producer, dead_letters.consumer, copies(), positions, TRANSACTION_TIMEOUT)
    except (KafkaException, BufferError) as exc:
        # If the abort failed too, the broker aborts it when its timeout passes, or the next run fences it.
        raise QueueError(
            f"redrive failed ({exc}); {done.redriven} dead letter(s) redriven before it are committed, "
            "the rest are not: run it again to go on"
        ) from exc
    return copied


# --- where a dead letter goes back to ----------------------------------------------------------------------------


def redrive_headers(headers: wire.HeadersIn | None, at_ms: int, topic: str) -> wire.Headers:
    """Back to a group: delivery and cancel counts reset, reason and move mark dropped, marked
    ``subroute.redriven: dlq``."""
    reason = wire.header_value(headers, wire.DLQ_REASON)
    return wire.with_event(
        headers,
        wire.event(wire.REDRIVE, at_ms, to=topic, reason=reason),
        {
            wire.DLQ_REASON: None,
            wire.DELIVERIES: None,
            wire.CANCELS: None,
            wire.MOVED_FROM: None,
            wire.REDRIVEN: wire.REDRIVEN_FROM_DLQ,
        },
    )


def redrive_target(prefix: str, app: str, headers: wire.HeadersIn | None, groups: Iterable[str]) -> str:
    """Where a dead letter goes back to: the band topic it was last delivered from when that is a band of the
    group named in ``subroute.group``, else that group's topic; the app's pending topic when the group is
    unknown (the router routed it nowhere, or the group was deleted) so that the router decides again."""
    group = wire.header_value(headers, wire.GROUP)
    if group is None or group not in set(groups):
        return wire.pending_topic(prefix, app)
    for past in reversed(wire.history_of(headers)):
        topic = past.get("topic")
        if isinstance(topic, str) and wire.band_of_topic(prefix, app, group, topic) is not None:
            return topic
    return wire.group_topic(prefix, app, group)
