"""The native plan on chosen cases: header decoding as router.routing.properties decodes, int64 edges, NaN, LIKE on
long inputs in linear time, sharing across apps, and what the wrapper refuses."""

from __future__ import annotations

import math
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from subroute import expressions
from subroute.expressions import Subscription, plan
from subroute.expressions.expression import check
from subroute.expressions.interpreter import interpret
from subroute.routing.native_plan import NativePlan
from subroute.routing.properties import PropertyDecodeError, decode_value


def matches(text: str, headers: list[tuple[str, bytes | None]], dialect: str = "bmq", **types: str) -> bool:
    return NativePlan([Subscription(0, text, dialect, types)]).match(headers) == {0}


_float_text = st.text(alphabet="0123456789_.eE+-naifNItyx \t", max_size=8)


@settings(max_examples=500, deadline=None)
@given(st.one_of(_float_text.map(str.encode), st.binary(max_size=6)))
def test_float_decoding_equals_python(raw: bytes) -> None:
    try:
        expected: float | None = float(decode_value(raw, "float"))
    except PropertyDecodeError:
        expected = None
    plan = NativePlan(
        [
            Subscription("present", "p IS NOT NULL", "sql92", {"p": "float"}),
            Subscription("nan", "p <> p", "sql92", {"p": "float"}),
            Subscription("positive", "p > 0", "sql92", {"p": "float"}),
            Subscription("big", "p >= 1e308", "sql92", {"p": "float"}),
        ]
    )
    got = plan.match([("p", raw)])
    if expected is None:
        assert got == frozenset()
        return
    assert "present" in got
    assert ("nan" in got) == math.isnan(expected)
    assert ("positive" in got) == (expected > 0)
    assert ("big" in got) == (expected >= 1e308)
    if math.isfinite(expected):
        exact = NativePlan([Subscription(0, f"p = {expected!r}", "sql92", {"p": "float"})])
        assert exact.match([("p", raw)]) == {0}


@settings(max_examples=500, deadline=None)
@given(st.one_of(st.text(alphabet="0123456789-+_ ", max_size=22).map(str.encode), st.binary(max_size=4)))
def test_int_decoding_equals_python(raw: bytes) -> None:
    assert_int_decoding_equals_python(raw)


def assert_int_decoding_equals_python(raw: bytes) -> None:
    try:
        expected: int | None = int(decode_value(raw, "int"))
    except PropertyDecodeError:
        expected = None
    assert matches("exists(p)", [("p", raw)], p="int") == (expected is not None)
    if expected is not None:
        assert matches(f"p == {expected}" if expected >= 0 else f"p == -{-expected}", [("p", raw)], p="int")


def test_leading_zeros_past_pythons_int_text_limit_keep_their_value() -> None:
    # int() refuses text past 4300 digits; "0" * 10000 is still 0 (Hypothesis found the two sides apart here).
    zeros = b"0" * 10000
    assert decode_value(zeros, "int") == 0
    assert decode_value(b"-" + zeros + b"9223372036854775808", "int") == -(2**63)
    for outside in (zeros + b"9223372036854775808", b"1" + zeros):
        with pytest.raises(PropertyDecodeError, match="outside int64"):
            decode_value(outside, "int")
        assert not matches("exists(p)", [("p", outside)], p="int")
    assert matches("p == 0", [("p", zeros)], p="int")
    assert matches("NOT p < 0", [("p", b"-7825"), ("p", zeros)], "sql92", p="int")
    assert matches("p == -9223372036854775808", [("p", b"-" + zeros + b"9223372036854775808")], p="int")


_long_ints = st.builds(
    lambda sign, zeros, digits: f"{sign}{'0' * zeros}{digits}".encode(),
    st.sampled_from(("", "-")),
    st.integers(0, 6000),
    st.text(alphabet="0123456789", max_size=21),
)


@settings(max_examples=100, deadline=None)
@given(_long_ints)
def test_long_int_decoding_equals_python(raw: bytes) -> None:
    assert_int_decoding_equals_python(raw)


def test_last_header_wins_and_null_or_bad_removes() -> None:
    assert matches("a == 2", [("a", b"1"), ("a", b"2")], a="int")
    assert not matches("exists(a)", [("a", b"1"), ("a", None)], a="int")
    assert not matches("exists(a)", [("a", b"1"), ("a", b"x")], a="int")
    assert matches('a == "x"', [("a", b"1"), ("a", b"x")])  # undeclared: a string
    assert not matches('a == "x"', [("a", b"\xff")])


def test_int64_edges() -> None:
    top, bottom = b"9223372036854775807", b"-9223372036854775808"
    assert matches("a + 0 == 9223372036854775807", [("a", top)], a="int")
    assert not matches("a + 1 > 0", [("a", top)], a="int")  # overflow: an error, no match
    assert not matches("a + 1 < 0", [("a", top)], a="int")
    assert not matches("-a > 0", [("a", bottom)], a="int")
    assert not matches("a / -1 != 0", [("a", bottom)], a="int")
    assert matches("a % -1 == 0", [("a", bottom)], a="int")
    assert matches("-7 / 2 == -3 && -7 % 2 == -1 && 7 % -2 == 1", [])
    assert not matches("a / 0 == 0 || true", [("a", b"1")], a="int")  # an error ends evaluation
    assert matches("a = 9223372036854775807", [("a", top)], "sql92", a="int")
    # sql92 compares int with float exactly, as Python does.
    assert not matches("a = 9007199254740992.0", [("a", b"9007199254740993")], "sql92", a="int")
    assert matches("a > 9007199254740992.0", [("a", b"9007199254740993")], "sql92", a="int")


