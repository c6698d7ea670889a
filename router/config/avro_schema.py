"""The Avro schema of an app's body, as the control plane checks it: a writer schema parsed for reading, and the
property type a JSON Pointer reads from it (``schema_property_type``), refused with the path and both types where
the schema contradicts the declaration. routing/body_avro.py reads bodies with the same ``WriterSchema``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import fastavro

from subroute.config.body_paths import is_index
from subroute.config.model import AppConfig
from subroute.errors import SubrouteError


class AvroPathError(SubrouteError, ValueError):
    """A property's path or declared type that the app's Avro schema contradicts (refused at apply)."""


@dataclass(frozen=True)
class WriterSchema:
    """A writer schema ready to read with: fastavro's parse of it (logical types dropped) and its named types."""

    parsed: Any
    named: dict[str, Any]
    source: Any  # the schema as given (JSON-shaped), for the native reader's compiler


def _without_logical_types(schema: Any) -> Any:
    if isinstance(schema, list):
        return [_without_logical_types(branch) for branch in schema]
    if isinstance(schema, dict):
        return {key: _without_logical_types(value) for key, value in schema.items() if key != "logicalType"}
    return schema


def writer_schema(schema: Any, named: Mapping[str, Any] | None = None) -> WriterSchema:
    """Parse a JSON-shaped Avro schema for reading; ``named`` holds already parsed types it refers to (a
    registry schema's references). Raises fastavro's SchemaParseException (a ValueError) for a bad schema."""
    known = dict(named or {})
    source = _without_logical_types(schema)
    parsed = fastavro.parse_schema(source, named_schemas=known)
    return WriterSchema(parsed, known, source)


def writer_schema_chain(schemas: Sequence[Any]) -> WriterSchema:
    """``writer_schema`` of the last of ``schemas``, the others being the types it references (each after those
    it references itself): what a registry client hands over for one schema id."""
    if not schemas:
        raise ValueError("no schema")
    named: dict[str, Any] = {}
    for referenced in schemas[:-1]:
        fastavro.parse_schema(_without_logical_types(referenced), named_schemas=named)
    return writer_schema(schemas[-1], named)


def needs_schema_registry(app: AppConfig) -> bool:
    """Whether ``app`` reads Avro in Confluent's wire format (``format: avro``, body properties, no ``schema:``)."""
    return app.format == "avro" and app.schema is None and bool(app.paths)


def parse_schema_text(text: str) -> WriterSchema:
    """``writer_schema`` of an .avsc file's text; raises ValueError (not JSON, not an Avro schema)."""
    try:
        document = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"not JSON: {exc}") from None
    try:
        return writer_schema(document)
    except Exception as exc:  # fastavro raises SchemaParseException, KeyError, TypeError on bad shapes
        raise ValueError(f"not an Avro schema: {exc}") from None


# Apply-time checks: the property type a path has in a known schema.

_PROPERTY_TYPES = {
    "int": "int",
    "long": "int",
    "float": "float",
    "double": "float",
    "boolean": "bool",
    "string": "string",
    "enum": "string",
}


def _kind(schema: Any, named: Mapping[str, Any]) -> tuple[str, Any]:
    """The type name of a parsed schema node and the node itself, named references followed."""
    while isinstance(schema, str) and schema in named:
        schema = named[schema]
    if isinstance(schema, list):
        return "union", schema
    if isinstance(schema, dict):
        return str(schema["type"]), schema
    return str(schema), schema


def _branches(schema: Any, named: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """The non-union types a schema node can hold (a union's branches, nested unions flattened), as
    ``(type name, node)`` with named references followed."""
    found: list[tuple[str, Any]] = []
    stack = [schema]
    while stack:
        kind, node = _kind(stack.pop(), named)
        if kind == "union":
            stack.extend(reversed(node))
        else:
            found.append((kind, node))
    return found


def _leaf_kinds(writer: WriterSchema, tokens: Sequence[str], path: str) -> list[str]:
    """The Avro types other than null the leaf at ``tokens`` can have (every branch of the unions on the way)."""
    nodes: list[Any] = [writer.parsed]
    for depth, token in enumerate(tokens):
        following: list[Any] = []
        for node in nodes:
            for kind, schema in _branches(node, writer.named):
                if kind in ("record", "error"):
                    following.extend(f["type"] for f in schema["fields"] if f["name"] == token)
                elif kind == "map":
                    following.append(schema["values"])
                elif kind == "array" and is_index(token):
                    following.append(schema["items"])
        if not following:
            walked = "/" + "/".join(tokens[:depth]) if depth else "the record"
            raise AvroPathError(f"path {path}: {walked} has no field, key or item {token!r} in the schema")
        nodes = following
    kinds: list[str] = []
    for node in nodes:
        for kind, _ in _branches(node, writer.named):
            if kind != "null" and kind not in kinds:
                kinds.append(kind)
    return kinds


def schema_property_type(writer: WriterSchema, path: str, tokens: Sequence[str], declared: str | None) -> str:
    """The property type a path reads from a known schema: ``declared`` if the schema allows it, else the leaf's
    own. Raises AvroPathError for a path the schema lacks, a leaf that is bytes/fixed/record/array/map or
    always null, a declared type the leaf never has, or a union of several types and no declared one."""
    kinds = _leaf_kinds(writer, tokens, path)
    if not kinds:
        raise AvroPathError(f"path {path}: the schema says it is always null")
    unread = [kind for kind in kinds if kind not in _PROPERTY_TYPES]
    if unread:
        raise AvroPathError(
            f"path {path}: the schema says {' or '.join(unread)}, which is not read as a property "
            "(properties are int, float, bool or string)"
        )
    types = sorted({_PROPERTY_TYPES[kind] for kind in kinds})
    if declared is None:
        if len(types) > 1:
            raise AvroPathError(f"path {path}: the schema allows {' or '.join(types)}: declare the type")
        return types[0]
    if declared in types or (declared == "float" and "int" in types):
        return declared
    raise AvroPathError(f"path {path}: declared {declared}, but the schema says {' or '.join(kinds)}")
