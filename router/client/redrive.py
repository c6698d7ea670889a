"""Dead letters: reading an app's dead-letter topic, and redriving them to their group topics once each.

A redrive commits a consumer group on the dead-letter topic, so a dead letter is redriven once: a full redrive
commits ``<prefix>.<app>.dlq-redrive``, a redrive with a reason R commits ``<prefix>.<app>.dlq-redrive.R``
(records of other reasons stay where they are). A record is redriven when its offset is below either position.
(Commit metadata would be one group, but Tansu drops it.)
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import cast

from confluent_kafka import OFFSET_BEGINNING, OFFSET_INVALID, Consumer, KafkaError, Message, TopicPartition

from subroute import names
from subroute.client.dead_letters import REASON_PATTERN, reason_of, redrive_headers, redrive_target
from subroute.client.delivery import Headers
from subroute.client.queue_consumer import QueueError
from subroute.kafka import io as kafka_io
from subroute.ops.settings import Settings

PROGRESS_EVERY = 1000


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


def _partitions(consumer: Consumer, topic: str) -> list[int]:
    info = consumer.list_topics(topic, timeout=10).topics.get(topic)
    if info is None or info.error is not None:
        return []
    return sorted(info.partitions)


def _redrive_consumer(settings: Settings, app: str, reason: str | None = None) -> Consumer:
    return Consumer(
        settings.client_config(
            {
                "group.id": redrive_group_id(settings.topic_prefix, app, reason),
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
                "enable.partition.eof": True,
                "auto.offset.reset": "earliest",
            }
        )
    )


def _committed(consumer: Consumer, topic: str, partitions: list[int]) -> dict[int, int]:
    if not partitions:
        return {}
    found = consumer.committed([TopicPartition(topic, p) for p in partitions], timeout=10)
    return {tp.partition: tp.offset for tp in found if tp.offset >= 0 and tp.offset != OFFSET_INVALID}


def _add_reasons(
    settings: Settings, app: str, state: RedriveState, topic: str, partitions: list[int], reasons: set[str]
) -> None:
    """Read the positions of the per-reason redrive groups for the reasons not known yet."""
    for reason in sorted(reasons - set(state.by_reason)):
        if not REASON_PATTERN.match(reason):
            state.by_reason[reason] = {}
            continue
        consumer = _redrive_consumer(settings, app, reason)
        try:
            state.by_reason[reason] = _committed(consumer, topic, partitions)
        finally:
            consumer.close()


def _read_letters(consumer: Consumer, topic: str, starts: dict[int, int]) -> list[DeadLetter]:
    """Every record from ``starts`` to the end each partition's fetches report."""
    if not starts:
        return []
    consumer.assign([TopicPartition(topic, p, o) for p, o in starts.items()])
    remaining = set(starts)
    letters: list[DeadLetter] = []
    idle_since = time.monotonic()
    while remaining and time.monotonic() - idle_since < 5.0:
        for message in consumer.consume(1000, timeout=0.5):
            idle_since = time.monotonic()
            error = message.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    remaining.discard(cast(int, message.partition()))
                continue
            letters.append(DeadLetter.of(message))
    return letters


def load(
    settings: Settings, app: str, *, from_start: bool
) -> tuple[list[DeadLetter], RedriveState, list[int]]:
    """The dead letters (all of them, or from the full-redrive position) and what has been redriven."""
    topic = names.dlq_topic(settings.topic_prefix, app)
    consumer = _redrive_consumer(settings, app)
    try:
        partitions = _partitions(consumer, topic)
        state = RedriveState(_committed(consumer, topic, partitions))
        starts = {
            p: OFFSET_BEGINNING if from_start else state.positions.get(p, OFFSET_BEGINNING)
            for p in partitions
        }
        letters = _read_letters(consumer, topic, starts)
    finally:
        consumer.close()
    _add_reasons(settings, app, state, topic, partitions, {letter.reason for letter in letters})
    return letters, state, partitions


def redrive(
    settings: Settings,
    app: str,
    groups: Sequence[str],
    reason: str | None = None,
    progress: Callable[[int], None] | None = None,
) -> dict[str, int]:
    """Send the dead letters of ``app`` not redriven yet (of ``reason`` only, when given) back to their group
    topics with the delivery count reset, then commit the redrive position: records per target topic.

    Nothing is committed unless every record was acknowledged (QueueError otherwise), so a failed redrive
    can be run again.
    """
    prefix = settings.topic_prefix
    topic = names.dlq_topic(prefix, app)
    letters, state, partitions = load(settings, app, from_start=False)
    if reason:
        _add_reasons(settings, app, state, topic, partitions, {reason})
    producer = kafka_io.producer(settings)
    failures: list[str] = []

    def on_delivery(error: KafkaError | None, _message: Message) -> None:
        if error is not None:
            failures.append(str(error))

    ends = dict(state.positions)
    for partition, position in state.by_reason.get(reason, {}).items() if reason else ():
        ends[partition] = max(ends.get(partition, 0), position)
    sent: dict[str, int] = {}
    now_ms = int(time.time() * 1000)
    for letter in letters:
        ends[letter.partition] = max(ends.get(letter.partition, 0), letter.offset + 1)
        if state.redriven(letter) or (reason and letter.reason != reason):
            continue
        target = redrive_target(prefix, app, letter.headers, list(groups))
        # A new timestamp: the message re-enters the queue now (an expired one would expire again at once).
        producer.produce(
            target,
            value=letter.value,
            key=letter.key,
            headers=cast(
                list[tuple[str, str | bytes | None]], redrive_headers(letter.headers, now_ms, target)
            ),
            on_delivery=on_delivery,
        )
        sent[target] = sent.get(target, 0) + 1
        count = sum(sent.values())
        if count % PROGRESS_EVERY == 0:
            producer.flush(30)
            if progress is not None:
                progress(count)
    if producer.flush(30) > 0 or failures:
        raise QueueError(f"redrive failed, nothing committed: {failures[:1] or 'timed out'}")
    if ends:
        consumer = _redrive_consumer(settings, app, reason)
        try:
            offsets = [TopicPartition(topic, p, o) for p, o in sorted(ends.items())]
            consumer.commit(offsets=offsets, asynchronous=False)
        finally:
            consumer.close()
    return sent
