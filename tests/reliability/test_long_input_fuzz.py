"""Fuzzing with long inputs and a time budget for every single step (hypothesis).

``test_parser_fuzz.py`` draws texts of at most 300 characters and one-character LIKE tokens, with no time
limit: it found none of the hostile inputs fixed since (``x LIKE '%a%a%a%a%a%a%b'`` on 3,000 characters, the
input regex ``^(a+)+$`` on a 44-character topic name, a sql92 integer literal of 5,000 digits, 389 bytes of
nested YAML aliases, 40-120 kB ``subroute.expiration`` headers). Here the inputs are long and made of few
characters, so that patterns match partially and worst cases are reached:

* values up to 10,000 characters built from a few repeated chunks of a small alphabet (``'ab' * 3000 + 'b'``);
* sql92 LIKE patterns with up to 30 ``%``/``_`` wildcards, multi-character literal runs, runs of thousands of
  ``_`` or literals, and escape characters (``!``, ``\\``, and ``a``, which is also a literal);
* sql92 expressions with long IN lists, long string, integer (up to 10,000 digits) and decimal literals, and
  nesting up to and just past the parser's depth limit; bmq expressions up to their 128 characters;
* header values up to 10,000 bytes for every type the router decodes (int, float, bool, string) and for
  ``subroute.expiration``; the same duration grammar as the YAML ``expiration``;
* YAML documents: configs of many apps with long values, nested aliases, deep nesting, token soup;
* input regexes (nested groups and quantifiers, alternations, classes, counted repetitions) against topic
  names up to Kafka's 249 characters.

Every compile, evaluation, header decode, YAML parse and pattern match is one *step*, timed on its own with
``time.perf_counter``; a step over its budget fails the test with the step and its input named. Evaluations
must also agree: the compiled evaluator, the reference interpreter, the shared plan and the native plan
(``subroute.routing.native_plan``, which decodes the headers itself). Only the documented errors may leave a
step: ``ExpressionError`` from compile, ``PropertyDecodeError`` from a decode, ``PatternError`` from a pattern;
evaluation, YAML parsing and expiration never raise.

Examples per test are sized so that the file runs in well under a minute on a 2-core machine; ``--soak``
multiplies them by ``SOAK_FACTOR``. ``SUBROUTE_FUZZ_SCALE`` (a float, default 1) scales them too.
"""

from __future__ import annotations

import functools
import os
import re
import signal
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

import pytest
import yaml
from hypothesis import HealthCheck, Phase, assume, given, settings, target
from hypothesis import strategies as st

from subroute import expressions, wire
from subroute.config import yaml as config_yaml
from subroute.durations import parse_duration_ms
from subroute.expressions.interpreter import interpret
from subroute.routing.expiration import message_expiration
from subroute.routing.native_plan import NativePlan
from subroute.routing.properties import (
    PropertyDecodeError,
    decode_headers,
    decode_value,
    decode_with,
    decoders_for,
)
from subroute.topic_patterns import PatternError, compile_pattern, input_matches

T = TypeVar("T")

# The budgets. A linear step on these inputs (at most ~10,000 characters of value, ~100,000 of expression or
# YAML) takes a few milliseconds to a few tens of them on the 2-core machine; the hostile inputs this file is
# for took seconds, minutes or hours (exponential or quadratic). The budgets sit well above the first, so a busy
# machine does not fail the test, and far below the second. This is one of the few places where a test asserts
# on time: each bound is on one step, never on a throughput.
BUDGET_EVALUATION = 0.25  # seconds: one evaluation of one expression on one message, one pattern match
BUDGET_COMPILE = 1.0  # seconds: one compile (expression, plan, native plan, regex), one YAML parse
BUDGET_DECODE = 0.25  # seconds: one header value decoded (or one message's headers), one duration parsed
# A step still running at this many times its budget (CPU time) is interrupted, so a runaway input fails the
# test with its name instead of hanging it (and hypothesis's replays of a failing input stay short). Code that
# does not return to the interpreter (one C call) is not interrupted; the step is then failed by its measured
# time when it ends.
WATCHDOG_FACTOR = 2

SOAK_FACTOR = 10
SCALE = float(os.environ.get("SUBROUTE_FUZZ_SCALE", "1"))

