"""Typed compile: with property types declared, what can never be right is refused with a caret."""

from __future__ import annotations

import pytest

from subroute import expressions


def type_error(
    text: str, types: dict[str, str] | None = None, dialect: str = "bmq"
) -> expressions.ExpressionError:
    with pytest.raises(expressions.ExpressionTypeError) as info:
        expressions.compile(text, dialect=dialect, types=types)
    return info.value


def test_declared_int_compared_with_string() -> None:
    err = type_error('CustomerId == "x"', {"CustomerId": "int"})
    assert err.position == 14
    assert str(err).splitlines()[1:] == ['  CustomerId == "x"', "                ^"]
    # Without the declaration it is only known when evaluating.
    assert expressions.compile('CustomerId == "x"').evaluate({"CustomerId": 1}).error == "type"


def test_fault_on_a_branch_is_still_refused() -> None:
    types = {"kind": "string", "shares": "int"}
    err = type_error('kind == "i" && shares > 1000 || shares == "all"', types)
    assert err.position == 42
    assert expressions.compile('kind == "i" && shares > 1000 || shares == "all"', types={"kind": "string"})


@pytest.mark.parametrize(
    ("text", "types", "position"),
    [
        ("x + 1 > 2", {"x": "string"}, 0),
        ("!x", {"x": "int"}, 1),
        ("-x == 1", {"x": "bool"}, 1),
        ("x && y", {"x": "bool", "y": "int"}, 5),
        ("x < y", {"x": "bool", "y": "bool"}, 0),
        ("x + 1", {"x": "int"}, 2),  # the result must be boolean
        ("x", {"x": "string"}, 0),
        ('1 == "1"', None, 5),
        ("true < false", None, 0),
        ('"a" + 1 > 0', None, 0),
        ("1 + 2", None, 2),
    ],
)
def test_bmq_static_type_errors(text: str, types: dict[str, str] | None, position: int) -> None:
    assert type_error(text, types).position == position


def test_well_typed_bmq_compiles() -> None:
    types = {"a": "int", "s": "string", "b": "bool"}
    for text in ("a + 1 > 2", 's < "x"', "b == true", "!b && a % 2 == 0", "exists(zz) || b != false"):
        expressions.compile(text, types=types)


@pytest.mark.parametrize(
    ("text", "types", "position"),
    [
        ("x = 'a'", {"x": "int"}, 4),
        ("x = 1", {"x": "string"}, 4),
        ("x = 1.5", {"x": "bool"}, 4),
        ("x < 'b'", None, 4),  # strings are not ordered in JMS
        ("x > 1", {"x": "string"}, 0),
        ("x LIKE 'a%'", {"x": "float"}, 0),
        ("x IN ('a')", {"x": "int"}, 0),
        ("x BETWEEN 1 AND 2", {"x": "string"}, 0),
        ("x + 1 = 2", {"x": "bool"}, 0),
        ("x AND TRUE", {"x": "int"}, 0),
        ("NOT x", {"x": "string"}, 4),
        ("x + 1", None, 2),
        ("TRUE = 1", None, 7),
    ],
)
def test_sql92_static_type_errors(text: str, types: dict[str, str] | None, position: int) -> None:
    assert type_error(text, types, "sql92").position == position


def test_well_typed_sql92_compiles() -> None:
    types = {"i": "int", "f": "float", "s": "string", "b": "bool"}
    for text in (
        "i = f",
        "i + f > 2",
        "s LIKE 'a%'",
        "b AND i BETWEEN 1 AND f",
        "x = NULL",
        "s IS NULL",
        "NULL",
    ):
        expressions.compile(text, dialect="sql92", types=types)


def test_declared_types_are_still_checked_when_evaluating() -> None:
    expr = expressions.compile("x > 1", types={"x": "int"})
    assert expr.evaluate({"x": "2"}).error == "type"
