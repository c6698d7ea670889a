"""The plan's interval index (a lower and an upper bound of one property) against each expression alone."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from subroute import expressions

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

_ints = st.one_of(
    st.integers(-50, 50), st.integers(-(2**63), 2**63 - 1), st.sampled_from((2**62, -(2**62), 2**53 + 1))
)
_floats = st.one_of(
    st.floats(-100, 100),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from((0.5, 1e300, -1e300, 2.0**53 + 0.0, 9.5)),
)


def _bmq_literal(n: int) -> str:
    return str(n) if n > -(2**63) else "-9223372036854775808"


@st.composite
def bmq_interval(draw: st.DrawFn) -> str:
    lo, hi = draw(_ints), draw(_ints)
    low_op = draw(st.sampled_from((">", ">=")))
    high_op = draw(st.sampled_from(("<", "<=")))
    parts = [f"x {low_op} {_bmq_literal(lo)}", f"x {high_op} {_bmq_literal(hi)}"]
    if draw(st.booleans()):
        parts.reverse()
    if draw(st.booleans()):
        parts.append(f"y == {draw(st.integers(0, 2))}")
    return " && ".join(parts)


@st.composite
def sql_interval(draw: st.DrawFn) -> str:
    number = st.one_of(st.integers(-50, 50).map(str), st.sampled_from(("0.5", "2.25", "-1.5", "1e3", "9.5")))
    lo, hi = draw(number), draw(number)
    if draw(st.booleans()):
        return f"x BETWEEN {lo} AND {hi}"
    return f"x {draw(st.sampled_from(('>', '>=')))} {lo} AND x {draw(st.sampled_from(('<', '<=')))} {hi}"


@st.composite
def message(draw: st.DrawFn) -> dict[str, object]:
    props: dict[str, object] = {}
    if draw(st.integers(0, 9)):
        props["x"] = draw(st.one_of(_ints, _floats, st.integers(-60, 60), st.just("s"), st.booleans()))
    props["y"] = draw(st.integers(0, 2))
    return props


def _check(subs: list[expressions.Subscription], messages: list[dict[str, object]]) -> None:
    plan = expressions.compile_plan(subs)
    alone = {s.id: expressions.compile(s.text, dialect=s.dialect) for s in subs}
    for props in messages:
        expected = frozenset(sid for sid, e in alone.items() if e.matches(props))  # type: ignore[arg-type]
        assert plan.match(props) == expected, (props, [s.text for s in subs])  # type: ignore[arg-type]


@SETTINGS
@given(st.lists(bmq_interval(), min_size=1, max_size=12), st.lists(message(), min_size=1, max_size=8))
def test_bmq_intervals(texts: list[str], messages: list[dict[str, object]]) -> None:
    _check([expressions.Subscription(i, t) for i, t in enumerate(texts)], messages)


@SETTINGS
@given(st.lists(sql_interval(), min_size=1, max_size=12), st.lists(message(), min_size=1, max_size=8))
def test_sql92_intervals(texts: list[str], messages: list[dict[str, object]]) -> None:
    _check([expressions.Subscription(i, t, "sql92") for i, t in enumerate(texts)], messages)


def test_windows_are_indexed_as_intervals() -> None:
    subs = [expressions.Subscription(i, f"x >= {i * 10} && x < {i * 10 + 10}") for i in range(1000)]
    plan = expressions.compile_plan(subs)
    assert plan.stats["indexed_interval"] == 1000
    assert plan.match({"x": 4321}) == {432}
    assert plan.match({"x": 10_000}) == frozenset()
    # only the windows near the value are candidates, not every window below it
    assert len(plan._candidates({"x": 9_999})) <= 3