MAX_VALUE = 10_000
MAX_TOPIC = 249  # Kafka's longest topic name

LONG = settings(
    deadline=None,  # the budgets below are explicit, per step, and name the input
    # No explain phase: after a failure it traces every later example (sys.settrace), which made these inputs
    # so slow that one failing run went on past the suite's limits (seen: past 420 s, under the suite's load).
    phases=[phase for phase in Phase if phase is not Phase.explain],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example],
)


# ---------------------------------------------------------------- the budget


class OverBudget(BaseException):
    """Raised by the watchdog inside a step (a BaseException: no ``except Exception`` in the code may eat it)."""


@contextmanager
def _watchdog(seconds: float) -> Iterator[None]:
    """Interrupt the block after ``seconds`` of CPU time, and again every 0.1 s after that should the first
    interruption land where it is swallowed (a gc callback). A virtual timer: pytest-timeout's SIGALRM is left
    alone. Where there is no such timer, or off the main thread, the block simply runs."""
    if not hasattr(signal, "setitimer") or threading.current_thread() is not threading.main_thread():
        yield
        return
    armed = [True]

    def fire(signum: int, frame: object) -> None:
        if armed[0]:
            raise OverBudget

    previous = signal.signal(signal.SIGVTALRM, fire)
    signal.setitimer(signal.ITIMER_VIRTUAL, seconds, 0.1)
    try:
        yield
    finally:
        while armed[0]:
            try:  # an interruption landing here is over: disarm, whatever comes
                armed[0] = False
            except OverBudget:
                continue
        signal.setitimer(signal.ITIMER_VIRTUAL, 0)
        signal.signal(signal.SIGVTALRM, previous)


_worst: dict[str, float] = {}  # per example: the largest share of its budget a step of each kind took


def timed(what: str, budget: float, step: Callable[[], T], kind: str = "") -> T:
    """Run one step; fail when it takes longer than ``budget`` seconds (``what`` names the step and input).

    The share of the budget used is also a hypothesis ``target``, per kind of step (``kind``, or the first
    word of ``what``), so the search leans toward the slower inputs.
    """
    start = time.perf_counter()
    stopped = False
    try:
        with _watchdog(budget * WATCHDOG_FACTOR):
            result = step()
    except OverBudget:
        stopped = True
    elapsed = time.perf_counter() - start
    if stopped or elapsed > budget:  # one raise: hypothesis must see the same failure when it replays
        how = "stopped after" if stopped else "took"
        raise AssertionError(f"{what}: {how} {elapsed:.3f} s, over its {budget} s budget")
    label = kind or what.split(" ", 1)[0]
    _worst[label] = max(_worst.get(label, 0.0), elapsed / budget)
    return result


def show(value: str | bytes, limit: int = 300) -> str:
    """A long input, short: runs of one repeated 1-4 character chunk are written ``chunk*count``."""
    text = value.decode("utf-8", "backslashreplace") if isinstance(value, bytes) else value
    parts: list[str] = []
    literal_start = i = 0
    size = 0  # len(" + ".join(parts)) + 3: once past the limit, the rest of the text is not shown anyway
    while i < len(text) and size <= limit + 3:
        best_chunk, best_count = "", 0
        for period in (1, 2, 3, 4):
            chunk = text[i : i + period]
            if len(chunk) < period:
                break
            count = 1
            while text.startswith(chunk, i + count * period):
                count += 1
            if count * period >= 12 and count * period > best_count * len(best_chunk):
                best_chunk, best_count = chunk, count
        if best_count:
            if literal_start < i:
                parts.append(repr(text[literal_start:i]))
                size += len(parts[-1]) + 3
            parts.append(f"{best_chunk!r}*{best_count}")
            size += len(parts[-1]) + 3
            i += best_count * len(best_chunk)
            literal_start = i
        else:
            i += 1
    if literal_start < len(text) and size <= limit + 3:
        parts.append(repr(text[literal_start:]))
    shown = " + ".join(parts) or repr(text)
    if len(shown) > limit:
        shown = shown[: limit - 1] + "…"
    kind = "bytes" if isinstance(value, bytes) else "chars"
    return f"{shown} ({len(value)} {kind})"


