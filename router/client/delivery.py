"""The consumer client's bookkeeping, as pure classes (no Kafka): tested on their own, driven by
``queue_consumer.py`` (with ``reader.py`` and ``give_back.py``).

* ``AckTracker``: which offsets of a partition are settled; the commit position is the contiguous settled prefix
  (at-most-once passes over unsettled ones, which then travel with the commit as its holes).
* ``DuplicateFilter``: router redeliveries recognised by their ``subroute.source``.
* ``GroupHoldBack``: later messages of a message group wait until the re-published copy of a cancelled one arrives
  (or, when the copy went to another member, until that member has settled it: ``MovedCopies``).
* ``BandBuffer``: fetched records per priority band, highest band first.
* ``Outstanding``: delivered, unacknowledged messages and their lease deadlines; ``backlog_limit``: how many.
* ``Settling``: messages given back (cancel, expire, lease) until their copy or dead letter is acknowledged.
* ``after_failure``: AMPS's MaxCancels / MaxDeliveries decision for a failed delivery.
* ``redelivery_partition``: where a failed delivery's copy goes so that another member of the group gets it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from subroute import wire

T = TypeVar("T")
TP = tuple[str, int]  # (topic, partition)


# --- acknowledgements ---------------------------------------------------------------------------------------------


class AckTracker:
    """Per partition: offsets handed over in fetch order; the commit position never passes an unsettled one,
    except where at-most-once delivery passed over it.

    Offsets need not be contiguous (transaction markers take offsets), so the position after a fully settled
    prefix is the last settled offset + 1, and otherwise the first unsettled offset.

    At-most-once commits past a message before it is handed out (``passing``, then ``pass_over``), even when an
    earlier message of its partition is not settled yet (its dead letter or replace write is still failing).
    Such earlier offsets become the partition's *holes*: unsettled offsets below the commit position, below its
    *floor*. They go with every commit of the partition, as its metadata (``wire.unsettled_metadata``), until
    they are settled; a member newly assigned the partition reads them back (``recover``), fetches from the
    first, takes the holes and skips everything else below the committed offset, which was passed already.
    """

    def __init__(self) -> None:
        self._order: dict[TP, deque[int]] = {}  # tracked offsets at or above the floor, in fetch order
        self._settled: dict[TP, set[int]] = {}  # the settled ones among them
        self._next: dict[TP, int] = {}  # after the last offset taken off the front of _order
        self._last: dict[TP, int] = {}  # the last offset handed over (a re-fetch is not taken again)
        self._floor: dict[TP, int] = {}  # below it every offset is done, except the holes
        self._holes: dict[TP, set[int]] = {}  # tracked, unsettled offsets below the floor
        self._expected: dict[TP, set[int]] = {}  # holes read back from the last commit, not fetched yet
        self._vanished: list[tuple[TP, int]] = []  # expected holes the partition no longer holds
        self._committed: dict[TP, int] = {}
        self._committed_holes: dict[TP, tuple[int, ...]] = {}
        # copy -> original: the original settles when its copy does (message groups through cancels).
        self._linked: dict[tuple[TP, int], tuple[TP, int]] = {}

    def recover(self, tp: TP, committed: int, holes: Iterable[int]) -> int:
        """The partition's last commit, at ``committed`` with these ``holes`` (its metadata), before anything of
        it is tracked. Returns the offset to fetch from: the first hole (``committed`` when there is none)."""
        expected = {h for h in holes if 0 <= h < committed}
        self._floor[tp] = committed
        self._committed[tp] = committed
        self._expected[tp] = expected
        self._committed_holes[tp] = tuple(sorted(expected))
        self._order.setdefault(tp, deque())
        self._settled.setdefault(tp, set())
        return min(expected, default=committed)

    def track(self, tp: TP, offset: int) -> bool:
        """Hand over ``offset`` (unsettled); False, and ignored, when it is not past the last one handed over
        (a re-fetch of a record already held), or when it lies below the floor and is no hole (passed over
        already: delivered at-most-once, or settled, by an earlier owner)."""
        last = self._last.get(tp)
        if last is not None and offset <= last:
            return False
        self._last[tp] = offset
        self._settled.setdefault(tp, set())
        expected = self._expected.get(tp)
        if expected:
            # Fetched in order: an expected hole before this offset is no longer in the partition (retention).
            self._vanished.extend((tp, e) for e in sorted(expected) if e < offset)
            found = offset in expected
            self._expected[tp] = {e for e in expected if e > offset}
            if found:
                self._holes.setdefault(tp, set()).add(offset)
                return True
        floor = self._floor.get(tp)
        if floor is not None and offset < floor:
            return False
        self._order.setdefault(tp, deque()).append(offset)
        # The consumer started here, so this position is already committed (or is the reset point).
        self._committed.setdefault(tp, offset)
        return True

    def settle(self, tp: TP, offset: int) -> None:
        settled = self._settled.get(tp)
        if settled is None:
            return  # partition revoked meanwhile: nothing to commit for it here
        holes = self._holes.get(tp)
        if holes is not None and offset in holes:
            holes.discard(offset)
        else:
            settled.add(offset)
        original = self._linked.pop((tp, offset), None)
        if original is not None:
            self.settle(*original)

    def settle_with(self, original: tuple[TP, int], copy: tuple[TP, int]) -> None:
        """Keep ``original`` unsettled until ``copy`` settles."""
        self._linked[copy] = original

    def passing(self, tp: TP, offset: int) -> tuple[int, tuple[int, ...]]:
        """(position, holes) of the partition once ``offset`` is passed over (``pass_over``), changing nothing:
        what at-most-once commits before it hands the message out."""
        order, settled = self._order.get(tp, deque()), self._settled.get(tp, set())
        floor = max(self._floor.get(tp, offset + 1), offset + 1)
        holes = set(self._holes.get(tp, ()))
        holes.discard(offset)
        after = self._next.get(tp)
        position: int | None = None
        for tracked in order:
            if tracked < floor:
                if tracked != offset and tracked not in settled:
                    holes.add(tracked)
            elif tracked in settled:
                after = tracked + 1
            else:
                position = tracked
                break
        if position is None:
            position = max(floor, after if after is not None else floor)
        return position, tuple(sorted(holes | self._expected.get(tp, set())))

    def pass_over(self, tp: TP, offset: int) -> None:
        """``offset`` is delivered at-most-once: settled, and the floor raised past it; unsettled offsets before
        it in its partition become holes."""
        if tp not in self._settled:
            return
        self.settle(tp, offset)
        floor = max(self._floor.get(tp, offset + 1), offset + 1)
        self._floor[tp] = floor
        order, settled = self._order.setdefault(tp, deque()), self._settled[tp]
        while order and order[0] < floor:
            tracked = order.popleft()
            if tracked in settled:
                settled.discard(tracked)
            else:
                self._holes.setdefault(tp, set()).add(tracked)

    def position(self, tp: TP) -> int | None:
        """The offset to commit for ``tp``: every tracked offset before it is settled or a hole (None: nothing
        tracked)."""
        order, settled = self._order.get(tp), self._settled.get(tp)
        if order is None or settled is None:
            return None
        while order and order[0] in settled:
            offset = order.popleft()
            settled.discard(offset)
            self._next[tp] = offset + 1
        if order:
            return order[0]
        known = [p for p in (self._next.get(tp), self._floor.get(tp)) if p is not None]
        return max(known) if known else None

    def is_hole(self, tp: TP, offset: int) -> bool:
        """``offset`` lies below the commit position, unsettled (read back from a commit, or passed over)."""
        return offset in self._holes.get(tp, ())

    def holes(self, tp: TP) -> tuple[int, ...]:
        """Unsettled offsets below the commit position (at-most-once passed over them), fetched or not yet."""
        return tuple(sorted(self._holes.get(tp, set()) | self._expected.get(tp, set())))

    def committable(self) -> dict[TP, int]:
        """Positions that moved past what was last marked committed, or whose holes changed since."""
        result: dict[TP, int] = {}
        for tp in list(self._settled):
            position = self.position(tp)
            if position is None:
                continue
            committed = self._committed.get(tp, -1)
            if position > committed or (
                position == committed and self.holes(tp) != self._committed_holes.get(tp, ())
            ):
                result[tp] = position
        return result

    def mark_committed(self, positions: dict[TP, int]) -> None:
        for tp, position in positions.items():
            self._committed[tp] = max(position, self._committed.get(tp, -1))
            self._committed_holes[tp] = self.holes(tp)

    def vanished(self) -> list[tuple[TP, int]]:
        """Holes read back from a commit that the partition no longer held when fetched (taken once)."""
        found, self._vanished = self._vanished, []
        return found

    def forget(self, tp: TP) -> None:
        for mapping in (
            self._order,
            self._settled,
            self._next,
            self._last,
            self._floor,
            self._holes,
            self._expected,
            self._committed,
            self._committed_holes,
        ):
            mapping.pop(tp, None)
        self._linked = {c: o for c, o in self._linked.items() if c[0] != tp and o[0] != tp}


# --- duplicates ---------------------------------------------------------------------------------------------------


@dataclass
class _SourceMemory:
    highest: int = -1
    seen: set[int] = field(default_factory=set)


class DuplicateFilter:
    """Drops router redeliveries: per group-topic partition, the ``subroute.source`` offsets already seen.

    The router reads each input partition in order and writes to a group-topic partition in order, so for each
    source partition the offsets arriving in one group-topic partition rise, and a redelivery shows up as an
    offset at or below the highest seen. A record is dropped only if its exact source offset was seen; the last
    ``window`` offsets below the highest are remembered (older ones are forgotten and then delivered again:
    a duplicate is preferred to a loss).
    """

    def __init__(self, window: int = 10_000) -> None:
        self.window = window
        self._memory: dict[TP, dict[tuple[str, int], _SourceMemory]] = {}

    def observe(self, tp: TP, source: tuple[str, int, int]) -> None:
        """Remember ``source`` as delivered from group-topic partition ``tp``."""
        topic, partition, offset = source
        memory = self._memory.setdefault(tp, {}).setdefault((topic, partition), _SourceMemory())
        memory.seen.add(offset)
        if offset > memory.highest:
            memory.highest = offset
            if len(memory.seen) > self.window:
                floor = memory.highest - self.window
                memory.seen = {o for o in memory.seen if o > floor}

    def is_duplicate(self, tp: TP, source: tuple[str, int, int]) -> bool:
        topic, partition, offset = source
        memory = self._memory.get(tp, {}).get((topic, partition))
        return memory is not None and offset in memory.seen

    def admit(self, tp: TP, source: tuple[str, int, int]) -> bool:
        """True for a first sighting (and remembers it), False for a duplicate."""
        if self.is_duplicate(tp, source):
            return False
        self.observe(tp, source)
        return True

    def highest(self, tp: TP, topic: str, partition: int) -> int | None:
        memory = self._memory.get(tp, {}).get((topic, partition))
        return None if memory is None else memory.highest

    def forget(self, tp: TP) -> None:
        self._memory.pop(tp, None)


# --- message groups -----------------------------------------------------------------------------------------------

GroupKey = tuple[str, int, bytes]  # (topic, partition, message-group id)


@dataclass
class _Hold(Generic[T]):
    expected: set[int] = field(default_factory=set)  # offsets of copies written, not read back yet
    unwritten: int = 0  # copies being written: their offsets are not known yet
    moved: int = 0  # copies written to another member's partition, not settled there yet
    held: list[tuple[int, T]] = field(default_factory=list)  # (offset, item), in fetch order

    @property
    def waiting(self) -> bool:
        return bool(self.expected) or self.unwritten > 0 or self.moved > 0


class GroupHoldBack(Generic[T]):
    """Qpid's ordering rule kept through cancels.

    A cancelled grouped message is re-published at the end of its partition. Until that copy is read back, the
    group's later messages are held; the copy is delivered first, then the held messages in their order. The
    hold starts when the message is given back (``expect_unwritten``), before the copy is written: its write
    may fail and be retried, and it may even be fetched before its delivery report names its offset
    (``written``).
    """

    def __init__(self) -> None:
        self._holds: dict[GroupKey, _Hold[T]] = {}

    def expect(self, key: GroupKey, copy_offset: int) -> None:
        self._holds.setdefault(key, _Hold()).expected.add(copy_offset)

    def expect_unwritten(self, key: GroupKey) -> None:
        """Hold the group now: a copy is being written, its offset comes with ``written``."""
        self._holds.setdefault(key, _Hold()).unwritten += 1

    def written(self, key: GroupKey, copy_offset: int) -> list[T]:
        """The copy announced by ``expect_unwritten`` is at ``copy_offset``. Returns what to deliver now, in
        order: nothing, or (when the copy was fetched already and held) the copy, then the held messages when
        the group waits for nothing else."""
        hold = self._holds.get(key)
        if hold is None or hold.unwritten <= 0:
            return []  # the partition was revoked meanwhile
        hold.unwritten -= 1
        arrived = [item for offset, item in hold.held if offset == copy_offset]
        if not arrived:
            hold.expected.add(copy_offset)
            return []
        hold.held = [(offset, item) for offset, item in hold.held if offset != copy_offset]
        if hold.waiting:
            return arrived
        del self._holds[key]
        return [*arrived, *(item for _, item in hold.held)]

    def written_elsewhere(self, key: GroupKey) -> None:
        """The copy announced by ``expect_unwritten`` was written to another member's partition: the group
        waits until ``settled_elsewhere``."""
        hold = self._holds.get(key)
        if hold is None or hold.unwritten <= 0:
            return  # the partition was revoked meanwhile
        hold.unwritten -= 1
        hold.moved += 1

    def settled_elsewhere(self, key: GroupKey) -> list[T]:
        """A copy written elsewhere was settled by the member that got it: the held messages, in order, when
        the group waits for nothing else (else nothing)."""
        hold = self._holds.get(key)
        if hold is None or hold.moved <= 0:
            return []
        hold.moved -= 1
        if hold.waiting:
            return []
        del self._holds[key]
        return [item for _, item in hold.held]

    def is_held(self, key: GroupKey) -> bool:
        return key in self._holds

    def route(self, key: GroupKey, offset: int, item: T) -> tuple[T | None, list[T]]:
        """(deliver now or None when held, items released to deliver right after it)."""
        hold = self._holds.get(key)
        if hold is None:
            return item, []
        if offset in hold.expected:
            hold.expected.discard(offset)
            if hold.waiting:
                return item, []
            del self._holds[key]
            return item, [held for _, held in hold.held]
        hold.held.append((offset, item))
        return None, []

    def held_count(self) -> int:
        return sum(len(h.held) for h in self._holds.values())

    def forget(self, topic: str, partition: int) -> list[T]:
        """Drop the holds of a revoked partition; returns the items they held."""
        dropped: list[T] = []
        for key in [k for k in self._holds if k[0] == topic and k[1] == partition]:
            dropped.extend(item for _, item in self._holds.pop(key).held)
        return dropped


@dataclass(frozen=True)
class MovedCopy:
    """A grouped message's copy written to another member's partition, and what waits for it."""

    copy: TP
    copy_offset: int
    group: GroupKey  # the group held here until the copy is settled
    original: tuple[TP, int]  # stays unsettled (uncommitted) until then


class MovedCopies:
    """Grouped copies this member wrote to other members' partitions, until those members settle them.

    A member settles a record by committing past it; the consumer group's committed offsets can be read by
    every member, so this member learns that the copy was processed from the committed offset of the copy's
    partition (``settled``), with no message between the members."""

    def __init__(self) -> None:
        self._copies: list[MovedCopy] = []

    def add(self, moved: MovedCopy) -> None:
        self._copies.append(moved)

    def partitions(self) -> set[TP]:
        return {m.copy for m in self._copies}

    def settled(self, committed: dict[TP, int]) -> list[MovedCopy]:
        """The copies whose partition's committed offset passed them (removed), in the order they were written."""
        done: list[MovedCopy] = []
        kept: list[MovedCopy] = []
        for moved in self._copies:
            passed = moved.copy in committed and committed[moved.copy] > moved.copy_offset
            (done if passed else kept).append(moved)
        self._copies = kept
        return done

    def forget(self, topic: str, partition: int) -> None:
        """This member lost the originals' partition: the next owner delivers them again."""
        self._copies = [m for m in self._copies if m.original[0] != (topic, partition)]

    def __len__(self) -> int:
        return len(self._copies)


