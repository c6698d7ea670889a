"""The expiry sweep of parked pending partitions (the rule: routing/sweep.py), on the poll-loop thread.

Per pending partition the worker keeps its sweep mark (what has left from behind its committed position: read
from the router group's commit when the partition is assigned, committed with the position), what its last pass
learned (``Stretches``, memory only), when this worker last swept it, and the pass under way.

A pass starts when routing stops the partition at a record that cannot go (its head) and the partition's sweep
is due: ``every`` seconds after the last pass started, or never swept by this worker. Instead of parking at once,
the partition is read on past the head: the batch router takes each expired record (``take``: dead letter, or
drop), ``note`` remembers when the others will expire, and once the pass has read to the partition's end
(``settle``) the partition is parked at its head with the pass's mark, committed with the head's position. A
parked partition is resumed when its sweep is due (``due``), besides the wake-ups of parking.py.

A pass is one unit of work, like a batch: its mark is committed when it ends, so a worker that stops in the
middle of one (or loses the partition, or reads a window again) leaves its dead letters to be written again by
the next pass (at-least-once). A pass routes under the config version it started with; when the worker took a
newer one meanwhile, the partition is read again from its head at once when the pass ends.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaException, TopicPartition

from subroute import wire
from subroute.routing.decisions import RoutingTable
from subroute.routing.envelope import Envelopes, InputRecord
from subroute.routing.expiration import message_expiration
from subroute.routing.sweep import Cursor, Stretches, SweepMark, deadline, finish, mark_of, pass_mark, plan
from subroute.worker.assignment import Assignment
from subroute.worker.tally import BatchTally

log = logging.getLogger(__name__)

Partition = tuple[str, int]

DEFAULT_SWEEP_SECONDS = 30.0


@dataclass
class Pass:
    """One pass over a partition behind its ``head``, routing under ``table`` at the clock of ``clock``."""

    app: str
    head: int
    table: RoutingTable
    envelopes: Envelopes
    clock: SweepMark  # the pass's mark while it reads: what has left once it has read a record
    cursor: Cursor
    stretches: Stretches  # what it learns as it reads


@dataclass
class PartitionSweep:
    mark: SweepMark | None = None
    stretches: Stretches | None = None
    swept_at: float | None = None  # monotonic seconds when the last pass started
    current: Pass | None = None


class Sweeps:
    def __init__(self, prefix: str, every: float) -> None:
        self.prefix = prefix
        self.every = every  # seconds between two passes over a parked partition
        self.partitions: dict[Partition, PartitionSweep] = {}

    def assigned(self, committed: Iterable[TopicPartition]) -> None:
        """Partitions assigned, with their commits (their marks): whatever was known of them before is stale."""
        for tp in committed:
            if tp.topic is not None and wire.app_of_pending(self.prefix, tp.topic):
                self.partitions[(tp.topic, tp.partition)] = PartitionSweep(mark_of(tp.metadata))

    def revoked(self, partitions: Iterable[Partition]) -> None:
        for partition in partitions:
            self.partitions.pop(partition, None)

    def reload(self, consumer: Consumer, partitions: Sequence[Partition]) -> None:
        """Partitions read again from their commits: their marks as committed (a mark not committed may name
        dead letters that were not written), their passes and memory dropped, their sweep due."""
        pending = [p for p in partitions if wire.app_of_pending(self.prefix, p[0])]
        if not pending:
            return
        try:
            committed = consumer.committed([TopicPartition(t, p) for t, p in pending], timeout=10)
        except KafkaException as exc:  # no mark then: records may be dead-lettered twice, none is lost
            log.warning("could not read the sweep marks again", extra={"fields": {"error": str(exc)}})
            committed = []
        marks = {(tp.topic, tp.partition): mark_of(tp.metadata) for tp in committed}
        for partition in pending:
            self.partitions[partition] = PartitionSweep(marks.get(partition))

    def due(self, paused: Iterable[Partition]) -> list[Partition]:
        """The parked partitions whose sweep is due."""
        now = time.monotonic()
        found = []
        for partition in paused:
            state = self.partitions.get(partition)
            if state is None or state.swept_at is None or now - state.swept_at >= self.every:
                found.append(partition)
        return found

    def start(
        self,
        consumer: Consumer,
        partition: Partition,
        head: int,
        app: str,
        table: RoutingTable,
        envelopes: Envelopes,
        now_ms: int,
    ) -> Pass | None:
        """A pass behind ``head``, where routing stopped the partition, if its sweep is due; else None (park)."""
        state = self.partitions.setdefault(partition, PartitionSweep())
        now = time.monotonic()
        if state.swept_at is not None and now - state.swept_at < self.every:
            return None
        route = table.app(app)
        limit = route.config.expiration_ms if route is not None else None
        clock = pass_mark(state.mark, now_ms, limit)
        ranges, stretches = plan(state.stretches, head, clock.at_ms, limit)
        current = Pass(app, head, table, envelopes, clock, Cursor(ranges, head), stretches)
        state.swept_at, state.current = now, current
        first = current.cursor.seek_first()
        if first is not None:
            consumer.seek(TopicPartition(partition[0], partition[1], first))
        return current

    def take(self, consumer: Consumer, current: Pass, mark: SweepMark | None, message: InputRecord) -> bool:
        """Whether the pass takes ``message`` (a record behind its head) now: it has expired and no earlier pass
        took it. Otherwise its deadline is noted. Seeks over what the pass does not read."""
        read, seek_to = current.cursor.step(message.offset)
        if seek_to is not None:
            consumer.seek(TopicPartition(message.topic, message.partition, seek_to))
        if not read:
            return False
        timestamp = message.timestamp_ms
        own = message_expiration(message.headers_list) if timestamp > 0 else None
        if mark is not None and mark.has_left(message.offset, timestamp, own):
            return False
        if current.clock.has_left(message.offset, timestamp, own):
            return True
        due_at = deadline(timestamp, own, current.stretches.limit_ms)
        if due_at is not None:
            current.stretches.note(message.offset, due_at)
        return False

    def abandon(self, consumer: Consumer, assignment: Assignment, partition: Partition) -> None:
        """Stop the pass without a mark (what it took is taken again by the next) and park at the head."""
        state = self.partitions[partition]
        if state.current is not None:
            assignment.park(consumer, partition, state.current.head)
            state.current, state.stretches = None, None

    def settle(
        self, consumer: Consumer, assignment: Assignment, table: RoutingTable, tally: BatchTally
    ) -> None:
        """End the passes that have read to their partition's end: park each at its head with its mark, the
        position and mark into ``tally`` to be committed after what the pass wrote."""
        for partition, state in self.partitions.items():
            current = state.current
            if current is None:
                continue
            tp = TopicPartition(partition[0], partition[1])
            position = consumer.position([tp])[0].offset
            watermarks = consumer.get_watermark_offsets(tp, cached=True)
            if watermarks is None or not current.cursor.done(position, watermarks[1]):
                continue
            reached = current.cursor.reached(position)
            current.stretches.reach(reached)
            state.mark, state.stretches, state.current = (
                finish(current.clock, reached),
                current.stretches,
                None,
            )
            assignment.park(consumer, partition, current.head)
            if current.table is not table:  # a newer version came meanwhile: route under it now
                assignment.resume(consumer, [partition])
            tally.offsets[partition] = current.head
            tally.marks[partition] = state.mark

    def passing(self) -> bool:
        """Whether a pass is under way."""
        return any(state.current is not None for state in self.partitions.values())

    def committable(self, partition: Partition, position: int) -> SweepMark | None:
        """The mark to commit with ``position``: None once the position has passed everything it says."""
        state = self.partitions.get(partition)
        if state is None or state.mark is None:
            return None
        if not state.mark.reaches_beyond(position):
            state.mark = None
        return state.mark