def run(prop: Callable[..., None], soak: bool, examples: int, *strategies: st.SearchStrategy[Any]) -> None:
    """Fuzz ``prop`` over ``strategies`` with ``examples`` examples (times SOAK_FACTOR under --soak)."""
    count = max(1, int(examples * SCALE * (SOAK_FACTOR if soak else 1)))

    @functools.wraps(prop)
    def targeted(*args: Any, **kwargs: Any) -> None:
        _worst.clear()
        prop(*args, **kwargs)
        for label, share in _worst.items():
            target(share, label=label)

    settings(LONG, max_examples=count)(given(*strategies)(targeted))()


# ---------------------------------------------------------------- long inputs


def runs(alphabet: str, max_size: int = MAX_VALUE, min_size: int = 0) -> st.SearchStrategy[str]:
    """Text of a few repeated chunks of ``alphabet``: ``'a' * 2999 + 'b'``, ``'ab' * 4000 + 'ba'``..."""
    chunk = st.text(alphabet, min_size=1, max_size=4)
    count = st.one_of(st.integers(1, 3), st.integers(1, max_size))
    pieces = st.integers(1 if min_size else 0, 6).flatmap(
        lambda n: st.lists(st.tuples(chunk, count), min_size=n, max_size=n)
    )
    text = pieces.map(lambda ps: "".join(c * n for c, n in ps)[:max_size])
    return text.filter(lambda t: len(t) >= min_size) if min_size else text


def sql_quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def bmq_quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


VALUE_ALPHABET = "ab"  # two letters: every pattern matches somewhere, partially, many times
TEXT_ALPHABET = "ab%_!'é\\"
long_texts = st.one_of(runs(VALUE_ALPHABET), runs(VALUE_ALPHABET), runs(TEXT_ALPHABET), st.text(max_size=20))

# LIKE patterns: wildcards, short literal runs, long runs of `_` or of literals (segments of thousands of
# units), escaped characters (the escape itself is drawn with the pattern).
ESCAPES = (None, "!", "\\", "a")
_like_tokens = st.one_of(
    st.just("%"),
    st.just("%"),
    st.text("_", min_size=1, max_size=3),
    st.text("ab", min_size=1, max_size=6),
    st.text("abé'", min_size=1, max_size=3),
    st.tuples(st.sampled_from("_ab"), st.one_of(st.integers(4, 40), st.integers(1, 3000))).map(
        lambda t: t[0] * t[1]
    ),
    runs("ab_", 3000),  # long segments mixing literals and `_`: 'a_' * 1500, 'aa' + '_' * 2000 + 'b'...
    st.sampled_from(["\x00%", "\x00_", "\x00\x00"]),  # \x00: the escape, put in below
)


@st.composite
def like_patterns(draw: st.DrawFn) -> tuple[str, str | None]:
    escape = draw(st.sampled_from(ESCAPES))
    size = draw(st.integers(0, 60))
    tokens = draw(st.lists(_like_tokens, min_size=size, max_size=size))
    pattern = "".join(tokens).replace("\x00", escape or "")
    return pattern, escape


def like_text(operand: str, pattern: str, escape: str | None, negated: bool) -> str:
    text = f"{operand} {'NOT ' if negated else ''}LIKE {sql_quote(pattern)}"
    return text + (f" ESCAPE {sql_quote(escape)}" if escape is not None else "")


# sql92 expressions over a: int, c: float, f: bool, s: string (declared) and x (undeclared: string).
SQL_TYPES = {"a": "int", "c": "float", "f": "bool", "s": "string"}
SQL_NAMES = ("a", "c", "f", "s", "x")
DIGITS = "0123456789"

