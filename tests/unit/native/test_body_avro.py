"""Property tests: the native Avro body reader (router/routing/native/src/body_avro.rs, via native_avro.py) reads
exactly what the reference (router/routing/body_avro.py: fastavro under a strict decoder) reads, on random
schemas (records, nested and recursive records, unions with null, arrays, maps, enums, fixed, every primitive,
logical types), random data written by fastavro, random paths and declared types, and the same bodies truncated,
extended, mutated or replaced by garbage: the same values, the same failures, the same undecodable bodies."""

from __future__ import annotations

import contextlib
import io
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import fastavro
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from subroute.routing import body_avro
from subroute.routing.body_avro import Reading, WriterSchema
from subroute.routing.native_avro import NativeAvroReader, lower

SETTINGS = settings(
    max_examples=int(os.environ.get("NATIVE_EXAMPLES", "300")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
Schema = Any
FIELD_NAMES = ("a", "b", "c", "id")
KEYS = ("a", "b", "", "é")
DECLARED = (None, "int", "float", "bool", "string")
NOT_INDEXES = ("01", "-1", "x", "", "18446744073709551616")
# Bytes that mean something to a decoder: 0/1/2 (booleans, small indexes), 1 and 3 (-1, -2 zigzag: negative
# indexes, lengths, block counts), varint continuations, and any.
BYTES = st.one_of(st.sampled_from([0, 1, 2, 3, 0x7F, 0x80, 0xFF]), st.integers(0, 255))
USUALLY = st.sampled_from(
    [True] * 7 + [False]
)  # sampled, not an integer: hypothesis favours 0 and the bounds


@dataclass(frozen=True)
class Read:
    name: str
    path: str
    tokens: tuple[str, ...]
    declared: str | None


# Schemas. Named types get their names after drawing (``_named``), so that no two collide.

# null last: hypothesis draws the first of a sampled list most often
PRIMITIVES = st.sampled_from(["long", "string", "double", "boolean", "int", "float", "bytes", "null"])
LOGICAL = st.sampled_from(
    [
        {"type": "long", "logicalType": "timestamp-millis"},
        {"type": "int", "logicalType": "date"},
        {"type": "string", "logicalType": "uuid"},
        {"type": "bytes", "logicalType": "decimal", "precision": 5, "scale": 2},
    ]
)
ENUMS = st.lists(st.sampled_from(["x", "y", "z", "w"]), min_size=1, max_size=4, unique=True).map(
    lambda symbols: {"type": "enum", "name": "?", "symbols": symbols}
)
FIXED = st.integers(0, 3).map(lambda size: {"type": "fixed", "name": "?", "size": size})
LEAVES = st.one_of(PRIMITIVES, PRIMITIVES.map(lambda t: {"type": t}), LOGICAL, ENUMS, FIXED)


def _union_key(schema: Schema) -> str:
    """What makes two branches of a union the same (the Avro specification allows one of each)."""
    if isinstance(schema, str):
        return schema
    if schema["type"] in ("record", "enum", "fixed"):
        return str(id(schema))  # named: distinct names after _named
    return str(schema["type"])


def _has_logical(schema: Schema) -> bool:
    if isinstance(schema, list):
        return any(_has_logical(branch) for branch in schema)
    if not isinstance(schema, dict):
        return False
    inner = [f["type"] for f in schema.get("fields", [])] + [
        schema[key] for key in ("items", "values") if key in schema
    ]
    return "logicalType" in schema or any(_has_logical(child) for child in inner)


def _unions(children: st.SearchStrategy[Schema]) -> st.SearchStrategy[Schema]:
    # No logical type anywhere in a union's branches: fastavro's writer, trying branches, raises on a value of
    # another branch (a record's string checked against a map of dates: "Invalid isoformat string").
    branch = children.filter(lambda s: not isinstance(s, list) and not _has_logical(s))
    branches = st.lists(branch, min_size=1, max_size=3)
    with_null = st.tuples(branches, st.booleans(), st.booleans()).map(
        lambda drawn: (
            (["null"] if drawn[1] else []) + drawn[0] + (["null"] if drawn[2] and not drawn[1] else [])
        )
    )
    return with_null.filter(lambda u: len({_union_key(b) for b in u}) == len(u))


def _containers(children: st.SearchStrategy[Schema]) -> st.SearchStrategy[Schema]:
    fields = st.lists(st.tuples(st.sampled_from(FIELD_NAMES), children), max_size=4, unique_by=lambda f: f[0])
    return st.one_of(
        fields.map(
            lambda fs: {"type": "record", "name": "?", "fields": [{"name": n, "type": t} for n, t in fs]}
        ),
        children.map(lambda t: {"type": "array", "items": t}),
        children.map(lambda t: {"type": "map", "values": t}),
        _unions(children),
    )


def _named(schema: Schema, counter: list[int]) -> Schema:
    if isinstance(schema, list):
        return [_named(branch, counter) for branch in schema]
    if not isinstance(schema, dict):
        return schema
    copy = dict(schema)
    if copy.get("name") == "?":
        counter[0] += 1
        copy["name"] = f"T{counter[0]}"
    if "fields" in copy:
        copy["fields"] = [{"name": f["name"], "type": _named(f["type"], counter)} for f in copy["fields"]]
    for key in ("items", "values"):
        if key in copy:
            copy[key] = _named(copy[key], counter)
    return copy


TREES = st.recursive(LEAVES, _containers, max_leaves=10).map(lambda s: _named(s, [0]))
ROOTS = TREES.map(
    lambda s: (
        s
        if isinstance(s, dict) and s.get("type") == "record"
        else {"type": "record", "name": "Root", "fields": [{"name": "a", "type": s}]}
    )
)
# A recursive type: a linked list of records, each holding a drawn value.
LISTS = TREES.map(
    lambda s: {
        "type": "record",
        "name": "Node",
        "fields": [{"name": "a", "type": s}, {"name": "next", "type": ["null", "Node"]}],
    }
)
SCHEMAS = st.one_of(ROOTS, ROOTS, LISTS)


# Values of a schema, as fastavro writes them.


def _value(draw: st.DrawFn, schema: Schema, named: dict[str, Schema], depth: int) -> Any:
    if isinstance(schema, list):
        choices = [b for b in schema if depth < 70 or b == "null"] or schema
        return _value(draw, draw(st.sampled_from(choices)), named, depth)
    if isinstance(schema, str) and schema in named:
        return _value(draw, named[schema], named, depth)
    kind = schema if isinstance(schema, str) else schema["type"]
    logical = schema.get("logicalType") if isinstance(schema, dict) else None
    if logical == "timestamp-millis":
        return draw(st.integers(0, 2**40))
    if logical == "date":
        return draw(st.integers(0, 30000))
    if logical == "uuid":
        return str(draw(st.uuids()))
    if logical == "decimal":
        from decimal import Decimal

        return Decimal(draw(st.integers(-99999, 99999))) / 100
    simple: dict[str, st.SearchStrategy[Any]] = {
        "null": st.none(),
        "boolean": st.booleans(),
        "int": st.integers(-(2**31), 2**31 - 1),
        "long": st.integers(-(2**63), 2**63 - 1),
        "float": st.floats(width=32),
        "double": st.floats(),
        "bytes": st.binary(max_size=6),
        "string": st.text(max_size=6),
    }
    if kind in simple:
        return draw(simple[kind])
    if kind == "fixed":
        return draw(st.binary(min_size=schema["size"], max_size=schema["size"]))
    if kind == "enum":
        named[schema["name"]] = schema
        return draw(st.sampled_from(schema["symbols"]))
    if kind == "array":
        size = draw(st.sampled_from([1, 2, 3, 0]))
        return [_value(draw, schema["items"], named, depth + 1) for _ in range(size)]
    if kind == "map":
        keys = draw(st.permutations(KEYS))[: draw(st.sampled_from([1, 2, 3, 0]))]
        return {key: _value(draw, schema["values"], named, depth + 1) for key in keys}
    named[schema["name"]] = schema
    return {f["name"]: _value(draw, f["type"], named, depth + 1) for f in schema["fields"]}


# Paths: walks the schema may or may not hold.


def _path(draw: st.DrawFn, schema: Schema) -> tuple[str, ...]:
    tokens: list[str] = []
    named: dict[str, Schema] = {}
    node = schema
    for _ in range(8):
        if isinstance(node, list):
            node = draw(st.sampled_from(node))
        if isinstance(node, str) and node in named:
            node = named[node]
        if isinstance(node, dict) and node.get("type") in ("record", "enum", "fixed"):
            named[node["name"]] = node
        kind = node if isinstance(node, str) else node.get("type")
        if kind == "record":
            names = [f["name"] for f in node["fields"]]
            absent = not names or not draw(USUALLY)
            token = "zz" if absent else draw(st.sampled_from(names))
            tokens.append(token)
            node = next((f["type"] for f in node["fields"] if f["name"] == token), "null")
        elif kind == "array":
            index = st.sampled_from(["0", "1", "2"]) if draw(USUALLY) else st.sampled_from(NOT_INDEXES)
            tokens.append(draw(index))
            node = node["items"]
        elif kind == "map":
            tokens.append(draw(st.sampled_from(KEYS)) if draw(USUALLY) else "zz")
            node = node["values"]
        else:
            if not draw(USUALLY):
                tokens.append(draw(st.sampled_from(["a", "0"])))  # a path through a leaf
            break
        if not draw(USUALLY):  # now and then a path that ends at a record, array or map
            break
    return tuple(tokens)


def _value_path(draw: st.DrawFn, value: Any) -> tuple[str, ...]:
    """A path the written value holds (paths drawn from the schema alone rarely meet random data)."""
    tokens: list[str] = []
    node = value
    while isinstance(node, (dict, list)) and node and draw(USUALLY):
        if isinstance(node, dict):
            key = draw(st.sampled_from(sorted(node)))
            tokens.append(key)
            node = node[key]
        else:
            index = draw(st.integers(0, len(node) - 1))
            tokens.append(str(index))
            node = node[index]
    return tuple(tokens) or ("a",)


@st.composite
def cases(draw: st.DrawFn) -> tuple[WriterSchema, list[Read], bytes]:
    schema = draw(SCHEMAS)
    value = _value(draw, schema, {}, 0)
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), value)
    writer = body_avro.writer_schema(schema)
    reads = []
    for i in range(draw(st.integers(1, 4))):
        tokens = _value_path(draw, value) if draw(st.booleans()) else _path(draw, schema)
        path = "/" + "/".join(tokens)
        # the leaf's own type, the type the schema gives the path (where it gives one), or any type
        how = draw(st.sampled_from(["own", "schema", "any"]))
        declared = None if how == "own" else draw(st.sampled_from(DECLARED))
        if how == "schema":
            with contextlib.suppress(body_avro.AvroPathError):
                declared = body_avro.schema_property_type(writer, path, tokens, None)
        reads.append(Read(f"P{i}", path, tokens, declared))
    return writer, reads, out.getvalue()


