"""Property tests: the compiled evaluator and the plan against the reference interpreter, and compile's
robustness on arbitrary text."""

from __future__ import annotations

from expr_strategies import bmq_expressions, plan_bmq, plan_sql, prop_maps, sql_expressions
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from subroute import expressions
from subroute.expressions.interpreter import interpret

SETTINGS = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _compiled(text: str, dialect: str) -> expressions.Expression | None:
    try:
        return expressions.compile(text, dialect=dialect)
    except expressions.ExpressionError:
        return None


@SETTINGS
@given(bmq_expressions, st.lists(prop_maps(), min_size=1, max_size=4))
def test_bmq_compiled_equals_interpreter(text: str, messages: list[dict[str, object]]) -> None:
    expr = _compiled(text, "bmq")
    if expr is None:
        return
    for props in messages:
        expected = interpret(expr.ast, props, "bmq")  # type: ignore[arg-type]
        assert expr.evaluate(props) == expected, (text, props)  # type: ignore[arg-type]
        assert expr.matches(props) is expected.value  # type: ignore[arg-type]


@SETTINGS
@given(sql_expressions, st.lists(prop_maps(), min_size=1, max_size=4))
def test_sql92_compiled_equals_interpreter(text: str, messages: list[dict[str, object]]) -> None:
    expr = _compiled(text, "sql92")
    if expr is None:
        return
    for props in messages:
        expected = interpret(expr.ast, props, "sql92")  # type: ignore[arg-type]
        assert expr.evaluate(props) == expected, (text, props)  # type: ignore[arg-type]


@SETTINGS
@given(
    st.lists(
        st.one_of(st.tuples(st.just("bmq"), plan_bmq), st.tuples(st.just("sql92"), plan_sql)),
        min_size=1,
        max_size=10,
    ),
    st.lists(prop_maps(), min_size=1, max_size=5),
)
def test_plan_equals_each_subscription_alone(
    specs: list[tuple[str, str]], messages: list[dict[str, object]]
) -> None:
    subs = []
    for i, (dialect, text) in enumerate(specs):
        if _compiled(text, dialect) is not None:
            subs.append(expressions.Subscription(i, text, dialect))
    plan = expressions.compile_plan(subs)
    assert len(plan) == len(subs)
    trees = {s.id: expressions.compile(s.text, dialect=s.dialect) for s in subs}
    for props in messages:
        outcomes = {sid: interpret(e.ast, props, e.dialect) for sid, e in trees.items()}  # type: ignore[arg-type]
        expected = frozenset(sid for sid, o in outcomes.items() if o.value)
        assert plan.match(props) == expected, (specs, props)  # type: ignore[arg-type]
        matched, errors = plan.match_with_errors(props)  # type: ignore[arg-type]
        assert matched == expected
        assert errors <= {sid for sid, o in outcomes.items() if o.error}


@SETTINGS
@given(
    st.lists(st.tuples(st.just("bmq"), plan_bmq), min_size=1, max_size=6), st.lists(prop_maps(), max_size=3)
)
def test_plan_of_duplicates_shares_and_agrees(
    specs: list[tuple[str, str]], messages: list[dict[str, object]]
) -> None:
    # Every expression twice: the copies are one DAG node and must still both be reported.
    subs = [
        expressions.Subscription((i, k), t, d)
        for i, (d, t) in enumerate(specs)
        for k in (0, 1)
        if _compiled(t, d)
    ]
    plan = expressions.compile_plan(subs)
    for props in messages:
        got = plan.match(props)  # type: ignore[arg-type]
        for sub in subs:
            alone = expressions.compile(sub.text, dialect=sub.dialect).matches(props)  # type: ignore[arg-type]
            assert (sub.id in got) is alone


_TOKENS = st.sampled_from(
    [
        "a",
        "b.c",
        "x_1",
        "1",
        "0",
        "-",
        "+",
        "*",
        "/",
        "%",
        "(",
        ")",
        "==",
        "=",
        "!=",
        "<",
        "<=",
        ">",
        ">=",
        "&&",
        "||",
        "!",
        "~",
        "true",
        "false",
        "exists",
        '"s"',
        '"\\q"',
        "'s'",
        "AND",
        "or",
        "NOT",
        "IN",
        "BETWEEN",
        "LIKE",
        "ESCAPE",
        "IS",
        "NULL",
        "2.5",
        ".5e3",
        "1e999",
        "99999999999999999999",
        ",",
        "<>",
        " ",
        "\t",
        "\n",
        "\r",
        "$x",
        "_y",
        "é",
    ]
)


@settings(max_examples=600, deadline=None)
@given(
    st.one_of(
        st.text(max_size=40),
        st.lists(_TOKENS, max_size=14).map("".join),
        st.lists(_TOKENS, max_size=14).map(" ".join),
    ),
    st.sampled_from(["bmq", "sql92"]),
    prop_maps(),
)
def test_only_expression_errors_leave_compile(text: str, dialect: str, props: dict[str, object]) -> None:
    try:
        expr = expressions.compile(text, dialect=dialect)
    except expressions.ExpressionError as exc:
        assert 0 <= exc.position <= len(text)
        assert "^" in str(exc)
        return
    outcome = expr.evaluate(props)  # type: ignore[arg-type]
    assert outcome == interpret(expr.ast, props, dialect)  # type: ignore[arg-type]


_ints = st.one_of(st.integers(-20, 20), st.sampled_from((2**63 - 1, -(2**63), 2**62, -(2**62), 3037000500)))


@SETTINGS
@given(st.sampled_from("+-*/%"), _ints, _ints, _ints, st.sampled_from(["bmq", "sql92"]))
def test_integer_arithmetic_equals_interpreter(op: str, a: int, b: int, c: int, dialect: str) -> None:
    if dialect == "sql92" and op == "%":
        op = "/"
    expr = expressions.compile(f"a {op} b < c", dialect=dialect)
    props = {"a": a, "b": b, "c": c}
    assert expr.evaluate(props) == interpret(expr.ast, props, dialect)
    expr = expressions.compile(f"-a {op} b {'==' if dialect == 'bmq' else '='} c", dialect=dialect)
    assert expr.evaluate(props) == interpret(expr.ast, props, dialect)