sql_ints = st.one_of(
    st.integers(0, 2**64).map(str),
    st.sampled_from(["9223372036854775807", "9223372036854775808", "0" * 30 + "1"]),
    runs(DIGITS, min_size=1),  # up to 10,000 digits
)
sql_decimals = st.one_of(
    st.floats(0, 1e308).map(repr),
    st.tuples(runs(DIGITS, 5000), runs(DIGITS, 5000), st.sampled_from(["", "e5", "E-400", "e+999"])).map(
        lambda t: f"{t[0] or '0'}.{t[1]}{t[2]}"
    ),
)
sql_strings = st.one_of(long_texts, st.text(max_size=5)).map(sql_quote)
sql_operands = st.one_of(
    st.sampled_from(SQL_NAMES),
    st.sampled_from(SQL_NAMES),
    sql_ints,
    sql_decimals,
    sql_strings,
    st.sampled_from(["TRUE", "FALSE", "NULL"]),
)
sql_values = st.one_of(
    sql_operands,
    st.tuples(sql_operands, st.lists(st.tuples(st.sampled_from("+-*/"), sql_operands), max_size=4)).map(
        lambda t: t[0] + "".join(f" {op} {v}" for op, v in t[1])
    ),
    st.tuples(st.integers(1, 210), sql_operands).map(lambda t: "- " * t[0] + t[1]),  # deep, within and past
    st.tuples(st.integers(1, 210), st.sampled_from(SQL_NAMES)).map(lambda t: " + ".join([t[1]] * t[0])),
)
_not = st.sampled_from(["", "NOT "])


@st.composite
def sql_in_lists(draw: st.DrawFn) -> str:
    operand = draw(sql_values)
    count = draw(st.one_of(st.integers(1, 5), st.integers(1, 2000)))
    stems = draw(st.lists(st.text(TEXT_ALPHABET, max_size=8), min_size=1, max_size=4))
    items = [sql_quote(f"{stems[i % len(stems)]}{i // len(stems)}") for i in range(count)]
    return f"{operand} {draw(_not)}IN ({', '.join(items)})"


@st.composite
def sql_likes(draw: st.DrawFn) -> str:
    pattern, escape = draw(like_patterns())
    return like_text(draw(st.sampled_from(["s", "x", "a", "'ab'"])), pattern, escape, draw(st.booleans()))


sql_predicates = st.one_of(
    st.tuples(sql_values, st.sampled_from(["=", "<>", "<", "<=", ">", ">="]), sql_values).map(" ".join),
    st.tuples(sql_values, _not, sql_values, sql_values).map(
        lambda t: f"{t[0]} {t[1]}BETWEEN {t[2]} AND {t[3]}"
    ),
    sql_in_lists(),
    sql_likes(),
    sql_likes(),
    st.tuples(sql_values, _not).map(lambda t: f"{t[0]} IS {t[1]}NULL"),
    st.sampled_from(SQL_NAMES),
)


@st.composite
def sql_chains(draw: st.DrawFn) -> str:
    """A flat chain of comparisons of one property (``a = 0 OR a = 1 OR ...``), within and past the depth limit."""
    name, op = draw(st.sampled_from(SQL_NAMES)), draw(st.sampled_from(["=", "<>", "<", ">="]))
    junction = draw(st.sampled_from([" AND ", " OR "]))
    return junction.join(f"{name} {op} {i}" for i in range(draw(st.integers(2, 260))))


sql_expressions = st.recursive(
    st.one_of(sql_predicates, sql_chains()),
    lambda kids: st.one_of(
        st.tuples(st.lists(kids, min_size=2, max_size=6), st.sampled_from([" AND ", " OR "])).map(
            lambda t: t[1].join(t[0])
        ),
        st.tuples(st.integers(1, 150), kids).map(lambda t: "(" * t[0] + t[1] + ")" * t[0]),
        st.tuples(st.integers(1, 210), kids).map(lambda t: "NOT " * t[0] + t[1]),
    ),
    max_leaves=8,
)
MAX_EXPRESSION = 60_000  # characters; the config's own limit is 4,096 by default (router/config/limits.py)

# bmq: at most 128 characters, so the long part is in the values; a: int, f: bool, s: string, b undeclared.
BMQ_TYPES = {"a": "int", "f": "bool", "s": "string"}
BMQ_NAMES = ("a", "b", "f", "s")
bmq_operands = st.one_of(
    st.sampled_from(BMQ_NAMES),
    st.sampled_from(BMQ_NAMES),
    st.integers(0, 2**64).map(str),
    runs(DIGITS, 120, min_size=1),
    st.text("ab\\\"'%", max_size=40).map(bmq_quote),
    runs("ab", 100).map(bmq_quote),
    st.sampled_from(["true", "false", "exists(a)", "exists(s)"]),
)
bmq_predicates = st.one_of(
    st.tuples(
        bmq_operands,
        st.sampled_from(["==", "!=", "<", "<=", ">", ">=", "+", "-", "*", "/", "%"]),
        bmq_operands,
    ).map(" ".join),
    st.tuples(st.integers(1, 64), bmq_operands).map(lambda t: "!" * t[0] + t[1]),
    st.tuples(st.integers(1, 64), bmq_operands).map(lambda t: "-" * t[0] + t[1]),
)
bmq_expressions = st.recursive(
    bmq_predicates,
    lambda kids: st.one_of(
        st.tuples(st.lists(kids, min_size=2, max_size=4), st.sampled_from([" && ", " || "])).map(
            lambda t: t[1].join(t[0])
        ),
        st.tuples(st.integers(1, 60), kids).map(lambda t: "(" * t[0] + t[1] + ")" * t[0]),
    ),
    max_leaves=6,
)

