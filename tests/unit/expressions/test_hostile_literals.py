"""Hostile expressions: only ExpressionError leaves compile, with a caret and a bounded message."""

from __future__ import annotations

import pytest

from subroute import expressions
from subroute.expressions.errors import EXCERPT, LiteralRangeError


@pytest.mark.parametrize(
    ("dialect", "digits"),
    [
        ("sql92", "9" * 5_000),  # raised ValueError out of compile before
        ("sql92", "0" * 4_990 + "1" * 20),
        ("sql92", "99999999999999999999"),
        ("bmq", "99999999999999999999"),  # bmq expressions are at most 128 characters anyway
    ],
)
def test_huge_integer_literals_are_range_errors_with_a_caret(dialect: str, digits: str) -> None:
    text = f"x = {digits}" if dialect == "sql92" else f"x == {digits}"
    with pytest.raises(LiteralRangeError) as info:
        expressions.compile(text, dialect=dialect)
    error = info.value
    assert error.position == text.index(digits[0])
    assert len(str(error)) < 4 * EXCERPT + 100  # an excerpt, not the whole literal
    line, caret = str(error).splitlines()[-2:]
    assert caret.index("^") == line.index(digits[0])  # the caret still sits under the literal


def test_a_fault_deep_in_a_long_expression_is_shown_as_an_excerpt() -> None:
    text = "x = 1 AND " * 300 + "x = = 2"
    with pytest.raises(expressions.ExpressionSyntaxError) as info:
        expressions.compile(text, dialect="sql92")
    line, caret = str(info.value).splitlines()[-2:]
    assert line.startswith("  …") and len(line) <= 2 * EXCERPT + 6
    assert line[caret.index("^")] == "="


def test_leading_zeros_are_not_digits_of_range() -> None:
    assert expressions.compile("x = 0000000000000000000000007", dialect="sql92").evaluate({"x": 7}).value
