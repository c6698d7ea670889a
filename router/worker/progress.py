"""Where the worker stands on its assigned partitions: input lag, and whether it has caught up.

Both read positions and the high watermarks the fetches reported (cached), never ListOffsets, which some brokers
answer short. Called from the poll-loop thread.
"""

from __future__ import annotations

from collections.abc import Collection

from confluent_kafka import Consumer, TopicPartition

Partition = tuple[str, int]


def input_lag(consumer: Consumer, assigned: Collection[Partition]) -> int:
    """Records of the assigned partitions not consumed yet."""
    lag = 0
    for tp in consumer.position([TopicPartition(t, p) for t, p in assigned]) if assigned else ():
        _, high = consumer.get_watermark_offsets(tp, cached=True)
        if high is not None and high >= 0 and tp.offset >= 0:
            lag += max(0, high - tp.offset)
    return lag


def caught_up(consumer: Consumer, assigned: Collection[Partition], paused: Collection[Partition]) -> bool:
    """Every assigned partition read to its (fetch-reported) end; paused pending partitions wait on purpose."""
    if not assigned:
        return False
    partitions = [TopicPartition(t, p) for t, p in assigned if (t, p) not in paused]
    if not partitions:
        return True
    positions = consumer.position(partitions)
    unknown = [tp for tp in positions if tp.offset < 0]  # nothing consumed from it in this session
    if unknown:
        committed = {(tp.topic, tp.partition): tp.offset for tp in consumer.committed(unknown, timeout=5)}
        for tp in unknown:
            tp.offset = committed.get((tp.topic, tp.partition), -1)
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
