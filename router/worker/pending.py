"""The worker's pending partitions: passes past the head and expiry sweeps (the rules: routing/passes.py,
routing/sweep.py), on the poll-loop thread. The batch router decides each record (worker/batch.py); this keeps
what each partition needs from one record to the next and starts, ends and wakes its passes.

Per pending partition the worker keeps:

* its ``Ledger``: the router's position (the first record that stays), the offsets routed past it
  (``RoutedPast``), the message groups with a record staying, why records stay;
* its sweep mark (what has left from behind the position by expiry) and what its last pass learned of when
  records will expire (``Stretches``, memory only);
* the view of the consumers its records are decided with: the newest one until a record stays for a group (a
  consumer, room), then frozen (one view per pass: routing/passes.py) until the next pass; and the config table:
  the newest until a record stays, then the one it was decided under, until the next pass;
* the pass under way, if any.

A partition is read from its committed position when it is assigned (or read again after a rewind): that first
reading is a routing pass. After a pass has read to the end, records are decided as they arrive. A new routing
pass (``wake``, ``renew``) starts when something changed that may let a staying record go: a new config version, or
a change to the consumers of the partition's app that concerns why its records stay; a wake-up that comes while
a pass reads starts the next pass once it ends. Every ``every`` seconds a partition with staying records is
swept: a sweep pass reads only where records may have expired (and what arrived since the last pass, decided as
any arrival), and takes the expired ones. When the routed-past set reaches its bound, the partition is parked at
its position (paused) at the end of the pass, as a plain queue, until a wake-up or its sweep.

The position, the routed-past offsets and the sweep mark are committed together as the commit's metadata (the
``wire.pending_metadata``), with the records routed for them: a worker that takes the partition over, or
a restart, passes over what was routed past the head and what the sweeps took. A pass's mark is committed when it
ends (one unit of work, like a batch): a worker that stops in the middle of one leaves its dead letters to be
written again by the next (at-least-once).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from confluent_kafka import Consumer, KafkaException, TopicPartition

from subroute import wire
from subroute.routing.decisions import Lag, RoutingTable
from subroute.routing.passes import Ledger, PassView, Reasons
from subroute.routing.routed_past import BUDGET_BYTES, RoutedPast, past_of
from subroute.routing.snapshot import Snapshot
from subroute.routing.sweep import Cursor, Stretches, SweepMark, finish, mark_of, pass_mark, plan
from subroute.worker.assignment import Assignment
from subroute.worker.tally import BatchTally

log = logging.getLogger(__name__)

Partition = tuple[str, int]

DEFAULT_SWEEP_SECONDS = 30.0


@dataclass
class Pass:
    """Reading a partition from its position: a routing pass decides every record; a sweep pass takes the expired
    records where they may be (its cursor's ranges) and decides only those that arrived since the last pass."""

    routing: bool
    clock: SweepMark  # the pass's mark while it reads: what has left once it has read a record
    cursor: Cursor
    stretches: Stretches  # what it learns as it reads
    # a routing pass: the reasons for which records are decided again (None: every record); a record that
    # stayed for another reason, which nothing since concerned, stays without being decided (``Reasons``)
    decides: frozenset[str] | None = None


@dataclass
class PendingPartition:
    app: str
    committed: int | None  # the router's committed position as read (None: nothing committed)
    past: RoutedPast
    mark: SweepMark | None = None
    stretches: Stretches | None = None
    swept_at: float | None = None  # monotonic seconds when the last pass started
    current: Pass | None = None
    ledger: Ledger | None = None  # None until the partition is read after it was assigned
    view: PassView | None = None  # what decisions see (see the module's doc)
    table: RoutingTable | None = None  # the table of the staying records' decisions
    frontier: int = -1  # records below it have been decided since the last routing pass began
    again: bool = False  # a routing pass is wanted once the one under way ends
    # why it was woken since the pass under way began (None: a new config version: everything)
    woken: frozenset[str] | None = None
    memory: Reasons = field(default_factory=Reasons)  # why each record stayed (routing/passes.py)
    # Within a pass whose view holds: the headers an app reads (those its expressions read, and the declared
    # ones), as found on a record that stayed, and why it stayed. A record with the same ones stays for the same
    # reason until the next pass, as the view never improves: it need not be decided (``BatchRouter``).
    waits: dict[tuple[tuple[str, bytes | None], ...], str] = field(default_factory=dict)
    parked: bool = False
    full_said: bool = False  # the bound was logged for the current head

    def metadata(self) -> str:
        """What the commit says of the partition besides the config version."""
        ledger = self.ledger
        if ledger is None:
            return wire.pending_metadata(None if self.mark is None else self.mark.text(), self.past.text())
        mark = self.mark
        if mark is not None and not mark.reaches_beyond(ledger.position):
            self.mark = mark = None  # the position has passed everything it says
        return wire.pending_metadata(None if mark is None else mark.text(), ledger.past.text())


@dataclass
class PendingPartitions:
    prefix: str
    every: float  # seconds between two sweeps of a partition with staying records
    budget: int = BUDGET_BYTES  # of the routed-past offsets in a commit's metadata (routing/routed_past.py)
    partitions: dict[Partition, PendingPartition] = field(default_factory=dict)
    _latest: Snapshot = field(default_factory=Snapshot)  # the consumers as the worker last routed with them
    _latest_of: object = None

    def follow(self, lag: Lag) -> None:
        """The consumers as the batch about to be routed sees them (a plain mapping: counts, every group
        present)."""
        if lag is self._latest_of:
            return
        self._latest_of = lag
        self._latest = lag if isinstance(lag, Snapshot) else Snapshot(dict(lag))

    def live(self) -> Snapshot:
        return self._latest

    def assigned(self, committed: Iterable[TopicPartition]) -> None:
        """Partitions assigned, with their commits: whatever was known of them before is stale."""
        for tp in committed:
            if tp.topic is None:
                continue
            app = wire.app_of_pending(self.prefix, tp.topic)
            if app:
                self.partitions[(tp.topic, tp.partition)] = _from_commit(app, tp)

    def revoked(self, partitions: Iterable[Partition]) -> None:
        for partition in partitions:
            self.partitions.pop(partition, None)

    def reload(self, consumer: Consumer, partitions: Sequence[Partition]) -> None:
        """Partitions read again from their commits (a rewind: what was not committed is routed again): their
        state as committed, read from the committed position."""
        pending = [p for p in partitions if wire.app_of_pending(self.prefix, p[0])]
        if not pending:
            return
        try:
            committed = consumer.committed([TopicPartition(t, p) for t, p in pending], timeout=10)
        except KafkaException as exc:  # read on from where the rewind sought: records may be routed twice
            log.warning("could not read the pending commits again", extra={"fields": {"error": str(exc)}})
            for partition in pending:
                self.partitions.pop(partition, None)
            return
        for tp in committed:
            app = wire.app_of_pending(self.prefix, tp.topic or "")
            if not app:
                continue
            self.partitions[(tp.topic, tp.partition)] = state = _from_commit(app, tp)
            if state.committed is not None:
                try:
                    consumer.seek(TopicPartition(tp.topic, tp.partition, state.committed))
                except KafkaException:  # no longer ours: its new owner reads from the commit
                    continue

    def state(self, partition: Partition, app: str) -> PendingPartition:
        found = self.partitions.get(partition)
        if found is None:  # assigned without a readable commit
            found = self.partitions[partition] = PendingPartition(app, None, RoutedPast())
        return found

    def ledger(self, state: PendingPartition, offset: int, now_ms: int, table: RoutingTable) -> Ledger:
        """The partition's ledger; the first record read since it was assigned starts a routing pass from the
        committed position (or from this record when nothing was committed)."""
        if state.ledger is None:
            start = offset if state.committed is None or state.committed < 0 else state.committed
            self._routing_pass(state, start, now_ms, table)
            assert state.ledger is not None
        return state.ledger

    def view(self, state: PendingPartition) -> PassView:
        """What the partition's decisions see: the newest snapshot until a record stays for a group, then the view
        as it was then (until the next pass)."""
        live = self.live()
        view = state.view
        ledger = state.ledger
        if view is None or (ledger is not None and not ledger.holds_groups and view.start is not live):
            view = state.view = PassView(live, self.live)
            state.waits.clear()
        return view

    def tick(self, consumer: Consumer, assignment: Assignment, table: RoutingTable, now_ms: int) -> None:
        """Between batches: the routing passes wanted since the last pass ended (``concerns``), and the sweeps due
        (every ``every`` seconds, while records stay)."""
        now = time.monotonic()
        for partition, state in self.partitions.items():
            ledger = state.ledger
            if ledger is None or not ledger.waiting or state.current is not None:
                continue
            if state.again:  # a record stayed after a change that concerned it: a routing pass first
                self._wanted(consumer, assignment, partition, state, table, now_ms)
                continue
            if state.swept_at is not None and now - state.swept_at < self.every:
                continue
            self._sweep_pass(consumer, assignment, partition, state, table, now_ms)

    def wake(
        self,
        consumer: Consumer,
        assignment: Assignment,
        woken: Mapping[str, frozenset[str]],
        table: RoutingTable,
        now_ms: int,
    ) -> None:
        """The consumers changed (``routing.passes.wakes``): a routing pass over every partition whose staying
        records may go now. What concerns no record yet is remembered (``woken``): a record that stays for it
        later in the pass under way, or as it arrives, was decided with a view older than the change, and wants
        the next pass (``concerns``)."""
        for partition, state in self.partitions.items():
            reasons = woken.get(state.app)
            ledger = state.ledger
            if reasons is None or ledger is None:
                continue
            if state.woken is not None:
                state.woken |= reasons
            if ledger.woken_by(reasons):
                self._wanted(consumer, assignment, partition, state, table, now_ms)

    def concerns(self, state: PendingPartition, reason: str) -> None:
        """A record stayed for ``reason``: if a change since the pass began concerned it, the next pass decides
        it again (the view it was decided with may be older than the change)."""
        woken = state.woken
        if woken is None or reason in woken:
            state.again = True

    def renew(self, consumer: Consumer, assignment: Assignment, table: RoutingTable, now_ms: int) -> None:
        """A new config table: a routing pass over every partition with staying records."""
        for partition, state in self.partitions.items():
            if state.ledger is not None and state.ledger.waiting:
                state.woken = None  # every record may go under it
                self._wanted(consumer, assignment, partition, state, table, now_ms)

    def settle(
        self,
        consumer: Consumer,
        assignment: Assignment,
        table: RoutingTable,
        tally: BatchTally,
        now_ms: int,
    ) -> None:
        """End the passes that have read to their partition's end: their mark and what they learned kept, the
        position and metadata into ``tally``; then the next routing pass if one is wanted, or park the partition if
        its routed-past set is at its bound."""
        for partition, state in self.partitions.items():
            current, ledger = state.current, state.ledger
            if current is None or ledger is None:
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
            state.frontier = max(state.frontier, reached)
            ledger.reach(reached)
            if state.again:
                self._wanted(consumer, assignment, partition, state, table, now_ms)
            elif ledger.full:
                assignment.park(consumer, partition, ledger.position)
                state.parked = True
            tally.offsets[partition] = ledger.position
            tally.metadata[partition] = state.metadata()

    def passing(self) -> bool:
        """Whether a pass is under way."""
        return any(state.current is not None for state in self.partitions.values())

    def backlog(self) -> dict[Partition, tuple[int, int]]:
        """Per partition read, the router's position and how many offsets beyond it were routed past: what the
        pending-backlog gauge counts from (the consumer's own position is at the end once a pass is over)."""
        return {
            partition: (state.ledger.position, len(state.ledger.past))
            for partition, state in self.partitions.items()
            if state.ledger is not None
        }

    def said_full(self, state: PendingPartition, partition: Partition) -> bool:
        """Log, once per head, that the partition stops at its head: the routed-past set is at its bound. Whether
        it said so now."""
        if state.full_said:
            return False
        state.full_said = True
        ledger = state.ledger
        log.warning(
            "pending partition stops at its head: the offsets routed past it fill the commit metadata",
            extra={
                "fields": {
                    "topic": partition[0],
                    "partition": partition[1],
                    "head": ledger.position if ledger is not None else None,
                    "routed_past": len(ledger.past) if ledger is not None else 0,
                }
            },
        )
        return True

    def _wanted(
        self,
        consumer: Consumer,
        assignment: Assignment,
        partition: Partition,
        state: PendingPartition,
        table: RoutingTable,
        now_ms: int,
    ) -> None:
        """A routing pass now, or once the pass under way has read to the end."""
        if state.current is not None:
            state.again = True
            return
        ledger = state.ledger
        if ledger is None:  # not read yet: its first reading is a routing pass
            return
        self._routing_pass(state, ledger.position, now_ms, table, state.woken)
        consumer.seek(TopicPartition(partition[0], partition[1], ledger.position))
        if state.parked:
            assignment.resume(consumer, [partition])
            state.parked = False

    def _routing_pass(
        self,
        state: PendingPartition,
        start: int,
        now_ms: int,
        table: RoutingTable,
        decides: frozenset[str] | None = None,
    ) -> None:
        previous = state.ledger
        past = previous.past if previous is not None else state.past
        ledger = Ledger.start(start, past, self.budget, state.memory)
        if previous is None or previous.position != ledger.position:
            state.full_said = False
        state.ledger, state.past = ledger, past
        state.view, state.table, state.again, state.frontier = None, None, False, start
        state.waits = {}
        state.woken = frozenset()  # what wakes it from here on concerns the next pass
        limit = _expiration(table, state.app)
        clock = pass_mark(state.mark, now_ms, limit)
        cursor = Cursor([(start, None)], start - 1)
        state.current = Pass(True, clock, cursor, Stretches(limit, start), decides)
        state.swept_at = time.monotonic()  # it reads everything: the next sweep is an interval later

    def _sweep_pass(
        self,
        consumer: Consumer,
        assignment: Assignment,
        partition: Partition,
        state: PendingPartition,
        table: RoutingTable,
        now_ms: int,
    ) -> None:
        ledger = state.ledger
        assert ledger is not None
        head = ledger.position
        limit = _expiration(table, state.app)
        clock = pass_mark(state.mark, now_ms, limit)
        ranges, stretches = plan(state.stretches, head - 1, clock.at_ms, limit)  # the head itself may expire
        cursor = Cursor(ranges, head - 1)
        first = ranges[0][0]
        cursor.next = first
        state.current = Pass(False, clock, cursor, stretches)
        state.swept_at = time.monotonic()
        consumer.seek(TopicPartition(partition[0], partition[1], first))
        if state.parked:
            assignment.resume(consumer, [partition])
            state.parked = False


def _from_commit(app: str, tp: TopicPartition) -> PendingPartition:
    committed = tp.offset if tp.offset is not None and tp.offset >= 0 else None
    past = past_of(tp.metadata, committed) if committed is not None else None
    return PendingPartition(app, committed, past or RoutedPast(committed or 0), mark_of(tp.metadata))


def _expiration(table: RoutingTable | None, app: str) -> int | None:
    route = table.app(app) if table is not None else None
    return route.config.expiration_ms if route is not None else None
