"""What waits on an app's pending topic, in messages and by reason (``subroute status``). Pure.

The router's committed position on a pending partition says how far routing has gone: everything below it has
been routed (or has left); past it, the offsets routed past the first waiting record are in the commit's
metadata. The records from there to the partition's end are read,
committed ones only (``read_committed``: transaction markers and aborted records are not messages), and each is
counted once, in one reason, unless it has already gone (``already_routed``):

* ``expiring``: it has expired, or will within ``soon_ms`` (``subroute status --expiring-within``, 5 minutes by
  default), by its own ``subroute.expiration`` or else the app's ``expiration``: unless it is routed before then,
  it leaves undelivered (dead letter, or dropped with ``on_expire: drop``) at the first sweep after that (the
  worker's ``--pending-sweep-seconds``). This reason wins over every other: whatever the record waits for, this
  is when its consumers lose it.
* ``no-consumer`` / ``capacity``: a subscription matched it, but no group it may go to had a live consumer, or
  every one was at ``max_unconfirmed`` (its ``subroute.pending-reason``).
* ``reroute``: it matched nothing under an older config version than the one in force, and the router has not
  committed on its partition under the version in force yet, or it was drained from a deleted group: the worker
  evaluates it again, under the version in force, when it passes over the partition.
* ``no-match``: it matched no subscription under the version in force.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Protocol

from subroute import wire
from subroute.config.model import AppConfig
from subroute.routing.expiration import expiration_of, message_expiration
from subroute.routing.parking import parked_version, waiting_reason
from subroute.routing.routed_past import RoutedPast, past_of
from subroute.routing.sweep import SweepMark, mark_of
from subroute.wire import CAPACITY, NO_CONSUMER

NO_MATCH = "no-match"
REROUTE = "reroute"
EXPIRING = "expiring"
REASONS = (NO_CONSUMER, CAPACITY, NO_MATCH, REROUTE, EXPIRING)  # the order status shows them in

DEFAULT_SOON_MS = 5 * 60_000  # what "expiring" looks ahead by default


class Parked(Protocol):
    """A record read from a pending topic (``kafka.scan.Stored``)."""

    @property
    def partition(self) -> int: ...
    @property
    def offset(self) -> int: ...
    @property
    def timestamp_ms(self) -> int: ...
    @property
    def headers(self) -> wire.HeadersIn: ...


class Commit(Protocol):
    """The router's commit on a pending partition (``kafka.groups.Commit``): its offset and metadata."""

    @property
    def offset(self) -> int: ...
    @property
    def metadata(self) -> str | None: ...


# One metadata string per partition: parsed once, not once per record.
@lru_cache(maxsize=1024)
def _mark(metadata: str) -> SweepMark | None:
    return mark_of(metadata)


@lru_cache(maxsize=1024)
def _past(metadata: str, position: int) -> RoutedPast | None:
    return past_of(metadata, position)


def already_routed(offset: int, record: Parked, commit: Commit | None) -> bool:
    """Whether the pending record at ``offset`` has gone, by what the router committed on its partition
    (``commit``, None when nothing): below the position it was routed, or has left; past it, a pass may have
    routed it past the first record that still waits (the routed-past offsets in the commit's metadata,
    routing/routed_past.py), or an expiry sweep may have taken it (the sweep mark, routing/sweep.py)."""
    if commit is None:
        return False
    if offset < commit.offset:
        return True
    past = _past(commit.metadata, commit.offset) if commit.metadata else None
    if past is not None and offset in past:
        return True
    mark = _mark(commit.metadata) if commit.metadata else None
    if mark is None or not mark.reaches_beyond(offset):
        return False
    own = message_expiration(record.headers) if record.timestamp_ms > 0 else None
    return mark.has_left(offset, record.timestamp_ms, own)


def reason_of(
    record: Parked, app: AppConfig, version: int, now_ms: int, soon_ms: int, commit: Commit | None = None
) -> str:
    """The one reason ``record`` (on ``app``'s pending topic) is counted in, config ``version`` being in force;
    ``commit``: the router's on the record's partition. A record that matched nothing under an older version is
    ``no-match`` once the router has committed on its partition under the version in force (a pass has decided
    it again: records that still match nothing stay where they are, unchanged), else ``reroute``."""
    limit = expiration_of(app, record.headers)
    if limit is not None and record.timestamp_ms > 0 and now_ms + soon_ms - record.timestamp_ms > limit:
        return EXPIRING
    waits = waiting_reason(record.headers)
    if waits is not None:
        return waits
    parked = parked_version(record.headers)
    if parked is not None and parked >= version:
        return NO_MATCH
    routed_under = wire.version_of(commit.metadata) if commit is not None else None
    return NO_MATCH if routed_under is not None and routed_under >= version else REROUTE


@dataclass
class Waiting:
    """Messages waiting, by reason; ``exact`` is False when the read stopped before the end (a floor)."""

    by_reason: dict[str, int] = field(default_factory=lambda: dict.fromkeys(REASONS, 0))
    exact: bool = True

    def add(self, reason: str) -> None:
        self.by_reason[reason] += 1

    @property
    def total(self) -> int:
        return sum(self.by_reason.values())


def count(
    records: Iterable[Parked],
    commits: Mapping[int, Commit],
    app: AppConfig,
    version: int,
    now_ms: int,
    soon_ms: int = DEFAULT_SOON_MS,
    into: Waiting | None = None,
) -> Waiting:
    """The records of ``app``'s pending topic that still wait (``commits``: the router's, by partition), by
    reason, added to ``into`` (a new count when None): a topic read in batches is counted batch by batch."""
    waiting = Waiting() if into is None else into
    for record in records:
        commit = commits.get(record.partition)
        if not already_routed(record.offset, record, commit):
            waiting.add(reason_of(record, app, version, now_ms, soon_ms, commit))
    return waiting
