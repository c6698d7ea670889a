"""A newly assigned partition waits for the config version it was last routed under (commit metadata)."""

from __future__ import annotations

from subroute.routing.routed_past import BUDGET_BYTES, MAX_TEXT, RoutedPast, past_of
from subroute.routing.sweep import SweepMark, mark_of
from subroute.wire import pending_metadata, version_metadata, version_of
from subroute.worker.assignment import releasable


def test_commit_metadata_round_trips_the_version_and_ignores_anything_else() -> None:
    assert version_of(version_metadata(0)) == 0
    assert version_of(version_metadata(123_456)) == 123_456
    for other in (
        None,
        "",
        "hello",
        "subroute.config-version=",
        "subroute.config-version=-1",
        "subroute.config-version=12x",
        "subroute.config-version=" + "9" * 40,
    ):
        assert version_of(other) is None, other


def test_a_pending_partitions_commit_carries_its_sweep_mark_beside_the_version() -> None:
    mark = SweepMark(own_until=40, at_ms=1_800_000_000_000, app_until=30, cutoff_ms=1_799_999_000_000)
    metadata = version_metadata(7, pending_metadata(mark.text()))
    assert version_of(metadata) == 7 and mark_of(metadata) == mark
    assert mark_of(version_metadata(7)) is None
    for other in (None, "", "subroute.sweep=1,2,3,4", metadata + "x", metadata.replace("40,", "x,")):
        assert mark_of(other) is None, other


def test_a_pending_partitions_commit_carries_the_offsets_routed_past_it_within_the_brokers_limit() -> None:
    past = RoutedPast(100, [(102, 105), (200, 201)])
    metadata = version_metadata(7, pending_metadata(None, past.text()))
    found = past_of(metadata, 100)
    assert found is not None and found.ranges() == past.ranges() and mark_of(metadata) is None
    assert version_of(metadata) == 7 and past_of(version_metadata(7), 100) is None
    # At their longest (a 20-digit version, a mark of 20-digit fields, a set filling its budget) the metadata
    # stays below 4,000 characters: the broker keeps 4,096 bytes by default (offset.metadata.max.bytes).
    longest = RoutedPast(0)
    offset = 0
    while longest.fits_with(offset + 2):  # every other offset: the bitmap form, as long as it may be
        offset += 2
        longest.add(offset)
    assert longest.size() == BUDGET_BYTES
    huge = 10**19
    mark = SweepMark(own_until=huge, at_ms=huge, app_until=huge, cutoff_ms=-(10**18))
    text = version_metadata(huge, pending_metadata(mark.text(), longest.text()))
    assert len(text) <= MAX_TEXT and mark_of(text) == mark and past_of(text, 0) is not None


def test_a_partition_waits_until_the_version_in_force_reaches_its_own() -> None:
    gated = {("in", 0): 10, ("in", 1): 12}
    assert releasable(gated, 9, settled_since_gated=False) == ([], [])
    assert releasable(gated, 10, settled_since_gated=False) == ([("in", 0)], [])
    assert releasable(gated, 12, settled_since_gated=False) == ([("in", 0), ("in", 1)], [])


def test_a_version_the_topic_does_not_have_does_not_hold_a_partition_forever() -> None:
    # The store read the config topic to its end after the partitions were held and is at 11: version 12 was
    # never on this topic (recreated), so in/1 is routed under 11, and reported.
    gated = {("in", 0): 10, ("in", 1): 12}
    assert releasable(gated, 11, settled_since_gated=True) == ([("in", 0), ("in", 1)], [("in", 1)])
