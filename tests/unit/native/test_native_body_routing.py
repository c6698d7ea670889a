"""Body properties on the native decision path (issue 25): a table whose apps read JSON or Avro bodies (plain, or in
Confluent's wire format) is decided by the native decider (not handed to the Python path), as ``Router.route``
decides it, and hostile bodies are refused there in linear time, each within a per-evaluation budget (bounded-evaluation tests: a budget far above what one
batch takes, far below what a quadratic or recursive reading of these bodies would)."""

from __future__ import annotations

import dataclasses
import io
import json
import time
from typing import Any

import fastavro
import pytest

from subroute.config.avro_schema import writer_schema
from subroute.config.model import AppConfig, Config, GroupConfig, SubscriptionConfig
from subroute.routing.body import MAX_BODY_BYTES, NoWriterSchemas
from subroute.routing.body_avro import WriterSchema
from subroute.routing.decisions import MessageView, Router, RouteResult, RoutingTable
from subroute.routing.native_routing import NativeTable, build_table

BUDGET = 1.0  # seconds for one batch of a few hostile records


def table() -> NativeTable:
    app = AppConfig(
        name="orders",
        inputs=("orders",),
        dialect="sql92",
        format="json",
        properties={"Region": "string", "CustomerId": "int", "Sku": "string", "Price": "float", "Qty": "int"},
        paths={"CustomerId": "/customer/id", "Sku": "/items/0/sku", "Price": "/price", "Qty": "/qty"},
        priority="Price * Qty",
    )
    # An app on the same topic reading CustomerId as a header (undeclared: a string): a slot of its own.
    audit = AppConfig(name="audit", inputs=("orders",), dialect="bmq", filter=('CustomerId == "7"',))
    groups = {
        ("orders", "vip"): GroupConfig("orders", "vip", (SubscriptionConfig("CustomerId = 7", priority=1),)),
        ("orders", "sku"): GroupConfig("orders", "sku", (SubscriptionConfig("Sku LIKE 'A%'", priority=1),)),
        ("orders", "rest"): GroupConfig("orders", "rest", ()),
        ("audit", "all"): GroupConfig("audit", "all", ()),
    }
    built = build_table(Config(1, {"orders": app, "audit": audit}, groups))
    assert built.native is not None and built.native.decisions is not None
    assert built.native.decisions.reads_body
    return built


def decide(records: list[MessageView]) -> list[RouteResult]:
    """The native batch's results, checked against ``Router.route`` record by record."""
    routing = table()
    reference = Router()
    expected = [reference.route(routing, m, {}, 0) for m in records]
    got = Router().route_batch(routing, records, {}, 0)
    fields = [(r.routed, list(r.filtered), r.evaluation_errors, r.decode_errors) for r in (*expected, *got)]
    assert fields[len(records) :] == fields[: len(records)]
    return got


def summary(result: RouteResult) -> dict[str, object]:
    return {d.app: (d.action.value, d.group, d.band) for d in (*result.routed, *result.filtered)} | {
        "errors": result.decode_errors
    }


def test_the_native_decider_reads_body_properties_and_ignores_headers_of_their_names() -> None:
    records = [
        MessageView("orders", [], 0, json.dumps({"customer": {"id": 7}, "price": 2.5, "qty": 2}).encode()),
        MessageView(
            "orders", [("CustomerId", b"7")], 0, b'{"customer": {"id": 8}, "items": [{"sku": "AB"}]}'
        ),
        MessageView("orders", [], 0, b'{"customer": {"id": "7"}, "price": 1e400, "qty": 1}'),
        MessageView("orders", [("CustomerId", b"7")], 0, b"not json"),
        MessageView("orders", [], 0, None),
    ]
    found = [summary(r) for r in decide(records)]
    assert found[0] == {
        "orders": ("route", "vip", 5),
        "audit": ("filtered", None, 0),
        "errors": {},
    }
    # The header CustomerId is audit's (a string header), never orders' (a body property).
    assert found[1] == {"orders": ("route", "sku", 0), "audit": ("route", "all", 0), "errors": {}}
    # Wrong types: CustomerId a string, Price not finite; counted per property.
    assert found[2] == {
        "orders": ("route", "rest", 0),
        "audit": ("filtered", None, 0),
        "errors": {"orders": {"CustomerId": 1, "Price": 1}},
    }
    # Undecodable: each of the four body properties counted once.
    every = {"orders": dict.fromkeys(("CustomerId", "Price", "Qty", "Sku"), 1)}
    assert found[3] == {"orders": ("route", "rest", 0), "audit": ("route", "all", 0), "errors": every}
    assert found[4] == {"orders": ("route", "rest", 0), "audit": ("filtered", None, 0), "errors": every}