def test_nan_and_three_valued_logic() -> None:
    nan = [("c", b"+nan")]
    for text in ("c = c", "c < 1", "c >= 1", "c BETWEEN 0 AND 1", "c NOT BETWEEN 0 AND 1"):
        assert not matches(text, nan, "sql92", c="float")
    for text in ("c <> c", "NOT (c = 1)", "c IS NOT NULL"):
        assert matches(text, nan, "sql92", c="float")
    assert not matches("x = 1 OR NOT (x = 1)", [], "sql92")  # UNKNOWN
    assert matches("x = 1 OR TRUE", [], "sql92")
    assert not matches("c / 0 = 1 OR TRUE", [("c", b"1")], "sql92", c="float")
    assert matches("c * 1e308 > 1e308", [("c", b"10")], "sql92", c="float")  # inf, as Python's floats


def test_like_is_linear_on_long_inputs() -> None:
    text = b"a" * 200_000
    plan = NativePlan([Subscription(0, "s LIKE '" + "%a" * 20 + "%b'", "sql92")])
    start = time.perf_counter()
    assert plan.match([("s", text)]) == frozenset()
    assert time.perf_counter() - start < 0.5
    assert matches("s LIKE '%a!%b_' ESCAPE '!'", [("s", "xxa%bé".encode())], "sql92")
    assert not matches("s NOT LIKE 'a%'", [("s", b"abc")], "sql92")


def test_shared_predicates_across_apps() -> None:
    subs = [
        Subscription(("app1", i), f'Region == "eu" && CustomerId == {i}', "bmq", {"CustomerId": "int"})
        for i in range(50)
    ] + [
        Subscription(("app2", i), f"Region = 'eu' AND CustomerId IN ('{i}')", "sql92", {}) for i in range(50)
    ]
    plan = NativePlan(subs)
    assert plan.stats["indexed_equality"] == 100
    assert plan.match([("Region", b"eu"), ("CustomerId", b"7")]) == {("app1", 7), ("app2", 7)}


def test_bad_expressions_raise_expression_errors() -> None:
    with pytest.raises(expressions.ExpressionError):
        NativePlan([Subscription(0, "a ==", "bmq")])
    assert len(NativePlan([])) == 0
    assert NativePlan([]).match_batch([None, []]) == [frozenset(), frozenset()]


_like_alphabet = "ab%_!'é😀\n"


@settings(max_examples=400, deadline=None)
@given(
    st.text(alphabet=_like_alphabet, max_size=6),
    st.booleans(),
    st.lists(st.text(alphabet=_like_alphabet, max_size=30), min_size=1, max_size=4),
)
def test_like_equals_reference(pattern: str, escape: bool, texts: list[str]) -> None:
    if escape and pattern.endswith("!") and not pattern.endswith("!!"):
        pattern += "!"
    source = "s LIKE '" + pattern.replace("'", "''") + "'" + (" ESCAPE '!'" if escape else "")
    try:
        tree = check(source, "sql92", {})
    except expressions.ExpressionError:
        return
    plan = NativePlan([Subscription(0, source, "sql92")])
    batch: list[list[tuple[str, bytes | None]]] = [[("s", t.encode())] for t in texts]
    for headers, got in zip(batch, plan.match_batch(batch), strict=True):
        expected = interpret(tree, {"s": headers[0][1].decode()}, "sql92").value  # type: ignore[union-attr]
        assert (got == {0}) == expected, (source, headers)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="aé😀\x00\x7f", max_size=3), st.text(alphabet="aé😀\x00\x7f", max_size=3))
def test_string_order_is_code_point_order(left: str, right: str) -> None:
    literal = '"' + right.replace("\\", "\\\\").replace('"', '\\"') + '"'
    plan = NativePlan(
        [Subscription(op, f"s {op} {literal}", "bmq") for op in ("<", "<=", ">", ">=", "==", "!=")]
    )
    got = plan.match([("s", left.encode())])
    expected = {
        op
        for op, holds in (
            ("<", left < right),
            ("<=", left <= right),
            (">", left > right),
            (">=", left >= right),
            ("==", left == right),
            ("!=", left != right),
        )
        if holds
    }
    assert got == expected


def test_reuse_skips_parsing_and_decides_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    subs = [Subscription(i, f'a == {i} && s != "x"', "bmq", {"a": "int"}) for i in range(20)]
    first = NativePlan(subs)
    parsed: list[str] = []
    original = plan.check

    def counted(text: str, *args: object) -> object:
        parsed.append(text)
        return original(text, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(plan, "check", counted)
    pauses: list[int] = []
    again = NativePlan(
        [*subs, Subscription("new", "a > 10", "bmq", {"a": "int"})], first, lambda: pauses.append(1)
    )
    assert parsed == ["a > 10"]  # only the new expression was parsed
    assert again.stats["lowered"] == 1  # and lowered: the others' gates are unchanged
    assert len(pauses) == 21 + 1  # after each subscription is given its entry, and after lowering the new one
    headers = [("a", b"12"), ("s", b"y")]
    assert again.match(headers) == {12, "new"}
    assert first.match(headers) == {12}


def test_required_groups_are_checked() -> None:
    subs = [
        Subscription("filter", "a > 0", "bmq", {"a": "int"}),
        Subscription("sub", "a > 5", "bmq", {"a": "int"}),
    ]
    plan = NativePlan(subs, opens=["app", None], requires=[None, "app"])
    assert plan.match([("a", b"7")]) == {"filter", "sub"}
    assert NativePlan(subs, opens=["other", None], requires=[None, "app"]).match([("a", b"7")]) == {"filter"}
    with pytest.raises(ValueError, match="entries"):
        NativePlan(subs, opens=["app"])
    with pytest.raises(ValueError, match="both"):
        NativePlan(subs, opens=["app", None], requires=["app", None])