# Header values: what producers may send for each type (long, of the type's own characters, or anything).
INT_RAWS = st.one_of(
    st.integers(-(2**64), 2**64).map(str),
    runs(DIGITS),
    runs(DIGITS, 4400),
    runs("-0123456789 +_"),
    st.tuples(st.sampled_from(["", "-", "+", " "]), runs(DIGITS, min_size=1)).map("".join),
).map(str.encode)
FLOAT_RAWS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    runs(DIGITS + ".eE-+"),
    st.tuples(runs(DIGITS, 5000), runs(DIGITS, 5000)).map(lambda t: f"{t[0]}.{t[1]}"),
    st.sampled_from(["nan", "inf", "-Infinity", " 1", "1_0"]),
    runs("nainfty. "),
).map(str.encode)
BOOL_RAWS = st.one_of(st.sampled_from(["true", "false", "True", ""]), runs("truefals ")).map(str.encode)
STRING_RAWS = st.one_of(
    long_texts.map(str.encode),
    st.binary(max_size=8),
    st.tuples(runs("ab"), st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80"])).map(
        lambda t: t[0].encode() + t[1]
    ),
)
DURATION_TEXTS = st.one_of(
    st.tuples(runs(DIGITS, min_size=1), runs(" "), st.sampled_from(["", "ms", "s", "m", "h", "d", "x"])).map(
        "".join
    ),
    st.tuples(runs(" \t"), runs(DIGITS), runs(" \t"), st.sampled_from(["ms", "s", "x", "1"]), runs(" ")).map(
        "".join
    ),
    runs(DIGITS + " msdh"),
    st.sampled_from(["30s", "5m", "250ms", "1h", "2d", "", " ", "1e3"]),
)
RAWS_BY_TYPE: dict[str, st.SearchStrategy[bytes]] = {
    "int": INT_RAWS,
    "float": FLOAT_RAWS,
    "bool": BOOL_RAWS,
    "string": STRING_RAWS,
}


def headers_for(
    types: Mapping[str, str], names_: Sequence[str]
) -> st.SearchStrategy[list[tuple[str, bytes | None]]]:
    """A message's headers: each name's value drawn for its declared type (mostly), repeats and nulls included."""

    def one(name: str) -> st.SearchStrategy[tuple[str, bytes | None]]:
        typical = RAWS_BY_TYPE[types.get(name, "string")]
        value: st.SearchStrategy[bytes | None] = st.one_of(typical, typical, typical, STRING_RAWS, st.none())
        return st.tuples(st.just(name), value)

    return st.lists(st.one_of(*(one(n) for n in names_)), max_size=7)


# ---------------------------------------------------------------- expressions


def compile_timed(text: str, dialect: str, types: Mapping[str, str] | None) -> expressions.Expression | None:
    """Compile within the budget; an ExpressionError is a fine answer, anything else is a bug."""

    def step() -> expressions.Expression | None:
        try:
            return expressions.compile(text, dialect=dialect, types=types)
        except expressions.ExpressionError:
            return None

    return timed(f"{dialect} compile of {show(text)}", BUDGET_COMPILE, step)