# --- priority bands -----------------------------------------------------------------------------------------------


class BandBuffer(Generic[T]):
    """Fetched, undelivered records per band; ``pop`` takes the oldest of the highest non-empty band."""

    def __init__(self, bands: int = 10) -> None:
        self._bands: list[deque[T]] = [deque() for _ in range(bands)]

    def push(self, band: int, item: T) -> None:
        self._bands[band].append(item)

    def push_front(self, band: int, items: Sequence[T]) -> None:
        """Put ``items`` back ahead of everything else of their band, in their order."""
        self._bands[band].extendleft(reversed(items))

    def pop(self) -> tuple[int, T] | None:
        for band in range(len(self._bands) - 1, -1, -1):
            if self._bands[band]:
                return band, self._bands[band].popleft()
        return None

    def remove_if(self, predicate: Callable[[T], bool]) -> list[T]:
        removed: list[T] = []
        for index, queue in enumerate(self._bands):
            kept: deque[T] = deque()
            for item in queue:
                (removed if predicate(item) else kept).append(item)
            self._bands[index] = kept
        return removed

    def __len__(self) -> int:
        return sum(len(q) for q in self._bands)


# --- leases -------------------------------------------------------------------------------------------------------

Key = tuple[str, int, int]  # (topic, partition, offset)


