"""A newly assigned partition waits for the config version it was last routed under (commit metadata)."""

from __future__ import annotations

from subroute.routing.sweep import SweepMark, mark_of
from subroute.wire import version_metadata, version_of
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
    metadata = version_metadata(7, mark.text())
    assert version_of(metadata) == 7 and mark_of(metadata) == mark
    assert mark_of(version_metadata(7)) is None
    for other in (None, "", "subroute.sweep=1,2,3,4", metadata + "x", metadata.replace("40,", "x,")):
        assert mark_of(other) is None, other


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