def check_evaluations(
    expr: expressions.Expression,
    types: Mapping[str, str],
    records: Sequence[list[tuple[str, bytes | None]]],
) -> None:
    """Each record's headers decoded as the router does, then evaluated by the compiled evaluator, the reference
    interpreter, a shared plan and the native plan: each within its budget, all four agreeing."""
    text, dialect = expr.text, expr.dialect
    sub = expressions.Subscription("x", text, dialect, types)
    plan = timed(f"plan compile of {show(text)}", BUDGET_COMPILE, lambda: expressions.compile_plan([sub]))
    native = timed(f"native plan compile of {show(text)}", BUDGET_COMPILE, lambda: NativePlan([sub]))
    decoders = decoders_for(types, sorted(expr.properties))
    for headers in records:
        where = (
            f"{dialect} {show(text, 200)} on headers {[(n, show(v, 120) if v else v) for n, v in headers]}"
        )
        props, _ = timed(
            f"decode of {where}", BUDGET_DECODE, functools.partial(decode_with, headers, decoders)
        )
        outcome = timed(f"evaluation of {where}", BUDGET_EVALUATION, functools.partial(expr.evaluate, props))
        reference = timed(
            f"interpretation of {where}",
            BUDGET_EVALUATION,
            functools.partial(interpret, expr.ast, props, dialect),
        )
        assert outcome == reference, f"compiled {outcome} but interpreted {reference}: {where}"
        matched = timed(f"plan match of {where}", BUDGET_EVALUATION, functools.partial(plan.match, props))
        assert matched == (frozenset({"x"}) if outcome.value else frozenset()), f"plan {matched}: {where}"
        native_matched = timed(
            f"native match of {where}", BUDGET_EVALUATION, functools.partial(native.match, headers)
        )
        assert native_matched == matched, f"native {native_matched}, plan {matched}: {where}"


def _like_property(pattern_escape: tuple[str, str | None], negated: bool, values: list[str]) -> None:
    pattern, escape = pattern_escape
    expr = compile_timed(like_text("s", pattern, escape, negated), "sql92", SQL_TYPES)
    if expr is None:
        assert escape is not None  # only a pattern ending in its escape is refused
        return
    check_evaluations(expr, SQL_TYPES, [[("s", v.encode())] for v in values])


def test_like_on_long_text(soak: bool) -> None:
    run(
        _like_property,
        soak,
        150,
        like_patterns(),
        st.booleans(),
        st.lists(long_texts, min_size=1, max_size=3),
    )


def _sql_property(text: str, records: list[list[tuple[str, bytes | None]]]) -> None:
    assume(len(text) <= MAX_EXPRESSION)
    expr = compile_timed(text, "sql92", SQL_TYPES)
    if expr is not None:
        check_evaluations(expr, SQL_TYPES, records)


def test_long_sql92_expressions(soak: bool) -> None:
    records = st.lists(headers_for(SQL_TYPES, SQL_NAMES), min_size=1, max_size=3)
    run(_sql_property, soak, 120, sql_expressions, records)


def _bmq_property(text: str, records: list[list[tuple[str, bytes | None]]]) -> None:
    expr = compile_timed(text, "bmq", BMQ_TYPES)
    if expr is not None:
        check_evaluations(expr, BMQ_TYPES, records)


def test_bmq_expressions_on_long_values(soak: bool) -> None:
    records = st.lists(headers_for(BMQ_TYPES, BMQ_NAMES), min_size=1, max_size=3)
    run(_bmq_property, soak, 120, bmq_expressions, records)


def _raw_text_property(text: str, dialect: str) -> None:
    compile_timed(text, dialect, None)


def test_long_raw_texts_compile_within_budget(soak: bool) -> None:
    """Texts of up to 10,000 characters of the dialects' own punctuation and digits: only ExpressionError."""
    texts = st.one_of(runs("()'\"%_ab01 =<>!-+*/.eE\\"), runs("(' "), runs("0123456789. e"), runs("(NOT "))
    run(_raw_text_property, soak, 100, texts, st.sampled_from(expressions.DIALECTS))


# ---------------------------------------------------------------- header values


def _decode_property(type_and_raw: tuple[str, bytes]) -> None:
    type_name, raw = type_and_raw
    where = f"{type_name} decode of {show(raw)}"

    def step() -> object:
        try:
            return decode_value(raw, type_name)
        except PropertyDecodeError:
            return None

    value = timed(where, BUDGET_DECODE, step)
    expected = {"int": int, "float": float, "bool": bool, "string": str}[type_name]
    assert value is None or type(value) is expected, f"{where}: gave {type(value).__name__}"
    headers: list[tuple[str, bytes | None]] = [("p", raw)]
    props, failures = timed(
        where + " (headers)", BUDGET_DECODE, lambda: decode_headers(headers, {"p": type_name})
    )
    assert props == ({} if value is None else {"p": value}) and failures == (value is None), where
    via = timed(
        where + " (decoders)",
        BUDGET_DECODE,
        lambda: decode_with(headers, decoders_for({"p": type_name}, ["p"])),
    )
    via_props, via_failures = via  # decode_with counts the failures by header name
    assert (via_props, sum(via_failures.values())) == (props, failures), where
    assert set(via_failures) <= {"p"}, where


