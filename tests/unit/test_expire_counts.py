"""Expired records are counted whatever becomes of them: subroute_expired_total{app,action}."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from subroute.ops.metrics import RouterMetrics
from subroute.routing.decisions import Action, Decision
from subroute.worker.tally import count_decision


def _value(metrics: RouterMetrics, name: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(name, labels)


def test_dropped_and_dead_lettered_expirations_are_counted_by_action() -> None:
    metrics = RouterMetrics(CollectorRegistry(), runtime=False)
    count_decision(metrics, Decision("billing", Action.DROP, reason="expired"), redriven=False, count=3)
    count_decision(metrics, Decision("audit", Action.DEAD_LETTER, reason="expired"), redriven=True)
    count_decision(metrics, Decision("audit", Action.DEAD_LETTER, reason="rejected"), redriven=False)
    assert _value(metrics, "subroute_expired_total", app="billing", action="drop") == 3
    assert _value(metrics, "subroute_expired_total", app="audit", action="dead-letter") == 1
    # a drop writes no dead letter; a dead letter for another reason is no expiration
    assert _value(metrics, "subroute_dead_lettered_total", app="billing", reason="expired") is None
    assert _value(metrics, "subroute_dead_lettered_total", app="audit", reason="rejected") == 1
