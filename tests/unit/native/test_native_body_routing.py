"""Body properties on the native decision path (issue 25): a table whose apps read JSON bodies is decided by the
native decider (not handed to the Python path), as ``Router.route`` decides it, and hostile bodies are refused
there in linear time, each within a per-evaluation budget (bounded-evaluation tests: a budget far above what one
batch takes, far below what a quadratic or recursive reading of these bodies would)."""

from __future__ import annotations

import json
import time

from subroute.config.model import AppConfig, Config, GroupConfig, SubscriptionConfig
from subroute.routing.body import MAX_BODY_BYTES
from subroute.routing.decisions import MessageView, Router, RouteResult
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
        "errors": {"orders": 2},
    }
    # Undecodable: each of the four body properties counted once.
    assert found[3] == {"orders": ("route", "rest", 0), "audit": ("route", "all", 0), "errors": {"orders": 4}}
    assert found[4] == {
        "orders": ("route", "rest", 0),
        "audit": ("filtered", None, 0),
        "errors": {"orders": 4},
    }


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
        assert result.decode_errors == ({"orders": counted} if counted else {}), value[:20]
        assert elapsed < BUDGET, (value[:20], elapsed)


def test_a_table_reading_avro_bodies_routes_on_the_python_path() -> None:
    """The native core reads JSON only: another format leaves the table to ``Router.route``."""
    app = AppConfig(
        name="a", inputs=("t",), format="avro", properties={"X": "int"}, paths={"X": "/x"}, filter=("X == 1",)
    )
    built = build_table(Config(1, {"a": app}, {}))
    assert built.native is None


def test_a_table_reading_no_body_hands_over_no_values() -> None:
    built = build_table(Config(1, {"x": AppConfig(name="x", inputs=("orders",))}, {}))
    assert built.native is not None and built.native.decisions is not None
    assert not built.native.decisions.reads_body
