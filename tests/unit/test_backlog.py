"""What waits on a pending topic, in messages and by reason (router/routing/backlog.py): pure, no broker."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given
from hypothesis import strategies as st

from subroute import wire
from subroute.config.model import AppConfig
from subroute.kafka.groups import Commit
from subroute.routing.backlog import (
    EXPIRING,
    NO_MATCH,
    REASONS,
    REROUTE,
    already_routed,
    count,
    reason_of,
)
from subroute.routing.sweep import SweepMark, finish, pass_mark
from subroute.wire import CAPACITY, NO_CONSUMER, pending_metadata, version_metadata

NOW = 1_800_000_000_000
MINUTE = 60_000
SOON = 5 * MINUTE
APP = AppConfig("billing", ("orders",), expiration_ms=60 * MINUTE)


@dataclass(frozen=True)
class Record:
    partition: int
    offset: int
    timestamp_ms: int
    headers: list[tuple[str, bytes | None]]


def parked(
    version: int = 7,
    reason: str | None = None,
    *,
    partition: int = 0,
    offset: int = 0,
    age_ms: int = MINUTE,
    own: str | None = None,
) -> Record:
    headers: list[tuple[str, bytes | None]] = [(wire.CONFIG_VERSION, str(version).encode())]
    if reason is not None:
        headers.append((wire.PENDING_REASON, reason.encode()))
    if own is not None:
        headers.append((wire.EXPIRATION, own.encode()))
    return Record(partition, offset, NOW - age_ms, headers)


def test_each_record_is_counted_in_one_reason() -> None:
    def of(record: Record, app: AppConfig = APP) -> str:
        return reason_of(record, app, 7, NOW, SOON)

    assert of(parked(reason="no-consumer")) == NO_CONSUMER
    assert of(parked(reason="capacity")) == CAPACITY
    assert of(parked()) == NO_MATCH  # no reason: matched nothing under the version in force
    assert of(parked(version=6)) == REROUTE  # matched nothing under an older one: evaluated again
    assert of(parked(version=6, reason="replaced")) == REROUTE  # drained from a deleted group
    assert of(Record(0, 0, NOW, [])) == REROUTE  # no version that parses: evaluated again (parking.is_due)
    assert of(parked(version=6, reason="capacity")) == CAPACITY  # still says what it waited for
    assert of(parked(reason="bogus")) == NO_MATCH  # an unknown reason is none (parking.waiting_reason)
    # expiring wins over every other reason: unless routed first, it leaves undelivered
    almost = 56 * MINUTE  # the app's 60 minutes run out in 4
    for reason in (None, "capacity", "no-consumer"):
        assert of(parked(reason=reason, age_ms=almost)) == EXPIRING
        assert of(parked(version=6, reason=reason, age_ms=almost)) == EXPIRING
    assert of(parked(age_ms=54 * MINUTE)) == NO_MATCH  # 6 minutes left: not soon
    assert of(parked(age_ms=90 * MINUTE)) == EXPIRING  # expired, not swept yet
    assert of(parked(age_ms=90 * MINUTE, own="2h")) == NO_MATCH  # its own expiration wins over the app's
    assert of(parked(age_ms=2 * MINUTE, own="5m")) == EXPIRING
    assert of(parked(age_ms=10_000 * MINUTE), AppConfig("b", ("orders",))) == NO_MATCH  # never expires
    assert of(Record(0, 0, 0, [(wire.CONFIG_VERSION, b"7")])) == NO_MATCH  # no timestamp: never expires


def test_below_the_routers_position_everything_has_gone() -> None:
    commit = Commit(10, version_metadata(7))
    assert already_routed(9, parked(), commit)
    assert not already_routed(10, parked(), commit)
    assert not already_routed(0, parked(), None)  # nothing committed: everything from the log start waits


def test_what_a_sweep_took_from_behind_the_head_has_gone() -> None:
    mark = finish(pass_mark(None, NOW, app_limit_ms=60 * MINUTE), reached=50)
    commit = Commit(10, version_metadata(7, pending_metadata(mark.text())))
    assert already_routed(20, parked(age_ms=61 * MINUTE), commit)  # expired when the pass ran: taken
    assert not already_routed(20, parked(age_ms=59 * MINUTE), commit)
    assert not already_routed(50, parked(age_ms=61 * MINUTE), commit)  # beyond what the pass read
    assert already_routed(20, parked(age_ms=2 * MINUTE, own="1m"), commit)  # its own expiration
    # metadata that is not ours says nothing
    assert not already_routed(20, parked(age_ms=61 * MINUTE), Commit(10, "someone else's"))


def test_count_skips_what_has_gone_and_splits_the_rest_by_reason() -> None:
    mark = SweepMark(own_until=100, at_ms=NOW, app_until=100, cutoff_ms=NOW - 60 * MINUTE)
    commits = {
        0: Commit(3, version_metadata(7, pending_metadata(mark.text()))),
        1: Commit(0, version_metadata(7)),
    }
    records = [
        parked(partition=0, offset=2),  # below the position: a record read before it moved (never counted)
        parked(partition=0, offset=3, reason="no-consumer"),  # the head
        parked(partition=0, offset=5, age_ms=61 * MINUTE),  # taken by the sweep
        parked(partition=0, offset=6),
        parked(partition=1, offset=0, reason="capacity"),
        parked(partition=1, offset=1, age_ms=58 * MINUTE),
        parked(partition=2, offset=0, version=3),  # a partition the router never committed
    ]
    waiting = count(records, commits, APP, 7, NOW, SOON)
    assert waiting.by_reason == {NO_CONSUMER: 1, CAPACITY: 1, NO_MATCH: 1, REROUTE: 1, EXPIRING: 1}
    assert waiting.total == 5 and waiting.exact
    assert list(waiting.by_reason) == list(REASONS)


@given(
    st.lists(
        st.tuples(
            st.sampled_from([None, "capacity", "no-consumer", "replaced"]),
            st.integers(5, 8),
            st.integers(0, 120),
        ),
        max_size=40,
    ),
    st.integers(0, 45),
)
def test_every_record_past_the_position_is_counted_once(
    specs: list[tuple[str | None, int, int]], position: int
) -> None:
    records = [
        parked(version, reason, offset=i, age_ms=minutes * MINUTE)
        for i, (reason, version, minutes) in enumerate(specs)
    ]
    waiting = count(records, {0: Commit(position, None)}, APP, 7, NOW, SOON)
    assert waiting.total == max(0, len(records) - position)
    assert sum(waiting.by_reason.values()) == waiting.total
