"""``subroute queue browse``: what a group has not confirmed yet, read from outside the group (AMPS: "a view of
the currently available messages ... A query of a queue is read-only").

A group's unconfirmed messages are the records of its group topic and its band topics (``.p1``-``.p9``) from its
consumer group's committed offsets (the log start where it has none, as ``QueueConsumer`` starts there) to the
end. They are read with an assigned consumer that never joins the group and never commits, in bounded batches
(``kafka/scan.py``), committed records only; those an operator settled (``queue ack``: a settle entry covers
them) are left out, as no member delivers them. The oldest ``limit`` that pass the filter are kept in a bounded
heap, so memory does not grow with the backlog.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass, field

from subroute import expressions, wire
from subroute.client.settles import SettleRules, matches
from subroute.config.model import AppConfig
from subroute.kafka import clients, groups
from subroute.kafka.scan import Partition, Scan, Stored
from subroute.ops.settings import Settings

Span = tuple[int, int]  # (first offset to read, end)


def unconfirmed_spans(settings: Settings, app: str, group: str) -> dict[Partition, Span]:
    """Per partition of the group's topics that exist: from the group's committed offset (or the log start) to
    the end when asked."""
    topics = wire.band_topics(settings.topic_prefix, app, group)  # band 0 is the group topic itself
    offsets = groups.topic_offsets(settings, topics)
    commits = groups.committed_offsets(
        clients.admin_client(settings), wire.consumer_group_id(settings.topic_prefix, app, group)
    )
    spans: dict[Partition, Span] = {}
    for where, (start, end) in offsets.items():
        commit = commits.get(where)
        spans[where] = (max(start, commit.offset if commit is not None else start), end)
    return spans


@dataclass(frozen=True)
class Browsed:
    """One unconfirmed record. ``deliveries``: its failed deliveries so far (``subroute.deliveries``, as the
    client counts them: cancels and lease expiries); ``message_group``: its key, for an app with ``group_by``."""

    topic: str
    partition: int
    offset: int
    band: int
    timestamp_ms: int
    key: bytes | None
    value: bytes | None
    headers: wire.Headers
    deliveries: int
    cancels: int
    message_group: str | None


@dataclass
class Browse:
    """The result: ``records`` oldest first (at most the limit); the counts are of everything read."""

    records: list[Browsed] = field(default_factory=list)
    read: int = 0  # unconfirmed records read
    settled: int = 0  # of them, settled by an operator (not listed, not matched)
    matched: int = 0  # of the others, those that pass the filter
    complete: bool = True  # read to the end of every partition (else the counts are floors)


def browse(
    settings: Settings,
    app: AppConfig,
    group: str,
    *,
    spans: dict[Partition, Span],
    where: expressions.Expression | None = None,
    limit: int = 20,
    rules: SettleRules | None = None,
    progress: Callable[[Browse], None] | None = None,
    max_wait: float = 600.0,
) -> Browse:
    """Read ``spans`` once; keep the ``limit`` oldest records (0: all) that ``where`` matches."""
    result = Browse()
    kept: list[tuple[int, int, Stored]] = []  # (-timestamp, -sequence, record): kept[0] is the newest kept
    everything: list[Stored] = []
    sequence = 0
    scan = Scan(settings, spans, limit=None, max_wait=max_wait)
    for batch in scan.batches():
        result.read += len(batch)
        for record in batch:
            if rules and rules.covers(record.topic, record.partition, record.offset, record.headers):
                result.settled += 1
                continue
            if where is not None and not matches(where, app, record.headers):
                continue
            result.matched += 1
            sequence += 1
            if limit <= 0:
                everything.append(record)
            elif len(kept) < limit:
                heapq.heappush(kept, (-record.timestamp_ms, -sequence, record))
            elif record.timestamp_ms < -kept[0][0]:  # older than the newest kept (a tie keeps the earlier)
                heapq.heapreplace(kept, (-record.timestamp_ms, -sequence, record))
        if progress is not None:
            progress(result)
    result.complete = not scan.unfinished
    if limit > 0:
        oldest = [record for _, _, record in sorted(kept, key=lambda k: (-k[0], -k[1]))]
    else:
        oldest = sorted(everything, key=lambda r: r.timestamp_ms)  # stable: read order among equals
    prefix = settings.topic_prefix
    result.records = [_browsed(prefix, app, group, record) for record in oldest]
    return result


def _browsed(prefix: str, app: AppConfig, group: str, record: Stored) -> Browsed:
    grouped = app.group_by is not None and record.key is not None
    return Browsed(
        topic=record.topic,
        partition=record.partition,
        offset=record.offset,
        band=wire.band_of_topic(prefix, app.name, group, record.topic) or 0,
        timestamp_ms=record.timestamp_ms,
        key=record.key,
        value=record.value,
        headers=record.headers,
        deliveries=wire.int_header(record.headers, wire.DELIVERIES),
        cancels=wire.int_header(record.headers, wire.CANCELS),
        message_group=record.key.decode("utf-8", errors="replace") if grouped and record.key else None,
    )
