"""The Avro body reference (router/routing/body_avro.py): paths into plain and Confluent-framed Avro values,
BODY-SPEC's type mapping and error rules, the strictness it adds to fastavro, and the apply-time schema check."""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import fastavro
import pytest

from subroute.routing import body_avro
from subroute.routing.body_avro import AvroPathError, WriterSchema


@dataclass(frozen=True)
class Read:
    name: str
    path: str
    declared: str | None = None

    @property
    def tokens(self) -> tuple[str, ...]:
        return tuple(self.path[1:].split("/"))


CUSTOMER = {
    "type": "record",
    "name": "Customer",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "tier", "type": {"type": "enum", "name": "Tier", "symbols": ["gold", "silver"]}},
        {"name": "nick", "type": ["null", "string"], "default": None},
    ],
}
ORDER = {
    "type": "record",
    "name": "Order",
    "namespace": "shop",
    "fields": [
        {"name": "customer", "type": CUSTOMER},
        {"name": "items", "type": {"type": "array", "items": {"type": "map", "values": "double"}}},
        {"name": "price", "type": "double"},
        {"name": "qty", "type": "int"},
        {"name": "rush", "type": "boolean"},
        {"name": "note", "type": "bytes"},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "back", "type": ["null", "Customer"], "default": None},
    ],
}
VALUE = {
    "customer": {"id": 42, "tier": "silver", "nick": None},
    "items": [{"sku": 1.5, "x": 2.0}, {"sku": 3.0}],
    "price": 9.5,
    "qty": 3,
    "rush": True,
    "note": b"\x00\x01",
    "at": 1_700_000_000_000,
    "back": {"id": 7, "tier": "gold", "nick": "bo"},
}


def written(schema: Any, value: Any) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), value)
    return out.getvalue()


def typed(reading: tuple[dict[str, Any], dict[str, int]]) -> tuple[dict[str, Any], dict[str, int]]:
    """A reading with each value's type beside it: True must not pass for 1, nor 3.0 for 3."""
    props, failures = reading
    return {name: (type(value).__name__, value) for name, value in props.items()}, failures


def test_paths_read_fields_enums_unions_arrays_maps_and_logical_types_as_their_underlying_type() -> None:
    writer = body_avro.writer_schema(ORDER)
    reads = [
        Read("Id", "/customer/id", "int"),
        Read("Tier", "/customer/tier"),
        Read("Nick", "/customer/nick", "string"),  # null branch: missing, not counted
        Read("Sku", "/items/1/sku", "float"),
        Read("Gone", "/items/2/sku", "float"),  # no such item: missing
        Read("Key", "/items/0/nope"),  # no such key: missing
        Read("Price", "/price"),
        Read("Qty", "/qty", "float"),  # an int leaf reads as a float property
        Read("Rush", "/rush"),
        Read("At", "/at"),
        Read("Back", "/back/nick"),
        Read("Into", "/qty/deeper"),  # a path through a number: missing
    ]
    assert typed(body_avro.read_plain(written(ORDER, VALUE), reads, writer)) == (
        {
            "Id": ("int", 42),
            "Tier": ("str", "silver"),
            "Sku": ("float", 3.0),
            "Price": ("float", 9.5),
            "Qty": ("float", 3.0),
            "Rush": ("bool", True),
            "At": ("int", 1_700_000_000_000),
            "Back": ("str", "bo"),
        },
        {},
    )


def test_wrong_types_bytes_and_containers_at_the_leaf_and_non_finite_floats_are_counted() -> None:
    writer = body_avro.writer_schema(ORDER)
    value = {**VALUE, "price": float("nan")}
    reads = [
        Read("Id", "/customer/id", "string"),
        Read("Price", "/price"),
        Read("Note", "/note"),
        Read("Customer", "/customer"),
        Read("Items", "/items", "string"),
        Read("Qty", "/qty", "int"),
    ]
    props, failures = body_avro.read_plain(written(ORDER, value), reads, writer)
    assert (props, failures) == ({"Qty": 3}, {"Id": 1, "Price": 1, "Note": 1, "Customer": 1, "Items": 1})


def _all_counted(body: bytes | None, writer: WriterSchema) -> bool:
    reads = [Read("Id", "/customer/id"), Read("Qty", "/qty")]
    return body_avro.read_plain(body, reads, writer) == ({}, {"Id": 1, "Qty": 1})


