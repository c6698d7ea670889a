"""No false finding: every finding lint reports on random small configs is confirmed by brute force, the
reference interpreter and the reference Router deciding every assignment of a small domain (absent headers
included), under every presence and capacity the groups can be in."""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from subroute.config.lint import (
    ALWAYS_TRUE,
    GROUP_SPLIT,
    NEVER_TRUE,
    OVERLAP,
    SHADOWED,
    WAITS_FOREVER,
    Finding,
    Ref,
    lint,
)
from subroute.config.model import AppConfig, Config, GroupConfig, SubscriptionConfig
from subroute.expressions import compile as compile_expression
from subroute.routing.decisions import Action, Decision, Router
from tests.unit.lint_support import config_of, decide

TYPES = {"x": "int", "t": "string", "b": "bool"}
# Literals come from {1, 2, 3} and {"a", "b"}: these values reach every class they cut, absent included.
DOMAIN = list(itertools.product([None, 0, 1, 2, 3, 4], [None, "a", "b", "c"], [None, True, False]))
ATOMS = [
    "x > 2",
    "x == 1",
    "x <= 3",
    "x != 2",
    "x >= 1 && x < 3",
    't == "a"',
    't != "b"',
    "b",
    "!b",
    "exists(x)",
    "exists(t)",
    "!exists(t)",
    "x + 1 > 2",
    "x * x == 4",  # the last two: arithmetic, unknown
]
GROUPS = ("g0", "g1", "g2")


def _expr() -> st.SearchStrategy[str]:
    atom = st.sampled_from(ATOMS)
    return st.recursive(
        atom,
        lambda inner: st.one_of(
            st.tuples(inner, st.sampled_from(["&&", "||"]), inner).map(lambda t: f"({t[0]}) {t[1]} ({t[2]})"),
            inner.map(lambda e: f"!({e})"),
        ),
        max_leaves=3,
    ).filter(lambda e: len(e) <= 128)


@st.composite
def configs(draw: st.DrawFn) -> Config:
    group_by = draw(st.sampled_from([None, None, "x", "t"]))
    app = AppConfig(
        name="shop",
        inputs=("orders",),
        properties=TYPES,
        filter=tuple(draw(st.lists(_expr(), max_size=1))),
        group_by=group_by,
        presence=draw(st.sampled_from(["required", "ignored"])),
        spillover=draw(st.booleans()),
        fairness=draw(st.sampled_from(["round-robin", "proportional", "fast"])),
    )
    groups = []
    for order, name in enumerate(GROUPS[: draw(st.integers(1, 3))]):
        subs = draw(st.lists(st.tuples(_expr(), st.integers(0, 2)), max_size=3))
        # every subscription limits its group to one unconfirmed message: "full" is then lag 1, whichever
        # subscriptions the group has (removing one never changes the limit)
        groups.append(
            GroupConfig("shop", name, tuple(SubscriptionConfig(e, p, 1) for e, p in subs), order=order)
        )
    return config_of(app, groups)


def _props(point: tuple[Any, ...]) -> dict[str, Any]:
    return {k: v for k, v in zip(("x", "t", "b"), point, strict=True) if v is not None}


def _text(config: Config, ref: Ref) -> str | None:
    app = config.apps["shop"]
    if ref[0] == "filter":
        return app.filter[int(ref[1])]
    return config.groups[("shop", ref[1])].effective_subscriptions[int(ref[2])].expression


def _matches(text: str | None, props: dict[str, Any]) -> bool:
    return text is None or compile_expression(text, types=TYPES).evaluate(props).value


def _passes(config: Config, props: dict[str, Any]) -> bool:
    app = config.apps["shop"]
    return not app.filter or any(_matches(f, props) for f in app.filter)


def _states(config: Config) -> list[tuple[frozenset[str], dict[str, int]]]:
    names = [g for (_, g) in config.groups]
    absences = [frozenset(c) for n in range(len(names) + 1) for c in itertools.combinations(names, n)]
    lags = [dict(zip(names, full, strict=True)) for full in itertools.product([0, 1], repeat=len(names))]
    return [(a, lag) for a in absences for lag in lags]


def _without(config: Config, ref: Ref) -> Config:
    g = config.groups[("shop", ref[1])]
    # replaced by one that never matches rather than removed: a group left without subscriptions takes anything
    never = SubscriptionConfig("exists(x) && !exists(x)", 0, 1)
    subs = tuple(never if i == int(ref[2]) else s for i, s in enumerate(g.subscriptions))
    groups = dict(config.groups)
    groups[("shop", ref[1])] = GroupConfig("shop", g.name, subs, order=g.order)
    return Config(1, config.apps, groups)


def _same(a: Decision, b: Decision) -> bool:
    return (a.action, a.group, a.reason) == (b.action, b.group, b.reason)


def _confirm(config: Config, f: Finding) -> None:
    own = f.refs[0]
    if f.kind == NEVER_TRUE:
        assert not any(_matches(_text(config, own), _props(p)) for p in DOMAIN), f
    elif f.kind == ALWAYS_TRUE:
        assert all(_matches(_text(config, own), _props(p)) for p in DOMAIN), f
    elif f.kind == WAITS_FOREVER:
        (sample,) = f.samples
        d = decide(config, "shop", sample)
        assert d.action is Action.PENDING and d.reason is None, (f, d)
    elif f.kind == OVERLAP:
        (sample,) = f.samples
        props = {k: v for k, v in sample.items() if v is not None}
        assert _passes(config, props)
        assert _matches(_text(config, own), props) and _matches(_text(config, f.refs[1]), props), f
        # both groups get such messages: some capacity state sends it to each
        router = Router()  # the turns of round-robin and proportional
        got = {decide(config, "shop", sample, router=router).group for _ in range(2 * len(config.groups))}
        got |= {decide(config, "shop", sample, absent=a, lag=lag).group for a, lag in _states(config)}
        assert {own[1], f.refs[1][1]} <= got, (f, got)
    elif f.kind == SHADOWED:
        # Never chosen: removing it changes no decision, in any presence and capacity state, for any message.
        # (A group without subscriptions cannot be removed this way; it is shadowed only by another group.)
        if config.groups[("shop", own[1])].subscriptions:
            reduced = _without(config, own)
            for point in DOMAIN:
                sample = dict(zip(("x", "t", "b"), point, strict=True))
                for absent, lag in _states(config):
                    a = decide(config, "shop", sample, absent=absent, lag=lag)
                    b = decide(reduced, "shop", sample, absent=absent, lag=lag)
                    assert _same(a, b), (f, sample, absent, lag, a, b)
    elif f.kind == GROUP_SPLIT:
        first, second = f.samples
        key = config.apps["shop"].group_by
        assert key is not None and first.get(key) == second.get(key)
        assert decide(config, "shop", first).group != decide(config, "shop", second).group, f
    else:  # pragma: no cover
        raise AssertionError(f.kind)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(configs())
def test_every_finding_is_confirmed_by_brute_force(config: Config) -> None:
    for finding in lint(config).findings:
        _confirm(config, finding)