def test_hostile_bodies_are_refused_fast_on_the_native_path() -> None:
    """A 1 MB document nested 100,000 deep, one byte over 1 MiB, 1 MB of garbage, 1 MB of one string and of an
    array of 200,000 numbers: each undecodable (or read) within the budget, with no recursion."""
    deep = b"[" * 100_000 + b"1" + b"]" * 100_000
    deep += b" " * (1_000_000 - len(deep))
    over = b'{"price": "' + b"x" * (MAX_BODY_BYTES - 12) + b'"}'
    assert len(over) == MAX_BODY_BYTES + 1
    garbage = bytes(range(256)) * 4000
    long_string = b'{"s": "' + b"\\u00e9" * 170_000 + b'", "qty": 3}'
    numbers = b'{"n": [' + b"1," * 200_000 + b'1], "qty": 3}'
    routing = table()
    for value, counted in ((deep, 4), (over, 4), (garbage, 4), (long_string, 0), (numbers, 0)):
        started = time.perf_counter()
        (result,) = Router().route_batch(routing, [MessageView("orders", [], 0, value)], {}, 0)
        elapsed = time.perf_counter() - started
        assert sum(result.decode_errors.get("orders", {}).values()) == counted, value[:20]
        assert elapsed < BUDGET, (value[:20], elapsed)


ORDER = {
    "type": "record",
    "name": "Order",
    "fields": [
        {"name": "note", "type": {"type": "array", "items": "string"}},  # skipped by its encoding
        {
            "name": "customer",
            "type": {"type": "record", "name": "C", "fields": [{"name": "id", "type": "long"}]},
        },
        {"name": "region", "type": ["null", {"type": "enum", "name": "R", "symbols": ["EU", "US"]}]},
        {"name": "next", "type": ["null", "Order"]},  # recursive
    ],
}


def avro(value: dict[str, object], schema: object = ORDER) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), value)
    return out.getvalue()


def framed(schema_id: int, body: bytes) -> bytes:
    return b"\x00" + schema_id.to_bytes(4, "big") + body


def order(customer: int, region: str | None = "EU", nested: int = 0) -> dict[str, object]:
    inner = order(customer, region, nested - 1) if nested else None
    return {"note": ["x"], "customer": {"id": customer}, "region": region, "next": inner}


def avro_table(plain_schema: str | None = json.dumps(ORDER)) -> NativeTable:
    """Three apps on one topic: plain Avro (``schema:``), Confluent's wire format, and JSON (properties of their
    own names: a property has one source)."""
    plain = AppConfig(
        name="plain",
        inputs=("orders",),
        format="avro",
        schema=plain_schema,
        properties={"Cust": "int", "Region": "string"},
        paths={"Cust": "/customer/id", "Region": "/region"},
        filter=("Cust == 7",),
    )
    wire = AppConfig(
        name="wire",
        inputs=("orders",),
        dialect="sql92",
        format="avro",
        properties={"WCust": "float", "WNext": "int"},
        paths={"WCust": "/customer/id", "WNext": "/next/customer/id"},
    )
    as_json = AppConfig(
        name="json", inputs=("orders",), format="json", properties={"J": "int"}, paths={"J": "/customer/id"}
    )
    groups = {
        ("plain", "eu"): GroupConfig("plain", "eu", (SubscriptionConfig('Region == "EU"'),)),
        ("wire", "big"): GroupConfig("wire", "big", (SubscriptionConfig("WCust > 5 AND WNext = 7"),)),
        ("json", "all"): GroupConfig("json", "all", (SubscriptionConfig("J > 0"),)),
    }
    built = build_table(Config(1, {"plain": plain, "wire": wire, "json": as_json}, groups))
    assert built.native is not None and built.native.decisions is not None
    assert built.native.decisions.framed
    return built


def test_avro_bodies_plain_and_framed_are_read_by_the_native_decider(monkeypatch: pytest.MonkeyPatch) -> None:
    """Plain Avro, Confluent's wire format (a known id, an id the registry lacks, another magic byte, a cut
    frame) and JSON on one topic: one native call decides them all, as ``Router.route`` does with the reference
    reader; each schema id is asked for once, and an id the registry lacked is asked again by the next batch."""
    routing = avro_table()
    asked: list[int] = []
    writers = {1: writer_schema(ORDER)}

    def writer_of(schema_id: int) -> WriterSchema | None:
        asked.append(schema_id)
        return writers.get(schema_id)

    body = avro(order(7, nested=1))
    records = [
        MessageView("orders", [], 0, body),  # plain reads it; wire: magic byte 14 (the array's count)
        MessageView("orders", [], 0, framed(1, body)),  # wire reads it; plain: garbage
        MessageView("orders", [], 0, framed(2, body)),  # an id the registry does not have
        MessageView("orders", [], 0, framed(1, avro(order(8, None)))),
        MessageView("orders", [], 0, b"\x01" + framed(1, body)[1:]),
        MessageView("orders", [], 0, b"\x00\x00\x01"),
        MessageView("orders", [], 0, b'{"customer": {"id": 3}}'),
        MessageView("orders", [], 0, None),
        MessageView("orders", [], 0, framed(1, body)[:-1]),  # truncated
    ]
    reference = Router()
    reference.writer_of = writers.get
    expected = [reference.route(routing, m, {}, 0) for m in records]
    routed_alone: list[MessageView] = []
    route = Router.route

    def counted(self: Router, table: RoutingTable, message: MessageView, *args: Any) -> RouteResult:
        routed_alone.append(message)
        return route(self, table, message, *args)

    monkeypatch.setattr(Router, "route", counted)
    native = Router()
    native.writer_of = writer_of
    got = native.route_batch(routing, records, {}, 0)
    assert routed_alone == []  # no record took the Python path
    assert [summary(r) for r in got] == [summary(r) for r in expected]
    assert sorted(asked) == [1, 2]
    found = [summary(r) for r in got]
    assert found[1]["wire"] == ("route", "big", 0) and found[1]["plain"] == ("filtered", None, 0)
    assert found[0]["plain"] == ("route", "eu", 0)
    assert found[2]["errors"]["wire"] == {"WCust": 1, "WNext": 1}  # type: ignore[index]
    assert found[3]["wire"] == ("pending", None, 0)  # no next: WNext missing, not counted
    assert "wire" not in found[3]["errors"]  # type: ignore[operator]
    native.route_batch(routing, records[:3], {}, 0)
    assert sorted(asked) == [1, 2, 2]  # 1 was learned; 2 may have come to the registry since


