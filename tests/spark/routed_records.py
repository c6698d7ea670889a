"""Helpers for the Spark tests: topics and records shaped like the router's output on a real broker."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass

# The test records' producer timestamps start at midnight UTC at the start of yesterday: recent, in the past, and
# all on one calendar day. A broker deletes records older than its time retention (Kafka's default 7 days, checked
# 30 s after it starts and every 5 minutes after), whatever their offsets: fixed dates in the past made a check
# that ran between producing and reading empty the topics, and a Spark run then landed nothing.
BASE_DATE = dt.datetime.now(dt.UTC).date() - dt.timedelta(days=1)
BASE_TIMESTAMP_MS = int(dt.datetime.combine(BASE_DATE, dt.time(), dt.UTC).timestamp() * 1000)


@dataclass(frozen=True)
class Produced:
    """Where a record landed and what it carried."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes
    timestamp_ms: int
    routed_at_ms: int


def create_topics(bootstrap: str, partitions: dict[str, int]) -> None:
    from subroute.kafka import clients
    from subroute.ops.settings import Settings

    settings = Settings(bootstrap_servers=bootstrap)
    clients.ensure_topics(
        clients.admin_client(settings),
        [clients.TopicSpec(name, count) for name, count in partitions.items()],
    )


def produce_routed(
    bootstrap: str,
    topic: str,
    values: list[bytes],
    *,
    app: str,
    group: str,
    partitions: int = 1,
    base_timestamp_ms: int = BASE_TIMESTAMP_MS,
    latency_ms: Callable[[int], int] = lambda i: 1 + i % 100,
) -> list[Produced]:
    """Records as the router writes them to a group topic: routing headers, producer timestamp kept."""
    from confluent_kafka import Producer

    from subroute import wire
    from subroute.kafka.clients import close_producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    delivered: dict[int, tuple[int, int]] = {}
    failures: list[object] = []
    for i, value in enumerate(values):
        timestamp = base_timestamp_ms + i
        headers: list[tuple[str, bytes | None]] = [
            ("Region", b"EU"),
            (wire.APP, app.encode()),
            (wire.GROUP, group.encode()),
            (wire.SUBSCRIPTION, f"{app}/{group}/0".encode()),
            (wire.SOURCE, wire.source_of("orders", 0, i).encode()),
            (wire.CONFIG_VERSION, b"7"),
            (wire.ROUTED_AT, str(timestamp + latency_ms(i)).encode()),
        ]

        def on_delivery(err: object, msg: object, i: int = i) -> None:
            if err is not None:
                failures.append(err)
            else:
                delivered[i] = (msg.partition(), msg.offset())  # type: ignore[attr-defined]

        producer.produce(
            topic,
            value=value,
            key=None if i % 5 == 0 else f"k{i}".encode(),
            headers=headers,
            partition=i % partitions,
            timestamp=timestamp,
            on_delivery=on_delivery,
        )
        producer.poll(0)
    producer.flush(30)
    close_producer(producer)
    assert not failures, failures
    return [
        Produced(
            topic,
            *delivered[i],
            None if i % 5 == 0 else f"k{i}".encode(),
            value,
            base_timestamp_ms + i,
            base_timestamp_ms + i + latency_ms(i),
        )
        for i, value in enumerate(values)
    ]


def sample_orders(count: int, seed: int) -> tuple[list[dict[str, object]], list[bytes]]:
    """Orders in the demo's payload schema (schemas/order.avsc) and their schemaless Avro encoding."""
    import io

    import fastavro

    from subroute.spark import avro

    schema = fastavro.parse_schema(avro.load_schema("order"))
    orders: list[dict[str, object]] = []
    encoded: list[bytes] = []
    for i in range(count):
        order = {
            "order_id": f"o-{seed}-{i}",
            "customer_id": 1000 + i,
            "amount": 100 * i + seed,
            "order_type": ("EXPRESS", "STANDARD", "BULK")[i % 3],
            "express": i % 3 == 0,
            "created_at": 1_767_225_600_000 + i,
        }
        buffer = io.BytesIO()
        fastavro.schemaless_writer(buffer, schema, order)
        orders.append(order)
        encoded.append(buffer.getvalue())
    return orders, encoded
