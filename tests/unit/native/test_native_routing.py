"""Property test: ``Router.route_batch`` (one native call per batch: the plan and every decision) gives exactly
the ``RouteResult`` of ``Router.route`` (the Python plans and ``decide_app``, per record) for every record:
decisions, filtered apps, evaluation and decode error counts per app; and leaves the same round-robin cursors and
the same routed counts in the lag ``Snapshot``.

Configurations are random: apps of both dialects with filters, declared property types, priority expressions,
the three fairness models, spillover, presence required or ignored, group_by with and without a default group,
expirations with either on_expire, reading overlapping topics; groups with subscriptions, priorities (often all of
a group's at one, so several match one message) and capacities (differing within a group). Records are random
header lists (missing, repeated, null, mistyped and undecodable values, int64 edges, NaN), on any topic, some
redriven for one app (``only_app``), some expired by the app's limit or their own (parsable or not)
``subroute.expiration``. Some apps read properties from JSON record values (``format: json``, ``path:``): records
carry random documents (nested, missing fields, nulls, wrong types, huge numbers, escapes, lone surrogates,
duplicate keys, too deep) and values that are no JSON at all or null; headers of those names are then ignored.
Others read them from Avro record values (``format: avro``): plain, under the app's ``schema:``, or in Confluent's
wire format under writer schemas by id (one the registry lacks among them), the schemas drawn around the paths
(nested records, unions with null, arrays, maps, enums, fixed, wrong leaf types, fields left out, fields the
paths never name), the values written by fastavro, then truncated, extended, replaced by garbage, framed with
another magic byte or an unknown id, or null.
Lags are plain mappings or snapshots with measured counts (so what a batch routes moves
later records' capacity), absent groups and message groups already held by some consumer group (a group of the
app, or one no longer in the config); cursors start anywhere.
"""

from __future__ import annotations

import io
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import fastavro
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "expressions"))
from expr_strategies import bmq_expressions, plan_bmq, plan_sql, sql_expressions

from subroute import expressions, wire
from subroute.config.avro_schema import writer_schema
from subroute.config.model import AppConfig, Config, GroupConfig, SubscriptionConfig
from subroute.expressions.expression import check
from subroute.routing import native_decisions
from subroute.routing.body import WriterOf
from subroute.routing.body_avro import WriterSchema
from subroute.routing.decisions import MessageView, Router, RouteResult, RoutingTable
from subroute.routing.holders import Holders
from subroute.routing.native_routing import build_table
from subroute.routing.snapshot import Snapshot

