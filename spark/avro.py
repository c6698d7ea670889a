"""Avro payloads in Spark: load an app's payload schema, map it to a Spark type, decode values with fastavro.

Values are schemaless Avro (``fastavro.schemaless_writer``), the form the demo producers write; a value that
does not decode gets a null payload and keeps its bytes in the ``value`` column.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

import fastavro
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
    resource = resources.files("schemas").joinpath(f"{spec}.avsc")
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


def decoder(schema: AvroSchema) -> Callable[[bytes | None], Any]:
    """A plain function (picklable for executors) that decodes one value, or gives None when it cannot."""
    parsed = fastavro.parse_schema(schema)

    def decode(value: bytes | None) -> Any:
        if value is None:
            return None
        try:
            return fastavro.schemaless_reader(io.BytesIO(value), parsed)
        except Exception:  # any malformed payload: a null payload, the raw bytes stay in `value`
            return None

    return decode


def payload_column(value: Column, schema: AvroSchema) -> Column:
    return F.udf(decoder(schema), spark_type(schema), useArrow=True)(value)
