"""Properties read from an Avro record value: the Python reference (fastavro) the native reader must agree with.

A value is plain schemaless Avro written with the app's schema, or Confluent's wire format: magic byte 0, the
writer schema's id in the Schema Registry (4 bytes, big-endian), then the body. A property's JSON Pointer
names record fields by name, map values by key and array items by decimal index; a union takes the branch the
record holds.

- the path does not exist in the record, or its leaf is null: the property is missing, not counted;
- the value is not decodable: a null value, more than ``MAX_BODY_BYTES``, a magic byte that is not 0, a schema
  id the registry does not have, a body that does not decode to its last byte under the writer schema (see
  ``StrictDecoder`` for what that refuses beyond fastavro), records, arrays and maps nested deeper than
  ``MAX_DEPTH``: every property read is missing and counted once;
- the leaf does not have the property's type: that property is missing and counted.

Type mapping: ``int``/``long`` are int; ``float``/``double`` are float (an int leaf reads as a float property,
as a JSON integer does; a non-finite value is counted); ``boolean`` is bool; ``string`` and ``enum`` are
string. Logical types read as their underlying type (a ``timestamp-millis`` is an int of milliseconds). A
property without a declared type takes the leaf's. Where the schema is known at apply (``schema:``),
``schema_property_type`` refuses a path the schema contradicts, with the path and both types.
"""

from __future__ import annotations

import io
import math
from collections.abc import Callable, Sequence
from typing import Any, Protocol

# fastavro's pure-Python reader takes a decoder object, so the strict rules below can be put under it; its
# compiled reader cannot. Internal to fastavro, but stable across its 1.x line (pinned <2 in pyproject.toml).
from fastavro._read_py import read_data
from fastavro.io.binary_decoder import BinaryDecoder

from subroute.config.avro_schema import (
    AvroPathError,
    WriterSchema,
    schema_property_type,
    writer_schema,
    writer_schema_chain,
)
from subroute.config.body_paths import ABSENT, resolve
from subroute.errors import SubrouteError

__all__ = [
    "AvroPathError",
    "UndecodableBody",
    "WriterSchema",
    "read_framed",
    "read_plain",
    "schema_id",
    "schema_property_type",
    "writer_schema",
    "writer_schema_chain",
]

PropertyValue = int | float | str | bool
Reading = tuple[dict[str, PropertyValue], dict[str, int]]

MAX_BODY_BYTES = 1_048_576  # the whole record value, as for JSON
MAX_DEPTH = 64  # records, arrays and maps nested in one another
MAGIC_BYTE = 0
WIRE_HEADER_BYTES = 5  # the magic byte and the 4-byte schema id
MAX_VARINT_BYTES = 10  # a 64-bit zigzag varint


class PathRead(Protocol):
    """One property read from the body (``routing/body.py``'s ``BodyRead`` is one): its name, JSON Pointer,
    reference tokens, and declared type (None: the schema's)."""

    @property
    def name(self) -> str: ...

    @property
    def path(self) -> str: ...

    @property
    def tokens(self) -> tuple[str, ...]: ...

    @property
    def declared(self) -> str | None: ...


class UndecodableBody(SubrouteError, ValueError):
    """The body does not decode under its writer schema by the rules of this module."""


class StrictDecoder(BinaryDecoder):
    """fastavro's binary decoder with the Avro specification's rules where fastavro is lenient, so that a body
    decodes exactly when the native reader decodes it:

    - a varint (int, long, lengths, counts, indexes) has at most 10 bytes, and the 10th carries 1 bit at most;
    - a boolean byte is 0 or 1;
    - an enum or union index is not negative (fastavro would index from the end);
    - a block's byte size (after a negative count) is not negative and is what the block's items take;
    - a body holds no more array items and map entries than it has bytes: only arrays of items that take no
      bytes (null, empty records, zero-size fixed) could, and a garbage count would loop for ever.
    """

    def __init__(self, fo: io.BytesIO, size: int) -> None:
        super().__init__(fo)  # type: ignore[no-untyped-call]  # fastavro's decoder is untyped
        self.items_left = size

    def read_long(self) -> int:
        value = 0
        for shift in range(0, 7 * MAX_VARINT_BYTES, 7):
            byte: bytes = self.fo.read(1)
            if not byte:
                raise EOFError("a varint runs past the end")
            bits = byte[0]
            if shift == 63 and bits > 1:
                raise UndecodableBody("a varint longer than 64 bits")
            value |= (bits & 0x7F) << shift
            if not bits & 0x80:
                return (value >> 1) ^ -(value & 1)
        raise UndecodableBody("a varint longer than 10 bytes")

    read_int = read_long

    def read_boolean(self) -> bool:
        byte: bytes = self.fo.read(1)
        if not byte:
            raise EOFError("a boolean runs past the end")
        if byte[0] > 1:
            raise UndecodableBody(f"boolean byte {byte[0]}")
        return byte[0] == 1

    def read_enum(self) -> int:
        return self.read_index()

    def read_index(self) -> int:
        index = self.read_long()
        if index < 0:
            raise UndecodableBody(f"negative index {index}")
        return index

    def _blocks(self) -> Any:
        count = self._block_count
        while count != 0:
            end = None
            if count < 0:
                count = -count
                size = self.read_long()
                if size < 0:
                    raise UndecodableBody(f"negative block size {size}")
                end = self.fo.tell() + size
            if count > self.items_left:
                raise UndecodableBody(f"a block of {count} items in a body of fewer bytes")
            self.items_left -= count
            for _ in range(count):
                yield
            if end is not None and self.fo.tell() != end:
                raise UndecodableBody("a block's byte size is not what its items take")
            count = self.read_long()

    iter_array = _blocks
    iter_map = _blocks