@pytest.mark.parametrize(
    ("what", "mangle"),
    [
        ("truncated", lambda body: body[:-1]),
        ("a byte after the record", lambda body: body + b"\x00"),
        ("empty", lambda body: b""),
    ],
)
def test_an_undecodable_body_counts_every_property_once(what: str, mangle: Callable[[bytes], bytes]) -> None:
    writer = body_avro.writer_schema(ORDER)
    assert _all_counted(mangle(written(ORDER, VALUE)), writer), what


def test_a_null_value_and_a_body_over_one_mib_count_every_property() -> None:
    schema = {"type": "record", "name": "R", "fields": [{"name": "s", "type": "string"}]}
    writer = body_avro.writer_schema(schema)
    big = written(schema, {"s": "x" * body_avro.MAX_BODY_BYTES})
    reads = [Read("S", "/s")]
    assert body_avro.read_plain(None, reads, writer) == ({}, {"S": 1})
    assert body_avro.read_plain(big, reads, writer) == ({}, {"S": 1})


# fastavro reads each of these without complaint; the Avro specification (and the native reader) refuses them.
LENIENT = [
    ("boolean byte 2", "boolean", b"\x02"),
    (
        "negative enum index (fastavro counts from the end)",
        {"type": "enum", "name": "E", "symbols": ["a", "b"]},
        b"\x01",
    ),
    ("negative union index (fastavro takes the last branch)", ["null", "long"], b"\x01\x02"),
    ("an 11-byte varint", "long", b"\xff" * 10 + b"\x01"),
    ("a 10th varint byte of more than 1 bit", "long", b"\xff" * 9 + b"\x7f"),
    (
        "a block size that is not what its items take",
        {"type": "array", "items": "long"},
        b"\x03\x06\x02\x04\x00",
    ),
    ("a negative block size", {"type": "array", "items": "long"}, b"\x03\x01\x02\x04\x00"),
    ("more items than bytes (nulls)", {"type": "array", "items": "null"}, b"\x0a\x00"),
]


@pytest.mark.parametrize(("what", "schema", "body"), LENIENT, ids=[case[0] for case in LENIENT])
def test_bodies_fastavro_accepts_but_avro_forbids_are_undecodable(
    what: str, schema: Any, body: bytes
) -> None:
    record = {"type": "record", "name": "R", "fields": [{"name": "f", "type": schema}]}
    fastavro.schemaless_reader(io.BytesIO(body), fastavro.parse_schema(record))  # fastavro: no error
    writer = body_avro.writer_schema(record)
    assert body_avro.read_plain(body, [Read("F", "/f")], writer) == ({}, {"F": 1}), what


def test_a_block_size_that_matches_and_nulls_within_the_byte_budget_are_read() -> None:
    record = {
        "type": "record",
        "name": "R",
        "fields": [{"name": "f", "type": {"type": "array", "items": "long"}}],
    }
    writer = body_avro.writer_schema(record)
    assert body_avro.read_plain(b"\x03\x04\x02\x04\x00", [Read("F", "/f/1")], writer) == ({"F": 2}, {})
    nulls = {
        "type": "record",
        "name": "N",
        "fields": [{"name": "f", "type": {"type": "array", "items": "null"}}],
    }
    assert body_avro.read_plain(b"\x02\x00", [Read("F", "/f/0")], body_avro.writer_schema(nulls)) == ({}, {})


def test_nesting_deeper_than_64_records_arrays_and_maps_is_undecodable() -> None:
    node = {
        "type": "record",
        "name": "Node",
        "fields": [{"name": "v", "type": "long"}, {"name": "next", "type": ["null", "Node"]}],
    }
    writer = body_avro.writer_schema(node)

    def chain(depth: int) -> dict[str, Any]:
        value: dict[str, Any] = {"v": depth, "next": None}
        for level in range(depth - 1, 0, -1):
            value = {"v": level, "next": value}
        return value

    deepest = "/" + "next/" * 63 + "v"
    assert body_avro.read_plain(written(node, chain(64)), [Read("V", deepest)], writer) == ({"V": 64}, {})
    assert body_avro.read_plain(written(node, chain(65)), [Read("V", deepest)], writer) == ({}, {"V": 1})
    # far deeper than Python's recursion limit: still only undecodable
    assert body_avro.read_plain(b"\x02\x00" * 5000 + b"\x02\x00", [Read("V", "/v")], writer) == ({}, {"V": 1})


