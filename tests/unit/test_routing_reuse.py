"""The routing table's shortcuts give the answers of a table built from scratch."""

from __future__ import annotations

from subroute.config.model import AppConfig, Config, GroupConfig, SubscriptionConfig
from subroute.routing.decisions import Action, MessageView, Router, build_table

TYPES = {"App": "string", "N": "int"}


def _config(limit: int) -> Config:
    apps = {
        name: AppConfig(name=name, inputs=("orders",), properties=TYPES, filter=(f'App == "{name}"',))
        for name in ("a", "b", "c")
    }
    groups = {
        ("a", "low"): GroupConfig("a", "low", (SubscriptionConfig(f"N < {limit}"),)),
        ("a", "high"): GroupConfig("a", "high", (SubscriptionConfig(f"N >= {limit}"),), order=1),
        ("b", "all"): GroupConfig("b", "all", (SubscriptionConfig("N >= 0 && N < 100", 1),)),
        ("c", "any"): GroupConfig("c", "any"),
    }
    return Config(1, apps, groups)


def _decisions(table, app: str, n: int) -> list[tuple[str, str, str | None]]:  # type: ignore[no-untyped-def]
    view = MessageView("orders", [("App", app.encode()), ("N", str(n).encode())], 0)
    return [(d.app, d.action.value, d.group) for d in Router().route(table, view, {}, 0).decisions]


def test_unchanged_apps_keep_their_plans_and_answers_match_a_fresh_build() -> None:
    first = build_table(_config(50))
    second = build_table(_config(20), previous=first)
    fresh = build_table(_config(20))
    plans = {a.name: a.plan for a in first.apps}
    assert [a.plan is plans[a.name] for a in second.apps] == [False, True, True]
    for app in ("a", "b", "c", "z"):
        for n in (-1, 0, 19, 20, 49, 50, 99, 100):
            assert _decisions(second, app, n) == _decisions(fresh, app, n)


def test_filtered_apps_are_reported_for_every_message() -> None:
    table = build_table(_config(50))
    for _ in range(3):  # the filter outcome is cached after the first message
        assert _decisions(table, "b", 7) == [
            ("a", "filtered", None),
            ("b", "route", "all"),
            ("c", "filtered", None),
        ]
    assert _decisions(table, "c", 500) == [
        ("a", "filtered", None),
        ("b", "filtered", None),
        ("c", "route", "any"),
    ]
    result = Router().route(table, MessageView("orders", [("App", b"a"), ("N", b"7")], 0), {}, 0)
    assert [d.action for d in result.routed] == [Action.ROUTE]
    assert sorted(d.app for d in result.filtered) == ["b", "c"]
