"""Sample orders for the demo and its tests: each order as a JSON value (topic ``orders``) and as schemaless
Avro written with examples/order.avsc (topic ``orders-avro``), the data in the body as most Kafka producers
write it; the Avro copy carries one header, ``Customer``, the message-group id of app ``carts``."""

from __future__ import annotations

import io
import json
import random
import time
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import fastavro

from subroute import wire

ORDER_TYPES = ("EXPRESS", "STANDARD", "BULK")
REGIONS = ("EU", "US", "APAC", "LATAM")
# examples/order.avsc: the app schema file of the demo's Avro app (router/dev/samples.py -> the checkout)
ORDER_SCHEMA = Path(__file__).resolve().parents[2] / "examples" / "order.avsc"


@dataclass(frozen=True)
class SampleRecord:
    key: bytes
    value: bytes
    headers: wire.Headers


@dataclass(frozen=True)
class SampleOrder:
    """One order, in the two encodings the demo writes."""

    json: SampleRecord
    avro: SampleRecord


@cache
def _order_schema() -> Any:
    return fastavro.parse_schema(json.loads(ORDER_SCHEMA.read_text()))


def encode_order(order: dict[str, object]) -> bytes:
    """Schemaless Avro with examples/order.avsc, as the demo's Avro producer writes it."""
    buffer = io.BytesIO()
    fastavro.schemaless_writer(buffer, _order_schema(), order)
    return buffer.getvalue()


def orders(
    count: int, seed: int = 7, customers: int = 1000, guest_share: float = 0.02
) -> Iterator[SampleOrder]:
    """Orders with a nested customer id (a few guests have none: ``customer`` is null), a region, a type, an
    express flag, a unit price and a quantity (small numbers: their product, AMPS's ``/price * /qty``, spreads
    over the priority bands 0..9) and an amount."""
    rng = random.Random(seed)
    now = int(time.time() * 1000)
    for i in range(count):
        customer = rng.randrange(customers)
        amount = int(rng.paretovariate(1.2) * 300)
        order_type = rng.choice(ORDER_TYPES)
        express = order_type == "EXPRESS" or rng.random() < 0.1
        region = rng.choice(REGIONS)
        price, qty = rng.randint(1, 5), rng.randint(1, 3)
        guest = rng.random() < guest_share
        order_id = f"o-{seed}-{i}"
        order: dict[str, Any] = {
            "order_id": order_id,
            "customer": None if guest else {"id": customer},
            "region": region,
            "type": order_type,
            "express": express,
            "price": price,
            "qty": qty,
            "amount": amount,
            "created_at": now,
        }
        key = order_id.encode()
        headers: wire.Headers = [] if guest else [("Customer", str(customer).encode())]
        yield SampleOrder(
            json=SampleRecord(key, json.dumps(order, separators=(",", ":")).encode(), []),
            avro=SampleRecord(key, encode_order(order), headers),
        )
