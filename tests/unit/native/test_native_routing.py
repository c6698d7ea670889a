"""Property test: ``Router.route_batch`` (one native plan evaluation per batch) gives exactly the ``RouteResult``
of ``Router.route`` (the Python plans, per record) for every record: decisions, filtered apps, evaluation and
decode error counts per app, and the round-robin cursors it leaves.

Configurations are random: apps of both dialects with filters, declared property types, priority expressions,
fairness models, spillover, group_by and expirations, reading overlapping topics; groups with subscriptions,
priorities and capacities. Records are random header lists (missing, repeated, null, mistyped and undecodable
values, int64 edges, NaN), on any topic, some redriven for one app (``only_app``), some expired.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "expressions"))
from expr_strategies import bmq_expressions, plan_bmq, plan_sql, sql_expressions

from subroute import expressions, names
from subroute.config.model import AppConfig, Config, GroupConfig, SubscriptionConfig
from subroute.expressions.expression import check
from subroute.routing.decisions import MessageView, Router, RouteResult, RoutingTable, build_table

SETTINGS = settings(
    max_examples=int(os.environ.get("NATIVE_EXAMPLES", "300")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
Headers = list[tuple[str, bytes | None]]

TOPICS = ("orders", "payments", "audit")
INPUTS = (("orders",), ("payments",), ("orders", "payments"), ("^pay.*",), ("orders", "^au"))
NAMES = ("a", "b", "c", "s", "t", "f")
_BMQ_TYPES = {"a": "int", "b": "int", "c": "int", "s": "string", "t": "string", "f": "bool"}
_SQL_TYPES = {"a": "int", "b": "int", "c": "float", "s": "string", "t": "string", "f": "bool"}
PRIORITIES = ("a", "b", "a + b", "a * 3", "a % 7", "b - 2", "c", "a / b", "9223372036854775807 + a")

VALUE_TEXTS = (
    "0",
    "-0",
    "1",
    "2",
    "3",
    "-1",
    "007",
    "9223372036854775807",
    "-9223372036854775808",
    "9223372036854775808",
    "2.5",
    "-0.0",
    "1e400",
    "nan",
    "NaN",
    "inf",
    "+1",
    " 1",
    "1_0",
    "",
    "true",
    "false",
    "a",
    "b",
    "ab",
    "%",
    "'",
)
raw_values: st.SearchStrategy[bytes | None] = st.one_of(
    st.sampled_from(VALUE_TEXTS).map(str.encode),
    st.integers(-(2**64), 2**64).map(lambda n: str(n).encode()),
    st.floats(allow_nan=True, allow_infinity=True).map(lambda f: repr(f).encode()),
    st.binary(max_size=3),
    st.just(b"\xff\xfe"),
    st.none(),
)
# Header names: the properties, the message-group header, an undeclared one and the message's own expiration.
header_names = st.sampled_from((*NAMES, "g", "other", names.EXPIRATION))
headers_strategy: st.SearchStrategy[Headers] = st.lists(
    st.tuples(header_names, st.one_of(raw_values, st.sampled_from((b"1", b"2")))), max_size=8
)


@st.composite
def type_maps(draw: st.DrawFn, dialect: str) -> dict[str, str]:
    base = _BMQ_TYPES if dialect == "bmq" else _SQL_TYPES
    kinds = ("int", "string", "bool") if dialect == "bmq" else ("int", "string", "bool", "float")
    out: dict[str, str] = {}
    for name, usual in base.items():
        choice = draw(st.integers(0, 5))
        if choice <= 3:
            out[name] = usual
        elif choice == 4:
            out[name] = draw(st.sampled_from(kinds))
    return out


def _valid(text: str, dialect: str, types: dict[str, str]) -> bool:
    try:
        check(text, dialect, types)
    except expressions.ExpressionError:
        return False
    return True


def _pairs(dialect: str) -> st.SearchStrategy[str]:
    """Two equality gates on a and b out of few values: which one indexes an entry depends on how many entries
    of the plan share each, which differs between an app's own plan and the plan of every app."""
    eq, joint = ("==", "&&") if dialect == "bmq" else ("=", "AND")
    return st.tuples(st.sampled_from(("a", "b")), st.integers(1, 2), st.integers(1, 2)).map(
        lambda t: f"{t[0]} {eq} {t[1]} {joint} {'b' if t[0] == 'a' else 'a'} {eq} {t[2]}"
    )


