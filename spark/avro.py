"""Avro payloads in Spark: load an app's payload schema, map it to a Spark type, decode values with fastavro.

Two encodings of a value are read:

- plain schemaless Avro (``fastavro.schemaless_writer``), the form the demo producers write, written with the
  app's schema;
- Confluent's wire format, what Confluent's serializers (Java, Go, confluent-kafka's ``AvroSerializer``) write:
  magic byte 0, the writer schema's id in the Schema Registry (4 bytes, big-endian), then the Avro body. The
  writer schema is fetched from the registry by id (once per id and Python worker) and the body is resolved
  into the app's schema, so the ``payload`` column keeps one Spark type whatever version a producer wrote.

A framed value with no registry configured fails the batch with a ``WireFormatError`` saying so: a null
payload would hide that every record of the app lands undecoded. A value that does not decode otherwise gets a
null payload and keeps its bytes in the ``value`` column.
"""

from __future__ import annotations

import functools
import io
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import fastavro
from fastavro.read import SchemaResolutionError
from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from subroute.errors import SubrouteError

AvroSchema = Any  # JSON-shaped: str | list | dict

_PRIMITIVES: dict[str, DataType] = {
    "boolean": BooleanType(),
    "int": IntegerType(),
    "long": LongType(),
    "float": FloatType(),
    "double": DoubleType(),
    "bytes": BinaryType(),
    "string": StringType(),
}


def load_schema(spec: str) -> AvroSchema:
    """A schema from a ``.avsc`` path, or by name from the ``schemas`` package (``order`` -> order.avsc)."""
    path = Path(spec)
    if path.suffix == ".avsc" or path.exists():
        return json.loads(path.read_text(encoding="utf-8"))
    resource = resources.files("subroute.schemas").joinpath(f"{spec}.avsc")
    if not resource.is_file():
        raise ValueError(f"no Avro schema {spec!r}: give a path to an .avsc file or a name from schemas/")
    return json.loads(resource.read_text(encoding="utf-8"))


def spark_type(schema: AvroSchema, named: dict[str, DataType] | None = None) -> DataType:
    """The Spark type fastavro's decoded values fit. Unions other than ``[null, T]`` are not supported."""
    named = {} if named is None else named
    if isinstance(schema, str):
        if schema in _PRIMITIVES:
            return _PRIMITIVES[schema]
        if schema in named:
            return named[schema]
        raise ValueError(f"Avro type {schema!r} is not supported here")
    if isinstance(schema, list):
        branches = [b for b in schema if b != "null"]
        if len(branches) != 1:
            raise ValueError(f"Avro union {schema!r}: only [null, T] maps to a Spark column")
        return spark_type(branches[0], named)
    kind = schema["type"]
    logical = schema.get("logicalType")
    if logical == "decimal":
        return DecimalType(schema["precision"], schema.get("scale", 0))
    if logical in ("timestamp-millis", "timestamp-micros"):
        return TimestampType()
    if logical == "date":
        return DateType()
    if logical == "uuid":
        raise ValueError("Avro uuid values decode to uuid.UUID, which Spark cannot store; use plain string")
    if kind == "record":
        struct = StructType(
            [StructField(f["name"], spark_type(f["type"], named), nullable=True) for f in schema["fields"]]
        )
        named[schema["name"]] = struct
        if "namespace" in schema:
            named[f"{schema['namespace']}.{schema['name']}"] = struct
        return struct
    if kind == "enum":
        return StringType()
    if kind == "fixed":
        return BinaryType()
    if kind == "array":
        return ArrayType(spark_type(schema["items"], named))
    if kind == "map":
        return MapType(StringType(), spark_type(schema["values"], named))
    return spark_type(kind, named)


MAGIC_BYTE = 0
WIRE_HEADER_BYTES = 5  # the magic byte and the 4-byte schema id


class WireFormatError(SubrouteError, ValueError):
    """A Confluent-framed value that cannot be read: no registry configured, or a schema that is not Avro or
    does not resolve into the app's schema."""


def wire_schema_id(value: bytes) -> int | None:
    """The schema id of a value framed in Confluent's wire format, or None when it is not framed so.

    Only the frame is checked: a plain Avro value may start with a zero byte too (a zero int or long, an empty
    string), so the caller decides with what else it knows (a registry that has the id, a plain decode).
    """
    if len(value) < WIRE_HEADER_BYTES or value[0] != MAGIC_BYTE:
        return None
    return int.from_bytes(value[1:WIRE_HEADER_BYTES], "big")


def frame(schema_id: int, body: bytes) -> bytes:
    """A value in Confluent's wire format: what a Confluent serializer writes for ``body`` under ``schema_id``."""
    return bytes([MAGIC_BYTE]) + schema_id.to_bytes(4, "big") + body


@dataclass(frozen=True)
class Registry:
    """Where the writer schemas are: a Schema Registry URL and ``SchemaRegistryClient`` properties (basic auth,
    TLS). Frozen and plain, so decoders that carry it pickle to executors."""

    url: str
    config: tuple[tuple[str, str], ...] = ()

    @classmethod
    def of(cls, url: str, config: Mapping[str, str] | None = None) -> Registry:
        return cls(url, tuple(sorted((config or {}).items())))


_NUMERIC_REGISTRY_PROPERTIES = frozenset(
    {
        "timeout",
        "cache.capacity",
        "cache.latest.ttl.sec",
        "max.retries",
        "retries.wait.ms",
        "retries.max.wait.ms",
    }
)


