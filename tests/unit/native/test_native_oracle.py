"""Property tests: the native plan (router/native, via router.routing.native_plan) decides exactly what the reference
decides: each subscription alone, its headers decoded by ``subroute.routing.properties`` with its own declared types,
evaluated by ``subroute.expressions.interpreter``; and the Python plan of each set of subscriptions sharing types."""

from __future__ import annotations

import os
import sys
from collections.abc import Hashable, Mapping, Sequence
from pathlib import Path

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "expressions"))
from expr_strategies import bmq_expressions, plan_bmq, plan_sql, sql_expressions

from subroute import expressions
from subroute.expressions import Subscription, compile_plan
from subroute.expressions.expression import check
from subroute.expressions.interpreter import interpret
from subroute.routing.native_plan import NativePlan
from subroute.routing.properties import decode_headers

SETTINGS = settings(
    max_examples=int(os.environ.get("NATIVE_EXAMPLES", "300")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
Headers = list[tuple[str, bytes | None]]

NAMES = ("a", "b", "c", "s", "t", "f", "x")
INT_TEXTS = (
    "0",
    "-0",
    "1",
    "-1",
    "2",
    "3",
    "-7",
    "007",
    "9223372036854775807",
    "-9223372036854775808",
    "9223372036854775808",
    "4611686018427387904",
    "18446744073709551616",
    "+1",
    " 1",
    "1_0",
    "",
)
FLOAT_TEXTS = (
    "0.0",
    "-0.0",
    "2.5",
    "-2.5",
    "1e300",
    "1e400",
    "nan",
    "+nan",
    "-NaN",
    "inf",
    "+infinity",
    "1_0.5",
    ".5",
    "3.",
    "9007199254740993",
    "9.223372036854775807e18",
)
OTHER_TEXTS = ("true", "false", "True", "a", "b", "ab", "%", "_", "'", "a%b", "x" * 40)

raw_values: st.SearchStrategy[bytes | None] = st.one_of(
    st.sampled_from(INT_TEXTS + FLOAT_TEXTS + OTHER_TEXTS).map(str.encode),
    st.integers(-(2**64), 2**64).map(lambda n: str(n).encode()),
    st.floats(allow_nan=True, allow_infinity=True).map(lambda f: repr(f).encode()),
    st.text(alphabet="ab%_'x", max_size=6).map(str.encode),
    st.binary(max_size=4),
    st.just(b"\xff\xfe"),
    st.none(),
)
headers_strategy: st.SearchStrategy[Headers] = st.lists(
    st.tuples(st.sampled_from(NAMES), raw_values), max_size=9
)

# Declared types: usually what the generated expressions assume for each name, sometimes undeclared or other.
_BMQ_TYPES = {"a": "int", "b": "int", "c": "int", "s": "string", "t": "string", "f": "bool"}
_SQL_TYPES = {"a": "int", "b": "int", "c": "float", "s": "string", "t": "string", "f": "bool"}


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


@st.composite
def subscriptions(draw: st.DrawFn) -> list[Subscription]:
    subs: list[Subscription] = []
    for i in range(draw(st.integers(1, 8))):
        dialect = draw(st.sampled_from(("bmq", "sql92")))
        texts = (bmq_expressions, plan_bmq) if dialect == "bmq" else (sql_expressions, plan_sql)
        text = draw(st.one_of(*texts))
        types = draw(type_maps(dialect))
        try:
            check(text, dialect, types)
        except expressions.ExpressionError:
            continue
        subs.append(Subscription(i, text, dialect, types))
        if draw(st.integers(0, 3)) == 0:  # the same text under another id (and maybe other types): sharing
            subs.append(Subscription(f"{i}'", text, dialect, draw(st.sampled_from((types, {})))))
    return subs


def reference(subs: Sequence[Subscription], headers: Headers) -> frozenset[Hashable]:
    return reference_with_errors(subs, headers)[0]


def reference_with_errors(
    subs: Sequence[Subscription], headers: Headers
) -> tuple[frozenset[Hashable], frozenset[Hashable]]:
    """Each subscription alone: the ids that match, and those whose evaluation ends in an error."""
    matched, errors = [], []
    for sub in subs:
        props, _ = decode_headers(headers, sub.types or {})
        outcome = interpret(check(sub.text, sub.dialect, sub.types), props, sub.dialect)
        if outcome.value:
            matched.append(sub.id)
        elif outcome.error is not None:
            errors.append(sub.id)
    return frozenset(matched), frozenset(errors)


def python_plans(subs: Sequence[Subscription], headers: Headers) -> frozenset[Hashable]:
    """The Python plan, one per set of declared types (as the router builds one per environment)."""
    groups: dict[tuple[tuple[str, str], ...], list[Subscription]] = {}
    for sub in subs:
        groups.setdefault(tuple(sorted((sub.types or {}).items())), []).append(sub)
    out: set[Hashable] = set()
    for key, group in groups.items():
        props, _ = decode_headers(headers, dict(key))
        out |= compile_plan(group).match(props)
    return frozenset(out)


@SETTINGS
@given(subscriptions(), st.lists(headers_strategy, min_size=1, max_size=6))
def test_native_equals_reference(subs: list[Subscription], batch: list[Headers]) -> None:
    plan = NativePlan(subs)
    got = plan.match_batch(batch)
    assert len(got) == len(batch)
    for headers, matched in zip(batch, got, strict=True):
        expected = reference(subs, headers)
        assert matched == expected, (headers, [(s.id, s.text, s.dialect, s.types) for s in subs])
        assert matched == python_plans(subs, headers)
    # Errors: only subscriptions that end in an error alone, and every such one that was evaluated.
    ungated = {i for i, sub in enumerate(subs) if plan.gate_of(i) is None}
    for headers, (hit, failed) in zip(batch, plan.match_indexes_with_errors(batch), strict=True):
        matched, errors = reference_with_errors(subs, headers)
        assert {subs[i].id for i in hit} == matched
        assert {subs[i].id for i in failed} <= errors
        assert {subs[i].id for i in ungated if subs[i].id in errors} <= {subs[i].id for i in failed}


# Gate-heavy plans: many subscriptions on few values, so the indexes hold several entries per key and bound.
_gate_values = st.sampled_from(("-1", "0", "1", "2", "3", "2.5", "1.0", "-9223372036854775808"))


@st.composite
def gated(draw: st.DrawFn) -> list[Subscription]:
    subs = []
    for i in range(draw(st.integers(1, 30))):
        sql = draw(st.booleans())
        name = draw(st.sampled_from(("a", "c")))
        low, high = draw(_gate_values), draw(_gate_values)
        if not sql:
            low, high = (v for v in (low, high))
            if "." in low or "." in high:
                low, high = "0", "2"
        form = draw(st.integers(0, 5))
        if sql:
            text = [
                f"{name} = {low}",
                f"{name} > {low} AND {name} <= {high}",
                f"{name} BETWEEN {low} AND {high}",
                f"({name} = {low} OR {name} = {high}) AND b > 0",
                f"{name} < {high}",
                f"{name} >= {low} AND {name} < {high} AND s IN ('a', 'b')",
            ][form]
            types = {"a": "int", "c": "float", "b": "int", "s": "string"}
        else:
            text = [
                f"{name} == {low}",
                f"{name} > {low} && {name} <= {high}",
                f"{name} >= {low} && {name} <= {high} && b != 1",
                f"({name} == {low} || {name} == {high}) && b > 0",
                f"{name} < {high}",
                f'{name} >= {low} && {name} < {high} && s == "a"',
            ][form]
            types = {"a": "int", "c": "int", "b": "int", "s": "string"}
        try:
            check(text, "sql92" if sql else "bmq", types)
        except expressions.ExpressionError:
            continue
        subs.append(Subscription(i, text, "sql92" if sql else "bmq", types))
    return subs


_num_texts = st.one_of(
    st.sampled_from(("-1", "0", "1", "2", "3", "2.5", "1.0", "0.5", "-0.0", "nan", "+nan", "1e300")),
    st.integers(-3, 4).map(str),
    st.floats(-4, 4).map(repr),
    st.sampled_from(("-9223372036854775808", "9223372036854775807")),
).map(str.encode)


@SETTINGS
@given(
    gated(),
    st.lists(
        st.lists(st.tuples(st.sampled_from(("a", "b", "c", "s")), _num_texts | st.just(b"a")), max_size=5),
        min_size=1,
        max_size=8,
    ),
)
def test_native_indexes_equal_reference(subs: list[Subscription], batch: list[Headers]) -> None:
    plan = NativePlan(subs)
    for headers, matched in zip(batch, plan.match_batch(batch), strict=True):
        assert matched == reference(subs, headers), headers


def _decoded(types: Mapping[str, str], headers: Headers) -> dict[str, object]:
    return dict(decode_headers(headers, types)[0])


_gated_headers = st.lists(
    st.tuples(st.sampled_from(("a", "b", "c", "s")), _num_texts | st.just(b"a")), max_size=5
)


@SETTINGS
@given(
    st.one_of(subscriptions(), gated()),
    st.lists(st.sampled_from((None, "open g", "open h", "needs g", "needs h")), min_size=30, max_size=30),
    st.lists(st.one_of(headers_strategy, _gated_headers), min_size=1, max_size=4),
)
def test_required_groups_equal_reference(
    subs: list[Subscription], roles: list[str | None], batch: list[Headers]
) -> None:
    """App filters and the subscriptions behind them in one plan: those that require a group match only when
    a subscription opening it matches (each decided alone by the reference). Gate-heavy plans too: the native
    plan indexes each group's subscriptions apart (a record probes the groups it opened), so a gate's key held
    in several groups, and records opening one, both or neither, are the cases."""
    roles = roles[: len(subs)]
    opens = [r[5:] if r and r.startswith("open") else None for r in roles]
    requires = [r[6:] if r and r.startswith("needs") else None for r in roles]
    plan = NativePlan(subs, opens=opens, requires=requires)
    results = plan.match_indexes_with_errors(batch)
    for headers, (hit, failed) in zip(batch, results, strict=True):
        alone, errors = reference_with_errors(subs, headers)
        opened = {g for sub, g in zip(subs, opens, strict=True) if g is not None and sub.id in alone}
        expected = {
            sub.id
            for sub, needs in zip(subs, requires, strict=True)
            if sub.id in alone and (needs is None or needs in opened)
        }
        assert {subs[i].id for i in hit} == expected
        assert {subs[i].id for i in failed} <= errors
        for i in failed:
            assert requires[i] is None or requires[i] in opened


@SETTINGS
@given(
    st.one_of(subscriptions(), gated()),
    st.lists(
        st.one_of(
            headers_strategy,
            st.lists(
                st.tuples(st.sampled_from(("a", "b", "c", "s")), _num_texts | st.just(b"a")), max_size=5
            ),
        ),
        min_size=1,
        max_size=6,
    ),
)
def test_preferred_gates_report_the_python_plans_errors(
    subs: list[Subscription], batch: list[Headers]
) -> None:
    """Made of a Python plan's entries (its gates), the native plan reports every error that plan reports, and
    no other where it could take every gate (the router counts errors on this: native_routing.py)."""
    groups: dict[tuple[tuple[str, str], ...], list[Subscription]] = {}
    for sub in subs:
        groups.setdefault(tuple(sorted((sub.types or {}).items())), []).append(sub)
    for key, group in groups.items():  # one Python plan per set of declared types, as the router's
        python = compile_plan(group)
        plan = NativePlan(python.entries)
        honoured = all(
            (e.gate.kind if e.gate else None) == plan.gate_of(i) for i, e in enumerate(python.entries)
        )
        event("every gate taken" if honoured else "some gate not taken")
        for headers, (hit, failed) in zip(batch, plan.match_indexes_with_errors(batch), strict=True):
            matched, errors = python.match_with_errors(_decoded(dict(key), headers))
            assert {group[i].id for i in hit} == matched, headers
            native_errors = {group[i].id for i in failed}
            assert errors <= native_errors, headers
            if honoured:
                assert native_errors == errors, headers
