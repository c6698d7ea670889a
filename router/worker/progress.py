"""Where the worker stands on its assigned partitions: input lag, and whether it has caught up.

Both read positions and the high watermarks the fetches reported (cached), never ListOffsets, which some brokers
answer short. Called from the poll-loop thread.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Protocol

from confluent_kafka import Consumer, KafkaException, TopicPartition

from subroute import wire
from subroute.ops.metrics import RouterMetrics

Partition = tuple[str, int]


class Held(Protocol):
    """What a worker holds: its assigned partitions and those it paused (``Assignment``)."""

    assigned: set[Partition]
    paused: set[Partition]


def lag(
    consumer: Consumer,
    assigned: Collection[Partition],
    prefix: str,
    routed: Mapping[Partition, tuple[int, int]] | None = None,
) -> tuple[int, int]:
    """Records of the assigned partitions not consumed yet: (input topics, pending topics).

    Kept apart because they mean different things: input lag is work to do (what autoscaling and alerts
    read); a pending backlog is parked on purpose until a subscription matches, and more workers would not
    shrink it. A pending partition the worker has read counts from the router's position there, less what was
    routed past it (``routed``: position and that count, worker/pending.py): its consumer reads on past the
    records that wait."""
    inputs = pending = 0
    positions = consumer.position([TopicPartition(t, p) for t, p in assigned]) if assigned else []
    _from_commits(consumer, positions)
    for tp in positions:
        _, high = consumer.get_watermark_offsets(tp, cached=True)
        if high is not None and high >= 0 and tp.offset >= 0:
            behind = max(0, high - tp.offset)
            if wire.app_of_pending(prefix, tp.topic or ""):
                known = routed.get((tp.topic or "", tp.partition)) if routed else None
                if known is not None:
                    behind = max(0, high - known[0] - known[1])
                pending += behind
            else:
                inputs += behind
    return inputs, pending


def publish_lag(
    consumer: Consumer,
    assigned: Collection[Partition],
    prefix: str,
    metrics: RouterMetrics,
    routed: Mapping[Partition, tuple[int, int]] | None = None,
) -> None:
    """``lag`` as the input-lag and pending-backlog gauges."""
    inputs, pending = lag(consumer, assigned, prefix, routed)
    metrics.input_lag.set(inputs)
    metrics.pending_backlog.set(pending)


def caught_up(consumer: Consumer, held: Held) -> bool:
    """Every assigned partition read to its (fetch-reported) end; paused pending partitions wait on purpose."""
    if not held.assigned:
        return False
    partitions = [TopicPartition(t, p) for t, p in held.assigned if (t, p) not in held.paused]
    if not partitions:
        return True
    positions = consumer.position(partitions)
    _from_commits(consumer, positions)
    for tp in positions:
        _, high = consumer.get_watermark_offsets(tp, cached=True)
        if high is None or high < 0:
            return False  # no fetch answered yet: the end is unknown
        if tp.offset < 0:
            if high > 0:
                return False
        elif tp.offset < high:
            return False
    return True


def nothing_fetched_ahead(consumer: Consumer, held: Held) -> bool:
    """No partition that is read has records beyond the consumer's position, as far as the last fetches told:
    the input has nothing more for now. Cheap (local state only), so it may be asked after every short batch; a
    partition whose position or end is not known yet counts as having nothing (the commit window's interval
    bounds what a wrong answer delays)."""
    partitions = [TopicPartition(t, p) for t, p in held.assigned if (t, p) not in held.paused]
    for tp in consumer.position(partitions) if partitions else ():
        if tp.offset >= 0:
            _, high = consumer.get_watermark_offsets(tp, cached=True)
            if high is not None and tp.offset < high:
                return False
    return True


def _from_commits(consumer: Consumer, positions: list[TopicPartition]) -> None:
    """Fill in the committed offset where the position is unknown: nothing consumed from the partition in this
    session, or a parked pending partition (sought back and paused)."""
    unknown = [tp for tp in positions if tp.offset < 0]
    if unknown:
        try:
            found = consumer.committed(unknown, timeout=5)
        except KafkaException:  # the coordinator is away (a network cut, a rebalance): unknown for now
            found = []  # a gauge or an idle check must never stop the worker
        committed = {(tp.topic, tp.partition): tp.offset for tp in found}
        for tp in unknown:
            tp.offset = committed.get((tp.topic, tp.partition), -1)