def _exact(reading: Reading) -> tuple[dict[str, tuple[str, str]], dict[str, int]]:
    """A reading compared exactly: each value's type and repr (True is not 1, -0.0 is not 0.0)."""
    props, failures = reading
    return {name: (type(v).__name__, repr(v)) for name, v in props.items()}, failures


def _same(writer: WriterSchema, reads: list[Read], body: bytes) -> Reading:
    expected = body_avro.read_plain(body, reads, writer)
    assert _exact(NativeAvroReader(writer, reads).read(body)) == _exact(expected), (lower(writer), body)
    return expected


@SETTINGS
@given(cases())
def test_native_reads_what_the_reference_reads_from_bodies_fastavro_wrote(
    case: tuple[WriterSchema, list[Read], bytes],
) -> None:
    writer, reads, body = case
    props, failures = _same(writer, reads, body)
    try:
        body_avro.decode_body(body, writer)
    except ValueError as exc:  # what fastavro writes is refused only past the documented limits
        assert "nest deeper" in str(exc) or "items in a body of fewer bytes" in str(exc), exc
        event(f"undecodable: {exc}")
        return
    event(f"read {len(props)}, counted {len(failures)} of {len(reads)}")


MUTATIONS: dict[str, Callable[[st.DrawFn, bytes], bytes]] = {
    "truncated": lambda draw, body: body[: draw(st.integers(0, max(len(body) - 1, 0)))],
    "extended": lambda draw, body: body + draw(st.binary(min_size=1, max_size=4)),
    "a byte changed": lambda draw, body: _changed(draw, body),
    "bytes inserted": lambda draw, body: _inserted(draw, body),
    "garbage": lambda draw, body: draw(st.binary(max_size=40)),
}


