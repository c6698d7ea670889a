"""Hypothesis strategies for the expression tests: random expressions of both dialects, mostly well-typed
(so that they compile and reach evaluation) but with every kind of run-time fault within reach, and random
property maps over the same few names."""

from __future__ import annotations

import functools

from hypothesis import strategies as st

NAMES = ("a", "b", "c", "s", "t", "f")
INT_EDGES = (0, 1, -1, 2, 3, -7, 7, 2**63 - 1, -(2**63), 2**62)

int_values = st.one_of(st.integers(-3, 3), st.sampled_from(INT_EDGES), st.just(2**64))
str_values = st.text(alphabet="ab%_'\"\\x", max_size=3)
float_values = st.one_of(
    st.sampled_from((0.0, -0.0, 1.0, 2.5, -2.5, 3.0, 1e300, float("inf"), float("nan"))),
    st.floats(-4, 4),
)
any_value = st.one_of(int_values, str_values, st.booleans(), float_values)


# Each name usually holds the type the generated expressions assume for it, so that evaluation gets past the
# type checks often; sometimes anything else.
_TYPICAL = {
    "a": int_values,
    "b": int_values,
    "c": float_values,
    "s": str_values,
    "t": str_values,
    "f": st.booleans(),
}


@st.composite
def prop_maps(draw: st.DrawFn) -> dict[str, int | float | str | bool]:
    keys = draw(st.lists(st.sampled_from(NAMES), unique=True, min_size=2))
    return {k: draw(st.one_of(_TYPICAL[k], _TYPICAL[k], _TYPICAL[k], any_value)) for k in keys}


# ------------------------------------------------------------------ bmq


