"""The commit window: the input positions routed since the last commit, and when to commit them.

Batches are produced as they are decided and their positions gathered here. The checkpoint commits the window
(at-least-once: once every record produced for it is acknowledged; exactly-once: as one transaction) once it
holds ``CommitInterval.records`` input records, once it is ``CommitInterval.ms`` old, or as soon as the consumer
has nothing more to give (a poll came back short of a full batch and the fetches report nothing beyond the
consumer's position). When the input is quiet every record is committed as soon as it is routed: the interval
costs no latency.

At-least-once, a window that is due is closed and a new one opened at once: routing goes on while the closed
window's delivery reports arrive (``acknowledged``), and closed windows are committed in order as they settle.
So under a backlog no batch waits for the acknowledgements of the ones before it. Pure: the worker's checkpoint
carries it out.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from subroute.routing.envelope import OutRecord
from subroute.worker.redelivery import Failure
from subroute.worker.tally import BatchTally

Partition = tuple[str, int]

DEFAULT_COMMIT_RECORDS = 20_000
DEFAULT_COMMIT_MS = 500


@dataclass(frozen=True)
class CommitInterval:
    """Commit at least every ``records`` input records and every ``ms`` milliseconds, whichever comes first."""

    records: int = DEFAULT_COMMIT_RECORDS
    ms: int = DEFAULT_COMMIT_MS

    def __post_init__(self) -> None:
        if self.records < 1 or self.ms < 0:
            raise ValueError(
                f"commit interval must be >= 1 record and >= 0 ms, not {self.records}, {self.ms}"
            )


@dataclass
class CommitWindow:
    number: int = 0  # windows are numbered as they open (the checkpoint's ``settled_through``)
    version: int = 0  # the newest config version a record of the window was routed under (commit metadata)
    offsets: dict[Partition, int] = field(default_factory=dict)  # next offset to commit, per partition
    # pending partitions: what their commit says besides the version (wire.pending_metadata)
    metadata: dict[Partition, str] = field(default_factory=dict)
    first_offsets: dict[Partition, int] = field(default_factory=dict)  # where to seek back to on a rewind
    sent: list[OutRecord] = field(
        default_factory=list
    )  # what was produced: failed deliveries are matched to it
    records: int = 0  # input records routed
    opened_at: float | None = None  # monotonic seconds of the first batch; None while empty
    # At-least-once: delivery reports received for ``sent`` (success or failure), and the failures among them.
    acknowledged: int = 0
    failures: list[Failure] = field(default_factory=list)

    def add(self, tally: BatchTally, now: float) -> None:
        """Gather one routed batch (``now``: monotonic seconds)."""
        if self.opened_at is None:
            self.opened_at = now
        self.version = max(self.version, tally.version)
        self.offsets.update(tally.offsets)
        self.metadata.update(tally.metadata)
        for partition, offset in tally.first_offsets.items():
            self.first_offsets.setdefault(partition, offset)
        self.sent += tally.sent
        self.records += tally.messages_in

    @property
    def empty(self) -> bool:
        return self.opened_at is None

    @property
    def settled(self) -> bool:
        """Every record produced for the window has its delivery report: its offsets may be committed (after
        its failures are dealt with)."""
        return self.acknowledged >= len(self.sent)

    def due(self, interval: CommitInterval, now: float, drained: bool) -> bool:
        """Whether to commit now: the window is full or old enough, or the input has nothing more for now."""
        if self.opened_at is None:
            return False
        return drained or self.records >= interval.records or (now - self.opened_at) * 1000 >= interval.ms


def routed_again(windows: list[CommitWindow]) -> dict[Partition, tuple[int, int]]:
    """The input offsets ``windows`` hold, per partition: ``(first, end)``, end exclusive (the position their
    commit would have written). When that commit is refused, these are what the partition's next owner routes
    again."""
    first: dict[Partition, int] = {}
    end: dict[Partition, int] = {}
    for window in windows:
        for partition, offset in window.first_offsets.items():
            first.setdefault(partition, offset)
        end.update(window.offsets)
    return {partition: (first.get(partition, offset), offset) for partition, offset in sorted(end.items())}


def describe_ranges(ranges: dict[Partition, tuple[int, int]]) -> str:
    """``topic/partition=first..end`` per partition, comma-separated (end exclusive), as logs show it."""
    return ", ".join(
        f"{topic}/{partition}={first}..{end}" for (topic, partition), (first, end) in ranges.items()
    )