def test_a_registry_that_cannot_be_read_stops_the_batch_before_anything_is_decided() -> None:
    """What ``writer_of`` raises goes to the caller, as from ``Router.route``: the records are not decided as
    if their properties were missing. Without any writer schemas, the reference's error is raised."""
    routing = avro_table()

    class Unreachable(RuntimeError):
        pass

    def writer_of(schema_id: int) -> WriterSchema | None:
        raise Unreachable(str(schema_id))

    native = Router()
    native.writer_of = writer_of
    records = [MessageView("orders", [], 0, framed(4, avro(order(7))))]
    with pytest.raises(Unreachable):
        native.route_batch(routing, records, {}, 0)
    native.writer_of = None
    with pytest.raises(NoWriterSchemas):
        native.route_batch(routing, records, {}, 0)
    with pytest.raises(NoWriterSchemas):
        Router().route(routing, records[0], {}, 0)


def test_one_property_under_two_avro_schema_settings_routes_on_the_python_path() -> None:
    """Two apps reading one property, one under its ``schema:``, the other in Confluent's wire format: it has
    two values per record, so the table routes on the Python path (which decodes per environment)."""
    plain = AppConfig(
        name="a",
        inputs=("t",),
        format="avro",
        schema=json.dumps(ORDER),
        properties={"X": "int"},
        paths={"X": "/customer/id"},
    )
    wire = dataclasses.replace(plain, name="b", schema=None)
    built = build_table(Config(1, {"a": plain, "b": wire}, {}))
    assert built.native is None
    router = Router()
    router.writer_of = {1: writer_schema(ORDER)}.get
    (result,) = router.route_batch(built, [MessageView("t", [], 0, framed(1, avro(order(7))))], {}, 0)
    assert result.decode_errors == {"a": {"X": 1}}  # the frame is no plain Order; b reads it


def test_hostile_avro_bodies_are_refused_fast_on_the_native_path() -> None:
    """A recursive record a million levels deep (refused past 64), an array of a million strings skipped whole,
    a block count of 2^62 items and a body over 1 MiB: each within the budget."""
    deep = {"type": "record", "name": "D", "fields": [{"name": "next", "type": ["null", "D"]}]}
    strings = {
        "type": "record",
        "name": "S",
        "fields": [{"name": "s", "type": {"type": "array", "items": "string"}}],
    }
    app = AppConfig(
        name="h",
        inputs=("t",),
        format="avro",
        properties={"N": "int"},
        paths={"N": "/next/next/x"},
    )
    writers = {1: writer_schema(deep), 2: writer_schema(strings)}
    built = build_table(Config(1, {"h": app}, {}))
    counted = {"h": {"N": 1}}
    zigzag = 2 * 1_000_000  # a million items, as a 3-byte varint
    count = bytes([zigzag & 0x7F | 0x80, (zigzag >> 7) & 0x7F | 0x80, zigzag >> 14])
    cases = {
        "a million levels": (framed(1, b"\x02" * 1_000_000), counted),
        "a million strings": (framed(2, count + b"\x00" * 1_000_000 + b"\x00"), {}),  # read; no N there
        "2^62 items": (framed(2, b"\x80\x80\x80\x80\x80\x80\x80\x80\x80\x01" + b"\x00"), counted),
        "over 1 MiB": (framed(2, b"\x00" * MAX_BODY_BYTES), counted),
    }
    for what, (value, expected) in cases.items():
        router = Router()
        router.writer_of = writers.get
        started = time.perf_counter()
        (result,) = router.route_batch(built, [MessageView("t", [], 0, value)], {}, 0)
        elapsed = time.perf_counter() - started
        assert result.decode_errors == expected, what
        assert elapsed < BUDGET, (what, elapsed)


def test_a_table_reading_no_body_hands_over_no_values() -> None:
    built = build_table(Config(1, {"x": AppConfig(name="x", inputs=("orders",))}, {}))
    assert built.native is not None and built.native.decisions is not None
    assert not built.native.decisions.reads_body