def test_map_keys_that_repeat_take_the_last_value() -> None:
    record = {
        "type": "record",
        "name": "R",
        "fields": [{"name": "m", "type": {"type": "map", "values": ["null", "long"]}}],
    }
    writer = body_avro.writer_schema(record)
    # one block of two entries, both "a": 1 then null
    body = b"\x04" + b"\x02a\x02\x02" + b"\x02a\x00" + b"\x00"
    assert body_avro.read_plain(body, [Read("A", "/m/a")], writer) == ({}, {})
    body = b"\x04" + b"\x02a\x00" + b"\x02a\x02\x02" + b"\x00"
    assert body_avro.read_plain(body, [Read("A", "/m/a")], writer) == ({"A": 1}, {})


def test_framed_values_read_through_the_writer_schema_of_their_id() -> None:
    writer = body_avro.writer_schema(ORDER)
    body = written(ORDER, VALUE)
    reads = [Read("Id", "/customer/id"), Read("Qty", "/qty")]
    seen: list[int] = []

    def writer_of(schema_id: int) -> WriterSchema | None:
        seen.append(schema_id)
        return writer if schema_id == 258 else None

    assert body_avro.read_framed(b"\x00\x00\x00\x01\x02" + body, reads, writer_of) == (
        {"Id": 42, "Qty": 3},
        {},
    )
    everything = ({}, {"Id": 1, "Qty": 1})
    assert body_avro.read_framed(b"\x00\x00\x00\x01\x03" + body, reads, writer_of) == everything  # unknown id
    assert (
        body_avro.read_framed(b"\x01\x00\x00\x01\x02" + body, reads, writer_of) == everything
    )  # magic byte 1
    assert body_avro.read_framed(b"\x00\x00\x01", reads, writer_of) == everything  # shorter than the frame
    assert body_avro.read_framed(None, reads, writer_of) == everything
    assert seen == [258, 259]


def test_a_registry_that_cannot_be_read_is_not_a_missing_property() -> None:
    class Unreachable(Exception):
        pass

    def writer_of(schema_id: int) -> WriterSchema | None:
        raise Unreachable(schema_id)

    with pytest.raises(Unreachable):
        body_avro.read_framed(b"\x00\x00\x00\x00\x01\x00", [Read("Id", "/id")], writer_of)


@pytest.mark.parametrize(
    ("path", "declared", "expected"),
    [
        ("/customer/id", None, "int"),
        ("/customer/id", "float", "float"),  # an int leaf reads as float
        ("/customer/tier", None, "string"),
        ("/customer/nick", None, "string"),  # [null, string]
        ("/items/0/sku", None, "float"),
        ("/items/7/anything", "float", "float"),  # arrays by any index, maps by any key
        ("/rush", None, "bool"),
        ("/at", None, "int"),  # a logical type is its underlying type
        ("/back/id", None, "int"),  # through [null, Customer]
    ],
)
def test_the_property_type_is_taken_from_the_schema(path: str, declared: str | None, expected: str) -> None:
    writer = body_avro.writer_schema(ORDER)
    assert body_avro.schema_property_type(writer, path, Read("P", path).tokens, declared) == expected


@pytest.mark.parametrize(
    ("path", "declared", "message"),
    [
        ("/customer/id", "string", "path /customer/id: declared string, but the schema says long"),
        ("/price", "int", "path /price: declared int, but the schema says double"),
        ("/note", None, "path /note: the schema says bytes, which is not read as a property"),
        ("/customer", None, "path /customer: the schema says record, which is not read"),
        ("/items", "string", "path /items: the schema says array, which is not read"),
        ("/customer/email", None, "path /customer/email: /customer has no field, key or item 'email'"),
        ("/items/first", None, "path /items/first: /items has no field, key or item 'first'"),
        ("/qty/x", None, "path /qty/x: /qty has no field, key or item 'x'"),
    ],
)
def test_a_path_the_schema_contradicts_is_refused_with_the_path_and_both_types(
    path: str, declared: str | None, message: str
) -> None:
    writer = body_avro.writer_schema(ORDER)
    with pytest.raises(AvroPathError, match="^" + message.replace("/", "/")):
        body_avro.schema_property_type(writer, path, Read("P", path).tokens, declared)


def test_a_union_of_several_types_needs_a_declared_type() -> None:
    record = {"type": "record", "name": "R", "fields": [{"name": "u", "type": ["null", "long", "string"]}]}
    writer = body_avro.writer_schema(record)
    with pytest.raises(AvroPathError, match="path /u: the schema allows int or string: declare the type"):
        body_avro.schema_property_type(writer, "/u", ("u",), None)
    assert body_avro.schema_property_type(writer, "/u", ("u",), "string") == "string"
    body = written(record, {"u": 5})
    assert body_avro.read_plain(body, [Read("U", "/u", "string")], writer) == ({}, {"U": 1})
