"""Passes over a pending partition: records waiting for different groups do not hold each other up. Pure: the
worker's ``pending`` carries it out.

A pending partition holds, in arrival order, the records of one app that wait: for a consumer (no candidate group
attached), for room (every candidate at its limit), or for a subscription that matches them (a config change).
BlazingMQ keeps each consumer's backlog apart, so a record that waits for one group must not hold up a record
behind it that another group can take. The router's committed position stays at the partition's first record that
still waits (its **head**), so no waiting record is ever skipped, and the worker reads on past it:

* A **pass** reads the partition from the committed position and decides every record in offset order with one
  view of the consumers (``PassView``): a record that can go now is routed, even behind the head; one that still
  waits stays where it is (nothing is copied). The ``Ledger`` keeps the account: the position (the first record
  that stays), and the offsets routed past it (``RoutedPast``), which the commit carries.
* Order among the records waiting for one group holds because a pass decides them in offset order and its view
  never improves while it runs: presence as when the pass started, each unconfirmed count never below what it was
  then. A group a record waited for stays unavailable to every record after it in the pass, so none of them
  overtakes it. Message groups are held to the same: once a record of a message group stays, every later record
  of that group stays too (its holder may change meanwhile, and the group's order must not).
* Records arriving after a pass are decided as they come, with the same view (the pass's tail).
* A new pass starts when something that could let a waiting record go has changed (``wakes``): a new config
  version (every waiting record), a group of the app attached or left (records waiting for a consumer or for
  room), a group's count fell or a message group it held was released (records waiting for room). Otherwise the
  waiting records are not read again, except by the expiry sweep (routing/sweep.py), which reads only where a
  record may have expired.
* Bound: the routed-past offsets must fit the commit's metadata (routing/routed_past.py). Once one more would not,
  the pass routes nothing more past the head (``Ledger.full``): the partition stops at its head as a queue, until
  a pass finds the head gone and the set shorter.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from subroute.routing.routed_past import BUDGET_BYTES, RoutedPast
from subroute.routing.snapshot import GroupId, Snapshot
from subroute.wire import CAPACITY, NO_CONSUMER

NO_MATCH = "no-match"  # a record that matches no subscription (under the version it was last decided by)
FULL = "full"  # a record that stayed because the routed-past set was at its bound
KEYED = "keyed"  # a record that stayed behind a record of its message group
EXPIRED = "expired"  # a record that expired since the pass began: the next sweep takes it

# Which changes may let which waiting records go (``wakes``): a new config version wakes every one.
# Records that stay for FULL or KEYED go only once the record before them goes, whose own reason wakes the pass.
WOKEN_BY_PRESENCE = frozenset({NO_CONSUMER, CAPACITY})
WOKEN_BY_ROOM = frozenset({CAPACITY})
_GROUP_WAITS = frozenset({NO_CONSUMER, CAPACITY})


# Why each record stayed, as a byte per offset (``Reasons``): 0 is "not known".
_CODES = (None, NO_MATCH, NO_CONSUMER, CAPACITY, KEYED, FULL, EXPIRED)
_CODE_OF = {reason: code for code, reason in enumerate(_CODES) if reason is not None}
# Records that stayed for one of these need not be decided again by a pass that a change concerning other reasons
# woke (``Reasons.unchanged``); the others stay behind something a pass decides again, so they are decided too.
_SETTLED_WAITS = frozenset({NO_MATCH, NO_CONSUMER, CAPACITY})


class Reasons:
    """Why each record of a pending partition stayed when it was last decided, one byte per offset from ``base``
    (the worker's memory: a worker that takes the partition over decides every record once). At most ``limit``
    offsets are remembered; beyond, nothing is (every record is decided again)."""

    __slots__ = ("_codes", "base", "limit")

    def __init__(self, base: int = 0, limit: int = 20_000_000) -> None:
        self.base, self.limit = base, limit
        self._codes = bytearray()

    def note(self, offset: int, reason: str) -> None:
        index = offset - self.base
        if index < 0 or index >= self.limit:
            return
        codes = self._codes
        if index >= len(codes):
            codes.extend(bytes(index + 1 - len(codes)))
        codes[index] = _CODE_OF.get(reason, 0)

    def get(self, offset: int) -> str | None:
        index = offset - self.base
        codes = self._codes
        return _CODES[codes[index]] if 0 <= index < len(codes) else None

    def unchanged(self, offset: int, woken: frozenset[str] | None) -> str | None:
        """The reason the record at ``offset`` stayed, when a pass that ``woken`` started (None: every reason)
        need not decide it again: it waits for something no change since concerned. None otherwise."""
        if woken is None:
            return None
        reason = self.get(offset)
        return reason if reason in _SETTLED_WAITS and reason not in woken else None

    def rebase(self, base: int) -> None:
        """Forget the offsets below ``base`` (the position moved past them)."""
        if base > self.base:
            del self._codes[: base - self.base]
            self.base = base


@dataclass
class Ledger:
    """What one pass over a pending partition has done, record by record in offset order, and the records that
    arrived after it (its tail)."""

    position: int  # what the router commits: the first record that stays, else the next offset to read
    past: RoutedPast  # the offsets routed past ``position``
    head: int | None = None  # the first record that stays, once one has
    keys: set[bytes] = field(default_factory=set)  # message groups with a record that stays
    reasons: set[str] = field(
        default_factory=set
    )  # why records stay: a waiting reason, NO_MATCH, FULL, KEYED
    full: bool = False  # the routed-past set reached its bound: nothing more goes past the head
    budget: int = BUDGET_BYTES
    memory: Reasons = field(default_factory=Reasons)  # why each record stayed, across passes

    @classmethod
    def start(
        cls, position: int, past: RoutedPast, budget: int = BUDGET_BYTES, memory: Reasons | None = None
    ) -> Ledger:
        """A pass from the committed ``position``, with what earlier passes routed past it (and remembered of
        the records that stayed)."""
        past.rebase(position)
        memory = memory or Reasons(position)
        memory.rebase(position)
        return cls(position, past, budget=budget, memory=memory)

    def reach(self, offset: int) -> None:
        """The next record read is at ``offset`` (or the partition ends there): with nothing staying yet, the
        position moves to it (the offsets between hold no record: transaction markers, or records retention
        deleted)."""
        if self.head is None and offset > self.position:
            self.position = offset
            self.past.rebase(offset)

    def gone(self, offset: int) -> bool:
        """Whether the record at ``offset`` went already: routed past the head by an earlier pass, or below the
        position. Passed over; with nothing staying before it, the position moves past it."""
        if offset < self.position:
            return True
        if offset not in self.past:
            return False
        self.passed(offset)
        return True

    def passed(self, offset: int) -> None:
        """The record at ``offset`` needs nothing (it went already: routed past, or taken by a sweep)."""
        if self.head is None:
            self.position = offset + 1
            self.past.rebase(offset + 1)

    def admits(self, offset: int, key: bytes | None) -> bool:
        """Whether a record that is due may be decided now: False when it must stay whatever routing would say,
        because a record of its message group stays before it, or because it could not be recorded if it went
        past the head (the set is at its bound; from then on nothing more goes past in this pass)."""
        if key is not None and key in self.keys:
            self.stayed(offset, KEYED, key)
            return False
        if self.head is None:
            return True
        if not self.full and self.past.fits_with(offset, self.budget):
            return True
        self.full = True
        self.stayed(offset, FULL, key)
        return False

    def went(self, offset: int) -> None:
        """The record at ``offset`` was routed (or dead-lettered)."""
        if self.head is None:
            self.passed(offset)
        else:
            self.past.add(offset)

    def stayed(self, offset: int, reason: str, key: bytes | None = None) -> None:
        """The record at ``offset`` stays (``reason``: why); later records of its message group ``key`` stay too."""
        if self.head is None:
            self.head = self.position = offset
            self.past.rebase(offset)
        self.reasons.add(reason)
        self.memory.note(offset, reason)
        if key is not None:
            self.keys.add(key)

    def woken_by(self, reasons: frozenset[str]) -> bool:
        """Whether a change that may let records staying for ``reasons`` go concerns this partition."""
        return not self.reasons.isdisjoint(reasons)

    @property
    def waiting(self) -> bool:
        """Whether some record stays."""
        return self.head is not None

    @property
    def holds_groups(self) -> bool:
        """Whether some record stays for a group (a consumer, room): from then on the pass's view holds, so that
        no later record takes that group before it (records that match nothing wait for no group)."""
        return not self.reasons.isdisjoint(_GROUP_WAITS)


class PassView(Snapshot):
    """The consumers as a pass sees them: the groups present when it started, and each group's unconfirmed count
    never below what it was then, nor below what the worker counts now (``live``: its newest snapshot). Nothing a
    record waited for becomes available to a later record of the pass; what the pass routes is counted where the
    worker counts (``note_routed``: on the live snapshot), so the pass and the input path share each limit."""

    def __init__(self, start: Snapshot, live: Callable[[], Snapshot]) -> None:
        super().__init__(start.measured, start.absent, start.started_at, start.holders)
        self.start, self.live = start, live

    # Read by decisions (``if lag.measured``: whether to count what is routed): the live snapshot's, so a pass
    # that began before the first measurement counts what it routes once one exists.
    @property  # type: ignore[override]
    def measured(self) -> object:
        return self.live().measured

    @measured.setter
    def measured(self, _: object) -> None:  # Snapshot.__init__ sets it; the live snapshot's is read instead
        pass

    def __getitem__(self, key: GroupId) -> int:
        found = self.get(key)
        if found is None:
            raise KeyError(key)
        return found

    def get(self, key: GroupId, default: int | None = None) -> int | None:  # type: ignore[override]
        then, now = self.start.get(key), self.live().get(key)
        if then is None and now is None:
            return default
        return max(then or 0, now or 0)

    def __contains__(self, key: object) -> bool:
        return key in self.start or key in self.live()

    def __iter__(self) -> Iterator[GroupId]:
        live = self.live()
        yield from self.start
        yield from (k for k in live if k not in self.start)

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def note_routed(self, key: GroupId, count: int = 1) -> None:
        self.live().note_routed(key, count)


def wakes(
    older: Snapshot, newer: Snapshot, released: frozenset[str] = frozenset()
) -> dict[str, frozenset[str]]:
    """Per app, the reasons for which records of its pending partitions may go under ``newer`` and could not
    under ``older``: a group attached or left (``WOKEN_BY_PRESENCE``), a group's count fell below what ``older``
    counted, or a message group of the app was released (``released``: ``WOKEN_BY_ROOM``). A group that left can
    let a record go too: a message group it held is placed afresh, and a lower priority may decide."""
    found: dict[str, frozenset[str]] = {}
    for app, _ in older.absent ^ newer.absent:
        found[app] = WOKEN_BY_PRESENCE
    for app in released:
        found.setdefault(app, WOKEN_BY_ROOM)
    if newer.started_at != older.started_at:  # a new lag measurement (not a presence refresh alone)
        for key in older.measured:
            if key[0] not in found and newer.measured.get(key, 0) < (older.get(key, 0) or 0):
                found[key[0]] = WOKEN_BY_ROOM
    return found