def test_long_header_values_decode_within_budget(soak: bool) -> None:
    raws = st.sampled_from(sorted(RAWS_BY_TYPE)).flatmap(
        lambda t: st.tuples(st.just(t), st.one_of(RAWS_BY_TYPE[t], RAWS_BY_TYPE[t], STRING_RAWS, INT_RAWS))
    )
    run(_decode_property, soak, 300, raws)


def _expiration_property(text: str, junk: bytes) -> None:
    raw = text.encode()
    where = f"subroute.expiration {show(raw)}"
    headers: list[tuple[str, bytes | None]] = [(wire.EXPIRATION, junk), (wire.EXPIRATION, raw)]
    own = timed(where, BUDGET_DECODE, lambda: message_expiration(headers))
    assert own is None or (type(own) is int and own >= 0), f"{where}: gave {own!r}"
    parsed = timed(f"duration {show(text)}", BUDGET_DECODE, lambda: parse_duration_ms(text))
    assert parsed is None or (type(parsed) is int and parsed >= 0)
    if parsed is not None and message_expiration([(wire.EXPIRATION, junk)]) is None:
        assert own == parsed, where

    def yaml_duration() -> int | None:
        try:
            return config_yaml.parse_duration_ms(text)
        except ValueError:
            return None

    from_yaml = timed(f"YAML expiration {show(text)}", BUDGET_DECODE, yaml_duration)
    assert from_yaml is None or from_yaml == parse_duration_ms(text, default_unit=None)


def test_long_expiration_headers_within_budget(soak: bool) -> None:
    junk = st.one_of(st.just(b""), STRING_RAWS, DURATION_TEXTS.map(str.encode))
    run(_expiration_property, soak, 300, DURATION_TEXTS, junk)


# ---------------------------------------------------------------- YAML


@st.composite
def yaml_configs(draw: st.DrawFn) -> str:
    """A config in the users' format with long values, dumped by PyYAML."""
    apps: dict[str, Any] = {}
    for a in range(draw(st.integers(1, 8))):
        body: dict[str, Any] = {
            "inputs": draw(st.lists(st.one_of(runs("ab.-_", MAX_TOPIC), st.just("^(a+)+$")), max_size=5)),
            "dialect": "sql92",
            "properties": dict.fromkeys(draw(st.lists(runs("ab", 300, min_size=1), max_size=5)), "int"),
            "filter": draw(st.lists(st.one_of(sql_likes(), sql_chains()), max_size=2)),
            "expiration": draw(st.one_of(DURATION_TEXTS, st.integers())),
            "groups": {
                f"g{g}": {
                    "subscriptions": draw(st.lists(st.one_of(runs("ab =", 2000), sql_likes()), max_size=3))
                }
                for g in range(draw(st.integers(0, 6)))
            },
        }
        apps[draw(runs("ab", 200, min_size=1)) + str(a)] = body
    # libyaml's emitter when there is one: the same text as PyYAML's own, which took most of this test's time
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    return yaml.dump({"apps": apps}, Dumper=dumper, width=draw(st.sampled_from([80, 10_000])))


@st.composite
def yaml_aliases(draw: st.DrawFn) -> str:
    """Nested aliases: each anchor a list of ``width`` aliases of the one before (``width ** depth`` leaves)."""
    width, depth = draw(st.integers(2, 12)), draw(st.integers(1, 12))
    lines = ["anchors:", f"  - &v0 [{draw(st.sampled_from(['x', 'orders', '1', '{a: b}']))}]"]
    lines += [f"  - &v{i} [{', '.join([f'*v{i - 1}'] * width)}]" for i in range(1, depth + 1)]
    where = draw(st.sampled_from(["inputs", "filter", "properties", "dialect", "groups", "expiration"]))
    lines += ["apps:", f"  app: {{{where}: *v{depth}}}"]
    return "\n".join(lines) + "\n"