class RegistrySchemas:
    """Writer schemas by id from one Schema Registry, fetched and parsed once per id (and per process)."""

    def __init__(self, registry: Registry) -> None:
        # Imported here: only jobs that read framed values need the registry client (and its HTTP stack).
        from confluent_kafka.schema_registry import SchemaRegistryClient

        self.registry = registry
        conf: dict[str, Any] = {"url": registry.url}
        for key, value in registry.config:
            # flags give text; the client wants numbers for these
            conf[key] = float(value) if key in _NUMERIC_REGISTRY_PROPERTIES else value
        self.client = SchemaRegistryClient(conf)
        self._parsed: dict[int, Any] = {}

    def writer(self, schema_id: int) -> Any | None:
        """The parsed writer schema, or None when the registry has no schema of that id (HTTP 404)."""
        if schema_id in self._parsed:
            return self._parsed[schema_id]
        from confluent_kafka.schema_registry.error import SchemaRegistryError

        named: dict[str, Any] = {}
        schema = None
        try:
            schema = self.client.get_schema(schema_id)
            if (schema.schema_type or "AVRO") != "AVRO":
                raise WireFormatError(
                    f"schema id {schema_id} in {self.registry.url} is {schema.schema_type}, not Avro: "
                    "only Avro payloads decode into the payload column"
                )
            for reference in schema.references or ():
                self._add_reference(reference.subject, reference.version, named)
            text = schema.schema_str
        except WireFormatError:
            raise
        except SchemaRegistryError as exc:
            if exc.http_status_code == 404 and schema is None:  # the id itself is unknown, not a reference
                self._parsed[schema_id] = None
                return None
            raise WireFormatError(f"schema id {schema_id}: {self.registry.url} answered {exc}") from exc
        except Exception as exc:  # unreachable, TLS, timeouts: the batch fails and Spark retries it
            raise WireFormatError(
                f"schema id {schema_id}: the schema registry {self.registry.url} cannot be read ({exc})"
            ) from exc
        if text is None:
            raise WireFormatError(f"schema id {schema_id} in {self.registry.url} has no schema text")
        parsed = fastavro.parse_schema(json.loads(text), named_schemas=named)
        self._parsed[schema_id] = parsed
        return parsed

    def _add_reference(self, subject: str | None, version: int | None, named: dict[str, Any]) -> None:
        """Parse a referenced schema (and its own references first) into ``named``, where the referring
        schema's parse finds the types it names."""
        if subject is None or version is None:
            raise WireFormatError(f"a schema reference without subject or version in {self.registry.url}")
        registered = self.client.get_version(subject, version)
        for reference in registered.schema.references or ():
            self._add_reference(reference.subject, reference.version, named)
        text = registered.schema.schema_str
        if text is None:
            raise WireFormatError(f"{subject} version {version} in {self.registry.url} has no schema text")
        fastavro.parse_schema(json.loads(text), named_schemas=named)


@functools.lru_cache(maxsize=8)
def registry_schemas(registry: Registry) -> RegistrySchemas:
    """One client and schema cache per registry and Python worker process (Spark reuses its Python workers,
    so a schema is fetched once per executor, not once per batch)."""
    return RegistrySchemas(registry)


def _read_whole(value: bytes, parsed: Any) -> tuple[bool, Any]:
    """``(True, decoded)`` when the value decodes as plain Avro to its last byte, else ``(False, None)``.

    (A flag, not a sentinel object: the decoder is pickled by value to executors, and a sentinel would not be
    the same object on both sides.)"""
    buffer = io.BytesIO(value)
    try:
        decoded = fastavro.schemaless_reader(buffer, parsed)
    except Exception:
        return False, None
    return (True, decoded) if buffer.tell() == len(value) else (False, None)


def decoder(
    schema: AvroSchema, registry: Registry | None = None, app: str = ""
) -> Callable[[bytes | None], Any]:
    """A plain function (picklable for executors) that decodes one value, or gives None when it cannot."""
    parsed = fastavro.parse_schema(schema)

    def decode(value: bytes | None) -> Any:
        if value is None:
            return None
        schema_id = wire_schema_id(value)
        if schema_id is not None:
            if registry is None:
                # A plain value can start with a zero byte too: it is one if it reads to its end.
                whole, plain = _read_whole(value, parsed)
                if whole:
                    return plain
                raise WireFormatError(
                    f"app {app or '?'}: a value is in Confluent's wire format (magic byte 0, schema id "
                    f"{schema_id}) and no schema registry is configured: give --schema-registry-url "
                    "(or SUBROUTE_SCHEMA_REGISTRY_URL) to decode it"
                )
            writer = registry_schemas(registry).writer(schema_id)
            if writer is not None:
                body = io.BytesIO(value[WIRE_HEADER_BYTES:])
                try:
                    return fastavro.schemaless_reader(body, writer, parsed)
                except SchemaResolutionError as exc:  # the app's schema cannot read what was written
                    raise WireFormatError(
                        f"app {app or '?'}: schema id {schema_id} does not resolve into the app's Avro schema "
                        f"({exc}): give a reader schema compatible with what producers write"
                    ) from exc
                except Exception:  # a malformed body: a null payload, the raw bytes stay in `value`
                    return None
            # the registry has no such id: not a framed value after all, read it as plain Avro
        try:
            return fastavro.schemaless_reader(io.BytesIO(value), parsed)
        except Exception:  # any malformed payload: a null payload, the raw bytes stay in `value`
            return None

    return decode


def payload_column(
    value: Column, schema: AvroSchema, registry: Registry | None = None, app: str = ""
) -> Column:
    return F.udf(decoder(schema, registry, app), spark_type(schema), useArrow=True)(value)
