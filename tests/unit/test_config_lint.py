"""``subroute config lint``: one test per kind of finding, each confirmed by the reference Router, and the
command's output formats and exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from subroute.cli.main import main
from subroute.config.lint import (
    ALWAYS_TRUE,
    GROUP_SPLIT,
    NEVER_TRUE,
    OVERLAP,
    SHADOWED,
    WAITS_FOREVER,
    Finding,
    LintReport,
    lint,
)
from subroute.config.model import AppConfig, GroupConfig, SubscriptionConfig
from subroute.expressions import compile as compile_expression
from subroute.routing.decisions import Action, Router
from tests.unit.lint_support import config_of, decide

TYPES = {"x": "int", "t": "string", "b": "bool"}


def app(**kw: object) -> AppConfig:
    return AppConfig(name="shop", inputs=("orders",), properties=TYPES, **kw)  # type: ignore[arg-type]


def group(name: str, *subs: tuple[str, int], order: int = 0) -> GroupConfig:
    return GroupConfig("shop", name, tuple(SubscriptionConfig(e, p) for e, p in subs), order=order)


def kinds(report: LintReport, kind: str) -> list[Finding]:
    return [f for f in report.findings if f.kind == kind]


def test_a_lower_subscription_of_the_same_group_that_a_higher_one_contains_is_shadowed() -> None:
    g = group("g", ("x > 5", 10), ("x > 7", 1))
    config = config_of(app(), [g, group("other", ("x < 0", 5), order=1)])
    (found,) = kinds(lint(config), SHADOWED)
    assert found.where == "apps.shop.groups.g.subscriptions[1]"
    # Never chosen, whoever is attached or full: no decision is stamped with it.
    for x in range(-2, 12):
        for absent in (frozenset(), frozenset({"g"}), frozenset({"other"})):
            for lag in ({}, {"g": 5}):
                d = decide(config, "shop", {"x": x}, absent=absent, lag=lag)
                assert d.subscription != "x > 7"


def test_another_groups_higher_subscription_shadows_only_with_presence_ignored_and_no_spillover() -> None:
    groups = [group("a", ("x > 5", 10)), group("b", ("x > 7", 1), order=1)]
    ignored = config_of(app(presence="ignored"), groups)
    (found,) = kinds(lint(ignored), SHADOWED)
    assert found.where == "apps.shop.groups.b.subscriptions[0]"
    required = config_of(app(), groups)
    assert not kinds(lint(required), SHADOWED)
    # why: with presence required, b takes what a would when a has no consumer
    assert decide(required, "shop", {"x": 9}, absent=frozenset({"a"})).group == "b"
    spilling = config_of(app(presence="ignored", spillover=True), groups)
    assert not kinds(lint(spilling), SHADOWED)


def test_equal_priority_overlap_between_groups_comes_with_a_sample_that_alternates() -> None:
    config = config_of(app(), [group("a", ("x > 5", 1)), group("b", ("x < 10", 1), order=1)])
    (found,) = kinds(lint(config), OVERLAP)
    (sample,) = found.samples
    router = Router()
    assert {decide(config, "shop", sample, router=router).group for _ in range(2)} == {"a", "b"}


def test_never_true_and_always_true_absent_headers_included() -> None:
    config = config_of(
        app(),
        [
            group("g", ("x > 5 && x < 3", 1), ("x > 5 || x <= 5", 1), ("!exists(x) || x > 5 || x <= 5", 1)),
        ],
    )
    report = lint(config)
    assert [f.where for f in kinds(report, NEVER_TRUE)] == ["apps.shop.groups.g.subscriptions[0]"]
    # "x > 5 || x <= 5" fails when x is absent: not always true
    assert [f.where for f in kinds(report, ALWAYS_TRUE)] == ["apps.shop.groups.g.subscriptions[2]"]
    for x in (None, -1, 4, 5, 6):
        props = {} if x is None else {"x": x}
        assert not compile_expression("x > 5 && x < 3", types=TYPES).evaluate(props).value
        assert compile_expression("!exists(x) || x > 5 || x <= 5", types=TYPES).evaluate(props).value


def test_messages_that_pass_the_filter_and_match_nothing_wait_forever() -> None:
    config = config_of(
        app(filter=("x >= 0",)), [group("g", ("x > 10", 1)), group("h", ('t == "a"', 1), order=1)]
    )
    (found,) = kinds(lint(config), WAITS_FOREVER)
    (sample,) = found.samples
    decision = decide(config, "shop", sample)
    assert decision.action is Action.PENDING and decision.reason is None
    # a group without subscriptions takes everything: nothing waits
    covered = config_of(app(filter=("x >= 0",)), [group("g", ("x > 10", 1)), group("all", order=1)])
    assert not kinds(lint(covered), WAITS_FOREVER)


def test_group_by_with_subscriptions_that_split_a_message_group() -> None:
    config = config_of(
        app(group_by="x", presence="ignored"),
        [group("general", ('t == "BULK"', 1)), group("audit", order=1)],
    )
    (found,) = kinds(lint(config), GROUP_SPLIT)
    first, second = found.samples
    assert first["x"] == second["x"]
    assert {decide(config, "shop", first).group, decide(config, "shop", second).group} == {"general", "audit"}
    # subscriptions on the group_by property alone never split a message group
    keyed = config_of(app(group_by="x"), [group("low", ("x < 5", 1)), group("high", ("x >= 5", 1), order=1)])
    assert not kinds(lint(keyed), GROUP_SPLIT)


def test_what_it_cannot_decide_is_unknown_never_a_finding() -> None:
    sql = AppConfig(name="shop", inputs=("orders",), dialect="sql92", properties=TYPES)
    config = config_of(
        sql,
        [
            group("g", ("t LIKE 'a%' AND t LIKE 'b%'", 10), ("x * 2 > 4 AND x < 0", 1)),
            group("h", ("t = 'a'", 5)),
        ],
    )
    report = lint(config)
    assert not kinds(report, NEVER_TRUE) and not kinds(report, SHADOWED)
    reasons = {u.where: u.reason for u in report.unknowns}
    assert "LIKE" in reasons["apps.shop.groups.g.subscriptions[0]"]
    assert "arithmetic" in reasons["apps.shop.groups.g.subscriptions[1]"]


def test_a_required_conjunct_that_cannot_hold_is_never_true_even_beside_an_unknown_one() -> None:
    sql = AppConfig(name="shop", inputs=("orders",), dialect="sql92", properties=TYPES)
    config = config_of(sql, [group("g", ("t LIKE 'a%' AND x > 5 AND x < 3", 1))])
    assert [f.where for f in kinds(lint(config), NEVER_TRUE)] == ["apps.shop.groups.g.subscriptions[0]"]


# --- the command ---------------------------------------------------------------------------------------------------

CLEAN = """
apps:
  shop:
    inputs: [orders]
    properties: {x: int}
    groups:
      low: {subscriptions: [{expression: 'x < 5', priority: 1}]}
      rest: {}
