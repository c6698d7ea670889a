"""Which consumer group holds each message group, read back from the group topics when a worker starts or is
assigned partitions (routing/holders.py says why and how holders are kept while a worker routes).

A worker that has just been given input partitions knows nothing of what the previous owner routed, yet message
groups it placed may still have messages outstanding. Those are on the group topics: every record of an app with
``group_by`` is keyed by its message group, so the unconfirmed tail of each group topic partition (from its
consumer group's committed offset to its end) says which message groups each consumer group holds. They are read
before the worker routes anything it was assigned.

Bounded: at most ``TAIL_LIMIT`` records per partition are read, the newest of its unconfirmed tail (a message
group's newest record is what releases it, and the newest records are the ones a long tail's consumer reaches
last), within ``MAX_WAIT`` seconds in all. A message group whose outstanding records all lie further back in a
longer tail is not known to be held, and may be placed afresh; the worker logs how many records it left unread.
"""

from __future__ import annotations

import logging
import time
from typing import cast

from confluent_kafka import Message, TopicPartition

from subroute import wire
from subroute.config.model import Config
from subroute.kafka.clients import admin_client, read_ranges, reader, watermarks
from subroute.ops.settings import Settings
from subroute.routing.capacity import groups_holding
from subroute.routing.holders import GroupId, Holders
from subroute.worker.capacity import measure_committed

log = logging.getLogger(__name__)

TAIL_LIMIT = 10_000  # records read per group topic partition: the newest of its unconfirmed tail
MAX_WAIT = 30.0  # seconds for the whole read (inside the rebalance callback: well under max.poll.interval.ms)


def restore_holders(
    settings: Settings, config: Config, holders: Holders, limit: int = TAIL_LIMIT, max_wait: float = MAX_WAIT
) -> int:
    """Hold every message group found in the unconfirmed tails of the group topics of ``config``'s apps with
    ``group_by``, by the group whose record of it was routed last; returns how many were taken (a message group
    this worker holds already keeps its placement: it is newer)."""
    groups = groups_holding(config)
    if not groups:
        return 0
    started = time.monotonic()
    ranges, owners, unread = _tails(settings, groups, limit)
    # (app, key) -> (routed at, group, topic, partition, offset) of its newest record seen, per group
    newest: dict[tuple[str, bytes], dict[str, tuple[int, str, int, int]]] = {}
    read = 0
    for message in read_ranges(settings, ranges, max_wait=max_wait):
        key = message.key()
        topic = message.topic() or ""
        if not key or topic not in owners:
            continue
        read += 1
        app, group = owners[topic]
        seen = newest.setdefault((app, key), {})
        seen[group] = (_routed_at(message), topic, message.partition() or 0, message.offset() or 0)
    taken = 0
    for (app, key), by_group in newest.items():
        group, (_, topic, partition, offset) = max(by_group.items(), key=lambda item: item[1][0])
        taken += holders.restore(app, key, group, topic, partition, offset)
    log.info(
        "message groups with messages outstanding read back from the group topics",
        extra={
            "fields": {
                "held": taken,
                "records": read,
                "unread": unread,
                "seconds": round(time.monotonic() - started, 3),
            }
        },
    )
    return taken


def _tails(
    settings: Settings, groups: list[GroupId], limit: int
) -> tuple[dict[tuple[str, int], tuple[int, int]], dict[str, GroupId], int]:
    """Per group topic partition, the span to read (the newest ``limit`` of its unconfirmed tail); each topic's
    (app, group); how many unconfirmed records are left unread by the limit."""
    prefix = settings.topic_prefix
    admin = admin_client(settings)
    probe = reader(settings, "subroute-holders")
    ranges: dict[tuple[str, int], tuple[int, int]] = {}
    owners: dict[str, GroupId] = {}
    unread = 0
    try:
        metadata = probe.list_topics(timeout=10)
        for app, group in groups:
            committed = measure_committed(admin, prefix, app, group, metadata)
            if not committed:
                continue
            owners[wire.group_topic(prefix, app, group)] = (app, group)
            partitions = [TopicPartition(topic, partition) for topic, partition in committed]
            for where, (low, high) in watermarks(probe, partitions).items():
                start = max(
                    committed[where], low
                )  # nothing committed (-1): the whole partition is unconfirmed
                if start >= high:
                    continue
                newest = max(start, high - limit)
                unread += newest - start
                ranges[where] = (newest, high)
    finally:
        probe.close()
    return ranges, owners, unread


def _routed_at(message: Message) -> int:
    """The record's ``subroute.routed-at`` (0 when missing): which of two groups placed a message group last."""
    headers = cast(wire.Headers, message.headers() or [])  # as the router produced them
    for name, value in headers:
        if name == wire.ROUTED_AT and value is not None and value.isdigit():
            return int(value)
    return 0
