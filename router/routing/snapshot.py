"""What the router knows of the consumers when it decides: each group's unconfirmed count and whether its
consumers are attached. Pure: the worker builds it from ``capacity``'s measurements and hands it to
``decisions.decide_app``; nothing here reads a clock or touches Kafka.

The snapshot is a ``Mapping[(app, group), int]`` of unconfirmed counts, the type ``Router.route`` always took as
``lag``, so callers that pass a plain mapping (explain, the Spark plan, tests) keep working and mean "every group
present". Presence is the extra ``absent`` set; which consumer group holds each message group with messages
outstanding is the extra ``holders`` (routing/holders.py), carried from one snapshot to the next.

A measurement is a few seconds old, and a worker routes thousands of records in that time. Holding capacity
(BlazingMQ maxUnconfirmed) on the measured figure alone would let a whole refresh interval's worth of records
through past it, so the snapshot adds what this worker routed to each measured group since the measurement
began (``note_routed``). Records routed just before the measurement began may already be in the measured end
offsets; they are counted again for ``OVERLAP_SECONDS`` (the produce latency they may still have been in), which
holds a little early rather than routing past capacity.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from types import MappingProxyType

from subroute.routing.holders import Holders

GroupId = tuple[str, str]  # (app, group)

# How far before a measurement's start the records routed are still added to it (see the module's doc).
OVERLAP_SECONDS = 1.0

_NO_LAG: Mapping[GroupId, int] = MappingProxyType({})


class Snapshot(Mapping[GroupId, int]):
    """Unconfirmed counts (measured + routed since) and the groups whose consumers are not attached."""

    __slots__ = ("_log", "_routed", "absent", "absent_apps", "clock", "holders", "measured", "started_at")

    def __init__(
        self,
        measured: Mapping[GroupId, int] = _NO_LAG,
        absent: frozenset[GroupId] = frozenset(),
        started_at: float = 0.0,
        holders: Holders | None = None,
    ) -> None:
        self.measured = measured
        self.absent = absent  # groups of presence-required apps whose Kafka consumer group has no live member
        self.absent_apps = frozenset(app for app, _ in absent)  # one lookup per message tells most apps apart
        self.started_at = started_at  # when the lag measurement began (the worker's monotonic clock)
        # message groups with messages outstanding, by the consumer group holding them (decisions add to it)
        self.holders = Holders() if holders is None else holders
        self.clock = started_at  # the time ``note_routed`` stamps; the worker sets it once per batch
        self._routed: dict[GroupId, int] = {}  # per group, the records routed since started_at - overlap
        # per group, [time, count] of what was routed, oldest first: what a newer measurement may not yet hold
        self._log: dict[GroupId, list[list[float]]] = {}

    def __getitem__(self, key: GroupId) -> int:
        routed = self._routed.get(key, 0)
        measured = self.measured.get(key)
        if measured is None:
            if not routed:
                raise KeyError(key)
            return routed
        return measured + routed

    def get(self, key: GroupId, default: int | None = None) -> int | None:  # type: ignore[override]
        # the decision path's lookup (``get(key, 0)``): no exception for the usual miss
        return self.measured.get(key, 0) + self._routed.get(key, 0) if key in self else default

    def __contains__(self, key: object) -> bool:
        return key in self.measured or key in self._routed

    def __iter__(self) -> Iterator[GroupId]:
        yield from self.measured
        yield from (k for k in self._routed if k not in self.measured)

    def __len__(self) -> int:
        return len(self.measured) + sum(1 for k in self._routed if k not in self.measured)

    def note_routed(self, key: GroupId, count: int = 1) -> None:
        """``count`` records routed to ``key``'s group: its unconfirmed count is that much more until a
        measurement says (``count`` at once is ``count`` calls of one: a batch decided natively)."""
        if key not in self.measured:
            return  # a group whose count decides nothing (no max_unconfirmed) is not tracked
        self._routed[key] = self._routed.get(key, 0) + count
        entries = self._log.setdefault(key, [])
        if entries and entries[-1][0] == self.clock:
            entries[-1][1] += count
        else:
            entries.append([self.clock, count])

    def renewed(
        self, measured: Mapping[GroupId, int], absent: frozenset[GroupId], started_at: float
    ) -> Snapshot:
        """The snapshot of a newer measurement, carrying what was routed since it began (and the overlap)."""
        fresh = Snapshot(measured, absent, started_at, self.holders)
        fresh.clock = self.clock
        cutoff = started_at - OVERLAP_SECONDS
        for key, entries in self._log.items():
            if key not in measured:
                continue
            kept = [e for e in entries if e[0] >= cutoff]
            if kept:
                fresh._log[key] = kept
                fresh._routed[key] = int(sum(e[1] for e in kept))
        return fresh
