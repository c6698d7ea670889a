"""Property test: the native JSON reader (router/routing/native/src/body_json.rs) reads a record value exactly as
the Python reference (routing/body.py's ``read_json``) does: the same values, the same properties missing, the
same failures counted. Documents are random: nested objects and arrays, missing paths, nulls, every JSON type at
a leaf, huge and edge numbers, unicode escapes (surrogate pairs and lone surrogates), duplicate keys, deep
nesting, and mutated bytes that make them invalid."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from subroute.routing import native_boundary
from subroute.routing.body import BodyRead, body_read, read_json

_native = native_boundary._native

KEYS = ["a", "b", "0", "1", "a/b", "~", "é", ""]
TYPES = ["int", "float", "bool", "string"]


def spec(read: BodyRead) -> native_boundary.BodyRead:
    return {
        "name": read.name,
        "tokens": [t.encode() for t in read.tokens],
        "declared": read.declared,  # type: ignore[typeddict-item]
    }


def same(value: bytes | None, reads: list[BodyRead]) -> tuple[dict[str, Any], dict[str, int]]:
    want = read_json(value, reads)
    reading = _native.read_json(value, [spec(r) for r in reads])
    have = (reading.props, reading.failures)
    assert have[1] == want[1], value
    assert have[0].keys() == want[0].keys(), value
    for name, expected in want[0].items():
        got = have[0][name]
        assert type(got) is type(expected) and (got == expected or (got != got and expected != expected)), (
            value,
            name,
        )
        if isinstance(expected, float):
            assert math.copysign(1, got) == math.copysign(1, expected)
    return want


NUMBER_TEXTS = st.sampled_from(
    [
        "0", "-0", "-0.0", "1", "9223372036854775807", "9223372036854775808", "-9223372036854775808",
        "-9223372036854775809", "1e2", "1E-2", "2.5", "1e400", "-1e400", "1e-400", "123456789012345678901",
        "1" + "0" * 400, "0.1", "4.9e-324", "1.7976931348623157e308",
    ]
)  # fmt: skip
STRING_TEXTS = st.sampled_from(
    [
        '"x"', '"\\u00e9"', '"\\ud83d\\ude00"', '"\\ud800"', '"\\udc00"', '"\\ud800\\u0041"', '"\\u0000"',
        '"a\\"b\\\\c\\/\\b\\f\\n\\r\\t"', '"é😀"', '"\\uD83D\\uDE00"',
    ]
)  # fmt: skip


@st.composite
def documents(draw: st.DrawFn) -> str:
    """JSON text built bottom-up (keys from KEYS, so paths often hit), with duplicates kept as written."""
    scalar = st.one_of(
        NUMBER_TEXTS, STRING_TEXTS, st.sampled_from(["true", "false", "null"]), st.integers().map(str)
    )

    def extend(children: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        members = st.lists(st.tuples(st.sampled_from(KEYS), children), max_size=4)
        obj = members.map(lambda m: "{" + ", ".join(f"{json.dumps(k)}: {v}" for k, v in m) + "}")
        arr = st.lists(children, max_size=4).map(lambda items: "[" + ",".join(items) + "]")
        return st.one_of(obj, arr)

    return draw(st.recursive(scalar, extend, max_leaves=20))


def pointer(tokens: list[str]) -> str:
    return "".join("/" + t.replace("~", "~0").replace("/", "~1") for t in tokens)


reads_strategy = st.lists(
    st.tuples(st.lists(st.sampled_from(KEYS), min_size=1, max_size=4), st.sampled_from(TYPES)),
    min_size=1,
    max_size=5,
).map(lambda rs: [body_read(f"p{i}", pointer(toks), t) for i, (toks, t) in enumerate(rs)])


@settings(max_examples=600, deadline=None)
@given(documents(), reads_strategy)
def test_valid_documents_read_alike(doc: str, reads: list[BodyRead]) -> None:
    same(doc.encode(), reads)


@settings(max_examples=400, deadline=None)
@given(documents(), reads_strategy, st.integers(0, 10_000), st.binary(min_size=1, max_size=3))
def test_mutated_documents_read_alike(doc: str, reads: list[BodyRead], at: int, junk: bytes) -> None:
    raw = doc.encode()
    at %= len(raw) + 1
    same(raw[:at] + junk + raw[at + 1 :], reads)
    same(raw[:at], reads)


@pytest.mark.parametrize(
    "doc",
    [
        None,
        b"",
        b" ",
        b'{"a": 1} ',
        b'\t\n{"a": 1}\r',
        b'{"a": 1,}',
        b'{"a": [1,]}',
        b'{"a" : 1 , "a" : null}',
        b'{"a": {"b": 1}, "a": {"c": 2}}',
        b'{"a": {"b": 1}, "a": 5}',
        b'[{"a": 1}]',
        b'{"a": NaN}',
        b'{"a": -Infinity}',
        b'{"a": 01}',
        b'{"a": 1.}',
        b'{"a": .5}',
        b'{"a": +1}',
        b'{"a": "\x01"}',
        b'{"a": "\xff"}',
        b'{"a": "\xed\xa0\x80"}',  # a surrogate encoded raw: not UTF-8
        # UTF-8 is checked where it can be (in strings and keys, eight bytes at a time): long and short runs,
        # a sequence cut at a run's end, overlong forms, bytes past ASCII outside strings.
        '{"a": "é", "s": "ab\u00e9cdéfghijklmnopé"}'.encode(),
        '{"é": 1, "a": "x"}'.encode(),
        b'{"a": "abcdefgh\xc3"}',
        b'{"a": "abcdefg\xc3\\n"}',
        b'{"a": "\xe0\x80\x80"}',
        b'{"s": "abcdefghijkl\xc0\xafmnop", "a": 1}',
        b'{"\xff": 1, "a": 2}',
        b'{"a": 1}\xc3\xa9',
        b'{"a": 1, \xc3\xa9}',
        b"\xef\xbb\xbf{}",
        b'{"a": tru}',
        b'{"a": "\\u12"}',
        b'{"a": "\\uZZZZ"}',
        b'{"\\u0061": 2}',
        b'{"\\ud800": 2, "a": 3}',
        b'{"a": 1' + b"0" * 5000 + b"}",
        b"[" * 64 + b"]" * 64,
        b"[" * 65 + b"]" * 65,
        b'{"a": ' + b"[" * 63 + b"]" * 63 + b"}",
        b'{"a": ' + b"[" * 64 + b"]" * 64 + b"}",
        b'{"s": "' + b"[" * 200 + b'", "a": 1}',
        b'{"a": 1}' + b" " * (1_048_576 - 8),
        b'{"a": 1}' + b" " * (1_048_576 - 7),
    ],
)
@pytest.mark.parametrize("declared", TYPES)
def test_edge_documents_read_alike(doc: bytes | None, declared: str) -> None:
    reads = [body_read("A", "/a", declared), body_read("B", "/a/0", declared), body_read("S", "/s", declared)]
    same(doc, reads)


def test_array_indexes_read_alike() -> None:
    doc = b'{"items": [10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21], "o": {"01": 1, "1": 2}}'
    for token in ["0", "11", "12", "01", "-", "1e1", "+1", "", " 1", "\u0661"]:
        for base in ["/items/", "/o/"]:
            same(doc, [body_read("P", base + token.replace("~", "~0"), "int")])
