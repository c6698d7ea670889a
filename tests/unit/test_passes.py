"""Passes over a pending partition (router/routing/passes.py): records waiting for different groups do not hold
each other up, arrival order holds among the records of one group (and of one message group), nothing goes twice
or is lost across passes and restarts from the commit, and the routed-past set's bound stops the partition at its
head rather than break any of that."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from subroute.routing.passes import (
    FULL,
    KEYED,
    NO_MATCH,
    WOKEN_BY_PRESENCE,
    WOKEN_BY_ROOM,
    Ledger,
    PassView,
    Reasons,
    wakes,
)
from subroute.routing.routed_past import RoutedPast
from subroute.routing.snapshot import Snapshot
from subroute.wire import CAPACITY, NO_CONSUMER


def test_a_record_that_can_go_goes_past_one_that_stays_and_the_position_stays_at_the_first_that_stays() -> (
    None
):
    ledger = Ledger.start(10, RoutedPast(10))
    assert ledger.admits(10, None)
    ledger.went(10)  # nothing stays before it: the position moves on
    assert ledger.position == 11 and not ledger.waiting
    ledger.stayed(11, NO_CONSUMER)
    assert ledger.admits(12, None)
    ledger.went(12)  # routed past the head
    ledger.stayed(13, CAPACITY)
    ledger.went(14)
    assert ledger.position == ledger.head == 11 and ledger.past.ranges() == [(12, 13), (14, 15)]
    assert ledger.reasons == {NO_CONSUMER, CAPACITY}

    # The next pass from the position: the head goes now, the routed-past record behind it is passed over, and
    # the position moves to the next record that stays.
    again = Ledger.start(ledger.position, ledger.past)
    assert not again.gone(11) and again.admits(11, None)
    again.went(11)
    assert again.gone(12) and again.position == 13
    again.stayed(13, CAPACITY)
    assert again.gone(14) and again.position == 13 and again.past.ranges() == [(14, 15)]


def test_once_a_record_of_a_message_group_stays_every_later_record_of_that_group_stays() -> None:
    ledger = Ledger.start(0, RoutedPast(0))
    ledger.stayed(0, CAPACITY, b"order-7")
    assert not ledger.admits(1, b"order-7") and ledger.admits(2, b"order-8") and ledger.admits(3, None)
    assert ledger.reasons == {CAPACITY, KEYED}


def test_when_the_set_is_at_its_bound_nothing_more_goes_past_the_head_until_the_head_moves() -> None:
    ledger = Ledger.start(0, RoutedPast(0), budget=2)
    ledger.stayed(0, NO_CONSUMER)
    for offset in (1, 3):  # two ranges: 2 bytes each in run lengths, 1 byte as a bitmap
        assert ledger.admits(offset, None)
        ledger.went(offset)
        ledger.stayed(offset + 1, NO_CONSUMER)
    assert ledger.admits(17, None) is False and ledger.full  # a bitmap to offset 17 needs 3 bytes
    assert ledger.admits(5, None) is False  # and nothing after it either, in this pass
    assert FULL in ledger.reasons
    again = Ledger.start(0, ledger.past, budget=2)
    again.went(0)  # the head goes: the position moves over what was routed past it
    assert again.gone(1) and again.position == 2 and again.admits(2, None)


def test_a_pass_view_keeps_presence_as_it_began_and_counts_from_what_it_saw() -> None:
    top, low = ("billing", "top"), ("billing", "low")
    start = Snapshot({top: 5, low: 1}, absent=frozenset({low}), started_at=1.0)
    live = [start]
    view = PassView(start, lambda: live[-1])
    live.append(Snapshot({top: 0, low: 9}, absent=frozenset(), started_at=2.0))  # confirms, and low attached
    assert view.absent == frozenset({low})  # not yet for this pass
    assert view.get(top) == 5 and view.get(low) == 9 and view.get(("billing", "x"), -1) == -1
    view.note_routed(top)  # counted where the worker counts
    assert live[-1][top] == 1 and view[top] == 5
    assert view.measured is live[-1].measured and set(view) == {top, low} and len(view) == 2


def test_what_wakes_a_partition() -> None:
    top = ("billing", "top")
    older = Snapshot({top: 4}, absent=frozenset({("billing", "low")}), started_at=1.0)
    assert wakes(older, Snapshot({top: 4}, absent=frozenset(), started_at=1.0)) == {
        "billing": WOKEN_BY_PRESENCE
    }
    assert wakes(older, Snapshot({top: 3}, absent=older.absent, started_at=2.0)) == {"billing": WOKEN_BY_ROOM}
    assert (
        wakes(older, Snapshot({top: 3}, absent=older.absent, started_at=1.0)) == {}
    )  # a presence refresh only
    assert wakes(older, Snapshot({top: 4}, absent=older.absent, started_at=2.0), frozenset({"jobs"})) == {
        "jobs": WOKEN_BY_ROOM
    }
    ledger = Ledger.start(0, RoutedPast(0))
    ledger.stayed(0, NO_CONSUMER)
    assert ledger.woken_by(WOKEN_BY_PRESENCE) and not ledger.woken_by(WOKEN_BY_ROOM)


def test_a_pass_need_not_decide_again_a_record_whose_wait_no_change_since_concerned() -> None:
    memory = Reasons(100, limit=50)
    for offset, reason in ((100, NO_CONSUMER), (101, CAPACITY), (102, NO_MATCH), (103, KEYED), (104, FULL)):
        memory.note(offset, reason)
    memory.note(150, NO_CONSUMER)  # beyond what it remembers
    woke_room = [memory.unchanged(o, WOKEN_BY_ROOM) for o in range(100, 106)]
    assert woke_room == [
        NO_CONSUMER,
        None,
        NO_MATCH,
        None,
        None,
        None,
    ]  # decided again: room, keyed, full, unknown
    assert [memory.unchanged(o, WOKEN_BY_PRESENCE) for o in range(100, 103)] == [None, None, NO_MATCH]
    assert memory.unchanged(100, None) is None  # a new config version: every record is decided again
    assert memory.get(150) is None
    memory.rebase(102)
    assert memory.get(101) is None and memory.get(102) == NO_MATCH
    ledger = Ledger.start(102, RoutedPast(102), memory=memory)
    ledger.stayed(105, CAPACITY)
    assert memory.get(105) == CAPACITY


# A simulated pending partition: each record is for one group (or for none: it matches nothing), some with a
# message-group key. Each pass sees a set of available groups that may only shrink while it runs (PassView);
# between passes anything may change. A pass may be cut short by a crash: what it delivered since the last
# commit is undone (exactly-once: its transaction is aborted) and the next worker starts from the commit (the
# position and the set as written). The set's budget may be small.


@dataclass(frozen=True)
class _Record:
    group: str | None
    key: bytes | None


_groups_of_records = st.sampled_from(["a", "b", "c", None])
# An app either groups messages (every record has a message group: order holds per message group) or not (order
# holds per consumer group).
_records = st.one_of(
    st.lists(st.builds(_Record, _groups_of_records, st.none()), min_size=1, max_size=60),
    st.lists(
        st.builds(_Record, _groups_of_records, st.sampled_from([b"k1", b"k2", b"k3"])),
        min_size=1,
        max_size=60,
    ),
)
_groups = st.frozensets(st.sampled_from(["a", "b", "c"]))
# (available at the start, [(offset, groups lost from there on)], crash at this offset or None)
_passes = st.lists(
    st.tuples(
        _groups, st.lists(st.tuples(st.integers(0, 60), _groups), max_size=3), st.none() | st.integers(0, 60)
    ),
    min_size=1,
    max_size=6,
)


@settings(max_examples=500, deadline=None)
@given(_records, _passes, st.sampled_from([1, 4, 64, 10_000]))
def test_passes_route_each_record_once_in_order_per_group_and_never_hold_one_group_up_for_another(
    records: list[_Record],
    passes: list[tuple[frozenset[str], list[tuple[int, frozenset[str]]], int | None]],
    budget: int,
) -> None:
    delivered: list[int] = []
    commit = (0, "")  # position, the routed-past set as written
    every = frozenset({"a", "b", "c"})
    for available, losses, crash in [*passes, (every, [], None)]:
        past = RoutedPast.parse(commit[1], commit[0]) or RoutedPast(commit[0])
        ledger = Ledger.start(commit[0], past, budget=budget)
        seen = set(available)
        before = len(delivered)
        for offset in range(commit[0], len(records)):
            if offset == crash:
                break
            for at, lost in losses:  # the view only worsens while a pass runs
                if at == offset:
                    seen -= lost
            if ledger.gone(offset):
                continue
            record = records[offset]
            if not ledger.admits(offset, record.key):
                continue
            if record.group is None:
                ledger.stayed(offset, "no-match")  # waits for a config change; holds no message group up
            elif record.group in seen:
                assert offset not in delivered  # never twice
                delivered.append(offset)
                ledger.went(offset)
            else:
                ledger.stayed(offset, NO_CONSUMER, record.key)
                seen.discard(record.group)  # unavailable to it: unavailable to every later record of the pass
        if crash is not None and crash < len(records):
            del delivered[before:]  # nothing of the pass was committed
            continue
        if not ledger.full and not losses:
            # no group held up by another: a record without a message group whose group was available stays
            # only behind... nothing: it went
            for offset in range(ledger.position, len(records)):
                record = records[offset]
                if record.key is None and record.group in available:
                    assert offset in ledger.past or offset in delivered
        commit = (ledger.position, ledger.past.text())
    # in order per consumer group (or per message group when the app groups messages), none twice
    assert len(delivered) == len(set(delivered))
    keyed = records[0].key is not None
    for name in (b"k1", b"k2", b"k3") if keyed else ("a", "b", "c"):
        mine = [i for i in delivered if (records[i].key if keyed else records[i].group) == name]
        assert mine == sorted(mine)
    # what the commit says went is exactly what went, and everything went but what matches nothing (with a
    # budget this small the partition may still stop at a head that matches nothing)
    written = RoutedPast.parse(commit[1], commit[0])
    went = set(range(commit[0])) | set(written or ())
    for_groups = {i for i, r in enumerate(records) if r.group is not None}
    assert went & for_groups == set(delivered)
    if budget >= 64:
        assert set(delivered) == for_groups
