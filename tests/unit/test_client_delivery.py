"""The consumer client's pure bookkeeping (subroute.client.delivery), from seed 001's and seed 002's own examples."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from subroute import wire
from subroute.client.delivery import (
    AckTracker,
    BandBuffer,
    DuplicateFilter,
    GroupHoldBack,
    MovedCopies,
    MovedCopy,
    Outstanding,
    Settling,
    after_failure,
    redelivery_partition,
    retry_delay,
)

TP = ("jobs", 0)


def test_out_of_order_acks_commit_only_the_contiguous_prefix() -> None:
    tracker = AckTracker()
    for offset in range(5):
        tracker.track(TP, offset)
    assert tracker.committable() == {}  # nothing acknowledged: the start position is no news
    tracker.settle(TP, 1)
    tracker.settle(TP, 3)
    assert tracker.committable() == {}  # 0 is still out: nothing may be committed
    tracker.settle(TP, 0)
    assert tracker.committable() == {TP: 2}  # 0 and 1; 2 is out
    tracker.mark_committed({TP: 2})
    tracker.settle(TP, 2)
    assert tracker.committable() == {TP: 4}
    tracker.mark_committed({TP: 4})
    tracker.settle(TP, 4)
    assert tracker.committable() == {TP: 5}


def test_offsets_with_gaps_commit_past_the_last_settled() -> None:
    # Transaction markers take offsets: records may be 10, 12, 15.
    tracker = AckTracker()
    for offset in (10, 12, 15):
        tracker.track(TP, offset)
    tracker.settle(TP, 10)
    assert tracker.committable() == {TP: 12}
    tracker.settle(TP, 15)
    tracker.settle(TP, 12)
    assert tracker.committable() == {TP: 16}


def test_refetched_offsets_are_ignored() -> None:
    tracker = AckTracker()
    assert tracker.track(TP, 3)
    assert not tracker.track(TP, 3)
    tracker.settle(TP, 3)
    assert tracker.committable() == {TP: 4}
    assert not tracker.track(TP, 2)


def test_a_linked_original_settles_with_its_copy() -> None:
    tracker = AckTracker()
    tracker.track(TP, 0)
    tracker.track(TP, 1)
    tracker.settle_with((TP, 0), (TP, 2))  # 0 was cancelled; its copy is 2
    tracker.settle(TP, 1)
    assert tracker.committable() == {}
    tracker.track(TP, 2)
    tracker.settle(TP, 2)
    assert tracker.committable() == {TP: 3}


def test_forgotten_partitions_are_not_committed() -> None:
    tracker = AckTracker()
    tracker.track(TP, 0)
    tracker.forget(TP)
    tracker.settle(TP, 0)
    assert tracker.committable() == {}


@given(st.permutations(list(range(12))), st.integers(min_value=0, max_value=12))
def test_commit_position_is_the_first_unacknowledged_offset(order: list[int], acked: int) -> None:
    tracker = AckTracker()
    for offset in range(12):
        tracker.track(TP, offset)
    done = set(order[:acked])
    for offset in order[:acked]:
        tracker.settle(TP, offset)
    first_missing = next((o for o in range(12) if o not in done), 12)
    expected = {TP: first_missing} if first_missing > 0 else {}
    assert tracker.committable() == expected


def test_at_most_once_passes_over_a_message_whose_dead_letter_is_still_being_written() -> None:
    # 0 expired on delivery and its dead letter keeps failing; 1 is delivered at-most-once: committed past
    # before it is handed out, with 0 kept as a hole of the commit until its dead letter is written.
    tracker = AckTracker()
    for offset in range(3):
        tracker.track(TP, offset)
    assert tracker.passing(TP, 1) == (2, (0,))
    assert tracker.committable() == {}  # passing changes nothing
    tracker.pass_over(TP, 1)
    assert (tracker.committable(), tracker.holes(TP)) == ({TP: 2}, (0,))
    tracker.mark_committed({TP: 2})
    assert tracker.committable() == {}
    assert tracker.passing(TP, 2) == (3, (0,))
    tracker.pass_over(TP, 2)
    tracker.mark_committed(tracker.committable())
    tracker.settle(TP, 0)  # the dead letter is written at last: the same position, without the hole
    assert (tracker.committable(), tracker.holes(TP)) == ({TP: 3}, ())
    tracker.mark_committed({TP: 3})
    assert tracker.committable() == {}


def test_passing_stops_at_the_first_unsettled_offset_after_the_message() -> None:
    tracker = AckTracker()
    for offset in (4, 5, 7, 9):  # with gaps, as transaction markers leave them
        tracker.track(TP, offset)
    tracker.settle(TP, 7)  # a duplicate dropped on arrival
    assert tracker.passing(TP, 5) == (9, (4,))
    tracker.pass_over(TP, 5)
    assert tracker.position(TP) == 9 and tracker.holes(TP) == (4,)


def test_a_new_owner_takes_the_holes_and_skips_what_was_passed_over() -> None:
    tracker = AckTracker()
    assert tracker.recover(TP, 10, [3, 7]) == 3  # fetch from the first hole
    assert tracker.committable() == {}
    assert [tracker.track(TP, o) for o in range(3, 12)] == [
        True,
        False,
        False,
        False,
        True,
        False,
        False,
        True,
        True,  # 3 and 7: holes; 10 on: new
    ]
    assert tracker.is_hole(TP, 3) and tracker.is_hole(TP, 7) and not tracker.is_hole(TP, 10)
    tracker.settle(TP, 3)
    assert (tracker.committable(), tracker.holes(TP)) == ({TP: 10}, (7,))
    tracker.settle(TP, 10)
    tracker.pass_over(TP, 7)  # delivered at-most-once this time (no longer expired under a new config)
    assert (tracker.committable(), tracker.holes(TP)) == ({TP: 11}, ())
    assert tracker.vanished() == []


def test_a_hole_the_partition_no_longer_holds_is_dropped_and_reported() -> None:
    tracker = AckTracker()
    assert tracker.recover(TP, 10, [3, 12]) == 3  # 12 is not below the commit: not a hole
    assert not tracker.track(TP, 5)  # retention deleted 3: fetching started later
    assert tracker.vanished() == [(TP, 3)] and tracker.vanished() == []
    assert tracker.holes(TP) == ()
    assert tracker.committable() == {TP: 10}  # written again without it


@pytest.mark.parametrize(
    "offsets", [(), (5,), (3, 4, 5, 9), (0, 2, 4), tuple(range(100, 1100)), (2**62, 2**62 + 1)]
)
def test_unsettled_offsets_round_trip_through_commit_metadata(offsets: tuple[int, ...]) -> None:
    metadata = wire.unsettled_metadata(offsets)
    assert metadata is not None and wire.unsettled_of(metadata) == offsets
    assert len(wire.unsettled_metadata(tuple(range(100, 1100))) or "") < 40  # runs are written as ranges


def test_commit_metadata_that_would_not_fit_is_refused_and_other_metadata_has_no_holes() -> None:
    assert wire.unsettled_metadata(tuple(range(0, 4000, 2))) is None  # over the broker's 4096 bytes
    others = (None, "", "subroute.config-version=7", "subroute.unsettled=x", "subroute.unsettled=5-3")
    for other in (*others, f"subroute.unsettled=0-{10**12}"):
        assert wire.unsettled_of(other) == ()


def test_router_redelivery_is_a_duplicate_but_new_sources_are_not() -> None:
    dedup = DuplicateFilter()
    group_tp = ("subroute.billing.general", 0)
    assert dedup.admit(group_tp, ("orders", 0, 5))
    assert dedup.admit(group_tp, ("orders", 0, 7))
    assert not dedup.admit(group_tp, ("orders", 0, 5))  # the router re-sent 5 after a restart
    assert dedup.admit(group_tp, ("orders", 0, 6))  # never seen here (routed elsewhere first): delivered
    assert dedup.admit(group_tp, ("orders", 1, 5))  # another source partition
    assert dedup.admit(("subroute.billing.general", 1), ("orders", 0, 5))  # another group-topic partition
    assert dedup.highest(group_tp, "orders", 0) == 7


def test_the_window_forgets_old_sources_and_then_prefers_a_duplicate_to_a_loss() -> None:
    dedup = DuplicateFilter(window=3)
    for offset in range(10):
        dedup.observe(TP, ("orders", 0, offset))
    assert dedup.is_duplicate(TP, ("orders", 0, 9))
    assert dedup.is_duplicate(TP, ("orders", 0, 7))
    assert not dedup.is_duplicate(TP, ("orders", 0, 2))


def test_records_resent_on_purpose_are_recognised() -> None:
    routed = [(wire.SOURCE, b"orders/0/5")]
    assert wire.source_position(routed) == ("orders", 0, 5)
    assert not wire.is_resent(routed)
    assert wire.is_resent([*routed, (wire.DELIVERIES, b"1")])  # a cancel copy
    assert wire.is_resent([*routed, (wire.REDRIVEN, b"pending")])
    assert wire.is_resent([*routed, (wire.REDRIVEN, b"dlq")])
    assert not wire.is_resent([*routed, (wire.DELIVERIES, b"0")])  # a dlq redrive resets the count
    assert wire.source_position([(wire.SOURCE, b"garbage")]) is None


def test_a_cancelled_grouped_message_is_not_overtaken_by_its_group() -> None:
    # Seed 002: a shopping cart's "add" then "remove". A-1 is cancelled; its copy lands at offset 9.
    hold: GroupHoldBack[str] = GroupHoldBack()
    cart_a, cart_b = ("cart", 0, b"A"), ("cart", 0, b"B")
    hold.expect(cart_a, 9)
    assert hold.route(cart_a, 2, "A-2") == (None, [])  # held until A-1 is back
    assert hold.route(cart_b, 3, "B-1") == ("B-1", [])  # "distinct message groups would not block each other"
    assert hold.route(cart_a, 4, "A-3") == (None, [])
    assert hold.held_count() == 2
    assert hold.route(cart_a, 9, "A-1 again") == ("A-1 again", ["A-2", "A-3"])
    assert not hold.is_held(cart_a)
    assert hold.route(cart_a, 10, "A-4") == ("A-4", [])


def test_two_cancels_in_a_group_release_after_the_last_copy() -> None:
    hold: GroupHoldBack[str] = GroupHoldBack()
    key = ("cart", 0, b"A")
    hold.expect(key, 8)
    hold.expect(key, 9)
    assert hold.route(key, 5, "A-3") == (None, [])
    assert hold.route(key, 8, "A-1 again") == ("A-1 again", [])
    assert hold.route(key, 9, "A-2 again") == ("A-2 again", ["A-3"])
    assert hold.forget("cart", 0) == []


def test_the_group_is_held_while_its_copy_is_being_written() -> None:
    # A-1 is cancelled; its copy's write fails and is retried, so its offset is not known for a while: A-2
    # must wait from the cancel on, and is released after the copy once the copy is written and read back.
    hold: GroupHoldBack[str] = GroupHoldBack()
    cart_a, cart_b = ("cart", 0, b"A"), ("cart", 0, b"B")
    hold.expect_unwritten(cart_a)
    assert hold.route(cart_a, 2, "A-2") == (None, [])
    assert hold.route(cart_b, 3, "B-1") == ("B-1", [])
    assert hold.written(cart_a, 9) == []  # written at 9, not read back yet
    assert hold.route(cart_a, 9, "A-1 again") == ("A-1 again", ["A-2"])
    assert not hold.is_held(cart_a)


def test_a_copy_fetched_before_its_write_is_reported_is_delivered_first() -> None:
    # The consumer may read the copy back before the producer hands over its delivery report: it is held
    # like any later message of the group, and goes first when the report names its offset.
    hold: GroupHoldBack[str] = GroupHoldBack()
    key = ("cart", 0, b"A")
    hold.expect_unwritten(key)
    assert hold.route(key, 5, "A-2") == (None, [])
    assert hold.route(key, 9, "A-1 again") == (None, [])
    assert hold.written(key, 9) == ["A-1 again", "A-2"]
    assert not hold.is_held(key)


def test_two_copies_of_a_group_one_written_one_still_being_written() -> None:
    hold: GroupHoldBack[str] = GroupHoldBack()
    key = ("cart", 0, b"A")
    hold.expect_unwritten(key)
    hold.expect_unwritten(key)
    assert hold.route(key, 5, "A-3") == (None, [])
    assert hold.route(key, 8, "A-1 again") == (None, [])
    assert hold.written(key, 8) == ["A-1 again"]  # the other copy is still awaited: A-3 waits
    assert hold.route(key, 9, "A-2 again") == (None, [])  # not announced yet: held like the rest
    assert hold.written(key, 9) == ["A-2 again", "A-3"]
    assert hold.written(key, 10) == []  # a report for a forgotten hold changes nothing
    assert not hold.is_held(key)


def test_retry_delays_double_and_are_bounded() -> None:
    assert [retry_delay(n) for n in range(1, 8)] == [0.2, 0.4, 0.8, 1.6, 3.2, 5.0, 5.0]
    assert retry_delay(1000) == 5.0


def test_a_failed_write_is_retried_after_the_backoff_and_settles_once() -> None:
    book: Settling[str] = Settling()
    key = ("jobs", 0, 7)
    book.add(key, "copy of 7", now=100.0)
    assert book.due(100.0) == [(key, "copy of 7")]
    first = book.start(key)
    assert first is not None
    assert book.due(100.0) == [] and book.next_due() is None  # under way: never a second write meanwhile
    assert book.start(key) is None
    assert book.failed(key, first, now=100.5) == 0.2
    assert book.due(100.6) == [] and book.next_due() == 100.7
    second = book.start(key)
    assert second is not None and book.failed(key, second, now=101.0) == 0.4
    assert book.failures(key) == 2
    third = book.start(key)
    assert third is not None
    assert book.written(key, first) is None  # a late report of an earlier write settles nothing
    assert book.written(key, third) == "copy of 7"
    assert book.written(key, third) is None  # settled once
    assert len(book) == 0 and key not in book and book.start(key) is None


def test_a_revoked_partition_abandons_its_given_back_messages() -> None:
    book: Settling[str] = Settling()
    book.add(("jobs", 0, 1), "a", now=0.0)
    book.add(("jobs", 1, 1), "b", now=0.0)
    token = book.start(("jobs", 0, 1))
    assert token is not None
    assert book.drop_partition("jobs", 0) == ["a"]
    assert book.written(("jobs", 0, 1), token) is None  # its write's report is ignored
    assert book.failed(("jobs", 0, 1), token, now=1.0) is None
    book.add(("jobs", 0, 1), "a again", now=2.0)  # fetched again after a reassignment
    assert book.written(("jobs", 0, 1), token) is None  # the old write cannot settle the new one
    assert len(book) == 2


def test_bands_drain_highest_first_and_keep_order_within_a_band() -> None:
    buffer: BandBuffer[str] = BandBuffer()
    for band, item in [(0, "low-1"), (9, "urgent-1"), (0, "low-2"), (5, "mid"), (9, "urgent-2")]:
        buffer.push(band, item)
    buffer.push_front(0, ["low-0a", "low-0b"])
    drained = []
    while (popped := buffer.pop()) is not None:
        drained.append(popped[1])
    assert drained == ["urgent-1", "urgent-2", "mid", "low-0a", "low-0b", "low-1", "low-2"]


def test_outstanding_leases_run_out_oldest_first() -> None:
    book: Outstanding[str] = Outstanding()
    book.add(("t", 0, 1), "a", now=100.0, lease=5.0)
    book.add(("t", 0, 2), "b", now=101.0, lease=1.0)
    book.add(("t", 0, 3), "c", now=101.0, lease=None)
    assert book.next_deadline() == 102.0
    assert book.overdue(103.0) == ["b"]
    assert book.overdue(110.0) == ["b", "a"]
    assert book.remove(("t", 0, 2)) == "b"
    assert book.remove(("t", 0, 2)) is None
    assert len(book) == 2
    assert book.drop_partition("t", 0) == ["a", "c"]


def test_jobs_max_cancels_3_expires_on_the_third_cancel() -> None:
    # "AMPS will automatically expire a message from Jobs on the 3rd time it receives a sow_delete with the
    # cancel operation for that message, or after the 10th unsuccessful delivery of the message."
    deliveries = cancels = 0
    reasons = []
    for _ in range(3):
        outcome = after_failure(deliveries, cancels, explicit_cancel=True, max_cancels=3, max_deliveries=10)
        deliveries, cancels = outcome.deliveries, outcome.cancels
        reasons.append(outcome.dead_letter_reason)
    assert reasons == [None, None, "max-cancels"]


def test_jobs_max_deliveries_10_expires_after_the_tenth_failed_delivery() -> None:
    deliveries = cancels = 0
    reasons = []
    for _ in range(10):  # leases that run out: not cancels
        outcome = after_failure(deliveries, cancels, explicit_cancel=False, max_cancels=3, max_deliveries=10)
        deliveries, cancels = outcome.deliveries, outcome.cancels
        reasons.append(outcome.dead_letter_reason)
    assert reasons == [None] * 9 + ["max-deliveries"]
    assert cancels == 0


def test_no_maximum_means_no_dead_letter() -> None:
    outcome = after_failure(99, 99, explicit_cancel=True, max_cancels=None, max_deliveries=0)
    assert outcome.dead_letter_reason is None
    assert (outcome.deliveries, outcome.cancels) == (100, 100)
    # AMPS's default for both is 0, "no maximum".
    for explicit in (True, False):
        outcome = after_failure(0, 0, explicit_cancel=explicit, max_cancels=0, max_deliveries=0)
        assert outcome.dead_letter_reason is None


def test_replace_headers_keeps_the_rest_in_order() -> None:
    headers = [("a", b"1"), (wire.DELIVERIES, b"1"), ("b", None), (wire.DELIVERIES, b"2")]
    assert wire.replace_headers(headers, {wire.DELIVERIES: b"3", wire.CANCELS: None}) == [
        ("a", b"1"),
        ("b", None),
        (wire.DELIVERIES, b"3"),
    ]


def test_a_failed_delivery_goes_to_a_partition_of_another_member_in_turns() -> None:
    # "the message is available to another subscriber": partitions this member does not own are the others'.
    assert [redelivery_partition(1, 4, {1}, turn) for turn in range(4)] == [0, 2, 3, 0]
    assert {redelivery_partition(0, 4, {0, 1}, turn) for turn in range(10)} == {2, 3}


def test_a_member_that_owns_every_partition_gets_its_failed_delivery_back() -> None:
    assert redelivery_partition(2, 3, {0, 1, 2}, 7) == 2  # alone in the group
    assert redelivery_partition(0, 1, {0}, 1) == 0  # one partition: no other member can own one
    assert redelivery_partition(1, 0, set(), 1) == 1  # partition count unknown: stays where it was


def test_a_group_whose_copy_went_to_another_member_waits_until_that_member_settles_it() -> None:
    # Seed 002, one consumer at a time per group: A-1 is cancelled and its copy goes to another member's
    # partition 1; A-2 waits here until the other member has processed the copy, then goes on here.
    hold: GroupHoldBack[str] = GroupHoldBack()
    moved = MovedCopies()
    cart_a, cart_b = ("cart", 0, b"A"), ("cart", 0, b"B")
    hold.expect_unwritten(cart_a)
    assert hold.route(cart_a, 2, "A-2") == (None, [])
    hold.written_elsewhere(cart_a)
    moved.add(MovedCopy(("cart", 1), 40, cart_a, (("cart", 0), 1)))
    assert hold.route(cart_b, 3, "B-1") == ("B-1", [])  # other groups go on
    assert hold.route(cart_a, 4, "A-3") == (None, [])
    assert moved.partitions() == {("cart", 1)}
    assert moved.settled({("cart", 1): 40}) == []  # the other member has not committed past the copy yet
    [done] = moved.settled({("cart", 1): 41})
    assert done.original == (("cart", 0), 1) and len(moved) == 0
    assert hold.settled_elsewhere(done.group) == ["A-2", "A-3"]
    assert not hold.is_held(cart_a)
    assert hold.settled_elsewhere(cart_a) == []  # once only


def test_moved_copies_of_a_lost_partition_are_forgotten() -> None:
    moved = MovedCopies()
    moved.add(MovedCopy(("cart", 1), 40, ("cart", 0, b"A"), (("cart", 0), 1)))
    moved.add(MovedCopy(("cart", 0), 7, ("cart", 2, b"C"), (("cart", 2), 3)))
    moved.forget("cart", 0)
    assert moved.partitions() == {("cart", 0)}
