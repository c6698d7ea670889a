"""``subroute queue ack``: settle a group's unconfirmed messages by filter (AMPS's ``sow_delete`` with a filter),
and remove the settle entries that cover nothing any more. The entry's rule is in ``client/settles.py``.

One run reads the group's unconfirmed records (``admin/browse.py``'s spans: committed offsets to the end),
counts those that match the filter and are not settled already (by an earlier entry), and writes, in one Kafka
transaction: with ``dead_letter``, a dead letter of each (reason ``operator``); the new entry (the filter and the
ends it read to); and a tombstone for each entry of the group that the group's commits have passed. A killed
run leaves nothing; a run again dead-letters nothing twice, since what the first one settled is covered. A dry
run reads, counts, and writes nothing (it does not even create the settle topic).
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import cast

from confluent_kafka import KafkaError, KafkaException, Message, Producer

from subroute import expressions, wire
from subroute.admin.browse import Span, unconfirmed_spans
from subroute.admin.transfer import transactional_producer
from subroute.client.settle_feed import SettleFeed, ensure_settle_topic
from subroute.client.settles import SettleEntry, matches
from subroute.config.model import AppConfig
from subroute.kafka import clients
from subroute.kafka.scan import Partition, Scan
from subroute.ops.settings import Settings

TIMEOUT = 30.0


@dataclass
class Settled:
    """What a run did (or, dry, would do). ``by_topic``: matching records newly settled, per topic."""

    by_topic: dict[str, int] = field(default_factory=dict)
    read: int = 0
    already: int = 0  # matching or not, covered by an earlier entry
    entry: SettleEntry | None = None  # written (None: nothing matched, or a dry run)
    removed: list[SettleEntry] = field(default_factory=list)  # entries removed (or, dry, to remove)
    complete: bool = True

    @property
    def count(self) -> int:
        return sum(self.by_topic.values())


def settle(
    settings: Settings,
    app: AppConfig,
    group: str,
    where: expressions.Expression | None,
    *,
    dead_letter: bool = False,
    dry_run: bool = False,
    progress: Callable[[Settled], None] | None = None,
    max_wait: float = 600.0,
) -> Settled:
    """Settle the unconfirmed records of ``group`` that ``where`` matches (None: ``--clear``, settle nothing and
    remove every entry of the group). Raises ``KafkaException`` when Kafka refuses; nothing is written then."""
    feed = SettleFeed(settings, app, group, create=False)
    try:
        rules = feed.rules
    finally:
        feed.close()
    spans = unconfirmed_spans(settings, app.name, group)
    result = Settled()
    starts = {where_: span[0] for where_, span in spans.items()}
    result.removed = [e for e in rules.entries if where is None or e.passed(starts)]
    matched: list[_Record] = []
    if where is not None:
        scan = Scan(settings, spans, limit=None, max_wait=max_wait)
        for batch in scan.batches():
            for record in batch:
                result.read += 1
                if rules and rules.covers(record.topic, record.partition, record.offset, record.headers):
                    result.already += 1
                    continue
                if matches(where, app, record.headers):
                    result.by_topic[record.topic] = result.by_topic.get(record.topic, 0) + 1
                    if dead_letter:
                        matched.append(_Record(*record))
            if progress is not None:
                progress(result)
        result.complete = not scan.unfinished
    if dry_run or (not result.count and not result.removed):
        return result
    ensure_settle_topic(settings)
    entry = None
    if result.count:
        entry = SettleEntry(
            app=app.name,
            group=group,
            id=f"{int(time.time() * 1000)}-{uuid.uuid4().hex[:8]}",
            filter=where.text if where is not None else "",
            ends=_ends(spans),
            dead_letter=dead_letter,
            at_ms=int(time.time() * 1000),
            count=result.count,
        )
    _write(settings, app.name, group, entry, result.removed, matched)
    result.entry = entry
    return result


@dataclass(frozen=True, slots=True)
class _Record:
    topic: str
    partition: int
    offset: int
    timestamp_ms: int
    headers: wire.Headers
    key: bytes | None
    value: bytes | None


def _ends(spans: dict[Partition, Span]) -> dict[Partition, int]:
    """The end of each partition that held unconfirmed records: what the entry may cover."""
    return {where: end for where, (start, end) in spans.items() if start < end}


def _write(
    settings: Settings,
    app: str,
    group: str,
    entry: SettleEntry | None,
    removed: list[SettleEntry],
    dead: list[_Record],
) -> None:
    """One transaction: the dead letters, the entry, the tombstones."""
    producer = transactional_producer(
        settings, wire.settle_transactional_id(settings.topic_prefix, app, group), TIMEOUT
    )
    failures: list[str] = []

    def delivered(error: KafkaError | None, _message: Message) -> None:
        if error is not None:
            failures.append(str(error))

    topic = wire.settle_topic(settings.topic_prefix)
    dlq = wire.dlq_topic(settings.topic_prefix, app)
    now = int(time.time() * 1000)
    try:
        producer.begin_transaction()
        try:
            for record in dead:
                headers = wire.dead_letter_headers(
                    record.headers,
                    wire.OPERATOR,
                    wire.event(
                        wire.DEAD_LETTER,
                        now,
                        reason=wire.OPERATOR,
                        topic=record.topic,
                        partition=record.partition,
                        offset=record.offset,
                        entry=None if entry is None else entry.id,
                    ),
                )
                _produce(producer, dlq, record.key, record.value, headers, record.timestamp_ms, delivered)
            if entry is not None:
                _produce(producer, topic, entry.key.encode(), entry.to_json(), [], 0, delivered)
            for old in removed:
                _produce(producer, topic, old.key.encode(), None, [], 0, delivered)
            producer.commit_transaction(TIMEOUT)
        except BaseException:
            with contextlib.suppress(KafkaException):
                producer.abort_transaction(TIMEOUT)
            raise
        if failures:
            raise KafkaException(KafkaError(KafkaError._FAIL, "; ".join(failures)))
    finally:
        clients.close_producer(producer)


def _produce(
    producer: Producer,
    topic: str,
    key: bytes | None,
    value: bytes | None,
    headers: wire.Headers,
    timestamp: int,
    delivered: Callable[[KafkaError | None, Message], None],
) -> None:
    sent = cast(list[tuple[str, str | bytes | None]], headers)  # the stubs take str values too
    while True:
        try:
            if timestamp > 0:
                producer.produce(
                    topic, value=value, key=key, headers=sent, timestamp=timestamp, on_delivery=delivered
                )
            else:
                producer.produce(topic, value=value, key=key, headers=sent, on_delivery=delivered)
            break
        except BufferError:  # the local queue is full: let deliveries drain it
            producer.poll(0.1)
    producer.poll(0)
