"""The dashboard and the alerts only use metrics the worker exports (router/ops/metrics.py), with the right suffixes:
``_total`` counters, ``_bucket``/``_sum``/``_count`` histograms. (The lead's test scrapes a live worker's /metrics
for the same names.)"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from subroute.ops.metrics import RouterMetrics

from .conftest import DEPLOY, DEPLOYABLE, one

DASHBOARD = DEPLOY / "grafana" / "subroute-dashboard.json"
# Grafana's variables, replaced by something PromQL parses.
GRAFANA_VARIABLES = {"$__rate_interval": "5m", "$__interval": "1m", "$__range": "1h"}
METRIC_NAME = re.compile(r"\bsubroute_[a-zA-Z0-9_]+")


def exported_names() -> set[str]:
    """Sample names a RouterMetrics registry exposes, all series present (labelled ones touched once)."""
    metrics = RouterMetrics(CollectorRegistry(), runtime=False)  # process_* and python_* are not subroute's
    names: set[str] = set()
    for family in metrics.registry.collect():
        if family.type == "info":
            names.add(f"{family.name}_info")
        elif family.type == "counter":
            names |= {f"{family.name}_total", f"{family.name}_created"}
        elif family.type == "histogram":
            names |= {f"{family.name}_{s}" for s in ("bucket", "sum", "count", "created")}
        else:
            names.add(family.name)
    return names


def dashboard() -> dict[str, Any]:
    return json.loads(DASHBOARD.read_text())


def dashboard_expressions() -> Iterator[str]:
    def panels(items: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        for panel in items:
            yield panel
            yield from panels(panel.get("panels", []))

    for panel in panels(dashboard()["panels"]):
        for target in panel.get("targets", []):
            yield target["expr"]


def dashboard_variable_queries() -> Iterator[str]:
    for variable in dashboard()["templating"]["list"]:
        if variable["type"] == "query":
            yield variable["query"]["query"]


def alert_expressions(resources: list[dict[str, Any]]) -> Iterator[str]:
    for group in one(resources, "PrometheusRule")["spec"]["groups"]:
        for rule in group["rules"]:
            yield rule["expr"]


def promql(expr: str) -> str:
    for variable, value in GRAFANA_VARIABLES.items():
        expr = expr.replace(variable, value)
    return re.sub(r"\$\w+", "x", expr)


def test_exported_names_follow_prometheus_conventions() -> None:
    names = exported_names()
    assert "subroute_messages_in_total" in names and "subroute_batch_seconds_bucket" in names
    assert "subroute_messages_in" not in names


def test_dashboard_and_alerts_use_exported_metrics(rendered: dict[str, list[dict[str, Any]]]) -> None:
    exported = exported_names()
    texts = [*dashboard_expressions(), *dashboard_variable_queries()]
    for target in DEPLOYABLE:
        texts += list(alert_expressions(rendered[target]))
    used = {name for text in texts for name in METRIC_NAME.findall(text)}
    assert used, "no subroute metric found"
    assert used <= exported, sorted(used - exported)
    # Every exported metric family is on the dashboard somewhere.
    families = {re.sub(r"_(total|bucket|sum|count|created)$", "", n) for n in exported}
    shown = {re.sub(r"_(total|bucket|sum|count|created)$", "", n) for n in used}
    assert families <= shown, sorted(families - shown)


def test_expressions_parse_and_name_only_exported_metrics(rendered: dict[str, list[dict[str, Any]]]) -> None:
    promql_parser = pytest.importorskip("promql_parser")
    exported = exported_names()
    expressions = [*dashboard_expressions()]
    for target in DEPLOYABLE:
        expressions += list(alert_expressions(rendered[target]))
    for expr in expressions:
        tree = promql_parser.parse(promql(expr))
        selectors: list[str] = []

        def visit(node: Any, selectors: list[str] = selectors) -> None:
            if isinstance(node, promql_parser.VectorSelector):
                selectors.append(node.name)
            for attr in ("args", "expr", "lhs", "rhs", "vector_selector"):
                child = getattr(node, attr, None)
                for item in child if isinstance(child, list) else [child]:
                    if isinstance(item, promql_parser.Expr):
                        visit(item)

        visit(tree)
        assert selectors, expr
        assert set(selectors) <= exported, (expr, set(selectors) - exported)


def test_dashboard_shape() -> None:
    board = dashboard()
    assert board["uid"] and board["title"] and board["schemaVersion"] >= 36
    ids = [p["id"] for p in board["panels"]]
    assert len(ids) == len(set(ids))
    variables = {v["name"] for v in board["templating"]["list"]}
    assert {"datasource", "namespace"} <= variables
    for panel in board["panels"]:
        assert set(panel["gridPos"]) == {"h", "w", "x", "y"}
        assert panel["gridPos"]["x"] + panel["gridPos"]["w"] <= 24
        if panel["type"] != "row":
            assert panel["datasource"]["uid"] == "${datasource}"
            assert panel["targets"] and all(t["expr"] for t in panel["targets"])
