"""The commit window: what it gathers from routed batches and when it is due."""

from __future__ import annotations

import pytest

from subroute.worker.tally import BatchTally
from subroute.worker.window import CommitInterval, CommitWindow, describe_ranges, routed_again


def _tally(version: int, first: dict[tuple[str, int], int], last: dict[tuple[str, int], int]) -> BatchTally:
    tally = BatchTally(version=version, messages_in=sum(last[p] - first[p] for p in last))
    tally.first_offsets.update(first)
    tally.offsets.update(last)
    return tally


def test_batches_merge_keeping_the_first_offsets_and_the_last_positions() -> None:
    window = CommitWindow()
    window.add(_tally(3, {("in", 0): 10, ("in", 1): 5}, {("in", 0): 20, ("in", 1): 8}), now=1.0)
    window.add(_tally(4, {("in", 0): 20, ("in", 2): 0}, {("in", 0): 30, ("in", 2): 4}), now=2.0)
    # a rewind goes back to where the window began; a commit to where it ends
    assert window.first_offsets == {("in", 0): 10, ("in", 1): 5, ("in", 2): 0}
    assert window.offsets == {("in", 0): 30, ("in", 1): 8, ("in", 2): 4}
    assert window.version == 4  # a successor must not route these partitions under an older version
    assert window.records == 27
    assert window.opened_at == 1.0


def test_an_empty_window_is_never_due() -> None:
    assert not CommitWindow().due(CommitInterval(1, 0), now=100.0, drained=True)


@pytest.mark.parametrize(
    ("records", "age", "drained", "due"),
    [
        (999, 0.0, False, False),  # under a backlog: keep producing
        (1000, 0.0, False, True),  # full
        (1, 0.25, False, True),  # old enough
        (1, 0.0, True, True),  # the input has nothing more: commit now, no latency added
    ],
)
def test_due_when_full_old_or_drained(records: int, age: float, drained: bool, due: bool) -> None:
    window = CommitWindow()
    window.add(_tally(1, {("in", 0): 0}, {("in", 0): records}), now=10.0)
    assert window.due(CommitInterval(records=1000, ms=250), now=10.0 + age, drained=drained) is due


def test_interval_bounds_are_checked() -> None:
    with pytest.raises(ValueError, match="commit interval"):
        CommitInterval(records=0)


def test_what_a_refused_commit_routes_again_is_each_partitions_first_offset_to_its_position() -> None:
    first, second = CommitWindow(), CommitWindow()
    first.add(BatchTally(offsets={("orders", 0): 110}, first_offsets={("orders", 0): 100}), now=0.0)
    second.add(
        BatchTally(
            offsets={("orders", 0): 130, ("orders", 1): 57},
            first_offsets={("orders", 0): 110, ("orders", 1): 50},
        ),
        now=1.0,
    )
    ranges = routed_again([first, second])
    assert ranges == {("orders", 0): (100, 130), ("orders", 1): (50, 57)}
    assert describe_ranges(ranges) == "orders/0=100..130, orders/1=50..57"