def backlog_limit(asked: int, group_cap: int | None) -> int:
    """A member's backlog: what it asked for (``max_backlog``) or its group's ``max_leased_per_member``,
    whichever is smaller (AMPS: "AMPS will lease the number specified in the subscription or the maximum set for
    the queue, whichever is lower")."""
    return asked if group_cap is None else min(asked, group_cap)


class Outstanding(Generic[T]):
    """Delivered, unacknowledged messages (the backlog) and, with a lease, when each must be settled."""

    def __init__(self) -> None:
        self._items: dict[Key, tuple[T, float | None]] = {}

    def add(self, key: Key, item: T, now: float, lease: float | None) -> None:
        self._items[key] = (item, None if lease is None else now + lease)

    def get(self, key: Key) -> T | None:
        entry = self._items.get(key)
        return None if entry is None else entry[0]

    def remove(self, key: Key) -> T | None:
        entry = self._items.pop(key, None)
        return None if entry is None else entry[0]

    def overdue(self, now: float) -> list[T]:
        """Messages whose lease ran out, oldest deadline first."""
        due = [(d, k) for k, (_, d) in self._items.items() if d is not None and d <= now]
        return [self._items[k][0] for _, k in sorted(due)]

    def next_deadline(self) -> float | None:
        deadlines = [d for _, d in self._items.values() if d is not None]
        return min(deadlines) if deadlines else None

    def keys(self) -> list[Key]:
        return list(self._items)

    def drop_partition(self, topic: str, partition: int) -> list[T]:
        gone = [k for k in self._items if k[0] == topic and k[1] == partition]
        return [self._items.pop(k)[0] for k in gone]

    def __len__(self) -> int:
        return len(self._items)