def _bmq_str_literal(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


_bmq_int_lit = st.one_of(st.integers(-3, 3), st.sampled_from(INT_EDGES)).map(
    lambda n: str(n) if n >= 0 else f"-{-n}" if n > -(2**63) else "-9223372036854775808"
)
_bmq_str_lit = st.text(alphabet='ab"\\', max_size=2).map(_bmq_str_literal)
_name = st.sampled_from(NAMES)
_int_name = st.sampled_from(("a", "b", "a", "b", "c", "s", "f"))
_num_name = st.sampled_from(("a", "b", "c", "a", "b", "c", "s"))
_str_name = st.sampled_from(("s", "t", "s", "t", "a"))
_bool_name = st.sampled_from(("f", "f", "f", "a"))


@st.composite
def _bmq(draw: st.DrawFn, kind: str, depth: int) -> str:
    """A bmq expression whose type is ``kind`` when the properties have the types it assumes."""
    leaf = depth == 0 or kind == "str" or draw(st.integers(0, 3)) == 0
    if kind == "int":
        if leaf:
            return draw(st.one_of(_bmq_int_lit, _int_name))
        if draw(st.integers(0, 4)) == 0:
            return f"-{draw(_bmq(kind, depth - 1))}"
        op = draw(st.sampled_from("+-*/%"))
        return f"({draw(_bmq('int', depth - 1))} {op} {draw(_bmq('int', depth - 1))})"
    if kind == "str":
        return draw(st.one_of(_bmq_str_lit, _str_name))
    if leaf:
        return draw(
            st.one_of(st.sampled_from(("true", "false")), _bool_name, _name.map(lambda n: f"exists({n})"))
        )
    branch = draw(st.integers(0, 6))
    sub = functools.partial(_bmq, depth=depth - 1)
    if branch == 0:
        return f"{draw(st.sampled_from('!~'))}({draw(sub('bool'))})"
    if branch == 1:
        return f"({draw(sub('bool'))} {draw(st.sampled_from(('&&', '||')))} {draw(sub('bool'))})"
    if branch == 2:
        return f"({draw(sub('bool'))}) {draw(st.sampled_from(('==', '!=')))} ({draw(sub('bool'))})"
    if branch == 3:
        return f"{draw(sub('str'))} {draw(st.sampled_from(('==', '!=', '<', '>=')))} {draw(sub('str'))}"
    return (
        f"{draw(sub('int'))} {draw(st.sampled_from(('==', '!=', '<', '<=', '>', '>=')))} {draw(sub('int'))}"
    )


def bmq(kind: str, depth: int) -> st.SearchStrategy[str]:
    return _bmq(kind, depth)


bmq_expressions = st.integers(1, 3).flatmap(lambda d: bmq("bool", d))

# ------------------------------------------------------------------ sql92


def _sql_str_literal(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


_sql_num_lit = st.one_of(
    st.integers(-3, 3).map(str),
    st.sampled_from(("2.5", "0.5", "1e0", ".5", "3.", "9223372036854775807", "-9223372036854775808", "NULL")),
)
_sql_str_lit = st.one_of(st.text(alphabet="ab'%_", max_size=2).map(_sql_str_literal), st.just("NULL"))
_like_pattern = st.text(alphabet="ab%_!'", max_size=4)


def _like(t: tuple[str, bool, str, bool]) -> str:
    operand, negated, pattern, escape = t
    if escape and pattern.endswith("!") and not pattern.endswith("!!"):
        pattern += "!"
    text = f"{operand} {'NOT ' if negated else ''}LIKE {_sql_str_literal(pattern)}"
    return text + (" ESCAPE '!'" if escape else "")


@st.composite
def _sql(draw: st.DrawFn, kind: str, depth: int) -> str:
    leaf = depth == 0 or kind == "str" or draw(st.integers(0, 3)) == 0
    sub = functools.partial(_sql, depth=depth - 1)
    if kind == "num":
        if leaf:
            return draw(st.one_of(_sql_num_lit, _num_name))
        if draw(st.integers(0, 4)) == 0:
            return f"{draw(st.sampled_from('-+'))}({draw(sub('num'))})"
        return f"({draw(sub('num'))} {draw(st.sampled_from('+-*/'))} {draw(sub('num'))})"
    if kind == "str":
        return draw(st.one_of(_sql_str_lit, _str_name))
    if leaf:
        return draw(st.one_of(st.sampled_from(("TRUE", "false", "NULL")), _bool_name))
    branch = draw(st.integers(0, 9))
    if branch == 0:
        return f"NOT {draw(sub('bool'))}"
    if branch == 1:
        return f"({draw(sub('bool'))} {draw(st.sampled_from(('AND', 'or')))} {draw(sub('bool'))})"
    if branch == 2:
        return f"({draw(sub('bool'))}) {draw(st.sampled_from(('=', '<>')))} ({draw(sub('bool'))})"
    if branch == 3:
        return f"{draw(sub('str'))} {draw(st.sampled_from(('=', '<>')))} {draw(sub('str'))}"
    if branch == 4:
        negated = draw(st.sampled_from(("", "NOT ")))
        return f"{draw(sub('num'))} {negated}BETWEEN {draw(sub('num'))} AND {draw(sub('num'))}"
    if branch == 5:
        values = draw(st.lists(st.text(alphabet="ab'", max_size=2), min_size=1, max_size=3))
        negated = draw(st.sampled_from(("", "NOT ")))
        return f"{draw(_str_name)} {negated}IN ({', '.join(_sql_str_literal(v) for v in values)})"
    if branch == 6:
        return _like((draw(sub("str")), draw(st.booleans()), draw(_like_pattern), draw(st.booleans())))
    if branch == 7:
        return f"{draw(sub('num'))} {draw(st.sampled_from(('IS NULL', 'IS NOT NULL')))}"
    return f"{draw(sub('num'))} {draw(st.sampled_from(('=', '<>', '<', '<=', '>', '>=')))} {draw(sub('num'))}"


def sql(kind: str, depth: int) -> st.SearchStrategy[str]:
    return _sql(kind, depth)


sql_expressions = st.integers(1, 3).flatmap(lambda d: sql("bool", d))

# ------------------------------------------------------------------ gate-friendly forms for plans

_bmq_gate = st.one_of(
    st.tuples(_name, st.sampled_from(("==", "<", "<=", ">", ">=")), st.integers(-2, 3)).map(
        lambda t: f"{t[0]} {t[1]} {t[2]}"
    ),
    st.tuples(_name, st.sampled_from(("a", "b", ""))).map(lambda t: f'{t[0]} == "{t[1]}"'),
    st.tuples(_name, st.booleans()).map(lambda t: f"{t[0]} == {'true' if t[1] else 'false'}"),
    st.tuples(_name, st.integers(-2, 2), st.integers(-2, 2)).map(
        lambda t: f"({t[0]} == {t[1]} || {t[0]} == {t[2]})"
    ),
    st.tuples(st.integers(-2, 3), _name).map(lambda t: f"{t[0]} < {t[1]}"),
)
_sql_gate = st.one_of(
    st.tuples(
        _name,
        st.sampled_from(("=", "<", "<=", ">", ">=")),
        st.sampled_from(("1", "2", "0", "2.5", "1.0", "-1")),
    ).map(" ".join),
    st.tuples(_name, st.sampled_from(("a", "b", ""))).map(lambda t: f"{t[0]} = '{t[1]}'"),
    st.tuples(_name, st.sampled_from(("TRUE", "FALSE"))).map(" = ".join),
    st.tuples(_name, st.lists(st.sampled_from(("a", "b", "''")), min_size=1, max_size=3)).map(
        lambda t: f"{t[0]} IN ({', '.join(_sql_str_literal(v) for v in t[1])})"
    ),
    st.tuples(_name, st.sampled_from(("0", "1", "1.5")), st.sampled_from(("1", "2", "2.5"))).map(
        lambda t: f"{t[0]} BETWEEN {t[1]} AND {t[2]}"
    ),
    st.tuples(_name, st.sampled_from(("1", "2.0")), st.sampled_from(("1", "2"))).map(
        lambda t: f"({t[0]} = {t[1]} OR {t[0]} = {t[2]})"
    ),
)


def _conj(parts: list[str], op: str) -> str:
    return f" {op} ".join(parts)


plan_bmq = st.lists(st.one_of(_bmq_gate, bmq("bool", 1)), min_size=1, max_size=3).map(
    lambda p: _conj(p, "&&")
)
plan_sql = st.lists(st.one_of(_sql_gate, sql("bool", 1)), min_size=0, max_size=3).map(
    lambda p: _conj(p, "AND")
)