def _depth(value: object) -> int:
    """How deeply records, maps (dicts) and arrays (lists) nest in a decoded value; iterative."""
    deepest = 0
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            children: Any = node.values()
        elif isinstance(node, list):
            children = node
        else:
            continue
        deepest = max(deepest, depth)
        if depth <= MAX_DEPTH:
            stack.extend((child, depth + 1) for child in children)
    return deepest


def decode_body(body: bytes, writer: WriterSchema) -> object:
    """The whole value of one plain Avro body; raises ValueError (or EOFError) when it is not decodable."""
    if len(body) > MAX_BODY_BYTES:
        raise UndecodableBody(f"the body is {len(body)} bytes; at most {MAX_BODY_BYTES} are read")
    stream = io.BytesIO(body)
    decoder = StrictDecoder(stream, len(body))
    options = {"handle_unicode_errors": "strict"}
    try:
        value = read_data(  # type: ignore[no-untyped-call]
            decoder, writer.parsed, {"writer": writer.named, "reader": {}}, None, options
        )
    except RecursionError:
        raise UndecodableBody(f"records, arrays and maps nest deeper than {MAX_DEPTH}") from None
    except (EOFError, IndexError, UnicodeDecodeError) as exc:  # truncated, an index past the end, bad UTF-8
        raise UndecodableBody(str(exc) or type(exc).__name__) from None
    if stream.tell() != len(body):
        raise UndecodableBody(f"{len(body) - stream.tell()} bytes after the record")
    if _depth(value) > MAX_DEPTH:
        raise UndecodableBody(f"records, arrays and maps nest deeper than {MAX_DEPTH}")
    return value


class _WrongType(Exception):
    pass


def typed(leaf: object, declared: str | None) -> PropertyValue:
    """The property value of a decoded leaf (not null) for ``declared`` (None: the leaf's own type)."""
    kind = type(leaf)
    if declared is None:
        declared = {int: "int", float: "float", bool: "bool", str: "string"}.get(kind)
    if declared == "int" and kind is int:
        return leaf  # type: ignore[return-value]  # an Avro long: always within int64
    if declared == "float" and (kind is float or kind is int):
        number = float(leaf)  # type: ignore[arg-type]
        if math.isfinite(number):
            return number
    if (declared == "bool" and kind is bool) or (declared == "string" and kind is str):
        return leaf  # type: ignore[return-value]
    raise _WrongType


def read_plain(body: bytes | None, reads: Sequence[PathRead], writer: WriterSchema) -> Reading:
    """The properties ``reads`` name from one plain (schemaless) Avro value, and the failures per property."""
    props: dict[str, PropertyValue] = {}
    if not reads:
        return props, {}
    try:
        if body is None:
            raise UndecodableBody("the record has no value")
        value = decode_body(body, writer)
    except ValueError:  # UndecodableBody, and any ValueError fastavro raises on garbage
        return props, {read.name: 1 for read in reads}
    failures: dict[str, int] = {}
    for read in reads:
        leaf = resolve(value, read.tokens)
        if leaf is ABSENT or leaf is None:
            continue
        try:
            props[read.name] = typed(leaf, read.declared)
        except _WrongType:
            failures[read.name] = 1
    return props, failures


def schema_id(value: bytes) -> int | None:
    """The schema id of a value in Confluent's wire format, or None when its frame is not one."""
    if len(value) < WIRE_HEADER_BYTES or value[0] != MAGIC_BYTE:
        return None
    return int.from_bytes(value[1:WIRE_HEADER_BYTES], "big")


def read_framed(
    value: bytes | None, reads: Sequence[PathRead], writer_of: Callable[[int], WriterSchema | None]
) -> Reading:
    """``read_plain`` for a value in Confluent's wire format; ``writer_of`` gives the writer schema of an id, None
    for an id the registry does not have. What it raises (the registry cannot be reached) goes to the caller:
    such a record waits, it is not read as if its properties were missing."""
    if not reads:
        return {}, {}
    framed = schema_id(value) if value is not None and len(value) <= MAX_BODY_BYTES else None
    writer = writer_of(framed) if framed is not None else None
    if value is None or writer is None:
        return {}, {read.name: 1 for read in reads}
    return read_plain(value[WIRE_HEADER_BYTES:], reads, writer)
