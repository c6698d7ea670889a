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


# --- properties read from headers: undeclared ones are strings ------------------------------------------------------
#
# A caller that decodes message properties from Kafka headers (the router, `subroute expr`) reads an undeclared
# header as text. It passes ``declared``, the names it declared; any other property is then a string, and a use
# where a string can never be right (a number, a condition) is refused with the fix: declare its type.


def undeclared_error(
    text: str, dialect: str, declared: tuple[str, ...] = (), types: dict[str, str] | None = None
) -> expressions.UndeclaredPropertyError:
    with pytest.raises(expressions.UndeclaredPropertyError) as info:
        expressions.compile(text, dialect=dialect, types=types, declared=declared)
    return info.value


@pytest.mark.parametrize(
    ("dialect", "text", "name", "position", "wanted"),
    [
        # RocketMQ's own sample (seed 003): "a between 0 and 3" on a header a=2 never matched and said nothing.
        ("sql92", "a BETWEEN 0 AND 3", "a", 0, "int"),
        ("sql92", "a NOT BETWEEN 0 AND 3", "a", 0, "int"),
        ("sql92", "a > 5", "a", 0, "int"),
        ("sql92", "a = 5", "a", 0, "int"),
        ("sql92", "5 = a", "a", 4, "int"),
        ("sql92", "price > 9.99", "price", 0, "float"),
        ("sql92", "a + 1 = 2", "a", 0, "int"),
        ("sql92", "-a = 1", "a", 1, "int"),
        ("sql92", "a < b", "a", 0, "int"),  # JMS orders numbers only
        ("sql92", "x = 1 AND a BETWEEN 0 AND 3", "a", 10, "int"),
        ("sql92", "a = TRUE", "a", 0, "bool"),
        ("sql92", "a AND s = 'x'", "a", 0, "bool"),
        ("sql92", "NOT a", "a", 4, "bool"),
        ("sql92", "a", "a", 0, "bool"),
        ("bmq", "a > 1", "a", 0, "int"),
        ("bmq", "a == 1", "a", 0, "int"),
        ("bmq", "1 == a", "a", 5, "int"),
        ("bmq", "x == 1 && a + 1 > 2", "a", 10, "int"),
        ("bmq", "-a < 0", "a", 1, "int"),
        ("bmq", "a && b", "a", 0, "bool"),
        ("bmq", "!a", "a", 1, "bool"),
        ("bmq", "a", "a", 0, "bool"),
        ("bmq", "a == true", "a", 0, "bool"),
    ],
)
def test_an_undeclared_property_used_as_a_number_or_a_condition_is_refused(
    dialect: str, text: str, name: str, position: int, wanted: str
) -> None:
    err = undeclared_error(text, dialect, ("x",), {"x": "int"})
    assert (err.name, err.position, err.wanted) == (name, position, wanted)
    assert f"{name!r} is not declared, so it is a string" in err.message
    assert err.message.endswith(f"declare its type ({wanted})")
    assert str(err).splitlines()[1:] == [f"  {text}", "  " + " " * position + "^"]
    # The fix names the caller's way of declaring it.
    fixed = err.with_fix(f"add {name}: {wanted} to properties")
    assert isinstance(fixed, expressions.UndeclaredPropertyError) and fixed.position == position
    assert fixed.message.endswith(f"add {name}: {wanted} to properties")
    # Declared, it compiles; without ``declared`` the type is unknown until evaluation, as before.
    expressions.compile(text, dialect=dialect, types={"x": "int", "a": wanted, "b": wanted, "price": wanted})
    expressions.compile(text, dialect=dialect, types={"x": "int"})


@pytest.mark.parametrize(
    ("dialect", "text"),
    [
        ("sql92", "a = 'x'"),
        ("sql92", "a <> b"),
        ("sql92", "a IN ('x', 'y')"),
        ("sql92", "a NOT LIKE 'x%'"),
        ("sql92", "a IS NULL OR a = NULL"),
        ("sql92", "t IS NOT NULL"),  # declared with a type this dialect does not know: unknown, not a string
        ("bmq", 'a == "x"'),
        ("bmq", 'a < "m" && a != b'),
        ("bmq", 'exists(a) && a == "x"'),
    ],
)
def test_an_undeclared_property_used_as_a_string_compiles(dialect: str, text: str) -> None:
    expressions.compile(text, dialect=dialect, declared=("t",))