# --- given-back messages ------------------------------------------------------------------------------------------

RETRY_FIRST = 0.2  # seconds before the first retry of a failed write
RETRY_MAX = 5.0  # the longest wait between two writes of one given-back message


def retry_delay(failures: int) -> float:
    """Seconds to wait after the ``failures``-th failed write of a given-back message (1, 2, ...): doubling from
    ``RETRY_FIRST``, never more than ``RETRY_MAX``."""
    return min(RETRY_FIRST * 2.0 ** (max(failures, 1) - 1), RETRY_MAX)


@dataclass
class _Settling(Generic[T]):
    item: T
    due: float  # when the next write may start (monotonic)
    failures: int = 0
    writing: int | None = None  # the token of the write under way, whose delivery report is awaited


class Settling(Generic[T]):
    """Messages the application gave back (cancel, expire, a lease that ran out, expiry on delivery) whose
    re-published copy or dead letter is not acknowledged yet.

    Such a message is neither held by the application nor settled: it stays in the backlog and its offset
    stays uncommitted until one write of it is acknowledged. A failed write is retried after ``retry_delay``;
    a new write never starts while one is under way (its outcome unknown), so a write that times out locally
    yet reaches the broker is not doubled by a retry. Each write has a token; a delivery report settles the
    message only if its token is the current one, so a message is settled once, and reports of writes that
    were abandoned (the partition was revoked) are ignored.
    """

    def __init__(self) -> None:
        self._items: dict[Key, _Settling[T]] = {}
        self._tokens = 0

    def add(self, key: Key, item: T, now: float) -> None:
        """Give ``item`` back; its first write is due at once."""
        self._items[key] = _Settling(item, now)

    def due(self, now: float) -> list[tuple[Key, T]]:
        """Messages whose next write may start now (none under way), in the order they were given back."""
        return [(k, e.item) for k, e in self._items.items() if e.writing is None and e.due <= now]

    def start(self, key: Key) -> int | None:
        """A write of ``key`` starts: its token (for ``written`` / ``failed``); None, and no write, when ``key`` is
        not waiting for one (settled, abandoned, or a write is under way)."""
        entry = self._items.get(key)
        if entry is None or entry.writing is not None:
            return None
        self._tokens += 1
        entry.writing = self._tokens
        return self._tokens

    def written(self, key: Key, token: int) -> T | None:
        """The write ``token`` was acknowledged: the message, now settled (None: abandoned or not current)."""
        entry = self._items.get(key)
        if entry is None or entry.writing != token:
            return None
        del self._items[key]
        return entry.item

    def failed(self, key: Key, token: int, now: float) -> float | None:
        """The write ``token`` failed: the next one is due after the returned delay (None: not current)."""
        entry = self._items.get(key)
        if entry is None or entry.writing != token:
            return None
        entry.writing = None
        entry.failures += 1
        delay = retry_delay(entry.failures)
        entry.due = now + delay
        return delay

    def next_due(self) -> float | None:
        """When the next write may start (None: none waits)."""
        times = [e.due for e in self._items.values() if e.writing is None]
        return min(times) if times else None

    def get(self, key: Key) -> T | None:
        entry = self._items.get(key)
        return None if entry is None else entry.item

    def failures(self, key: Key) -> int:
        entry = self._items.get(key)
        return 0 if entry is None else entry.failures

    def drop_partition(self, topic: str, partition: int) -> list[T]:
        """Abandon the given-back messages of a revoked partition (the next owner reads them again from the
        committed offset); reports of their writes under way are then ignored."""
        gone = [k for k in self._items if k[0] == topic and k[1] == partition]
        return [self._items.pop(k).item for k in gone]

    def __contains__(self, key: Key) -> bool:
        return key in self._items

    def __len__(self) -> int:
        return len(self._items)