"""
FINDINGS = CLEAN.replace("x < 5", "x < 5 && x > 7")


@pytest.fixture(autouse=True)
def _no_broker(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SUBROUTE_BOOTSTRAP_SERVERS", "127.0.0.1:1")  # lint without --sample-topic is offline


def _lint(tmp_path: Path, text: str, *extra: str) -> int:
    path = tmp_path / "subscriptions.yaml"
    path.write_text(text)
    return main(["config", "lint", "-f", str(path), *extra])


def test_exit_0_when_clean_1_with_findings_2_when_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _lint(tmp_path, CLEAN) == 0
    assert "0 finding(s)" in capsys.readouterr().out
    assert _lint(tmp_path, FINDINGS) == 1
    assert "never-true: apps.shop.groups.low.subscriptions[0]" in capsys.readouterr().out
    assert _lint(tmp_path, CLEAN.replace("x < 5", "x < 'five'")) == 2
    assert "^" in capsys.readouterr().err


def test_json_and_yaml_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _lint(tmp_path, FINDINGS, "-o", "json") == 1
    document = json.loads(capsys.readouterr().out)
    assert [f["kind"] for f in document["findings"]] == [NEVER_TRUE]
    assert document["expressions"] == 1
    assert _lint(tmp_path, FINDINGS, "-o", "yaml") == 1
    assert "kind: never-true" in capsys.readouterr().out


def test_the_example_config_lints(capsys: pytest.CaptureFixture[str]) -> None:
    root = Path(__file__).resolve().parents[2]
    assert main(["config", "lint", "-f", str(root / "examples" / "subscriptions.yaml")]) == 1
    out = capsys.readouterr().out
    assert "waits-forever: apps.billing" in out and "CustomerId absent" in out
