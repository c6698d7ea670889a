"""A writer schema lowered for the native Avro body reader (router/routing/native/src/body_avro.rs).

The native reader takes the schema as a flat table of ``AvroNode`` (native_boundary.py), the root first. A named
type is one node however often it is referred to, so a recursive type is a cycle in the table. Logical types are
already gone (``body_avro.writer_schema``): each node is its underlying type, as the reference reads it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, cast

from subroute.routing import body, body_avro
from subroute.routing.body_avro import Reading, WriterSchema
from subroute.routing.native_boundary import AvroNode, AvroRead, PropertyType, _native

_PRIMITIVES = ("null", "boolean", "int", "long", "float", "double", "bytes", "string")


def _node(
    kind: str, size: int = 0, children: list[int] | None = None, names: list[str] | None = None
) -> AvroNode:
    return cast(AvroNode, {"kind": kind, "size": size, "children": children or [], "names": names or []})


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
        nodes.append(_node("null"))  # its place, taken before its children so that a cycle finds it
        if isinstance(schema, str):
            nodes[position] = _node(schema)
            return position
        if isinstance(schema, list):
            nodes[position] = _node("union", children=[add(branch) for branch in schema])
            return position
        kind = schema["type"]
        if kind in ("record", "error", "enum", "fixed"):
            named_at[schema["name"]] = position
        if kind in ("record", "error"):
            fields = schema["fields"]
            nodes[position] = _node(
                "record", children=[add(f["type"]) for f in fields], names=[f["name"] for f in fields]
            )
        elif kind == "enum":
            nodes[position] = _node("enum", names=list(schema["symbols"]))
        elif kind == "fixed":
            nodes[position] = _node("fixed", size=int(schema["size"]))
        elif kind == "array":
            nodes[position] = _node("array", children=[add(schema["items"])])
        elif kind == "map":
            nodes[position] = _node("map", children=[add(schema["values"])])
        else:
            raise ValueError(f"Avro type {kind!r} is not one the native reader knows")
        return position

    add(writer.parsed)
    return nodes


# Node tables by writer schema (kept with it: the id of a live object is not reused).
_LOWERED: dict[int, tuple[WriterSchema, list[AvroNode]]] = {}
_MAX_LOWERED = 1024  # distinct writer schemas: a new one past it starts the cache afresh


def lowered(writer: WriterSchema) -> list[AvroNode]:
    """``lower(writer)``, made once per writer schema (the worker keeps one object per schema id)."""
    found = _LOWERED.get(id(writer))
    if found is None or found[0] is not writer:
        if len(_LOWERED) >= _MAX_LOWERED:
            _LOWERED.clear()
        found = _LOWERED[id(writer)] = (writer, lower(writer))
    return found[1]


def schemas_by_id(writer_of: body.WriterOf | None) -> Callable[[int], list[AvroNode] | None]:
    """What the native decider asks for a schema id it has not met (``BatchState``'s ``schemas``): the node table
    of the writer schema ``writer_of`` gives (the Router's: the worker's, fetched before the batch), None for an
    id the registry does not have. Without ``writer_of`` it raises as ``body.read_avro`` does."""
    lookup = writer_of or body.no_writer_schemas

    def schemas(schema_id: int) -> list[AvroNode] | None:
        writer = lookup(schema_id)
        return None if writer is None else lowered(writer)

    return schemas


class NativeAvroReader:
    """The native reader of one app's body reads under one writer schema: ``read_plain`` of body_avro.py, in Rust."""

    def __init__(self, writer: WriterSchema, reads: Sequence[body_avro.PathRead]) -> None:
        self._names = [read.name for read in reads]
        specs = [
            AvroRead(
                name=read.name, tokens=list(read.tokens), declared=cast(PropertyType | None, read.declared)
            )
            for read in reads
        ]
        self._reader = _native.AvroBodyReader(lower(writer), specs)

    def read(self, body: bytes | None) -> Reading:
        if body is None:  # no value at all: undecodable, as in the reference
            return {}, dict.fromkeys(self._names, 1)
        reading = self._reader.read(body)
        return reading.props, reading.failures


# Readers by writer schema (kept with it: the id of a live object is not reused) and reads.
_READERS: dict[tuple[int, tuple[body.BodyRead, ...]], tuple[WriterSchema, NativeAvroReader]] = {}
_MAX_READERS = 1024  # distinct (schema, reads) pairs: a new one past it starts the cache afresh


def _reader(writer: WriterSchema, reads: tuple[body.BodyRead, ...]) -> NativeAvroReader:
    key = (id(writer), reads)
    found = _READERS.get(key)
    if found is None or found[0] is not writer:
        if len(_READERS) >= _MAX_READERS:
            _READERS.clear()
        found = _READERS[key] = (writer, NativeAvroReader(writer, reads))
    return found[1]


def read_body(
    value: bytes | None,
    format: str,
    reads: Sequence[body.BodyRead],
    schema: str | None = None,
    writer_of: body.WriterOf | None = None,
) -> Reading:
    """``routing/body.py``'s ``read_body`` with Avro bodies read by the native reader (the same rules, checked
    against the reference by hypothesis in tests/unit/native/): what the worker's ``Router`` reads with where a
    record is decided on the Python path (the native decider reads bodies itself). JSON and headers-only go to
    the reference."""
    if format != "avro" or not reads:
        return body.read_body(value, format, reads, schema, writer_of)
    chosen = tuple(reads)
    if schema is not None:
        return _reader(body.app_writer_schema(schema), chosen).read(value)
    # Confluent's wire format, framed as body_avro.read_framed frames it
    framed = (
        body_avro.schema_id(value) if value is not None and len(value) <= body_avro.MAX_BODY_BYTES else None
    )
    writer = (writer_of or body.no_writer_schemas)(framed) if framed is not None else None
    if value is None or writer is None:
        return {}, dict.fromkeys((read.name for read in reads), 1)
    return _reader(writer, chosen).read(value[body_avro.WIRE_HEADER_BYTES :])
