"""A batch's decisions reach the metrics once per label set: many distinct decisions (one per subscription at
10,000 subscriptions) that share an app and group cost one labelled-counter lookup, and the counts are exact."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from subroute.ops.metrics import RouterMetrics
from subroute.routing.decisions import Action, Decision
from subroute.wire import EXPIRED
from subroute.worker.tally import BatchTally


def sample(metrics: RouterMetrics, name: str, **labels: str) -> float:
    return metrics.registry.get_sample_value(name, labels) or 0.0


def test_decisions_sharing_labels_are_counted_together_and_exactly() -> None:
    metrics = RouterMetrics(CollectorRegistry())
    lookups: list[tuple[str, ...]] = []
    labels = metrics.routed.labels

    def counting(*values: str) -> object:
        lookups.append(values)
        return labels(*values)

    metrics.routed.labels = counting  # type: ignore[method-assign]
    # 300 subscriptions of one group, each its own Decision object, and one of another group
    subscriptions = [Decision("billing", Action.ROUTE, "general", f"s{i}") for i in range(300)]
    other = Decision("billing", Action.ROUTE, "vip", "v")
    tally = BatchTally(decisions=[*subscriptions, *subscriptions[:100], other])
    expired = Decision("billing", Action.DEAD_LETTER, reason=EXPIRED)
    filtered = (Decision("audit", Action.FILTERED), expired)
    tally.filtered = [filtered, filtered]
    tally.publish(metrics)

    assert sorted(lookups) == [("billing", "general"), ("billing", "vip")]
    assert sample(metrics, "subroute_routed_total", app="billing", group="general") == 400
    assert sample(metrics, "subroute_routed_total", app="billing", group="vip") == 1
    assert sample(metrics, "subroute_filtered_total", app="audit") == 2
    assert sample(metrics, "subroute_dead_lettered_total", app="billing", reason=EXPIRED) == 2
    assert sample(metrics, "subroute_expired_total", app="billing", action="dead-letter") == 2
