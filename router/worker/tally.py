"""What one batch did, counted in plain dicts and lists, then added to the metrics once per batch.

A labelled counter costs a lock and a lookup per call; most decisions are made once per table, so a batch holds
few distinct decision objects, and counting each object once (by identity) is cheap; those are then summed by
the labels they count under, so each labelled counter is looked up once per batch.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from subroute.ops.metrics import RouterMetrics
from subroute.routing.decisions import Action, Decision
from subroute.routing.envelope import OutRecord
from subroute.wire import EXPIRED

_T = TypeVar("_T")


def count_by_identity(items: list[_T]) -> list[tuple[_T, int]]:
    """Each distinct object of ``items`` (by identity) with the number of times it occurs; in C, not per item
    in Python. The list keeps the objects alive, so their ids stay theirs meanwhile."""
    distinct = dict(zip(map(id, items), items, strict=True))
    return [(distinct[key], count) for key, count in Counter(map(id, items)).items()]


def add_counts(into: dict[str, int], counts: dict[str, int]) -> None:
    for name, count in counts.items():
        into[name] = into.get(name, 0) + count


def add_nested_counts(into: dict[str, dict[str, int]], counts: dict[str, dict[str, int]]) -> None:
    for name, inner in counts.items():
        add_counts(into.setdefault(name, {}), inner)


@dataclass
class BatchTally:
    """Per batch: input positions (next offset to commit, first offset seen) and what routing decided."""

    version: int = 0  # the config version the batch was routed under (committed as offset metadata)
    offsets: dict[tuple[str, int], int] = field(default_factory=dict)
    # what the commit of each pending partition in ``offsets`` says besides the version (its sweep mark and the
    # offsets routed past its position: wire.pending_metadata)
    metadata: dict[tuple[str, int], str] = field(default_factory=dict)
    first_offsets: dict[tuple[str, int], int] = field(default_factory=dict)
    sent: list[OutRecord] = field(
        default_factory=list
    )  # what was produced: failed deliveries are matched to it
    messages_in: int = 0
    age_ms: int | None = None  # producer timestamp to routing, of the batch's first input record that has one
    dropped_headers: int = 0
    decisions: list[Decision] = field(default_factory=list)
    filtered: list[Sequence[Decision]] = field(default_factory=list)
    decode_errors: dict[str, dict[str, int]] = field(default_factory=dict)  # app -> property -> count
    evaluation_errors: dict[str, int] = field(default_factory=dict)

    def publish(self, metrics: RouterMetrics, distinct: list[tuple[Decision, int]] | None = None) -> None:
        """Add this batch's counts to the metrics (``distinct``: ``count_by_identity(self.decisions)``, when the
        caller has it already)."""
        if self.messages_in:
            metrics.messages_in.inc(self.messages_in)
        if self.age_ms is not None:
            metrics.record_age.observe(max(0, self.age_ms) / 1000)
        if self.dropped_headers:
            metrics.dropped_headers.inc(self.dropped_headers)
        for app, by_property in self.decode_errors.items():
            for prop, count in by_property.items():
                metrics.property_decode_errors.labels(app, prop).inc(count)
        for app, count in self.evaluation_errors.items():
            metrics.evaluation_errors.labels(app).inc(count)
        # Distinct decisions can share their labels (at 10,000 subscriptions a batch holds a decision object per
        # subscription it matched, most of a few groups): a labelled counter is looked up once per label set.
        totals: dict[tuple[Action, str, str | None, str | None], int] = {}
        example: dict[tuple[Action, str, str | None, str | None], Decision] = {}
        filtered = [(d, count) for ds, count in count_by_identity(self.filtered) for d in ds]
        for decision, count in (*(distinct or count_by_identity(self.decisions)), *filtered):
            key = (decision.action, decision.app, decision.group, decision.reason)
            totals[key] = totals.get(key, 0) + count
            example.setdefault(key, decision)
        for key, count in totals.items():
            count_decision(metrics, example[key], redriven=False, count=count)


def count_decision(metrics: RouterMetrics, decision: Decision, redriven: bool, count: int = 1) -> None:
    if decision.action is Action.ROUTE:
        metrics.routed.labels(decision.app, decision.group).inc(count)
        if redriven:
            metrics.redriven.labels(decision.app).inc(count)
    elif decision.action is Action.FILTERED:
        metrics.filtered.labels(decision.app).inc(count)
    elif decision.action is Action.PENDING:
        if not redriven:
            metrics.pending.labels(decision.app).inc(count)
    elif decision.action is Action.DROP:  # only ever an expired record (on_expire: drop)
        metrics.expired.labels(decision.app, Action.DROP.value).inc(count)
    else:
        metrics.dead_lettered.labels(decision.app, decision.reason or "unknown").inc(count)
        if decision.reason == EXPIRED:
            metrics.expired.labels(decision.app, Action.DEAD_LETTER.value).inc(count)