@st.composite
def yaml_nesting(draw: st.DrawFn) -> str:
    """Deep nesting of flow and block collections."""
    depth = draw(st.one_of(st.integers(1, 60), st.integers(1, 5000)))  # flow nesting: 2 characters a level
    kind = draw(st.sampled_from(["flow-list", "flow-map", "block-map", "block-list"]))
    if kind == "flow-list":
        return "apps: " + "[" * depth + "x" + "]" * depth
    if kind == "flow-map":
        return "apps: " + "{a: " * depth + "b" + "}" * depth
    if kind == "block-map":
        return "apps:\n" + "".join(" " * i + f"k{i}:\n" for i in range(1, min(depth, 300) + 1))
    return "apps:\n" + "".join(" " * i + "-\n" for i in range(1, min(depth, 300) + 1))  # quadratic size


yaml_documents = st.one_of(
    yaml_configs(),
    yaml_aliases(),
    yaml_nesting(),
    runs("[]{}:,-&*!? \n'\"|>#ab", 20_000),
    runs("apps:\n -&*[]{}ab", 20_000),
)


def _yaml_property(text: str) -> None:
    where = f"YAML parse of {show(text)}"
    parsed = timed(where, BUDGET_COMPILE, lambda: config_yaml.parse_yaml(text))
    assert isinstance(parsed, config_yaml.ParsedConfig), where
    # What is reported stays about as long as the document: no alias expanded into the messages.
    reported = sum(len(str(e)) for e in parsed.errors)
    assert reported <= 50 * len(text) + 10_000, f"{where}: {reported} characters of errors"


def test_long_yaml_documents_within_budget(soak: bool) -> None:
    run(_yaml_property, soak, 120, yaml_documents)


# ---------------------------------------------------------------- input topic regexes

_re_atoms = st.one_of(st.sampled_from(["a", "b", "ab", ".", "[ab]", "[a-z]", "\\.", "-", "_", "\\w", "a?"]))


def _re_quantified(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    quantifier = st.sampled_from(["", "+", "*", "?", "{2,}", "{1,30}", "+?", "*?"])
    return st.tuples(inner, quantifier).map(lambda t: f"({t[0]}){t[1]}" if t[1] else t[0])


regexes = st.recursive(
    _re_atoms,
    lambda kids: st.one_of(
        _re_quantified(kids),
        st.lists(kids, min_size=2, max_size=4).map("".join),
        st.lists(kids, min_size=2, max_size=3).map("|".join).map(lambda t: f"({t})"),
    ),
    max_leaves=10,
)
input_regexes = st.tuples(regexes, st.sampled_from(["$", "", "$", "b$", "(a|b)$"])).map(
    lambda t: f"^{t[0]}{t[1]}"
)
topic_names = st.one_of(runs("a", MAX_TOPIC), runs("ab", MAX_TOPIC), runs("ab.-_", MAX_TOPIC)).map(
    lambda t: t + "!"
)


def _pattern_property(pattern: str, topics: list[str]) -> None:
    def step() -> object:
        try:
            return compile_pattern(pattern)
        except PatternError:
            return None

    if timed(f"compile of input regex {pattern!r}", BUDGET_COMPILE, step) is None:
        return
    for topic in topics:
        found = timed(
            f"input regex {pattern!r} on topic {show(topic)}",
            BUDGET_EVALUATION,
            functools.partial(input_matches, pattern, topic),
        )
        assert isinstance(found, bool)


def test_input_regexes_on_long_topic_names(soak: bool) -> None:
    run(_pattern_property, soak, 200, input_regexes, st.lists(topic_names, min_size=1, max_size=4))


def test_the_watchdog_stops_a_runaway_step() -> None:
    """Self-check: a step that would run for hours (a backtracking regex) fails within its budget times
    WATCHDOG_FACTOR, with its name in the message."""
    start = time.perf_counter()
    with pytest.raises(AssertionError, match="runaway step: stopped after"):
        timed("runaway step", 0.05, lambda: re.fullmatch(r"(a+)+$", "a" * 44 + "!"))
    assert time.perf_counter() - start < 5
