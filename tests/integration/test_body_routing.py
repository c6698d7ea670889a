"""Routing on properties read from JSON record values (issue 25) on a real broker: a producer writes plain JSON
values, the worker routes on a nested field (/customer/id), an array element (/items/0/sku) and on a priority
computed from two body fields (band topics); bad bodies (not JSON, a null value, wrong types) are counted as
decode errors and land where their missing properties send them."""

from __future__ import annotations

import json

import pytest

from subroute import wire
from tests.integration.harness import apply, make_env, produce_raw, read, run_worker

pytestmark = pytest.mark.kafka

BODY_CONFIG = """
apps:
  orders:
    inputs: [INPUT]
    dialect: sql92
    format: json
    properties:
      CustomerId: {type: int, path: /customer/id}
      Sku: {type: string, path: /items/0/sku}
      Price: {type: int, path: /price}
      Qty: {type: int, path: /qty}
    priority: Price * Qty
    groups:
      vip: {subscriptions: [{expression: 'CustomerId = 7', priority: 10}]}
      books: {subscriptions: [{expression: "Sku LIKE 'BOOK-%'", priority: 5}]}
      rest: {}
"""


def body(document: object) -> bytes:
    return json.dumps(document).encode()


# (value, headers, where it goes: (group, band), decode errors it counts)
RECORDS: list[tuple[bytes | None, list[tuple[str, bytes | None]], tuple[str, int], int]] = [
    (body({"customer": {"id": 7}, "items": [{"sku": "BOOK-1"}], "price": 3, "qty": 2}), [], ("vip", 6), 0),
    (body({"customer": {"id": 8}, "items": [{"sku": "BOOK-2"}, {"sku": "PEN"}], "price": 100, "qty": 1}), [], ("books", 9), 0),
    (body({"items": [{"sku": "PEN"}, {"sku": "BOOK-3"}], "customer": {"id": 9}, "price": 0, "qty": 5}), [], ("rest", 0), 0),
    (body({"customer": {"id": 7, "name": "x"}, "price": 1, "qty": 4}), [], ("vip", 4), 0),
    (b"not json", [("CustomerId", b"7")], ("rest", 0), 4),  # a header of a body property's name is not read
    (body({"customer": {"id": "7"}, "items": [{"sku": 42}], "price": 2, "qty": 2}), [], ("rest", 4), 2),
    (None, [], ("rest", 0), 4),
    (body({"customer": {"id": 7}, "price": 2.5, "qty": 2}), [], ("vip", 0), 1),  # Price is an int
    (b' {"customer": {"id": null}, "items": [], "price": 3, "qty": 3}\n', [], ("rest", 9), 0),
]  # fmt: skip


def test_the_worker_routes_on_json_body_fields(kafka, unique) -> None:
    env = make_env(kafka.bootstrap_servers, unique)
    assert apply(env, BODY_CONFIG) == 0
    produce_raw(env, [(f"k{i}".encode(), value, headers) for i, (value, headers, _, _) in enumerate(RECORDS)])
    metrics = run_worker(env)

    found: dict[bytes, tuple[str, int]] = {}
    for group in ("vip", "books", "rest"):
        for band in range(wire.LOWEST_BAND, wire.HIGHEST_BAND + 1):
            for message in read(env, wire.band_topic(env.prefix, "orders", group, band)):
                key = message.key()
                assert key not in found, key  # each record once
                found[key] = (group, band)
    assert found == {f"k{i}".encode(): where for i, (_, _, where, _) in enumerate(RECORDS)}
    assert read(env, wire.pending_topic(env.prefix, "orders")) == []
    counted = sum(errors for *_, errors in RECORDS)
    assert metrics.property_decode_errors.labels("orders")._value.get() == counted
