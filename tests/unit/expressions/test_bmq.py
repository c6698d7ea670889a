"""The bmq dialect, rule by rule (issue 2) and the examples of seed 000."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from subroute import expressions
from subroute.expressions import Outcome
from subroute.expressions.interpreter import interpret

I64_MAX = 2**63 - 1
I64_MIN = -(2**63)


def ev(text: str, props: Mapping[str, int | float | str | bool] | None = None) -> Outcome:
    """Evaluate with the compiled form, checking it against the interpreter on the way."""
    expr = expressions.compile(text)
    outcome = expr.evaluate(props or {})
    assert outcome == interpret(expr.ast, props or {}, "bmq")
    assert expr.matches(props or {}) is outcome.value
    return outcome


def syntax_error(text: str) -> expressions.ExpressionError:
    with pytest.raises(expressions.ExpressionSyntaxError) as info:
        expressions.compile(text)
    return info.value


# ------------------------------------------------------------------ seed 000's examples


def test_seed_customer_destination_order_type() -> None:
    props = {"CustomerId": 1000, "DestinationId": "ABC", "OrderType": "limit"}
    assert ev("CustomerId == 1000", props).value
    assert ev('DestinationId == "ABC" && OrderType == "limit"', props).value
    assert not ev("CustomerId == 1001", props).value
    assert ev('CustomerId == 1000 || DestinationId == "XYZ"', {"CustomerId": 1000}) == Outcome(True)


def test_seed_short_circuit_example() -> None:
    text = 'type == "i" && shares > 1000 || shares == "all"'
    assert ev(text, {"type": "i", "shares": 2000}) == Outcome(True)
    assert ev(text, {"type": "s", "shares": "all"}) == Outcome(True)
    # The wrong-typed side is never evaluated...
    assert ev(text, {"type": "s", "shares": "some"}) == Outcome(False)
    # ...but when it is, its type error ends the evaluation.
    assert ev(text, {"type": "i", "shares": "all"}) == Outcome(False, "type")
    assert ev('order == "limit" && limit == 0', {"order": "market"}) == Outcome(False)


def test_seed_precedence_examples() -> None:
    assert ev("a*x+b>0", {"a": 2, "x": 3, "b": -5}) == Outcome(True)  # ((2*3)+-5) > 0
    assert ev("a*x+b>0", {"a": 2, "x": 3, "b": -6}) == Outcome(False)
    assert ev("a-b-c == 5", {"a": 10, "b": 3, "c": 2}) == Outcome(True)  # (a-b)-c, not a-(b-c)
    assert ev("!!ok", {"ok": True}) == Outcome(True)
    assert ev("!!ok", {"ok": False}) == Outcome(False)


def test_precedence_table() -> None:
    assert ev("1 + 2 * 3 == 7").value
    assert ev("(1 + 2) * 3 == 9").value
    assert ev("10 / 5 * 2 == 4").value  # left to right
    assert ev("10 % 4 * 3 == 6").value
    assert ev("1 < 2 == true").value  # relational binds tighter than equality
    assert ev("true || false && false").value  # && binds tighter than ||
    assert not ev("(true || false) && false").value
    assert ev("!false == true").value  # ! binds tighter than ==
    assert ev("-2 * -3 == 6").value


# ------------------------------------------------------------------ identifiers and keywords


@pytest.mark.parametrize("name", ["ask", "Ask", "askPrice", "ask_price", "sp500", "a.b.c", "x1_.y"])
def test_identifiers(name: str) -> None:
    assert ev(f"{name} == 1", {name: 1}).value


def test_identifiers_are_case_sensitive() -> None:
    assert ev("ask == 1", {"Ask": 1}) == Outcome(False, "name")


@pytest.mark.parametrize("text", ["_ask == 1", "1Y == 1", ".a == 1"])
def test_bad_identifiers(text: str) -> None:
    syntax_error(text)


def test_keywords_are_lower_case_only() -> None:
    assert ev("True == 1", {"True": 1}).value  # an identifier
    assert ev("FALSE", {"FALSE": True}).value
    assert ev("true").value and not ev("false").value
    syntax_error("exists == 1")
    assert ev("Exists == 2", {"Exists": 2}).value


def test_exists() -> None:
    assert ev("exists(x)", {"x": 1.5}) == Outcome(True)  # present, whatever its type
    assert ev("exists(x)") == Outcome(False)
    assert ev("exists(x) && x > 3", {}) == Outcome(False)
    assert ev("!exists(a.b)") == Outcome(True)


# ------------------------------------------------------------------ literals


def test_int64_literals() -> None:
    assert ev(f"x == {I64_MAX}", {"x": I64_MAX}).value
    assert ev(f"x == {I64_MIN}", {"x": I64_MIN}).value
    assert ev("x == -9223372036854775808", {"x": I64_MIN}).value
    assert ev("x == - 9223372036854775808", {"x": I64_MIN}).value


@pytest.mark.parametrize(
    ("text", "position"),
    [("x == 9223372036854775808", 5), ("x == -9223372036854775809", 6), ("99999999999999999999 > x", 0)],
)
def test_int64_literal_out_of_range(text: str, position: int) -> None:
    with pytest.raises(expressions.LiteralRangeError) as info:
        expressions.compile(text)
    assert info.value.position == position
    assert str(info.value).endswith("\n" + " " * (2 + position) + "^")


def test_minus() -> None:
    assert ev("x-1 == 4", {"x": 5}).value  # subtraction, not x followed by -1
    assert ev("x - 1 == 4", {"x": 5}).value
    assert ev("x -1 == 4", {"x": 5}).value
    assert ev("-x == -5", {"x": 5}).value
    assert ev("-(x + 1) == -6", {"x": 5}).value
    assert ev("--x == 5", {"x": 5}).value
    assert ev("-x == 1", {"x": I64_MIN}) == Outcome(False, "arithmetic")


def test_strings_and_escapes() -> None:
    assert ev(r's == "a\"b"', {"s": 'a"b'}).value
    assert ev(r's == "a\\b"', {"s": "a\\b"}).value
    assert ev('s == ""', {"s": ""}).value
    assert ev('s == "é ü"', {"s": "é ü"}).value


@pytest.mark.parametrize(("text", "position"), [(r's == "a\nb"', 7), (r's == "\t"', 6), (r'"\x" == s', 1)])
def test_bad_escapes(text: str, position: int) -> None:
    assert syntax_error(text).position == position


def test_unterminated_string() -> None:
    assert syntax_error('s == "abc').position == 5
    assert syntax_error("s == 'abc'").position == 5


def test_string_order_is_utf8_byte_order() -> None:
    assert ev('s < "b"', {"s": "a"}).value
    assert ev('s < "a"', {"s": "B"}).value  # upper case sorts first
    assert ev('s > "z"', {"s": "é"}).value  # multi-byte after ASCII
    assert ev('s < "\U0001f600"', {"s": "\uffff"}).value  # 4-byte UTF-8 after 3-byte
    assert ev('s <= "ab"', {"s": "ab"}).value
    assert ev('s < "ab"', {"s": "a"}).value


# ------------------------------------------------------------------ operators and syntax


def test_comparisons_do_not_chain() -> None:
    err = syntax_error("x == y == z")
    assert err.position == 7 and "chain" in err.message
    assert syntax_error("a < b < c").position == 6
    assert syntax_error("a != b == c").position == 7


def test_single_equals_suggests_double() -> None:
    err = syntax_error("x = 1")
    assert err.position == 2 and "==" in err.message


def test_tilde_is_not() -> None:
    assert ev("~x", {"x": False}).value
    assert ev("~~x", {"x": True}).value
    assert ev("~(1 > 2)").value


def test_whitespace() -> None:
    assert ev("x\t==\n1 ", {"x": 1}).value
    assert syntax_error("x ==\r1").position == 4
    assert syntax_error("x ==\f1").position == 4
    assert syntax_error("x ==\u00a01").position == 4


def test_length_limit() -> None:
    text = "(" * 62 + "x" + ")" * 62 + " == 1"
    assert len(text) > 128
    with pytest.raises(expressions.ExpressionLimitError) as info:
        expressions.compile(text)
    assert info.value.position == 128
    ok = "x == " + '"' + "a" * 121 + '"'
    assert len(ok) == 128
    assert ev(ok, {"x": "a" * 121}).value
    deep = "!" * 127 + "x"  # the deepest nesting 128 characters allow
    assert ev(deep, {"x": False}).value


@pytest.mark.parametrize(
    "text", ["", "   ", "\n", "x ==", "(x == 1", "x == 1)", "x == 1 y", "&& x", "x & y", "x | y"]
)
def test_syntax_errors(text: str) -> None:
    err = syntax_error(text)
    assert 0 <= err.position <= len(text)


def test_trailing_and_missing_operands_positions() -> None:
    assert syntax_error("x == 1 y").position == 7
    assert syntax_error("x ==").position == 4


# ------------------------------------------------------------------ types and evaluation errors


def test_relational_operators_need_same_type() -> None:
    assert ev("x == 1", {"x": "1"}) == Outcome(False, "type")
    assert ev('x == "1"', {"x": 1}) == Outcome(False, "type")
    assert ev("x == y", {"x": 1, "y": "1"}) == Outcome(False, "type")
    assert ev("x == y", {"x": True, "y": True}) == Outcome(True)
    assert ev("x != y", {"x": True, "y": False}) == Outcome(True)
    assert ev("x < y", {"x": True, "y": False}) == Outcome(False, "type")  # booleans are not ordered
    assert ev("x < y", {"x": "a", "y": "b"}) == Outcome(True)


def test_bool_is_not_int() -> None:
    assert ev("x == 1", {"x": True}) == Outcome(False, "type")
    assert ev("x == true", {"x": 1}) == Outcome(False, "type")
    assert ev("x + 1 == 2", {"x": True}) == Outcome(False, "type")
    assert ev("x", {"x": 1}) == Outcome(False, "result")


def test_float_and_out_of_range_property_values_are_type_errors() -> None:
    assert ev("x == 1", {"x": 1.0}) == Outcome(False, "type")
    assert ev("x > 1", {"x": 2**63}) == Outcome(False, "type")
    assert ev("exists(x)", {"x": 2**63}) == Outcome(True)


def test_missing_property_is_a_name_error() -> None:
    assert ev("x == 1") == Outcome(False, "name")
    assert ev("!x") == Outcome(False, "name")


def test_arithmetic_is_c_int64() -> None:
    assert ev("x / 2 == -3", {"x": -7}).value  # truncates toward zero
    assert ev("x / -2 == -3", {"x": 7}).value
    assert ev("x % 2 == -1", {"x": -7}).value  # sign of the dividend
    assert ev("x % -2 == 1", {"x": 7}).value
    assert ev("x % -2 == -1", {"x": -7}).value
    assert ev("x / 0 == 1", {"x": 1}) == Outcome(False, "arithmetic")
    assert ev("x % 0 == 1", {"x": 1}) == Outcome(False, "arithmetic")
    assert ev("x + 1 > 0", {"x": I64_MAX}) == Outcome(False, "arithmetic")
    assert ev("x - 1 < 0", {"x": I64_MIN}) == Outcome(False, "arithmetic")
    assert ev("x * 2 > 0", {"x": 2**62}) == Outcome(False, "arithmetic")
    assert ev("x / -1 > 0", {"x": I64_MIN}) == Outcome(False, "arithmetic")
    assert ev("x % -1 == 0", {"x": I64_MIN}) == Outcome(True)
    assert ev(f"x + 1 == {I64_MAX}", {"x": I64_MAX - 1}).value


def test_logic_needs_booleans() -> None:
    assert ev("x && true", {"x": 1}) == Outcome(False, "type")
    assert ev("true && x", {"x": "s"}) == Outcome(False, "type")
    assert ev("false && x", {"x": "s"}) == Outcome(False)  # not evaluated, not checked
    assert ev("true || x", {}) == Outcome(True)
    assert ev("false || x", {}) == Outcome(False, "name")
    assert ev("!x", {"x": 0}) == Outcome(False, "type")


def test_non_boolean_result() -> None:
    assert ev("x", {"x": "s"}) == Outcome(False, "result")
    assert ev("x", {"x": True}) == Outcome(True)


def test_expression_attributes() -> None:
    expr = expressions.compile("a == 1 && exists(b) || c.d > e")
    assert expr.text == "a == 1 && exists(b) || c.d > e"
    assert expr.dialect == "bmq"
    assert expr.properties == frozenset({"a", "b", "c.d", "e"})


def test_bad_dialect_and_type_names() -> None:
    with pytest.raises(ValueError):
        expressions.compile("x", dialect="sql")
    with pytest.raises(ValueError):
        expressions.compile("x == 1", types={"x": "float"})
    with pytest.raises(ValueError):
        expressions.compile("x == 1", types={"x": "integer"})


def test_caret_message() -> None:
    with pytest.raises(expressions.ExpressionError) as info:
        expressions.compile("x == 1 &&\ny = 2")
    err = info.value
    assert err.position == 12
    assert err.text == "x == 1 &&\ny = 2"
    assert str(err).splitlines()[1:] == ["  y = 2", "    ^"]