def _texts(dialect: str) -> st.SearchStrategy[str]:
    if dialect == "bmq":
        common = st.sampled_from(("a == 1", "a > 0", 's == "a"'))
        return st.one_of(bmq_expressions, plan_bmq, common, _pairs(dialect))
    common = st.sampled_from(("a = 1", "a > 0", "s = 'a'", "c < 2.5"))
    return st.one_of(sql_expressions, plan_sql, common, _pairs(dialect))


@st.composite
def configs(draw: st.DrawFn) -> Config:
    apps: dict[str, AppConfig] = {}
    groups: dict[tuple[str, str], GroupConfig] = {}
    # A conjunct many entries share is a poor gate in the one native plan and may be a good one in an app's own
    # plan: the native plan must index each entry as its Python plan does (errors are counted where evaluated).
    shared = {"bmq": draw(plan_bmq), "sql92": draw(plan_sql)}
    for i in range(draw(st.integers(1, 4))):
        name = f"app{i}"
        dialect = draw(st.sampled_from(("bmq", "sql92")))
        # Apps often share their types (one environment), sometimes not.
        types = dict(_BMQ_TYPES if dialect == "bmq" else _SQL_TYPES)
        if draw(st.booleans()):
            types = draw(type_maps(dialect))
        texts = _texts(dialect)
        common = shared[dialect]
        if common and draw(st.booleans()):
            joint = " && " if dialect == "bmq" else " AND "
            texts = st.one_of(texts, st.just(common), texts.map(lambda t, c=common, j=joint: f"{c}{j}({t})"))
        filters = [t for t in draw(st.lists(texts, max_size=3)) if _valid(t, dialect, types)]
        priority = draw(st.one_of(st.none(), st.sampled_from(PRIORITIES)))
        if priority is not None and not _valid(f"({priority}) >= 1", dialect, types):
            priority = None
        apps[name] = AppConfig(
            name=name,
            inputs=draw(st.sampled_from(INPUTS)),
            dialect=dialect,
            properties=types,
            filter=tuple(filters),
            group_by=draw(st.sampled_from((None, None, "g", "s"))),
            fairness=draw(st.sampled_from(("round-robin", "proportional", "fast"))),
            spillover=draw(st.booleans()),
            expiration_ms=draw(st.sampled_from((None, None, 1_000))),
            priority=priority,
        )
        for j in range(draw(st.integers(1, 3))):
            subs = []
            for _ in range(draw(st.integers(0, 3))):
                text = draw(st.one_of(st.none(), texts))
                if text is not None and not _valid(text, dialect, types):
                    continue
                subs.append(
                    SubscriptionConfig(
                        text, draw(st.integers(0, 2)), draw(st.sampled_from((None, None, 1, 2)))
                    )
                )
            groups[(name, f"g{j}")] = GroupConfig(
                app=name, name=f"g{j}", subscriptions=tuple(subs), order=draw(st.integers(0, 2))
            )
    return Config(version=1, apps=apps, groups=groups)


@st.composite
def records(draw: st.DrawFn, apps: Sequence[str]) -> tuple[MessageView, str | None]:
    headers = draw(headers_strategy)
    if draw(st.integers(0, 5)) == 0:  # now 10,000: the apps' 1 s expiration, or the record's own
        headers.append((names.EXPIRATION, draw(st.sampled_from((b"1s", b"1h", b"bad")))))
    timestamp = draw(st.sampled_from((0, 9_500, 5_000)))
    only_app = draw(st.one_of(st.none(), st.none(), st.sampled_from((*apps, "missing"))))
    return MessageView(draw(st.sampled_from(TOPICS)), headers, timestamp), only_app


def _fields(result: RouteResult) -> tuple[object, ...]:
    return (result.routed, list(result.filtered), result.evaluation_errors, result.decode_errors)


def _check(
    table: RoutingTable, batch: list[tuple[MessageView, str | None]], lag: dict[tuple[str, str], int]
) -> list[RouteResult]:
    # Fresh routers for each side: the round-robin cursors must move in step.
    reference, native = Router(), Router()
    expected = [reference.route(table, m, lag, 10_000, only_app) for m, only_app in batch]
    got = native.route_batch(table, [m for m, _ in batch], lag, 10_000, [o for _, o in batch])
    assert len(got) == len(expected)
    for (message, only_app), want, have in zip(batch, expected, got, strict=True):
        assert _fields(have) == _fields(want), (message, only_app)
    assert native.cursors == reference.cursors
    return expected