# --- failed deliveries --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FailureOutcome:
    deliveries: int  # failed deliveries, this one included
    cancels: int
    dead_letter_reason: str | None  # None: re-publish for another attempt


def after_failure(
    deliveries: int,
    cancels: int,
    *,
    explicit_cancel: bool,
    max_cancels: int | None,
    max_deliveries: int | None,
) -> FailureOutcome:
    """A delivery failed (an explicit cancel, or the lease ran out). AMPS: "expire a message from Jobs on the
    3rd time it receives a sow_delete with the cancel operation for that message [MaxCancels 3], or after the
    10th unsuccessful delivery of the message [MaxDeliveries 10]". 0 or None means no maximum."""
    deliveries += 1
    if explicit_cancel:
        cancels += 1
    reason: str | None = None
    if explicit_cancel and max_cancels and cancels >= max_cancels:
        reason = wire.MAX_CANCELS
    elif max_deliveries and deliveries >= max_deliveries:
        reason = wire.MAX_DELIVERIES
    return FailureOutcome(deliveries, cancels, reason)


# --- redelivery to another member ---------------------------------------------------------------------------------


def redelivery_partition(partition: int, partitions: int, mine: Collection[int], turn: int) -> int:
    """The partition of a topic with ``partitions`` partitions that the copy of a failed delivery from
    ``partition`` is written to, so that another member of the consumer group gets it (AMPS: the message "is
    available to another subscriber").

    Within a Kafka consumer group every partition of a subscribed topic is assigned to exactly one member, so a
    partition this member does not own (``mine``) belongs to another member (or, during a rebalance, is about to).
    The copy goes to one of those, in turns (``turn``) so that repeated failures spread over the other members.
    When this member owns every partition (it is the only member, or the topic has one partition) there is no
    other member to give it to, and the copy goes back to ``partition``, as before.
    """
    others = [p for p in range(partitions) if p not in mine]
    if not others:
        return partition
    return others[turn % len(others)]
