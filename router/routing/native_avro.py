"""A writer schema lowered for the native Avro body reader (router/routing/native/src/body_avro.rs).

The native reader takes the schema as a flat table of nodes, the root first, each ``(kind, size, children,
names)``: ``size`` is a fixed's byte count, ``children`` are node positions (a record's field types, an array's
items, a map's values, a union's branches), ``names`` a record's field names or an enum's symbols. A named type
is one node however often it is referred to, so a recursive type is a cycle in the table. Logical types are
already gone (``body_avro.writer_schema``): each node is its underlying type, as the reference reads it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from subroute.routing.body_avro import AvroRead, Reading, WriterSchema
from subroute.routing.native_boundary import _native

AvroNode = tuple[str, int, list[int], list[str]]
_PRIMITIVES = ("null", "boolean", "int", "long", "float", "double", "bytes", "string")


def lower(writer: WriterSchema) -> list[AvroNode]:
    """The node table of a parsed writer schema (fastavro's parse: named types by full name in ``named``)."""
    nodes: list[AvroNode] = []
    named_at: dict[str, int] = {}

    def add(schema: Any) -> int:
        if isinstance(schema, str) and schema not in _PRIMITIVES:
            if schema in named_at:
                return named_at[schema]
            schema = writer.named[schema]
        if isinstance(schema, dict) and schema["type"] in _PRIMITIVES:
            schema = schema["type"]  # {"type": "long"}, a primitive written as an object
        position = len(nodes)
        nodes.append(("null", 0, [], []))  # its place, taken before its children so that a cycle finds it
        if isinstance(schema, str):
            nodes[position] = (schema, 0, [], [])
            return position
        if isinstance(schema, list):
            nodes[position] = ("union", 0, [add(branch) for branch in schema], [])
            return position
        kind = schema["type"]
        if kind in ("record", "error", "enum", "fixed"):
            named_at[schema["name"]] = position
        if kind in ("record", "error"):
            fields = schema["fields"]
            nodes[position] = ("record", 0, [add(f["type"]) for f in fields], [f["name"] for f in fields])
        elif kind == "enum":
            nodes[position] = ("enum", 0, [], list(schema["symbols"]))
        elif kind == "fixed":
            nodes[position] = ("fixed", int(schema["size"]), [], [])
        elif kind == "array":
            nodes[position] = ("array", 0, [add(schema["items"])], [])
        elif kind == "map":
            nodes[position] = ("map", 0, [add(schema["values"])], [])
        else:
            raise ValueError(f"Avro type {kind!r} is not one the native reader knows")
        return position

    add(writer.parsed)
    return nodes


class NativeAvroReader:
    """The native reader of one app's body reads under one writer schema: ``read_plain`` of body_avro.py, in Rust."""

    def __init__(self, writer: WriterSchema, reads: Sequence[AvroRead]) -> None:
        self._names = [read.name for read in reads]
        self._reader = _native.AvroBodyReader(
            lower(writer), [(read.name, list(read.tokens), read.declared) for read in reads]
        )

    def read(self, body: bytes | None) -> Reading:
        if body is None:  # no value at all: undecodable, as in the reference
            return {}, dict.fromkeys(self._names, 1)
        return self._reader.read(body)