@SETTINGS
@given(st.data())
def test_route_batch_equals_route(data: st.DataObject) -> None:
    config = data.draw(configs())
    table = build_table(config)
    assert table.native is not None
    batch = data.draw(st.lists(records(sorted(config.apps)), min_size=1, max_size=12))
    lag = {key: data.draw(st.integers(0, 3)) for key in config.groups} if data.draw(st.booleans()) else {}
    for result in _check(table, batch, lag):
        # What the examples reach (pytest --hypothesis-show-statistics).
        event("evaluation errors" if result.evaluation_errors else "no evaluation error")
        event("decode errors" if result.decode_errors else "no decode error")
        event(f"{len(result.routed)} routed, {len(result.filtered)} filtered")
    # A table built from this one (the native plan reuses its parses) routes the same way.
    _check(build_table(config, previous=table), batch, lag)


@pytest.mark.parametrize("dialect", ["bmq", "sql92"])
def test_errors_counted_as_the_python_plans_do(dialect: str) -> None:
    """A shared equality makes a poor gate in the one native plan, a good one in an app's own plan: the native
    plan must still index each entry as its Python plan does, or the two count evaluation errors on different
    records (here: b is missing, so ``b > 0`` fails wherever it is evaluated)."""
    eq = "==" if dialect == "bmq" else "="
    types = {"a": "int", "b": "int"}
    apps = {
        f"app{i}": AppConfig(f"app{i}", ("orders",), dialect, types, filter=(f"a {eq} 1",)) for i in range(3)
    }
    groups = {
        ("app0", "g"): GroupConfig(
            "app0", "g", (SubscriptionConfig(f"a {eq} 1 {'&&' if dialect == 'bmq' else 'AND'} b > 0"),)
        )
    }
    table = build_table(Config(version=1, apps=apps, groups=groups))
    batch: list[tuple[MessageView, str | None]] = [
        (MessageView("orders", [("a", b"1")], 0), None),
        (MessageView("orders", [("a", b"2")], 0), None),
        (MessageView("orders", [("a", b"x"), ("b", b"1")], 0), None),
    ]
    _check(table, batch, {})


def test_entries_indexed_otherwise_fall_back_to_route(monkeypatch: pytest.MonkeyPatch) -> None:
    """Six ranges on one property make the Python plan index these by an interval with float bounds, which the
    native plan cannot: it evaluates them on every record, so it reports errors (here: a division by zero) on
    records the Python plan never evaluates them on. Such a record takes ``route``, which counts as the Python
    plans do."""
    types = {"c": "float", "b": "int"}
    app = AppConfig("app0", ("orders",), "sql92", types)
    subs = tuple(SubscriptionConfig(f"c BETWEEN 1.5 AND 2.5 AND b / 0 = {k}") for k in range(6))
    table = build_table(
        Config(version=1, apps={"app0": app}, groups={("app0", "g"): GroupConfig("app0", "g", subs)})
    )
    assert table.native is not None and not all(table.native.exact)
    routed_alone: list[MessageView] = []
    route = Router.route

    def counted(
        self: Router, table: RoutingTable, message: MessageView, *args: Any, **kwargs: Any
    ) -> RouteResult:
        routed_alone.append(message)
        return route(self, table, message, *args, **kwargs)

    batch: list[tuple[MessageView, str | None]] = [
        (MessageView("orders", [("c", b"2.0"), ("b", b"1")], 0), None),
        (MessageView("orders", [("c", b"5.0"), ("b", b"1")], 0), None),
        (MessageView("orders", [("b", b"1")], 0), None),
    ]
    monkeypatch.setattr(Router, "route", counted)
    results = _check(table, batch, {})
    assert [r.evaluation_errors for r in results] == [{"app0": 6}, {}, {}]
    # After the reference's own calls: route_batch's, among them the record the Python plan does not evaluate
    # the entries on (c missing: not in the interval) but the native plan does (c BETWEEN is UNKNOWN, then the
    # division fails).
    assert batch[2][0] in routed_alone[len(batch) :]
