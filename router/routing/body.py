"""Properties read from a record's value (its body): the Python reference the native reader must agree with.

An app with ``format: json`` (or ``avro``) binds some properties to a JSON Pointer (RFC 6901) into the body
instead of a header. ``read_body`` reads them from one record value:

- the path does not exist, or its leaf is ``null``: the property is missing, not counted;
- the body is not decodable (not UTF-8 JSON as a whole, a null value, larger than ``MAX_BODY_BYTES``, nested
  deeper than ``MAX_DEPTH``): every property read is missing and counted once;
- the leaf has the wrong type for the declared one: that property is missing and counted.

Type mapping (JSON): ``int`` is a number literal without fraction or exponent, within int64; ``float`` any number
finite as an f64 (ints included); ``bool`` ``true``/``false``; ``string`` a string that is valid Unicode (a lone
surrogate escape is counted). Objects and arrays at the leaf are the wrong type; a duplicate key: the last wins.

Nothing here is recursive on the input: the depth is checked by a linear scan before ``json`` parses (whose C
scanner would otherwise recurse as deep as the document goes).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from itertools import accumulate

from subroute.config.avro_schema import WriterSchema, parse_schema_text
from subroute.config.body_paths import ABSENT, parse_pointer, resolve
from subroute.errors import SubrouteError
from subroute.routing import body_avro
from subroute.routing.properties import INT64_MAX, INT64_MIN, PropertyValue

MAX_BODY_BYTES = 1_048_576  # 1 MiB
MAX_DEPTH = 64  # objects and arrays


@dataclass(frozen=True, slots=True)
class BodyRead:
    """One property read from the body: its name, JSON Pointer (as written), declared type, and the pointer's
    reference tokens (``body_read`` parses them)."""

    name: str
    path: str
    declared: str
    tokens: tuple[str, ...]


def body_read(name: str, path: str, declared: str) -> BodyRead:
    return BodyRead(name, path, declared, parse_pointer(path))


Reading = tuple[dict[str, PropertyValue], dict[str, int]]


class _BigInt:
    """An integer literal too long for int64 (more than 20 characters): kept as text, so that ``json`` never
    converts a huge literal (Python refuses ints past 4300 digits) and a float reading rounds it once."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


def _parse_int(text: str) -> int | _BigInt:
    return int(text) if len(text) <= 20 else _BigInt(text)


def _refuse_constant(text: str) -> object:
    raise ValueError(f"{text} is not JSON (RFC 8259)")  # Python's json takes NaN and Infinity unless told


_DECODER = json.JSONDecoder(parse_int=_parse_int, parse_constant=_refuse_constant)
_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_NOT_BRACKETS = re.compile(r"[^\[\]{}]+")
_DEPTH_STEP = str.maketrans({"[": "\x01", "{": "\x01", "]": "\x02", "}": "\x02"})


def too_deep(text: str) -> bool:
    """Whether ``text`` opens more than MAX_DEPTH objects and arrays at once, outside strings. Linear; exact for
    valid JSON (for invalid JSON either answer leads to the same outcome: undecodable)."""
    if text.count("[") + text.count("{") <= MAX_DEPTH:
        return False
    brackets = _NOT_BRACKETS.sub("", _STRINGS.sub("", text)).translate(_DEPTH_STEP)
    steps = (1 if c == "\x01" else -1 for c in brackets)
    return max(accumulate(steps), default=0) > MAX_DEPTH


def decode_json(value: bytes | None) -> object:
    """The document of one record value; raises ValueError when it is not decodable (see the module doc)."""
    if value is None:
        raise ValueError("the record has no value")
    if len(value) > MAX_BODY_BYTES:
        raise ValueError(f"the body is {len(value)} bytes; at most {MAX_BODY_BYTES} are read")
    text = value.decode("utf-8")  # UnicodeDecodeError is a ValueError
    if too_deep(text):
        raise ValueError(f"the body nests deeper than {MAX_DEPTH} levels")
    return _DECODER.decode(text)


class _WrongType(Exception):
    pass


def _as_int(leaf: object) -> PropertyValue:
    if type(leaf) is int and INT64_MIN <= leaf <= INT64_MAX:
        return leaf
    raise _WrongType


def _as_float(leaf: object) -> PropertyValue:
    if type(leaf) is float:
        value = leaf
    elif type(leaf) is int:
        value = float(leaf)
    elif type(leaf) is _BigInt:
        value = float(leaf.text)
    else:
        raise _WrongType
    if not math.isfinite(value):
        raise _WrongType
    return value


def _as_bool(leaf: object) -> PropertyValue:
    if type(leaf) is bool:
        return leaf
    raise _WrongType


def _as_string(leaf: object) -> PropertyValue:
    if type(leaf) is str:
        try:
            leaf.encode("utf-8")  # a lone surrogate escape is not text
        except UnicodeEncodeError:
            raise _WrongType from None
        return leaf
    raise _WrongType


_TYPED: dict[str, Callable[[object], PropertyValue]] = {
    "int": _as_int,
    "float": _as_float,
    "bool": _as_bool,
    "string": _as_string,
}


def read_json(value: bytes | None, reads: Sequence[BodyRead]) -> Reading:
    """The properties ``reads`` name, from one JSON record value, and the failures per property."""
    props: dict[str, PropertyValue] = {}
    if not reads:
        return props, {}
    try:
        document = decode_json(value)
    except (ValueError, RecursionError):
        return props, {read.name: 1 for read in reads}
    failures: dict[str, int] = {}
    for read in reads:
        leaf = resolve(document, read.tokens)
        if leaf is ABSENT or leaf is None:
            continue
        try:
            props[read.name] = _TYPED[read.declared](leaf)
        except _WrongType:
            failures[read.name] = 1
    return props, failures


# The writer schema of a schema id (Confluent's wire format), None for an id the registry does not have. The
# worker gives the schemas it fetched for the batch; routing itself never talks to the registry.
WriterOf = Callable[[int], WriterSchema | None]


class NoWriterSchemas(SubrouteError, RuntimeError):
    """A value in Confluent's wire format was read where no writer schemas were given (no registry set)."""


def no_writer_schemas(schema_id: int) -> WriterSchema | None:
    raise NoWriterSchemas(
        f"schema id {schema_id}: no schema registry is set to read Avro in Confluent's wire format"
    )


@lru_cache(maxsize=256)
def app_writer_schema(schema: str) -> WriterSchema:
    """The parsed writer schema of an app's ``schema:`` text (validated at apply; parsed once per text)."""
    return parse_schema_text(schema)


def read_avro(
    value: bytes | None, reads: Sequence[BodyRead], schema: str | None, writer_of: WriterOf | None = None
) -> Reading:
    """Avro bodies: schemaless with the app's ``schema``, else Confluent's wire format whose writer schema
    ``writer_of`` gives by id (routing/body_avro.py has the rules). What ``writer_of`` raises (the registry
    cannot be read) goes to the caller: such a record is not read as if its fields were absent."""
    if schema is not None:
        return body_avro.read_plain(value, reads, app_writer_schema(schema))
    return body_avro.read_framed(value, reads, writer_of or no_writer_schemas)


def read_body(
    value: bytes | None,
    format: str,
    reads: Sequence[BodyRead],
    schema: str | None = None,
    writer_of: WriterOf | None = None,
) -> Reading:
    """``(props, failures_by_property)`` of one record value for an app of ``format``."""
    if format == "json":
        return read_json(value, reads)
    if format == "avro":
        return read_avro(value, reads, schema, writer_of)
    return {}, {}
