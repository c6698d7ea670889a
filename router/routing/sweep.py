"""The expiry sweep of a pending partition: what leaves from behind its head, and what is remembered of it. Pure:
the worker's ``pending`` carries it out.

The router's committed position on a pending partition stays at its first record that still waits (its **head**:
it matches nothing under the version in force, or it waits for a consumer or for room), so nothing still waiting
is ever skipped; records behind it that could go were routed past it (routing/passes.py). Expired records that
still wait must leave all the same (dead letter, or nothing with ``on_expire: drop``) within the sweep interval,
so once per interval a **pass** reads from the head and takes the records that have expired, leaving every other
one where it is (nothing is copied, nothing reordered) and passing over those routed past the head. A routing
pass, which reads the whole partition, is a sweep too.

What a pass took lies beyond the committed position, so the position cannot say it. A ``SweepMark``, committed
with the position as offset-commit metadata, says it as a rule: *below offset S, every record that had expired at
time T has left*. Expiry only grows with time, so one mark covers every pass so far, whatever their number; it
works across workers (a new owner reads it from the commit) and across config versions (it does not depend on the
version's expiration, see below). A record is taken when the pass's mark covers it and the previous mark did not.

The app's expiration can change between passes. Records on the app's expiration are remembered by a cutoff
timestamp instead (``cutoff = T - expiration``: what is older has left), below their own bound. A pass moves that
cutoff only forward; after the expiration is raised, the mark keeps the old cutoff and its old bound until the new
cutoff overtakes it (at most the raise later): records beyond the old bound that have expired under the new
expiration wait until then, since one cutoff could not say which of them left.

Reading the whole partition every interval would cost as much as the partition is long. A pass reads only what
may hold something newly expired: what came since the last pass, and the **stretches** (``SPAN`` offsets each)
where the earliest deadline noted by the last pass has come (the worker keeps those deadlines in memory; a new
worker reads the whole partition once).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from subroute import wire

UNBOUNDED = 2**63 - 1  # a pass's own bound until it ends: everything it reads
SPAN = 1000  # offsets per stretch whose earliest deadline a worker remembers

Range = tuple[int, int | None]  # offsets [start, end) to read; None: to the end of the partition


@dataclass(frozen=True)
class SweepMark:
    """What has left from behind a pending partition's committed position: below ``own_until``, every record with
    its own ``subroute.expiration`` that had expired at ``at_ms``; below ``app_until``, every record on the app's
    expiration whose timestamp is before ``cutoff_ms`` (none when it is None)."""

    own_until: int
    at_ms: int
    app_until: int
    cutoff_ms: int | None

    def has_left(self, offset: int, timestamp_ms: int, own_limit_ms: int | None) -> bool:
        """Whether the record at ``offset`` (``own_limit_ms``: its own expiration, if any) is gone."""
        if timestamp_ms <= 0:  # no timestamp: it never expires (expiration.is_expired)
            return False
        if own_limit_ms is not None:
            return offset < self.own_until and self.at_ms - timestamp_ms > own_limit_ms
        return self.cutoff_ms is not None and offset < self.app_until and timestamp_ms < self.cutoff_ms

    def reaches_beyond(self, offset: int) -> bool:
        """Whether it says anything of records at ``offset`` or later (once the position passes it, it is done)."""
        return offset < self.own_until or (self.cutoff_ms is not None and offset < self.app_until)

    def text(self) -> str:
        cutoff = "-" if self.cutoff_ms is None else str(self.cutoff_ms)
        return f"{self.own_until},{self.at_ms},{self.app_until},{cutoff}"

    @classmethod
    def parse(cls, text: str) -> SweepMark | None:
        """The mark ``text`` wrote; None for anything else (a commit's metadata is not ours to trust)."""
        parts = text.split(",")
        if len(parts) != 4 or any(len(part) > 20 for part in parts):
            return None
        try:
            own_until, at_ms, app_until = int(parts[0]), int(parts[1]), int(parts[2])
            cutoff = None if parts[3] == "-" else int(parts[3])
        except ValueError:
            return None
        if own_until < 0 or app_until < 0:
            return None
        return cls(own_until, at_ms, app_until, cutoff)


def mark_of(metadata: str | None) -> SweepMark | None:
    """The sweep mark in a commit's metadata (``wire.version_metadata``); None when there is none."""
    text = wire.sweep_of(metadata)
    return None if text is None else SweepMark.parse(text)


def pass_mark(previous: SweepMark | None, now_ms: int, app_limit_ms: int | None) -> SweepMark:
    """The mark of a pass that starts at ``now_ms`` under an app expiration of ``app_limit_ms``, while it reads
    (unbounded): it covers everything ``previous`` covered, and what has expired since. Its clock never goes back
    (another worker's may have been ahead); the app cutoff moves only forward (see the module's note)."""
    at = now_ms if previous is None else max(now_ms, previous.at_ms)
    cutoff = None if app_limit_ms is None else at - app_limit_ms
    if (
        previous is not None
        and previous.cutoff_ms is not None
        and (cutoff is None or cutoff < previous.cutoff_ms)
    ):
        return SweepMark(UNBOUNDED, at, previous.app_until, previous.cutoff_ms)
    return SweepMark(UNBOUNDED, at, UNBOUNDED, cutoff)


def finish(current: SweepMark, reached: int) -> SweepMark:
    """The mark of a pass that read everything below ``reached`` (at least as far as the marks before it)."""
    app_until = reached if current.app_until == UNBOUNDED else current.app_until
    return replace(current, own_until=reached, app_until=app_until)


def deadline(timestamp_ms: int, own_limit_ms: int | None, app_limit_ms: int | None) -> int | None:
    """The first clock at which a pass takes the record (None: never), the app's expiration being ``app_limit_ms``.
    Never later than the truth (after a raised expiration a pass may take the record later still), which is what
    deciding not to read it again needs."""
    limit = own_limit_ms if own_limit_ms is not None else app_limit_ms
    if limit is None or timestamp_ms <= 0:
        return None
    return timestamp_ms + limit + 1


@dataclass
class Stretches:
    """What the passes over one parked partition learned, in the worker's memory: the offsets below
    ``scanned_to`` were read, and per stretch (``offset // SPAN``) the earliest deadline of a record there that
    is still waiting, under the app expiration ``limit_ms``. A stretch without an entry has nothing that expires."""

    limit_ms: int | None
    scanned_to: int
    earliest: dict[int, int] = field(default_factory=dict)

    def note(self, offset: int, due_at: int) -> None:
        """A record read by the pass that still waits, and the first clock at which it will not."""
        stretch = offset // SPAN
        known = self.earliest.get(stretch)
        if known is None or due_at < known:
            self.earliest[stretch] = due_at

    def reach(self, offset: int) -> None:
        """The pass has read everything below ``offset``."""
        self.scanned_to = max(self.scanned_to, offset)


def plan(
    known: Stretches | None, head: int, clock_ms: int, limit_ms: int | None
) -> tuple[list[Range], Stretches]:
    """The offsets a pass at ``clock_ms`` reads behind ``head``, in order, and the memory it fills as it reads.

    Everything behind the head when nothing is known (or the app's expiration changed: every deadline moved);
    otherwise the stretches whose earliest deadline has come (from behind the head for the head's own), and what
    came after the last pass. A stretch not read keeps its entry: nothing in it has expired since."""
    first = head + 1
    if known is None or known.limit_ms != limit_ms:
        return [(first, None)], Stretches(limit_ms, first)
    lowest = first // SPAN
    earliest = {k: at for k, at in known.earliest.items() if k >= lowest}
    ranges: list[Range] = []
    for stretch in sorted(k for k, at in earliest.items() if at <= clock_ms):
        del earliest[stretch]  # read again: noted afresh
        start, end = max(stretch * SPAN, first), min((stretch + 1) * SPAN, known.scanned_to)
        if start < end:
            ranges.append((start, end))
    ranges.append((max(known.scanned_to, first), None))
    merged: list[Range] = []
    for start, stop in ranges:
        if merged:
            last_start, last_stop = merged[-1]
            if last_stop is not None and start <= last_stop:
                merged[-1] = (last_start, None if stop is None else max(stop, last_stop))
                continue
        merged.append((start, stop))
    return merged, Stretches(limit_ms, known.scanned_to, earliest)


class Cursor:
    """Walks a pass's ranges as the consumer gives the partition's records, in offset order, from behind the head:
    which records to look at, and where to seek when the consumer reaches a gap between ranges."""

    def __init__(self, ranges: list[Range], head: int) -> None:
        self.ranges = ranges
        self.index = 0
        self.next = head + 1  # the first offset not looked at yet (or sought to)

    def seek_first(self) -> int | None:
        """Where to seek before reading, when the first range does not start right behind the head."""
        start = self.ranges[0][0]
        if start > self.next:
            self.next = start
            return start
        return None

    def step(self, offset: int) -> tuple[bool, int | None]:
        """Whether to look at the record at ``offset``, and the offset to seek to first (it is in a gap)."""
        if offset < self.next:  # given before a seek took effect
            return False, None
        ranges = self.ranges
        while True:
            end = ranges[self.index][1]
            if end is None or offset < end:
                break
            self.index += 1
        start = ranges[self.index][0]
        if offset < start:
            self.next = start
            return False, start
        self.next = offset + 1
        return True, None

    def reached(self, position: int) -> int:
        """How far the pass has read, the consumer's ``position`` (negative: unknown) included: it also passes
        offsets that hold no record (transaction markers)."""
        return max(self.next, position)

    def done(self, position: int, high: int) -> bool:
        """Whether the pass has read to the partition's end ``high`` (negative: not known yet)."""
        return high >= 0 and self.reached(position) >= high
