"""The sql92 dialect: JMS selectors as ActiveMQ/Artemis implement them, three-valued logic, seed 004."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from subroute import expressions
from subroute.expressions import Outcome
from subroute.expressions.interpreter import interpret

TRUE, FALSE, UNKNOWN = Outcome(True), Outcome(False), Outcome(False)


def ev(text: str, props: Mapping[str, int | float | str | bool] | None = None) -> Outcome:
    expr = expressions.compile(text, dialect="sql92")
    outcome = expr.evaluate(props or {})
    assert outcome == interpret(expr.ast, props or {}, "sql92")
    return outcome


def truth(text: str, props: Mapping[str, int | float | str | bool] | None = None) -> bool | None:
    """TRUE, FALSE or UNKNOWN (None) of a predicate, told apart with IS NULL-free tricks: p, NOT p."""
    if ev(text, props).value:
        return True
    if ev(f"NOT ({text})", props).value:
        return False
    return None


def syntax_error(text: str) -> expressions.ExpressionError:
    with pytest.raises(expressions.ExpressionSyntaxError) as info:
        expressions.compile(text, dialect="sql92")
    return info.value


CHATROOM = "((targetUser = 'all') OR (targetUser = 'phil')) AND (sender NOT IN ('dan', 'harry'))"


def test_seed_004_chatroom() -> None:
    assert ev(CHATROOM, {"targetUser": "all", "sender": "bob"}) == TRUE
    assert ev(CHATROOM, {"targetUser": "phil", "sender": "bob"}) == TRUE
    assert ev(CHATROOM, {"targetUser": "phil", "sender": "dan"}) == FALSE
    assert ev(CHATROOM, {"targetUser": "4", "sender": "bob"}) == FALSE
    assert ev(CHATROOM, {"targetUser": "all"}) == UNKNOWN  # sender missing: NULL NOT IN (...) is UNKNOWN
    plan = expressions.compile_plan(
        [
            expressions.Subscription(c, f"(targetUser = 'all') OR (targetUser = '{c}')", "sql92")
            for c in ("2", "4", "5")
        ]
    )
    assert plan.match({"targetUser": "all"}) == {"2", "4", "5"}
    assert plan.match({"targetUser": "4"}) == {"4"}


def test_seed_003_constants_and_operators() -> None:
    props = {"a": 5, "price": 3.1415, "tag": "abc", "flag": True}
    assert ev("a > 3 AND a >= 5 AND a < 6 AND a <= 5 AND a = 5 AND a <> 4", props) == TRUE
    assert ev("a BETWEEN 1 AND 5 AND price BETWEEN 3 AND 3.2", props) == TRUE
    assert ev("tag = 'abc' AND tag <> 'x' AND tag IN ('x', 'abc')", props) == TRUE
    assert ev("missing IS NULL AND tag IS NOT NULL", props) == TRUE
    assert ev("flag = TRUE AND NOT (flag = FALSE) AND flag", props) == TRUE
    assert ev("price = 3.1415", props) == TRUE


def test_keywords_are_case_insensitive_identifiers_are_not() -> None:
    assert ev("a between 1 and 3 AnD b iS nOt NuLl", {"a": 2, "b": 1}) == TRUE
    assert ev("x = TrUe", {"x": True}) == TRUE
    assert ev("Andy = 1", {"Andy": 1}) == TRUE
    assert ev("A = 1", {"a": 1}) == UNKNOWN


@pytest.mark.parametrize("name", ["x", "_x", "$x", "x$1", "JMSType", "a_b$"])
def test_identifiers(name: str) -> None:
    assert ev(f"{name} = 1", {name: 1}) == TRUE


def test_empty_selector_matches_everything() -> None:
    assert ev("") == TRUE
    assert ev(" \t\n") == TRUE
    assert ev("", {"x": 1}) == TRUE


def test_literals() -> None:
    assert ev("x = 9223372036854775807", {"x": 2**63 - 1}) == TRUE
    assert ev("x = -9223372036854775808", {"x": -(2**63)}) == TRUE
    with pytest.raises(expressions.LiteralRangeError):
        expressions.compile("x = 9223372036854775808", dialect="sql92")
    with pytest.raises(expressions.LiteralRangeError):
        expressions.compile("x = 1e999", dialect="sql92")
    for text in ("1.5", "1.5e0", ".15e1", "15e-1", "15E-1", "1.50"):
        assert ev(f"x = {text}", {"x": 1.5}) == TRUE, text
    assert ev("x = 3.", {"x": 3}) == TRUE
    assert ev("x = 'it''s'", {"x": "it's"}) == TRUE
    assert ev("x = ''", {"x": ""}) == TRUE


def test_int_and_float_compare_numerically() -> None:
    assert ev("x = 2", {"x": 2.0}) == TRUE
    assert ev("x = 2.0", {"x": 2}) == TRUE
    assert ev("x < 2.5", {"x": 2}) == TRUE
    assert ev("x + 0.5 = 2.5", {"x": 2}) == TRUE
    assert ev("x / 2 = 3", {"x": 7}) == TRUE  # int division truncates toward zero, like Java
    assert ev("x / 2 = -3", {"x": -7}) == TRUE
    assert ev("x / 2 = 3.5", {"x": 7.0}) == TRUE


def test_no_implicit_conversion() -> None:
    assert truth("x = '1'", {"x": 1}) is False
    assert truth("x = 1", {"x": "1"}) is False
    assert truth("x <> 1", {"x": "1"}) is True  # <> is NOT =
    assert truth("x > 0", {"x": "1"}) is False
    assert truth("x = 1", {"x": True}) is False  # a boolean is not a number
    assert truth("x = TRUE", {"x": 1}) is False
    assert truth("x < y", {"x": "a", "y": "b"}) is False  # strings are compared with = and <> only
    assert truth("x = y", {"x": "a", "y": "a"}) is True
    assert ev("x + 1 = 2", {"x": "1"}) == Outcome(False, "type")


def test_three_valued_comparisons() -> None:
    for text in (
        "x = 1",
        "x <> 1",
        "x < 1",
        "x >= 1",
        "x BETWEEN 0 AND 2",
        "x NOT BETWEEN 0 AND 2",
        "x + 1 = 2",
    ):
        assert truth(text) is None, text
    assert truth("x IN ('a')") is None
    assert truth("x NOT IN ('a')") is None
    assert truth("x LIKE 'a%'") is None
    assert truth("x NOT LIKE 'a%'") is None
    assert truth("x IS NULL") is True
    assert truth("x IS NOT NULL") is False
    assert truth("x = NULL", {"x": 1}) is None
    assert truth("NULL = NULL") is None
    assert truth("NULL") is None


TV = {"TRUE": True, "FALSE": False, "NULL": None}


@pytest.mark.parametrize("a", TV)
@pytest.mark.parametrize("b", TV)
def test_three_valued_logic_tables(a: str, b: str) -> None:
    x, y = TV[a], TV[b]
    expected_and = False if False in (x, y) else None if None in (x, y) else True
    expected_or = True if True in (x, y) else None if None in (x, y) else False
    assert truth(f"{a} AND {b}") is expected_and
    assert truth(f"{a} OR {b}") is expected_or
    # The same through properties (a missing property is NULL).
    props = {k: v for k, v in (("p", x), ("q", y)) if v is not None}
    assert truth("p AND q", props) is expected_and
    assert truth("p OR q", props) is expected_or


def test_not_unknown_is_unknown() -> None:
    assert truth("NOT NULL") is None
    assert truth("NOT (x = 1)") is None
    assert truth("NOT NOT (x = 1)", {"x": 1}) is True


def test_between_follows_the_jms_equivalences() -> None:
    assert truth("x BETWEEN 1 AND 3", {"x": 1}) is True
    assert truth("x BETWEEN 1 AND 3", {"x": 3}) is True
    assert truth("x BETWEEN 1 AND 3", {"x": 4}) is False
    assert truth("x NOT BETWEEN 1 AND 3", {"x": 4}) is True
    assert truth("x NOT BETWEEN 1 AND 3", {"x": 2}) is False
    # "x NOT BETWEEN a AND b" is "x < a OR x > b": both false for a string.
    assert truth("x BETWEEN 1 AND 3", {"x": "2"}) is False
    assert truth("x NOT BETWEEN 1 AND 3", {"x": "2"}) is False
    assert truth("x BETWEEN NULL AND 3", {"x": 5}) is False
    assert truth("x BETWEEN NULL AND 3", {"x": 2}) is None


def test_in() -> None:
    assert truth("x IN ('a', 'b')", {"x": "b"}) is True
    assert truth("x IN ('a', 'b')", {"x": "c"}) is False
    assert truth("x NOT IN ('a', 'b')", {"x": "c"}) is True
    assert truth("x IN ('1')", {"x": 1}) is False
    assert truth("x IN ('it''s')", {"x": "it's"}) is True
    syntax_error("x IN ()")
    syntax_error("x IN (1, 2)")


def test_like() -> None:
    assert truth("x LIKE 'ab%'", {"x": "abc"}) is True
    assert truth("x LIKE 'ab%'", {"x": "ab"}) is True
    assert truth("x LIKE 'ab%'", {"x": "xab"}) is False
    assert truth("x LIKE '_b_'", {"x": "abc"}) is True
    assert truth("x LIKE '_b_'", {"x": "abcd"}) is False
    assert truth("x LIKE 'a.c'", {"x": "abc"}) is False  # regex characters are literal
    assert truth("x LIKE 'a\nc'", {"x": "a\nc"}) is True
    assert truth("x LIKE '%\n'", {"x": "ab\n"}) is True
    assert truth("x LIKE '100!%' ESCAPE '!'", {"x": "100%"}) is True
    assert truth("x LIKE '100!%' ESCAPE '!'", {"x": "1000"}) is False
    assert truth("x LIKE 'a!_b' ESCAPE '!'", {"x": "a_b"}) is True
    assert truth("x LIKE 'a!!b' ESCAPE '!'", {"x": "a!b"}) is True
    assert truth("x NOT LIKE 'a%'", {"x": "bcd"}) is True
    assert truth("x LIKE '1%'", {"x": 12}) is False
    assert syntax_error("x LIKE 'a' ESCAPE 'ab'").position == 18
    assert syntax_error("x LIKE 'a!' ESCAPE '!'").position == 7


def test_arithmetic() -> None:
    assert truth("a * 2 + b = 7", {"a": 2, "b": 3}) is True
    assert truth("a - b - c = 5", {"a": 10, "b": 3, "c": 2}) is True
    assert truth("-a = -2 AND +a = 2", {"a": 2}) is True
    assert ev("a / 0 = 1", {"a": 1}) == Outcome(False, "arithmetic")
    assert ev("a / 0.0 = 1", {"a": 1}) == Outcome(False, "arithmetic")
    assert ev("a + 1 > 0", {"a": 2**63 - 1}) == Outcome(False, "arithmetic")
    assert truth("a + 1 > 0", {"a": float(2**63)}) is True


def test_non_boolean_operands_and_results() -> None:
    assert ev("x AND TRUE", {"x": 1}) == Outcome(False, "type")
    assert ev("NOT x", {"x": "s"}) == Outcome(False, "type")
    assert ev("x", {"x": "s"}) == Outcome(False, "result")
    assert ev("FALSE AND x", {"x": "s"}) == FALSE  # not evaluated
    assert ev("x", {"x": True}) == TRUE


def test_syntax() -> None:
    assert syntax_error("a = 1 b").position == 6  # trailing tokens
    assert syntax_error("a == 1").position == 3
    assert syntax_error("a != 1").position == 2
    assert syntax_error('a = "s"').position == 4
    assert syntax_error("a = 'abc").position == 4
    assert syntax_error("a = b = c").position == 6
    assert syntax_error("a = 1 AND").position == 9
    assert syntax_error("NOT").position == 3
    assert syntax_error("a BETWEEN 1").position == 11
    assert syntax_error("a IS 1").position == 5


def test_deep_nesting_is_refused_cleanly() -> None:
    with pytest.raises(expressions.ExpressionLimitError):
        expressions.compile("NOT " * 300 + "x", dialect="sql92")
    with pytest.raises(expressions.ExpressionLimitError):
        expressions.compile("+".join(["1"] * 1000) + " = 1", dialect="sql92")
    assert ev("NOT " * 150 + "x", {"x": True}) == TRUE
