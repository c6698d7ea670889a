"""Dead letters: reading an app's dead-letter topic, and redriving them to their group topics once each.

A redrive commits a consumer group on the dead-letter topic, so a dead letter is redriven once: a full redrive
commits ``<prefix>.<app>.dlq-redrive``, a redrive with a reason R commits ``<prefix>.<app>.dlq-redrive.R``
(records of other reasons stay where they are). A record is redriven when its offset is below either position.
(Commit metadata would be one group, but Tansu drops it.)

The topic is read in bounded batches (``BATCH_RECORDS`` records or ``BATCH_BYTES`` of keys and values, with a
small fetch queue), so memory does not grow with the topic. Each batch is one Kafka transaction: its copies and
the redrive group's new position are committed together (transactional id = the redrive group's id). A redrive
killed at any point leaves whole batches done and the rest to do; the next run aborts the killed one's open
transaction and goes on from the committed position, so a ``read_committed`` reader sees each dead letter once.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import cast

from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_INVALID,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    TopicPartition,
)

from subroute import names
from subroute.client.dead_letters import REASON_PATTERN, reason_of, redrive_headers, redrive_target
from subroute.client.delivery import Headers
from subroute.client.messages import QueueError
from subroute.kafka import io as kafka_io
from subroute.ops.settings import Settings

BATCH_RECORDS = 1000  # dead letters per batch (one transaction, one progress line)
BATCH_BYTES = 4 * 1024 * 1024  # keys and values per batch: large dead letters make smaller batches
FETCH_QUEUE_KB = 4 * 1024  # what the reader fetches ahead (librdkafka's default is 64 MB)
TRANSACTION_TIMEOUT = 60.0  # seconds for one batch's commit


def redrive_group_id(prefix: str, app: str, reason: str | None = None) -> str:
    base = f"{prefix}.{app}.dlq-redrive"
    return base if reason is None else f"{base}.{reason}"


# --- reading the dead-letter topic --------------------------------------------------------------------------------


@dataclass
class DeadLetter:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: Headers
    timestamp: int

    @classmethod
    def of(cls, message: Message) -> DeadLetter:
        return cls(
            cast(int, message.partition()),
            cast(int, message.offset()),
            message.key(),
            message.value(),
            cast(Headers, message.headers() or []),
            message.timestamp()[1],
        )

    @property
    def reason(self) -> str:
        return reason_of(self.headers)


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
                "group.id": redrive_group_id(settings.topic_prefix, app, reason),
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
        self.topic = names.dlq_topic(settings.topic_prefix, app)
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
            if not REASON_PATTERN.match(reason):
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
        if dry_run:
            for batch in dead_letters.batches(starts):
                for letter in batch:
                    if state.redriven(letter) or (reason is not None and letter.reason != reason):
                        done.skipped += 1
                        continue
                    target = redrive_target(prefix, app, letter.headers, list(groups))
                    sent[target] = sent.get(target, 0) + 1
                    done.redriven += 1
                done.read += len(batch)
                if progress is not None:
                    progress(done)
            return sent
        producer = kafka_io.producer(
            settings,
            **{
                "transactional.id": redrive_group_id(prefix, app, reason),
                "transaction.timeout.ms": int(TRANSACTION_TIMEOUT * 1000),
            },
        )
        try:
            # Fences a killed redrive of the same group and aborts its open transaction.
            producer.init_transactions(TRANSACTION_TIMEOUT)
        except KafkaException as exc:
            raise QueueError(f"redrive could not start its transactions: {exc}") from exc
        for batch in dead_letters.batches(starts):
            now_ms = int(time.time() * 1000)
            ends: dict[int, int] = {}
            counts: dict[str, int] = {}
            producer.begin_transaction()
            try:
                for letter in batch:
                    ends[letter.partition] = letter.offset + 1
                    if state.redriven(letter) or (reason is not None and letter.reason != reason):
                        done.skipped += 1
                        continue
                    target = redrive_target(prefix, app, letter.headers, list(groups))
                    # A new timestamp: the message re-enters the queue now (an expired one would expire again).
                    producer.produce(
                        target,
                        value=letter.value,
                        key=letter.key,
                        headers=cast(
                            list[tuple[str, str | bytes | None]],
                            redrive_headers(letter.headers, now_ms, target),
                        ),
                    )
                    counts[target] = counts.get(target, 0) + 1
                offsets = [TopicPartition(dead_letters.topic, p, o) for p, o in sorted(ends.items())]
                producer.send_offsets_to_transaction(
                    offsets, dead_letters.consumer.consumer_group_metadata(), TRANSACTION_TIMEOUT
                )
                producer.commit_transaction(TRANSACTION_TIMEOUT)
            except (KafkaException, BufferError) as exc:
                # If the abort fails too, the broker aborts it when its timeout passes, or the next run fences it.
                with contextlib.suppress(KafkaException):
                    producer.abort_transaction(TRANSACTION_TIMEOUT)
                raise QueueError(
                    f"redrive failed ({exc}); {done.redriven} dead letter(s) redriven before it are committed, "
                    "the rest are not: run it again to go on"
                ) from exc
            done.read += len(batch)
            done.redriven += sum(counts.values())
            for target, count in counts.items():
                sent[target] = sent.get(target, 0) + count
            if progress is not None:
                progress(done)
    return sent