def _changed(draw: st.DrawFn, body: bytes) -> bytes:
    if not body:
        return draw(st.binary(min_size=1, max_size=3))
    at = draw(st.integers(0, len(body) - 1))
    return body[:at] + bytes([draw(BYTES)]) + body[at + 1 :]


def _inserted(draw: st.DrawFn, body: bytes) -> bytes:
    at = draw(st.integers(0, len(body)))
    return body[:at] + bytes(draw(st.lists(BYTES, min_size=1, max_size=11))) + body[at:]


@SETTINGS
@given(cases(), st.sampled_from(sorted(MUTATIONS)), st.data())
def test_native_and_reference_agree_on_truncated_mutated_and_garbage_bodies(
    case: tuple[WriterSchema, list[Read], bytes], mutation: str, data: st.DataObject
) -> None:
    writer, reads, body = case
    mangled = MUTATIONS[mutation](data.draw, body)
    props, failures = _same(writer, reads, mangled)
    undecodable = not props and failures == {read.name: 1 for read in reads}
    event(f"{mutation}: {'undecodable' if undecodable else 'decoded'}")


# Encodings fastavro does not write but other writers do, or that only garbage holds: each read by both alike.
RECORD_OF = {
    "boolean": "boolean",
    "enum": {"type": "enum", "name": "E", "symbols": ["a", "b"]},
    "union": ["null", "long"],
    "longs": {"type": "array", "items": "long"},
    "nulls": {"type": "array", "items": "null"},
    "map": {"type": "map", "values": "long"},
    "string": "string",
    "long": "long",
    "fixed": {"type": "fixed", "name": "F", "size": 2},
}
CRAFTED = [
    ("boolean", b"\x01", {"F": True}),
    ("boolean", b"\x02", None),
    ("enum", b"\x02", {"F": "b"}),
    ("enum", b"\x01", None),  # -1
    ("enum", b"\x04", None),
    ("union", b"\x02\x06", {"F": 3}),
    ("union", b"\x01\x06", None),  # -1
    ("union", b"\x04\x06", None),
    ("longs", b"\x03\x04\x02\x04\x00", {"F": 2}),  # a negative count with the block's byte size
    ("longs", b"\x03\x06\x02\x04\x00", None),  # a byte size that is not the items'
    ("longs", b"\x03\x01\x02\x04\x00", None),  # a negative byte size
    ("longs", b"\x02\x02\x02\x04\x00", {"F": 2}),  # two blocks
    ("longs", b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", None),  # i64::MIN items
    ("longs", b"\xfe\xff\xff\xff\xff\xff\xff\xff\xff\x01", None),  # i64::MAX items
    ("nulls", b"\x04\x00", {}),  # two nulls in two bytes
    ("nulls", b"\x06\x00", None),  # three nulls in two bytes: more items than bytes
    ("nulls", b"\x02\x02\x02\x02\x00", {}),  # four nulls in blocks of one
    ("map", b"\x02\x00\x06\x00", {}),  # key "" (the read's key is "0")
    ("map", b"\x02\x020\x06\x00", {"F": 3}),
    ("map", b"\x04\x020\x06\x020\x08\x00", {"F": 4}),  # a repeated key: the last wins
    ("map", b"\x02\x02\xff\x06\x00", None),  # a key that is not UTF-8
    ("string", b"\x04\xc3\xa9", {"F": "\u00e9"}),
    ("string", b"\x06\xed\xa0\x80", None),  # a surrogate encoded: not UTF-8
    ("string", b"\x01", None),  # a negative length
    ("string", b"\xfe\xff\xff\xff\x0f", None),  # a length past the body
    ("long", b"\xfe\xff\xff\xff\xff\xff\xff\xff\xff\x01", {"F": 2**63 - 1}),
    ("long", b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", {"F": -(2**63)}),
    ("long", b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\x03", None),  # a 10th byte of 2 bits
    ("long", b"\x80" * 10 + b"\x00", None),  # 11 bytes
    ("long", b"\x80\x00", {"F": 0}),  # an over-long zero: allowed, as Avro's readers do
    ("fixed", b"ab", {}),  # fixed is bytes: counted
    ("fixed", b"a", None),
]


@pytest.mark.parametrize(("field", "body", "expected"), CRAFTED)
def test_crafted_encodings_are_read_alike(field: str, body: bytes, expected: dict[str, Any] | None) -> None:
    schema = {"type": "record", "name": "R", "fields": [{"name": "f", "type": RECORD_OF[field]}]}
    writer = body_avro.writer_schema(schema)
    path = {"longs": "/f/1", "map": "/f/0", "nulls": "/f/0"}.get(field, "/f")
    reads = [Read("F", path, tuple(path[1:].split("/")), None)]
    props, failures = _same(writer, reads, body)
    if expected is None:
        assert (props, failures) == ({}, {"F": 1})
    else:
        assert _exact((props, failures))[0] == _exact((expected, {}))[0]
        assert failures == ({"F": 1} if field == "fixed" else {})


def _varint(value: int) -> bytes:
    zigzag = (value << 1) ^ (value >> 63)
    out = bytearray()
    while zigzag > 0x7F:
        out.append(zigzag & 0x7F | 0x80)
        zigzag >>= 7
    return bytes([*out, zigzag])


LONGS: Any = {"type": "array", "items": "long"}
HOSTILE: dict[str, tuple[Any, bytes, Reading]] = {
    # a million items, one block: every item passed, the one read found
    "a 1 MiB array": (LONGS, _varint(1_048_570) + b"\x00" * 1_048_570 + b"\x00", ({"F": 0}, {})),
    # a recursive type a million levels deep: refused at level 65, not followed down
    "a million levels": (["null", "R"], b"\x02" * (1 << 20), ({}, {"F": 1})),
    # over the size limit: refused before a byte is read
    "over 1 MiB": (LONGS, b"\x00" * (body_avro.MAX_BODY_BYTES + 1), ({}, {"F": 1})),
    # a block of 2^62 nulls: refused by the item budget, not looped over
    "2^62 nulls": ({"type": "array", "items": "null"}, _varint(2**62) + b"\x00", ({}, {"F": 1})),
}


@pytest.mark.parametrize("what", sorted(HOSTILE))
def test_hostile_bodies_are_read_or_refused_in_linear_time(what: str) -> None:
    field, body, expected = HOSTILE[what]
    writer = body_avro.writer_schema(
        {"type": "record", "name": "R", "fields": [{"name": "f", "type": field}]}
    )
    reads = [Read("F", "/f/5", ("f", "5"), None)]
    reader = NativeAvroReader(writer, reads)
    started = time.perf_counter()
    assert reader.read(body) == expected
    assert time.perf_counter() - started < 0.5  # a bounded-evaluation budget: about 30 ms here
    assert body_avro.read_plain(body, reads, writer) == expected
