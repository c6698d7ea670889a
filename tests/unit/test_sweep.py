"""The expiry sweep past a pending partition's held head (router/routing/sweep.py): which records a pass takes,
what its mark remembers of them, and which stretches of the partition a pass has to read again."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from subroute.routing.sweep import (
    SPAN,
    Cursor,
    Stretches,
    SweepMark,
    deadline,
    finish,
    pass_mark,
    plan,
)

NOW = 1_800_000_000_000
MINUTE = 60_000


def test_a_mark_remembers_what_had_expired_below_where_its_pass_read_to() -> None:
    mark = finish(pass_mark(None, NOW, app_limit_ms=10 * MINUTE), reached=50)
    old = NOW - 11 * MINUTE
    assert mark.has_left(10, old, None)  # past the app's expiration when the pass ran
    assert not mark.has_left(10, NOW - 9 * MINUTE, None)  # not yet expired then: still waiting
    assert not mark.has_left(50, old, None)  # beyond where the pass read: not looked at
    assert mark.has_left(10, NOW - 2_000, 1_000)  # its own subroute.expiration wins over the app's
    assert not mark.has_left(10, old, 20 * MINUTE)
    assert not mark.has_left(10, 0, None)  # no timestamp: never expires
    assert mark.reaches_beyond(49) and not mark.reaches_beyond(50)


def test_without_any_expiration_nothing_leaves() -> None:
    mark = finish(pass_mark(None, NOW, app_limit_ms=None), reached=50)
    assert not mark.has_left(10, NOW - 1_000 * MINUTE, None)
    assert mark.has_left(10, NOW - 2_000, 1_000)


def test_a_later_pass_takes_more_as_time_goes_on() -> None:
    first = finish(pass_mark(None, NOW, 10 * MINUTE), reached=50)
    later = pass_mark(first, NOW + 5 * MINUTE, 10 * MINUTE)
    ts = NOW - 7 * MINUTE  # expired between the two passes
    assert not first.has_left(10, ts, None) and later.has_left(10, ts, None)
    assert later.has_left(80, ts, None)  # beyond the first pass: read now
    # a clock behind the mark's (another worker's) does not move it back
    assert pass_mark(first, NOW - MINUTE, 10 * MINUTE).at_ms == NOW


def test_a_raised_expiration_does_not_extend_what_the_app_expiration_took_until_it_catches_up() -> None:
    first = finish(pass_mark(None, NOW, 10 * MINUTE), reached=50)  # took records older than NOW - 10 min
    raised = pass_mark(first, NOW + MINUTE, 60 * MINUTE)
    taken = NOW - 20 * MINUTE  # taken by the first pass: still counted as gone
    assert raised.has_left(10, taken, None)
    # beyond the first pass, a record older than the old cutoff has not expired under the new expiration: the
    # mark cannot say "gone below 50 by the old cutoff, beyond it by the new one", so it waits
    assert not raised.has_left(80, taken, None)
    assert raised.has_left(80, NOW - 2_000, 1_000)  # records with their own expiration are still swept
    caught_up = pass_mark(finish(raised, reached=100), NOW + 61 * MINUTE, 60 * MINUTE)
    assert caught_up.has_left(80, taken, None)


records = st.lists(
    st.tuples(
        st.integers(0, 300),  # offset
        st.integers(-1, 100 * MINUTE),  # age at NOW (-1: no timestamp)
        st.one_of(st.none(), st.integers(0, 50 * MINUTE)),  # its own expiration
    ),
    max_size=30,
)
passes = st.lists(
    st.tuples(
        st.integers(-5 * MINUTE, 30 * MINUTE),  # clock of the pass, from NOW
        st.one_of(st.none(), st.integers(0, 60 * MINUTE)),  # the app's expiration then
        st.integers(0, 300),  # how much further the pass reads than the one before
    ),
    min_size=1,
    max_size=5,
)


@given(records, passes)
def test_every_pass_keeps_what_earlier_ones_took_and_takes_only_what_has_expired(
    found: list[tuple[int, int, int | None]], done: list[tuple[int, int | None, int]]
) -> None:
    mark: SweepMark | None = None
    reached = 0
    for clock, limit, further in done:
        current = pass_mark(mark, NOW + clock, limit)
        reached += further
        final = finish(current, reached)
        for offset, age, own in found:
            ts = NOW - age if age >= 0 else 0
            before = mark is not None and mark.has_left(offset, ts, own)
            after = final.has_left(offset, ts, own)
            assert not before or after  # nothing taken comes back
            if after and not before:  # taken by this pass: within it, expired under the expiration in force
                assert offset < reached and ts > 0
                expiry = own if own is not None else limit
                assert expiry is not None and current.at_ms - ts > expiry
        mark = final


def test_a_mark_survives_the_commit_metadata_and_garbage_is_no_mark() -> None:
    for mark in (
        finish(pass_mark(None, NOW, 10 * MINUTE), 50),
        finish(pass_mark(None, NOW, None), 7),
        finish(pass_mark(finish(pass_mark(None, NOW, MINUTE), 9), NOW, 10**13), 12),  # negative cutoff
    ):
        assert SweepMark.parse(mark.text()) == mark
    for text in ("", "1,2,3", "a,b,c,d", "1,2,3,4,5", "1,2,3,x", "-1,2,3,-", "9" * 40 + ",1,1,-"):
        assert SweepMark.parse(text) is None


def test_deadline_is_the_first_clock_at_which_a_pass_takes_the_record() -> None:
    ts = NOW - MINUTE
    assert deadline(ts, None, MINUTE) == ts + MINUTE + 1
    assert deadline(ts, 5_000, MINUTE) == ts + 5_001  # its own wins
    assert deadline(ts, None, None) is None and deadline(0, 5_000, MINUTE) is None
    at = deadline(ts, None, MINUTE)
    assert at is not None
    assert not pass_mark(None, at - 1, MINUTE).has_left(3, ts, None)
    assert pass_mark(None, at, MINUTE).has_left(3, ts, None)


def test_a_first_pass_reads_everything_behind_the_head() -> None:
    ranges, known = plan(None, head=7, clock_ms=NOW, limit_ms=MINUTE)
    assert ranges == [(8, None)] and known.scanned_to == 8 and not known.earliest


def test_a_later_pass_reads_only_stretches_with_something_due_and_what_came_since() -> None:
    known = Stretches(limit_ms=MINUTE, scanned_to=5 * SPAN + 10)
    known.earliest = {0: NOW - 1, 1: NOW + 1, 2: NOW + 5, 3: NOW, 5: NOW - 3}
    ranges, fresh = plan(known, head=SPAN // 2, clock_ms=NOW, limit_ms=MINUTE)
    # stretch 0 from behind the head; 1 and 2 are not due; 3 is; 5 (partly read) merges with what is new
    assert ranges == [(SPAN // 2 + 1, SPAN), (3 * SPAN, 4 * SPAN), (5 * SPAN, None)]
    assert fresh.earliest == {1: NOW + 1, 2: NOW + 5}  # due ones are read again and noted afresh
    fresh.note(3 * SPAN + 4, NOW + 100)
    fresh.note(3 * SPAN + 9, NOW + 50)
    fresh.reach(6 * SPAN)
    assert fresh.earliest[3] == NOW + 50 and fresh.scanned_to == 6 * SPAN
    # stretches before the head are forgotten; a changed app expiration makes every deadline wrong
    later, _ = plan(fresh, head=2 * SPAN + 3, clock_ms=NOW + 2, limit_ms=MINUTE)
    assert later == [(6 * SPAN, None)]
    assert plan(fresh, head=3, clock_ms=NOW, limit_ms=2 * MINUTE)[0] == [(4, None)]


def test_the_cursor_walks_the_ranges_and_seeks_over_the_gaps() -> None:
    cursor = Cursor([(11, 20), (40, 45), (90, None)], head=10)
    assert cursor.seek_first() is None
    assert cursor.step(11) == (True, None)
    assert cursor.step(19) == (True, None)
    assert cursor.step(20) == (False, 40)  # a gap: seek to the next range
    assert cursor.step(21) == (False, None)  # delivered before the seek took effect
    assert cursor.step(40) == (True, None)
    assert cursor.step(46) == (False, 90)
    assert not cursor.done(position=-1001, high=100)  # sought, nothing delivered yet
    assert cursor.step(90) == (True, None) and cursor.step(99) == (True, None)
    assert cursor.done(position=100, high=100) and cursor.reached(100) == 100
    # a pass with nothing new to read from the start seeks at once, and is done when that is the end
    quick = Cursor([(30, None)], head=10)
    assert quick.seek_first() == 30 and quick.done(position=-1001, high=30)
    assert not Cursor([(11, None)], head=10).done(position=-1001, high=-1001)  # end not known yet
