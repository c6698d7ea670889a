"""The alerts an operator gets: each links its section of docs/runbook.md, which says what it means, what to check
and what to do; every `subroute ...` command they tell an operator to run exists (the CLI's own parser accepts
it); the not-ready alert leaves idle workers out; and the capacity and version-skew alerts compare what the
workers export."""

from __future__ import annotations

import re
from typing import Any

import pytest

from subroute.cli.main import build_parser

from .conftest import DEPLOYABLE, ROOT, TARGETS, one

RUNBOOK = ROOT / "docs" / "runbook.md"


def alerts(resources: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    rule = one(resources, "PrometheusRule")
    return {r["alert"]: r for g in rule["spec"]["groups"] for r in g["rules"] if "alert" in r}


def runbook_sections() -> dict[str, str]:
    parts = re.split(r"^## (\S+)\n", RUNBOOK.read_text(), flags=re.MULTILINE)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def commands(text: str) -> list[str]:
    """The `subroute ...` commands in backticks (inline code may wrap over a line in Markdown and YAML)."""
    return [" ".join(c.split()) for c in re.findall(r"`(subroute [^`]+)`", text)]


def parses(command: str) -> bool:
    # Placeholders (`APP`, a Prometheus `{{ $labels.app }}`) become a word; the parser only checks the shape.
    argv = re.sub(r"\{\{[^}]*\}\}", "x", command).split()[1:]
    try:
        build_parser().parse_args(argv)
    except SystemExit:
        return False
    return True


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_every_alert_links_its_runbook_section(
    rendered: dict[str, list[dict[str, Any]]], target: str
) -> None:
    found = alerts(rendered[target])
    sections = runbook_sections()
    assert set(sections) == set(found), "one runbook section per alert, and no other"
    for name, rule in found.items():
        assert rule["annotations"]["runbook_url"] == f"docs/runbook.md#{name.lower()}", name
        for part in ("**Means.**", "**Check.**", "**Do.**"):
            assert part in sections[name], (name, part)


def test_runbook_links_point_at_sections_that_exist() -> None:
    anchors = {name.lower() for name in runbook_sections()}
    links = re.findall(r"\]\(#([a-z0-9-]+)\)", RUNBOOK.read_text())
    assert links and set(links) <= anchors


def test_the_commands_alerts_and_runbook_give_exist(rendered: dict[str, list[dict[str, Any]]]) -> None:
    texts = [RUNBOOK.read_text()]
    for rule in alerts(rendered["base"]).values():
        texts += [str(v) for v in rule["annotations"].values()]
    found = [c for text in texts for c in commands(text)]
    assert len(found) >= 10, found
    assert [c for c in found if not parses(c)] == []
    assert not parses("subroute config explain")  # the command an alert used to name


def test_a_command_check_catches_a_wrong_flag() -> None:
    assert parses("subroute dlq show APP --reason expired")
    assert not parses("subroute dlq show APP --why expired")


@pytest.mark.parametrize("target", DEPLOYABLE)
def test_the_not_ready_alert_leaves_idle_workers_out(
    rendered: dict[str, list[dict[str, Any]]], target: str
) -> None:
    promql_parser = pytest.importorskip("promql_parser")
    tree = promql_parser.parse(alerts(rendered[target])["SubrouteWorkerNotReady"]["expr"])
    assert str(tree.op) == "unless"
    assert "subroute_ready" in str(tree.lhs) and "== 0" in str(tree.lhs)
    assert "subroute_idle" in str(tree.rhs) and "== 1" in str(tree.rhs)
    assert set(tree.modifier.matching.labels) == {"namespace", "pod"}  # per worker, not per namespace


@pytest.mark.parametrize("target", DEPLOYABLE)
def test_the_capacity_and_skew_alerts(rendered: dict[str, list[dict[str, Any]]], target: str) -> None:
    promql_parser = pytest.importorskip("promql_parser")
    found = alerts(rendered[target])
    capacity = promql_parser.parse(found["SubrouteGroupOverCapacity"]["expr"])
    assert str(capacity.op) == ">="
    assert "subroute_group_lag_messages" in str(capacity.lhs)
    assert "subroute_group_max_unconfirmed" in str(capacity.rhs)
    assert set(capacity.modifier.matching.labels) == {"namespace", "app", "group"}
    skew = promql_parser.parse(found["SubrouteConfigVersionSkew"]["expr"])
    assert str(skew.op) == ">" and str(skew.lhs.op) == "-"
    assert str(skew.lhs.lhs).startswith("max by (namespace)") and str(skew.lhs.rhs).startswith(
        "min by (namespace)"
    )
    assert "subroute_plan_version" in str(skew.lhs.lhs) and "subroute_plan_version" in str(skew.lhs.rhs)
    for name in ("SubrouteGroupOverCapacity", "SubrouteConfigVersionSkew"):
        assert found[name]["for"] in ("10m", "15m")  # a rebalance or a config change passes first


def test_the_deploy_readme_links_the_runbook_and_lists_every_alert(
    rendered: dict[str, list[dict[str, Any]]],
) -> None:
    text = (ROOT / "deploy" / "README.md").read_text()
    assert "(../docs/runbook.md)" in text
    listed = set(re.findall(r"^\| (Subroute\w+)", text, flags=re.MULTILINE))
    assert listed == set(alerts(rendered["base"]))
