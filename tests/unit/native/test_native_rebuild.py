"""A table rebuilt after a config change (``build_table(new, previous)``) takes the lowered entries of its previous
native plan for every expression it still holds, and decides exactly as a table built from nothing.

The native plan of a rebuilt table extends the previous plan's node list and reuses its lowered entries (gate
and residual per expression and gate; router/routing/native_plan.py); ``stats["lowered"]`` and
``stats["reused"]`` say how many of each, so a break of the reuse fails here, as would a reused entry that
decides otherwise.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_native_routing import SETTINGS, Headers, _check, _texts, _valid, configs, headers_strategy, records

from subroute.config.model import AppConfig, Config, GroupConfig, SubscriptionConfig
from subroute.expressions import Subscription, compile_plan
from subroute.expressions.plan import Gate, plan_entries
from subroute.routing import native_plan
from subroute.routing.decisions import RoutingTable
from subroute.routing.native_plan import NativePlan
from subroute.routing.native_routing import build_table


def _native(table: RoutingTable) -> native_plan.NativePlan:
    assert table.native is not None
    return table.native.plan


def _same_decisions(rebuilt: RoutingTable, fresh: RoutingTable, batch: list[Headers]) -> None:
    assert rebuilt.native is not None and fresh.native is not None
    assert rebuilt.native.ids == fresh.native.ids
    assert rebuilt.native.spans == fresh.native.spans
    assert rebuilt.native.exact == fresh.native.exact
    assert _native(rebuilt).match_indexes_with_errors(batch) == _native(fresh).match_indexes_with_errors(
        batch
    )


@st.composite
def one_group_changed(draw: st.DrawFn, config: Config) -> Config:
    """``config`` with one group's subscriptions rewritten (new expressions, or some of another group's)."""
    (app, group), old = draw(st.sampled_from(sorted(config.groups.items())))
    dialect, types = config.apps[app].dialect, dict(config.apps[app].properties)
    others = [s for g in config.groups.values() for s in g.subscriptions if g.app == app]
    subs: list[SubscriptionConfig] = []
    for _ in range(draw(st.integers(0, 4))):
        if others and draw(st.booleans()):
            subs.append(draw(st.sampled_from(others)))
            continue
        text = draw(_texts(dialect))
        if _valid(text, dialect, types):
            subs.append(SubscriptionConfig(text, draw(st.integers(0, 2))))
    groups = dict(config.groups)
    groups[(app, group)] = GroupConfig(app, group, tuple(subs), old.order)
    return dataclasses.replace(config, version=config.version + 1, groups=groups)


@SETTINGS
@given(st.data())
def test_rebuilt_table_decides_as_a_fresh_one(data: st.DataObject) -> None:
    config = data.draw(configs())
    table = build_table(config)
    batch = data.draw(st.lists(headers_strategy, min_size=1, max_size=12))
    # A chain of changes, back to the first config at the end: entries of plans before the previous one are
    # reused too only if the previous plan held them.
    versions = [data.draw(one_group_changed(config))]
    versions.append(data.draw(one_group_changed(versions[0])))
    versions.append(dataclasses.replace(config, version=10))
    for new in versions:
        rebuilt = build_table(new, table)
        fresh = build_table(new)
        _same_decisions(rebuilt, fresh, batch)
        stats = _native(rebuilt).stats
        assert stats["lowered"] + stats["reused"] == stats["subscriptions"] == len(_native(fresh))
        table = rebuilt
    # And routing on the rebuilt table is route's.
    routed = data.draw(st.lists(records(sorted(config.apps)), min_size=1, max_size=6))
    _check(table, routed, {})


def _config(groups: dict[tuple[str, str], tuple[str, ...]]) -> Config:
    types = {"a": "int", "s": "string"}
    apps = {
        name: AppConfig(
            name, ("orders",), "bmq", types, filter=(f"a > {i}",), priority="a % 3" if i else None
        )
        for i, name in enumerate(sorted({app for app, _ in groups}))
    }
    return Config(
        version=1,
        apps=apps,
        groups={
            (app, group): GroupConfig(app, group, tuple(SubscriptionConfig(t) for t in texts))
            for (app, group), texts in groups.items()
        },
    )


GROUPS = {
    ("app0", "g0"): tuple(f'a == {k} && s != "x"' for k in range(20)),
    ("app0", "g1"): tuple(f"a >= {k} && a < {k + 5}" for k in range(20)),
    ("app1", "g0"): tuple(f's == "v{k}" || a == {k}' for k in range(20)),
    ("app2", "g0"): tuple(f"a == {k}" for k in range(20)),
}


def test_a_one_group_change_lowers_that_group_only() -> None:
    table = build_table(_config(GROUPS))
    first = _native(table).stats
    assert first["reused"] == 0 and first["lowered"] == first["subscriptions"]
    # Rewrite 5 of the 20 expressions of one group: only those 5 are lowered again.
    changed = dict(GROUPS)
    changed[("app0", "g1")] = GROUPS[("app0", "g1")][:15] + tuple(
        f"a >= {k} && a < {k + 7}" for k in range(5)
    )
    config = _config(changed)
    rebuilt = build_table(config, table)
    stats = _native(rebuilt).stats
    assert (stats["lowered"], stats["reused"]) == (5, first["subscriptions"] - 5)
    batch: list[Headers] = [[("a", str(v).encode()), ("s", s)] for v in range(-1, 30) for s in (b"x", b"v3")]
    _same_decisions(rebuilt, build_table(config), batch)
    # Nothing changed: nothing is lowered, and the nodes are those of the previous plan.
    again = build_table(dataclasses.replace(config, version=3), rebuilt)
    assert _native(again).stats["lowered"] == 0
    assert _native(again).stats["nodes"] == stats["nodes"]


def test_entries_are_taken_by_content_and_gate() -> None:
    subs = [Subscription(i, f"a == {i} && b > 0", "bmq", {"a": "int", "b": "int"}) for i in range(10)]
    by_a = compile_plan(subs).entries
    assert all(e.gate is not None and e.gate.prop == "a" for e in by_a)
    first = NativePlan(by_a)
    # Equal subscriptions (other ids, another mapping of the same types) take the earlier entries ...
    copies = [Subscription(("copy", i), s.text, s.dialect, dict(s.types or {})) for i, s in enumerate(subs)]
    assert NativePlan(compile_plan(copies).entries, reuse=first).stats["reused"] == 10
    # ... but not under another gate, or other declared types.
    on_b = Gate("range", "b", 1, True, op=">", bound=0)
    by_b = NativePlan([dataclasses.replace(e, gate=on_b) for e in by_a], reuse=first)
    assert by_b.stats["lowered"] == 10
    retyped = [Subscription(s.id, s.text, s.dialect, {"a": "int", "b": "int", "c": "string"}) for s in subs]
    assert NativePlan(compile_plan(retyped).entries, reuse=first).stats["lowered"] == 10
    headers = [("a", b"3"), ("b", b"1")]
    assert by_b.match(headers) == first.match(headers) == {3}
    # Subscriptions are given the Python plan's gates here, so their entries are taken as well.
    assert NativePlan(subs, reuse=first).stats["reused"] == 10


def test_node_list_starts_afresh_when_mostly_unread(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(native_plan, "GARBAGE_SLACK", 0)
    types = {"a": "int"}

    def plan(texts: list[str], reuse: NativePlan | None) -> NativePlan:
        subs = [Subscription(i, t, "bmq", types) for i, t in enumerate(texts)]
        # Ungated entries: every node of the expression is in the node list.
        return NativePlan([dataclasses.replace(e, gate=None) for e in plan_entries(subs)], reuse=reuse)

    small = plan(["a == 1"], None)
    # Entirely new expressions: the node list grows past twice its fresh size ...
    large = plan([f"a * {k} == {k + 1}" for k in range(10)], small)
    assert large.stats["nodes"] > 2 * small.stats["nodes"]
    # ... so the next plan starts afresh: nothing reused, only the nodes it reads.
    again = plan(["a == 1"], large)
    assert again.stats["reused"] == 0
    assert again.stats["nodes"] == small.stats["nodes"]
    assert again.match([("a", b"1")]) == {0}
