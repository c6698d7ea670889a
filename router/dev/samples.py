"""Sample orders for the demo, tests and benchmarks: Avro payloads (schemas/order.avsc) and typed headers."""

from __future__ import annotations

import io
import random
import time
from collections.abc import Iterator
from dataclasses import dataclass

import fastavro

from subroute import wire
from subroute.schemas import load_schema

ORDER_TYPES = ("EXPRESS", "STANDARD", "BULK")
REGIONS = ("EU", "US", "APAC", "LATAM")


@dataclass(frozen=True)
class SampleRecord:
    key: bytes
    value: bytes
    headers: wire.Headers


def encode_order(order: dict[str, object]) -> bytes:
    buffer = io.BytesIO()
    fastavro.schemaless_writer(buffer, load_schema("order"), order)
    return buffer.getvalue()


def orders(
    count: int, seed: int = 7, customers: int = 1000, guest_share: float = 0.02
) -> Iterator[SampleRecord]:
    """Orders with headers CustomerId, Amount, OrderType, Express, Region; a few guests have no CustomerId."""
    rng = random.Random(seed)
    now = int(time.time() * 1000)
    for i in range(count):
        customer = rng.randrange(customers)
        amount = int(rng.paretovariate(1.2) * 300)
        order_type = rng.choice(ORDER_TYPES)
        express = order_type == "EXPRESS" or rng.random() < 0.1
        region = rng.choice(REGIONS)
        order_id = f"o-{seed}-{i}"
        value = encode_order(
            {
                "order_id": order_id,
                "customer_id": customer,
                "amount": amount,
                "order_type": order_type,
                "express": express,
                "created_at": now,
            }
        )
        headers: wire.Headers = [
            ("Amount", str(amount).encode()),
            ("OrderType", order_type.encode()),
            ("Express", b"true" if express else b"false"),
            ("Region", region.encode()),
        ]
        if rng.random() >= guest_share:
            headers.insert(0, ("CustomerId", str(customer).encode()))
        yield SampleRecord(order_id.encode(), value, headers)