SETTINGS = settings(
    max_examples=int(os.environ.get("NATIVE_EXAMPLES", "300")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
Headers = list[tuple[str, bytes | None]]

TOPICS = ("orders", "payments", "audit")
INPUTS = (("orders",), ("payments",), ("orders", "payments"), ("^pay.*",), ("orders", "^au"))
NAMES = ("a", "b", "c", "s", "t", "f")
_BMQ_TYPES = {"a": "int", "b": "int", "c": "int", "s": "string", "t": "string", "f": "bool"}
_SQL_TYPES = {"a": "int", "b": "int", "c": "float", "s": "string", "t": "string", "f": "bool"}
# Priorities that fail on some records (a missing property, b = 0, overflow) and one that fails wherever a and b
# are present (division by zero): counted once per record however many of the nine thresholds fail.
PRIORITIES = (
    "a",
    "b",
    "a + b",
    "a * 3",
    "a % 7",
    "b - 2",
    "c",
    "a / b",
    "9223372036854775807 + a",
    "a / (b - b)",
)

VALUE_TEXTS = (
    "0",
    "-0",
    "1",
    "2",
    "3",
    "-1",
    "007",
    "9223372036854775807",
    "-9223372036854775808",
    "9223372036854775808",
    "2.5",
    "-0.0",
    "1e400",
    "nan",
    "NaN",
    "inf",
    "+1",
    " 1",
    "1_0",
    "",
    "true",
    "false",
    "a",
    "b",
    "ab",
    "%",
    "'",
)
raw_values: st.SearchStrategy[bytes | None] = st.one_of(
    st.sampled_from(VALUE_TEXTS).map(str.encode),
    st.integers(-(2**64), 2**64).map(lambda n: str(n).encode()),
    st.floats(allow_nan=True, allow_infinity=True).map(lambda f: repr(f).encode()),
    st.binary(max_size=3),
    st.just(b"\xff\xfe"),
    st.none(),
)
# Header names: the properties, the message-group header, an undeclared one and the message's own expiration.
header_names = st.sampled_from((*NAMES, "g", "other", wire.EXPIRATION))
headers_strategy: st.SearchStrategy[Headers] = st.lists(
    st.tuples(header_names, st.one_of(raw_values, st.sampled_from((b"1", b"2")))), max_size=8
)


# Properties some apps read from the record's JSON value: one path and type each across the config (as validation
# requires); the others read them as headers, or (undeclared) as string headers.
BODY = {
    "a": ("int", "/a"),
    "b": ("int", "/n/b"),
    "c": ("float", "/c"),
    "s": ("string", "/items/0/s"),
    "t": ("string", "/t~1x"),
    "f": ("bool", "/f"),
}
# The same properties in Avro values: record fields, an array item, a map value (Avro names hold no "/").
AVRO_PATHS = {"a": "/a", "b": "/n/b", "c": "/c", "s": "/items/0/s", "t": "/m/t~1x", "f": "/f"}
BODY_PATHS = {"json": {prop: path for prop, (_, path) in BODY.items()}, "avro": AVRO_PATHS}
LEAVES = (
    "0", "-0", "1", "2", "-1", "2.5", "1.0", "1e2", "1e400", "-0.0", "9223372036854775807", "9223372036854775808",
    "-9223372036854775808", "123456789012345678901234567890", '"a"', '"ab"', '"1"', '"%"', '"\u00e9"',
    '"\ud800"', '"\ud83d\ude00"', '"a\"b"', "true", "false", "null", "[]", "[1]", '{"b": 1}', "{}",
)  # fmt: skip
leaves = st.one_of(st.sampled_from(LEAVES), st.integers(-(2**64), 2**64).map(str))


@st.composite
def json_values(draw: st.DrawFn) -> bytes | None:
    """A record value for the apps that read its body: a document with some of BODY's paths (any leaf), or
    one that is not decodable."""
    kind = draw(st.integers(0, 9))
    if kind == 0:
        return draw(
            st.sampled_from(
                (
                    None,
                    b"",
                    b"not json",
                    b'{"a": 1',
                    b"\xff",
                    b'{"a": 1} x',
                    b"NaN",
                    b'{"a": NaN}',
                    b"[" * 70 + b"]" * 70,
                )
            )
        )
    if kind == 1:
        return draw(st.binary(max_size=6))
    members = []
    for text in ('"a": {}', '"n": {{"b": {}}}', '"c": {}', '"items": [{{"s": {}}}]', '"t/x": {}', '"f": {}'):
        if draw(st.integers(0, 3)):
            members.append(text.format(draw(leaves)))
    if draw(st.integers(0, 5)) == 0:
        members.insert(0, f'"a": {draw(leaves)}')  # a duplicate key: the last one wins
    document = "{" + ", ".join(draw(st.permutations(members))) + "}"
    if draw(st.integers(0, 9)) == 0:
        document = "[" * 64 + document + "]" * 64  # too deep, or not an object at the root
    return f" {document}\n".encode("utf-8", "surrogatepass")


# Avro writer schemas drawn around AVRO_PATHS: each leaf of its declared type most often, else nullable, of
# another type (counted), an enum (a string) or a fixed (refused as bytes: counted); containers in several
# shapes, some fields left out or padded with fields no path names (skipped by their encoding).
_LEAF_TYPES: dict[str, tuple[Any, ...]] = {
    "int": ("long", "long", "int", ["null", "long"], ["null", "int"], ["null", "string", "long"], "string", "double"),
    "float": ("double", "double", "float", "long", ["null", "double"], ["int", "null"], "string", "boolean"),
    "string": ("string", "string", ["null", "string"], "enum", ["null", "enum"], "long", "bytes", "fixed"),
    "bool": ("boolean", "boolean", ["null", "boolean"], "long", "string"),
}  # fmt: skip
_PADS: tuple[Any, ...] = (
    "long",
    "string",
    "bytes",
    "double",
    "float",
    "boolean",
    "null",
    {"type": "array", "items": "double"},
    {"type": "map", "values": ["null", "string"]},
    "fixed",
    "enum",
    {"type": "array", "items": {"type": "map", "values": "long"}},
    "record",
)


class _Names:
    """Fresh names for the named types of one schema."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}{self.count}"


def _named_leaf(leaf: Any, names: _Names) -> Any:
    if isinstance(leaf, list):
        return [_named_leaf(branch, names) for branch in leaf]
    if leaf == "enum":
        return {"type": "enum", "name": names("E"), "symbols": ["a", "b", "ab", "x"]}
    if leaf == "fixed":
        return {"type": "fixed", "name": names("F"), "size": 2}
    if leaf == "record":  # nested records and arrays to skip
        inner = {"type": "record", "name": names("P"), "fields": [{"name": "v", "type": "long"}]}
        return {
            "type": "record",
            "name": names("P"),
            "fields": [
                {"name": "x", "type": {"type": "array", "items": inner}},
                {"name": "y", "type": "string"},
            ],
        }
    return leaf


def _record(draw: st.DrawFn, name: str, fields: list[tuple[str, Any]], names: _Names) -> Any:
    """A record of ``fields`` (each left out now and then), with padding fields anywhere."""
    kept = [f for f in fields if draw(st.integers(0, 7))]
    for i in range(draw(st.integers(0, 2))):
        kept.append((f"pad{i}", _named_leaf(draw(st.sampled_from(_PADS)), names)))
    kept = draw(st.permutations(kept))
    return {"type": "record", "name": name, "fields": [{"name": n, "type": t} for n, t in kept]}


@st.composite
def avro_schemas(draw: st.DrawFn) -> Any:
    names = _Names()

    def leaf(prop: str) -> Any:
        return _named_leaf(draw(st.sampled_from(_LEAF_TYPES[BODY[prop][0]])), names)

    n_record = _record(draw, names("N"), [("b", leaf("b"))], names)
    n = draw(st.sampled_from(("record", "nullable", "map")))
    item = _record(draw, names("I"), [("s", leaf("s"))], names)
    items: Any = {"type": "array", "items": item}
    m: Any = {"type": "map", "values": leaf("t")}
    return _record(
        draw,
        "Order",
        [
            ("a", leaf("a")),
            (
                "n",
                {
                    "record": n_record,
                    "nullable": ["null", n_record],
                    "map": {"type": "map", "values": leaf("b")},
                }[n],
            ),
            ("c", leaf("c")),
            ("items", draw(st.sampled_from((items, ["null", items], {"type": "array", "items": leaf("s")})))),
            ("m", draw(st.sampled_from((m, ["null", m])))),
            ("f", leaf("f")),
        ],
        names,
    )


_SIMPLE_VALUES: dict[str, st.SearchStrategy[Any]] = {
    "null": st.none(),
    "boolean": st.booleans(),
    "int": st.one_of(st.integers(-1, 3), st.integers(-(2**31), 2**31 - 1)),
    "long": st.one_of(st.integers(-1, 3), st.sampled_from((2**63 - 1, -(2**63)))),
    "float": st.one_of(st.sampled_from((2.5, 0.0, -0.0, 1.0)), st.floats(width=32)),
    "double": st.one_of(st.sampled_from((2.5, 0.0, -0.0, 1.0, 1e300)), st.floats()),
    "bytes": st.binary(max_size=3),
    "string": st.sampled_from(("a", "b", "ab", "%", "", "\u00e9", "1")),
}


def _avro_value(draw: st.DrawFn, schema: Any, named: dict[str, Any]) -> Any:
    if isinstance(schema, list):
        return _avro_value(draw, draw(st.sampled_from(schema)), named)
    if isinstance(schema, str) and schema in named:
        return _avro_value(draw, named[schema], named)
    kind = schema if isinstance(schema, str) else schema["type"]
    if kind in _SIMPLE_VALUES:
        return draw(_SIMPLE_VALUES[kind])
    if kind in ("record", "enum", "fixed"):
        named[schema["name"]] = schema
    if kind == "fixed":
        return draw(st.binary(min_size=schema["size"], max_size=schema["size"]))
    if kind == "enum":
        return draw(st.sampled_from(schema["symbols"]))
    if kind == "array":
        return [_avro_value(draw, schema["items"], named) for _ in range(draw(st.sampled_from((1, 2, 0))))]
    if kind == "map":
        keys = draw(st.permutations(("t/x", "a", "", "\u00e9")))[: draw(st.sampled_from((1, 2, 3, 0)))]
        return {key: _avro_value(draw, schema["values"], named) for key in keys}
    return {f["name"]: _avro_value(draw, f["type"], named) for f in schema["fields"]}


def _encoded(draw: st.DrawFn, schema: Any) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), _avro_value(draw, schema, {}))
    return out.getvalue()


def _mangled(draw: st.DrawFn, body: bytes) -> bytes:
    """``body`` most often, else truncated, extended or garbage."""
    kind = draw(st.integers(0, 9))
    if kind == 0:
        return body[: draw(st.integers(0, max(len(body) - 1, 0)))]
    if kind == 1:
        return body + draw(st.binary(min_size=1, max_size=3))
    if kind == 2:
        return draw(st.binary(max_size=12))
    return body


@st.composite
def plain_avro_values(draw: st.DrawFn, schema: Any) -> bytes | None:
    """A value written with the app's schema (or not: mangled, null, JSON)."""
    if draw(st.integers(0, 19)) == 0:
        return draw(st.sampled_from((None, b"", b'{"a": 1}')))
    return _mangled(draw, _encoded(draw, schema))


@st.composite
def framed_avro_values(draw: st.DrawFn, schemas: Sequence[Any]) -> bytes | None:
    """A value in Confluent's wire format under the schema of id 1 or 2 (``schemas``), or framed with an id the
    registry lacks (3), another magic byte, cut inside its header, or null."""
    kind = draw(st.integers(0, 19))
    if kind == 0:
        return draw(st.sampled_from((None, b"", b"\x00\x00\x00", b'{"a": 1}')))
    sid = draw(st.sampled_from((1, 1, 2, 3))) if len(schemas) > 1 else draw(st.sampled_from((1, 1, 3)))
    body = _encoded(draw, schemas[min(sid, len(schemas)) - 1])
    magic = b"\x01" if kind == 1 else b"\x00"
    return _mangled(draw, magic + sid.to_bytes(4, "big") + body)


# A record's own expiration: parsable (units, spaces, bare ms, 0, past any int64) or not (first that parses wins).
expirations = st.one_of(
    st.sampled_from(
        (b"1s", b"1h", b"bad", b" 2 s ", b"\x1c3 s\x1f", b"500", b"0", b"", b"1 x", b"5ms", b"1\xc2\xa0s")
    ),
    st.sampled_from((b"9" * 32, b"9" * 33, b"9" * 31 + b"d")),
    st.integers(0, 20_000).map(lambda n: str(n).encode()),
)


@st.composite
def type_maps(draw: st.DrawFn, dialect: str) -> dict[str, str]:
    base = _BMQ_TYPES if dialect == "bmq" else _SQL_TYPES
    kinds = ("int", "string", "bool") if dialect == "bmq" else ("int", "string", "bool", "float")
    out: dict[str, str] = {}
    for name, usual in base.items():
        choice = draw(st.integers(0, 5))
        if choice <= 3:
            out[name] = usual
        elif choice == 4:
            out[name] = draw(st.sampled_from(kinds))
    return out


def _valid(text: str, dialect: str, types: dict[str, str]) -> bool:
    try:
        check(text, dialect, types)
    except expressions.ExpressionError:
        return False
    return True


def _pairs(dialect: str) -> st.SearchStrategy[str]:
    """Two equality gates on a and b out of few values: which one indexes an entry depends on how many entries
    of the plan share each, which differs between an app's own plan and the plan of every app."""
    eq, joint = ("==", "&&") if dialect == "bmq" else ("=", "AND")
    return st.tuples(st.sampled_from(("a", "b")), st.integers(1, 2), st.integers(1, 2)).map(
        lambda t: f"{t[0]} {eq} {t[1]} {joint} {'b' if t[0] == 'a' else 'a'} {eq} {t[2]}"
    )


def _texts(dialect: str) -> st.SearchStrategy[str]:
    if dialect == "bmq":
        common = st.sampled_from(("a == 1", "a > 0", 's == "a"'))
        return st.one_of(bmq_expressions, plan_bmq, common, _pairs(dialect))
    common = st.sampled_from(("a = 1", "a > 0", "s = 'a'", "c < 2.5"))
    return st.one_of(sql_expressions, plan_sql, common, _pairs(dialect))


@st.composite
def configs(
    draw: st.DrawFn, body_format: str = "json", schema: str | None = None, reading: bool = False
) -> Config:
    """Random apps and groups; those reading the body read it as ``body_format`` (``schema``: a plain Avro
    writer schema, else Confluent's wire format); with ``reading``, the first app reads some property there."""
    apps: dict[str, AppConfig] = {}
    paths_of = BODY_PATHS[body_format]
    groups: dict[tuple[str, str], GroupConfig] = {}
    # A conjunct many entries share is a poor gate in the one native plan and may be a good one in an app's own
    # plan: the native plan must index each entry as its Python plan does (errors are counted where evaluated).
    shared = {"bmq": draw(plan_bmq), "sql92": draw(plan_sql)}
    body_names = (
        sorted(draw(st.sets(st.sampled_from(sorted(BODY)), min_size=1 if reading else 0)))
        if reading or draw(st.integers(0, 2))
        else []
    )
    for i in range(draw(st.integers(1, 4))):
        name = f"app{i}"
        dialect = draw(st.sampled_from(("bmq", "sql92")))
        # Apps often share their types (one environment), sometimes not.
        types = dict(_BMQ_TYPES if dialect == "bmq" else _SQL_TYPES)
        if draw(st.booleans()):
            types = draw(type_maps(dialect))
        # An app that reads the body declares each body property with its one type and path; the others do not
        # declare them (they read headers of those names as strings).
        json = bool(body_names) and ((reading and i == 0) or draw(st.booleans()))
        for prop in body_names:
            declared, _ = BODY[prop]
            if not json or (declared == "float" and dialect == "bmq"):
                types.pop(prop, None)
            elif prop in types or (reading and i == 0) or draw(st.booleans()):
                types[prop] = declared
        paths = {prop: paths_of[prop] for prop in body_names if json and prop in types}
        texts = _texts(dialect)
        common = shared[dialect]
        if common and draw(st.booleans()):
            joint = " && " if dialect == "bmq" else " AND "
            texts = st.one_of(texts, st.just(common), texts.map(lambda t, c=common, j=joint: f"{c}{j}({t})"))
        filters = [t for t in draw(st.lists(texts, max_size=3)) if _valid(t, dialect, types)]
        priority = draw(st.one_of(st.none(), st.sampled_from(PRIORITIES)))
        if priority is not None and not _valid(f"({priority}) >= 1", dialect, types):
            priority = None
        apps[name] = AppConfig(
            name=name,
            inputs=draw(st.sampled_from(INPUTS)),
            dialect=dialect,
            properties=types,
            format=body_format if paths else "none",
            paths=paths,
            schema=schema if paths else None,
            filter=tuple(filters),
            group_by=draw(st.sampled_from((None, None, "g", *(("s",) if "s" not in paths else ())))),
            default_group=draw(st.sampled_from((None, "dg", ""))),
            fairness=draw(st.sampled_from(("round-robin", "proportional", "fast"))),
            spillover=draw(st.booleans()),
            presence=draw(st.sampled_from(("required", "ignored"))),
            expiration_ms=draw(st.sampled_from((None, None, 1_000, 0))),
            on_expire=draw(st.sampled_from(("dead-letter", "drop"))),
            priority=priority,
        )
        for j in range(draw(st.integers(1, 3))):
            subs = []
            # Often all of a group's subscriptions at one priority: several of them match one message, and the
            # group still takes one turn, under one limit.
            level = draw(st.one_of(st.none(), st.integers(0, 2)))
            for _ in range(draw(st.integers(0, 3))):
                text = draw(st.one_of(st.none(), texts))
                if text is not None and not _valid(text, dialect, types):
                    continue
                subs.append(
                    SubscriptionConfig(
                        text,
                        draw(st.integers(0, 2)) if level is None else level,
                        draw(st.sampled_from((None, None, 0, 1, 2, 3))),
                    )
                )
            groups[(name, f"g{j}")] = GroupConfig(
                app=name, name=f"g{j}", subscriptions=tuple(subs), order=draw(st.integers(0, 2))
            )
    return Config(version=1, apps=apps, groups=groups)


@st.composite
def records(
    draw: st.DrawFn, apps: Sequence[str], values: st.SearchStrategy[bytes | None] | None = None
) -> tuple[MessageView, str | None]:
    headers = draw(headers_strategy)
    if draw(st.integers(0, 3)) == 0:  # now 10,000: the apps' 1 s expiration, or the record's own
        headers.append((wire.EXPIRATION, draw(expirations)))
    timestamp = draw(st.sampled_from((0, 9_500, 5_000)))
    only_app = draw(st.one_of(st.none(), st.none(), st.sampled_from((*apps, "missing"))))
    value = draw(values if values is not None else json_values())
    return MessageView(draw(st.sampled_from(TOPICS)), headers, timestamp, value), only_app


def _fields(result: RouteResult) -> tuple[object, ...]:
    return (result.routed, list(result.filtered), result.evaluation_errors, result.decode_errors)


Lag = dict[tuple[str, str], int]
Held = dict[tuple[str, bytes], str]  # (app, message group key) -> the consumer group holding it
# How a test's lag is made: a plain mapping, or a snapshot (measured counts, absent groups, message groups held),
# fresh for each side.
LagSpec = Lag | tuple[Lag, frozenset[tuple[str, str]]] | tuple[Lag, frozenset[tuple[str, str]], Held]


def _lag(spec: LagSpec) -> Lag | Snapshot:
    if isinstance(spec, tuple):
        measured, absent, *rest = spec
        holders = Holders()
        for (app, key), group in (rest[0] if rest else {}).items():
            holders.hold(app, key, group)
        return Snapshot(dict(measured), absent, started_at=1.0, holders=holders)
    return spec


def _state(lag: Lag | Snapshot) -> object:
    """What routing leaves in a lag: a snapshot's routed counts and their log, and the message groups held."""
    return (
        (
            dict(lag._routed),
            {k: [list(e) for e in v] for k, v in lag._log.items()},
            lag.holders.by_app,
            dict(lag.holders._outstanding),
        )
        if isinstance(lag, Snapshot)
        else dict(lag)
    )


def _check(
    table: RoutingTable,
    batch: list[tuple[MessageView, str | None]],
    spec: LagSpec,
    cursors: dict[tuple[str, int], int] | None = None,
    split: int | None = None,
    writer_of: WriterOf | None = None,
) -> list[RouteResult]:
    """``route`` record by record against ``route_batch`` (in two calls at ``split``), from the same cursors and
    lag (and Avro writer schemas by id, ``writer_of``): the same results, and the same cursors and snapshot counts
    left."""
    reference, native = Router(), Router()
    reference.writer_of = native.writer_of = writer_of
    reference.cursors = dict(cursors or {})
    native.cursors = dict(cursors or {})
    lag_ref, lag_native = _lag(spec), _lag(spec)
    expected = [reference.route(table, m, lag_ref, 10_000, only_app) for m, only_app in batch]
    cut = len(batch) if split is None else split
    got = []
    for part in (batch[:cut], batch[cut:]):
        if part:
            got += native.route_batch(table, [m for m, _ in part], lag_native, 10_000, [o for _, o in part])
    assert len(got) == len(expected)
    for (message, only_app), want, have in zip(batch, expected, got, strict=True):
        assert _fields(have) == _fields(want), (message, only_app)
    assert native.cursors == reference.cursors
    assert _state(lag_native) == _state(lag_ref)
    return expected


@st.composite
def lag_specs(draw: st.DrawFn, config: Config) -> LagSpec:
    keys = sorted(config.groups)
    counts = {key: draw(st.integers(0, 3)) for key in keys if draw(st.integers(0, 3))}
    kind = draw(st.integers(0, 5))
    if kind == 0:
        return {}
    if kind == 1:
        return counts
    # A snapshot (most often): what the batch routes to a measured group counts against its capacity at once.
    absent = draw(st.sets(st.sampled_from([*keys, ("app0", "unknown")]))) if draw(st.booleans()) else set()
    return counts, frozenset(absent), draw(held_groups(config))


# Message-group keys records carry (values of the group_by headers "g" and "s", the default groups) and some no
# record carries.
GROUP_KEYS = (b"1", b"2", b"a", b"b", b"ab", b"dg", wire.DEFAULT_MESSAGE_GROUP.encode(), b"\xff\xfe", b"x")


@st.composite
def held_groups(draw: st.DrawFn, config: Config) -> Held:
    """Message groups held by a group of their app, or by one the config no longer has."""
    if draw(st.integers(0, 3)) == 0:
        return {}
    holders = {app: [g for a, g in config.groups if a == app] + ["gone"] for app in config.apps}
    return draw(
        st.dictionaries(
            st.sampled_from(sorted(config.apps)).flatmap(
                lambda app: st.tuples(st.just(app), st.sampled_from(GROUP_KEYS))
            ),
            st.sampled_from(sorted({g for groups in holders.values() for g in groups})),
            max_size=8,
        )
    )


@st.composite
def cursor_maps(draw: st.DrawFn, config: Config) -> dict[tuple[str, int], int]:
    keys = [(app, priority) for app in config.apps for priority in range(3)]
    return {key: draw(st.integers(0, 7)) for key in keys if draw(st.integers(0, 2)) == 0}


@SETTINGS
@given(st.data())
def test_route_batch_equals_route(data: st.DataObject) -> None:
    config = data.draw(configs())
    table = build_table(config)
    assert table.native is not None and table.native.decisions is not None  # the native decisions are tested
    batch = data.draw(st.lists(records(sorted(config.apps)), min_size=1, max_size=20))
    lag = data.draw(lag_specs(config))
    cursors = data.draw(cursor_maps(config))
    split = data.draw(st.one_of(st.none(), st.integers(0, len(batch))))
    for result in _check(table, batch, lag, cursors, split):
        # What the examples reach (pytest --hypothesis-show-statistics).
        event("evaluation errors" if result.evaluation_errors else "no evaluation error")
        event("decode errors" if result.decode_errors else "no decode error")
        event("reads bodies" if any(env.body for env in table.environments) else "headers only")
        event(f"{len(result.routed)} routed, {len(result.filtered)} filtered")
        for decision in result.routed:
            event(f"{decision.action.value} {decision.reason or ''} {'key' if decision.key else ''}")
    # A table built from this one (the native plan reuses its parses) routes the same way.
    _check(build_table(config, previous=table), batch, lag, cursors)


@SETTINGS
@given(st.data())
def test_route_batch_equals_route_on_avro_bodies(data: st.DataObject) -> None:
    """Apps reading plain Avro (``schema:``) or Confluent's wire format (ids 1 and 2 known, 3 not): decided by
    the native decider (which reads the bodies itself) as ``Router.route`` decides with the reference reader."""
    first = data.draw(avro_schemas())
    writer_of: WriterOf | None = None
    if data.draw(st.booleans()):
        config = data.draw(configs("avro", json.dumps(first), reading=True))
        values = plain_avro_values(first)
        event("plain")
    else:
        schemas = [first, data.draw(avro_schemas())] if data.draw(st.booleans()) else [first]
        writers: dict[int, WriterSchema] = {i + 1: writer_schema(s) for i, s in enumerate(schemas)}
        writer_of = writers.get
        config = data.draw(configs("avro", reading=True))
        values = framed_avro_values(schemas)
        event("framed")
    table = build_table(config)
    assert table.native is not None and table.native.decisions is not None  # the native decisions are tested
    batch = data.draw(st.lists(records(sorted(config.apps), values), min_size=1, max_size=20))
    lag = data.draw(lag_specs(config))
    cursors = data.draw(cursor_maps(config))
    split = data.draw(st.one_of(st.none(), st.integers(0, len(batch))))
    for result in _check(table, batch, lag, cursors, split, writer_of):
        event("decode errors" if result.decode_errors else "no decode error")
        for decision in result.routed:
            event(f"{decision.action.value} {decision.reason or ''}")
    _check(build_table(config, previous=table), batch, lag, cursors, None, writer_of)


@pytest.mark.parametrize("dialect", ["bmq", "sql92"])
def test_errors_counted_as_the_python_plans_do(dialect: str) -> None:
    """A shared equality makes a poor gate in the one native plan, a good one in an app's own plan: the native
    plan must still index each entry as its Python plan does, or the two count evaluation errors on different
    records (here: b is missing, so ``b > 0`` fails wherever it is evaluated)."""
    eq = "==" if dialect == "bmq" else "="
    types = {"a": "int", "b": "int"}
    apps = {
        f"app{i}": AppConfig(f"app{i}", ("orders",), dialect, types, filter=(f"a {eq} 1",)) for i in range(3)
    }
    groups = {
        ("app0", "g"): GroupConfig(
            "app0", "g", (SubscriptionConfig(f"a {eq} 1 {'&&' if dialect == 'bmq' else 'AND'} b > 0"),)
        )
    }
    table = build_table(Config(version=1, apps=apps, groups=groups))
    batch: list[tuple[MessageView, str | None]] = [
        (MessageView("orders", [("a", b"1")], 0), None),
        (MessageView("orders", [("a", b"2")], 0), None),
        (MessageView("orders", [("a", b"x"), ("b", b"1")], 0), None),
    ]
    _check(table, batch, {})


def test_entries_indexed_otherwise_fall_back_to_route(monkeypatch: pytest.MonkeyPatch) -> None:
    """Six ranges on one property make the Python plan index these by an interval with float bounds, which the
    native plan cannot: it evaluates them on every record, so it reports errors (here: a division by zero) on
    records the Python plan never evaluates them on. Such a record takes ``route``, which counts as the Python
    plans do."""
    types = {"c": "float", "b": "int"}
    app = AppConfig("app0", ("orders",), "sql92", types)
    subs = tuple(SubscriptionConfig(f"c BETWEEN 1.5 AND 2.5 AND b / 0 = {k}") for k in range(6))
    table = build_table(
        Config(version=1, apps={"app0": app}, groups={("app0", "g"): GroupConfig("app0", "g", subs)})
    )
    assert table.native is not None and not all(table.native.exact)
    routed_alone: list[MessageView] = []
    route = Router.route

    def counted(
        self: Router, table: RoutingTable, message: MessageView, *args: Any, **kwargs: Any
    ) -> RouteResult:
        routed_alone.append(message)
        return route(self, table, message, *args, **kwargs)

    batch: list[tuple[MessageView, str | None]] = [
        (MessageView("orders", [("c", b"2.0"), ("b", b"1")], 0), None),
        (MessageView("orders", [("c", b"5.0"), ("b", b"1")], 0), None),
        (MessageView("orders", [("b", b"1")], 0), None),
    ]
    monkeypatch.setattr(Router, "route", counted)
    results = _check(table, batch, {})
    assert [r.evaluation_errors for r in results] == [{"app0": 6}, {}, {}]
    # After the reference's own calls: route_batch's, among them the record the Python plan does not evaluate
    # the entries on (c missing: not in the interval) but the native plan does (c BETWEEN is UNKNOWN, then the
    # division fails).
    assert batch[2][0] in routed_alone[len(batch) :]


@st.composite
def busy_configs(draw: st.DrawFn) -> Config:
    """Apps on one topic without filters whose every group has a small max_unconfirmed: most records route, so
    a batch fills groups and later records meet full ones (capacity, spillover, fairness among the rest)."""
    apps: dict[str, AppConfig] = {}
    groups: dict[tuple[str, str], GroupConfig] = {}
    for i in range(draw(st.integers(1, 3))):
        name = f"app{i}"
        apps[name] = AppConfig(
            name=name,
            inputs=("orders",),
            properties={"a": "int"},
            group_by=draw(st.sampled_from((None, None, "g"))),
            fairness=draw(st.sampled_from(("round-robin", "proportional", "fast"))),
            spillover=draw(st.booleans()),
            presence=draw(st.sampled_from(("required", "ignored"))),
        )
        for j in range(draw(st.integers(1, 4))):
            level = draw(st.one_of(st.none(), st.integers(0, 1)))  # see configs
            subs = tuple(
                SubscriptionConfig(
                    draw(st.sampled_from((None, "a == 1", "a > 0"))),
                    draw(st.integers(0, 1)) if level is None else level,
                    draw(st.sampled_from((None, 1, 2, 4))),
                )
                for _ in range(draw(st.integers(0, 3)))
            )
            groups[(name, f"g{j}")] = GroupConfig(name, f"g{j}", subs, order=j)
    return Config(version=1, apps=apps, groups=groups)


@SETTINGS
@given(st.data())
def test_a_batch_fills_groups_as_route_does(data: st.DataObject) -> None:
    config = data.draw(busy_configs())
    table = build_table(config)
    headers = st.lists(
        st.tuples(st.sampled_from(("a", "g")), st.sampled_from((b"1", b"2", b"0"))), max_size=2
    )
    batch = data.draw(
        st.lists(headers.map(lambda h: (MessageView("orders", h, 0), None)), min_size=5, max_size=30)
    )
    keys = sorted(config.groups)
    measured = {key: data.draw(st.integers(0, 2)) for key in keys if data.draw(st.integers(0, 4))}
    absent = frozenset(data.draw(st.sets(st.sampled_from(keys))) if data.draw(st.booleans()) else ())
    spec: LagSpec = (
        (measured, absent, data.draw(held_groups(config))) if data.draw(st.integers(0, 4)) else measured
    )
    for result in _check(
        table, batch, spec, data.draw(cursor_maps(config)), data.draw(st.integers(0, len(batch)))
    ):
        for decision in result.routed:
            event(f"{decision.action.value} {decision.reason or ''}")


# Filters that overlap (a record often passes several apps' filters, or none) and subscriptions with equality,
# range and interval gates on the same few keys in every app.
_SHARED_FILTERS = {
    "bmq": (None, "a > 0", "a >= 1", "b == 1", "a == 1 || b == 2"),
    "sql92": (None, "a > 0", "a >= 1", "b = 1", "a = 1 OR b = 2"),
}
_SHARED_SUBSCRIPTIONS = {
    "bmq": (
        "a == 1",
        "a == 2",
        "b == 1",
        "a > 1",
        "a >= 1 && a <= 2",
        "(a == 1 || a == 2) && b > 0",
        "b < 2",
    ),
    "sql92": ("a = 1", "a = 2", "b = 1", "a > 1", "a BETWEEN 1 AND 2", "(a = 1 OR a = 2) AND b > 0", "b < 2"),
}


@st.composite
def shared_gate_configs(draw: st.DrawFn) -> Config:
    """Apps on one topic whose filters overlap and whose subscriptions are gated on the same keys: the native
    plan indexes each app's subscriptions apart and probes those of the apps whose filter a record passed."""
    dialect = draw(st.sampled_from(("bmq", "sql92")))
    apps: dict[str, AppConfig] = {}
    groups: dict[tuple[str, str], GroupConfig] = {}
    for i in range(draw(st.integers(2, 4))):
        name = f"app{i}"
        filters = draw(st.lists(st.sampled_from(_SHARED_FILTERS[dialect]), max_size=2))
        apps[name] = AppConfig(
            name=name,
            inputs=("orders",),
            dialect=dialect,
            properties={"a": "int", "b": "int"},
            filter=tuple(f for f in filters if f is not None),
            fairness=draw(st.sampled_from(("round-robin", "proportional", "fast"))),
            presence="ignored",
        )
        for j in range(draw(st.integers(1, 3))):
            subs = tuple(
                SubscriptionConfig(
                    draw(st.sampled_from(_SHARED_SUBSCRIPTIONS[dialect])), draw(st.integers(0, 1))
                )
                for _ in range(draw(st.integers(0, 3)))
            )
            groups[(name, f"g{j}")] = GroupConfig(name, f"g{j}", subs, order=j)
    return Config(version=1, apps=apps, groups=groups)


@SETTINGS
@given(st.data())
def test_apps_sharing_gates_route_as_route_does(data: st.DataObject) -> None:
    config = data.draw(shared_gate_configs())
    table = build_table(config)
    headers = st.lists(
        st.tuples(st.sampled_from(("a", "b")), st.sampled_from((b"0", b"1", b"2", b"3", b"x"))), max_size=3
    )
    batch = data.draw(
        st.lists(headers.map(lambda h: (MessageView("orders", h, 0), None)), min_size=1, max_size=20)
    )
    for result in _check(table, batch, {}, data.draw(cursor_maps(config))):
        event(f"{len(result.routed)} routed, {len(result.filtered)} filtered")


def test_a_table_without_the_decider_routes_record_by_record(monkeypatch: pytest.MonkeyPatch) -> None:
    """Should the native side refuse the decider (a bug), the table keeps its native plan, and ``route_batch`` is
    ``route`` per record."""

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise ValueError("refused")

    monkeypatch.setattr(native_decisions.NativeDecisions, "build", refuse)
    app = AppConfig("app0", ("orders",), "bmq", {"a": "int"}, filter=("a > 0",), fairness="round-robin")
    groups = {(app.name, g): GroupConfig(app.name, g, (SubscriptionConfig("a > 1"),)) for g in ("g0", "g1")}
    table = build_table(Config(version=1, apps={app.name: app}, groups=groups))
    assert table.native is not None and table.native.decisions is None
    batch = [(MessageView("orders", [("a", str(n).encode())], 0), None) for n in range(4)]
    results = _check(table, batch, {})
    assert [[d.group for d in r.routed] for r in results] == [[], [None], ["g0"], ["g1"]]  # filtered, pending


def test_a_batch_keeps_a_message_group_on_the_group_holding_it() -> None:
    """Issue 22, item 3, in one native call: A's first record places it on general, so A's next record follows it
    there although it matches vip; B (held by vip before the batch) follows vip although it matches general."""
    app = AppConfig("billing", ("orders",), "bmq", {"Cust": "string", "Amt": "int"}, group_by="Cust")
    groups = {
        ("billing", "vip"): GroupConfig("billing", "vip", (SubscriptionConfig("Amt > 1000"),)),
        ("billing", "general"): GroupConfig(
            "billing", "general", (SubscriptionConfig("Amt == 10"),), order=1
        ),
    }
    table = build_table(Config(version=1, apps={"billing": app}, groups=groups))
    batch: list[tuple[MessageView, str | None]] = [
        (MessageView("orders", [("Cust", c.encode()), ("Amt", a.encode())], 0), None)
        for c, a in (("A", "10"), ("A", "5000"), ("B", "10"), ("C", "5000"))
    ]
    results = _check(table, batch, ({}, frozenset(), {("billing", b"B"): "vip"}))
    assert [r.routed[0].group for r in results] == ["general", "general", "vip", "vip"]
