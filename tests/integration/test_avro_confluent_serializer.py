"""Values written by confluent-kafka's own ``AvroSerializer`` (Confluent's wire format, the writer schema registered in
a real Schema Registry) through Apache Kafka are read back, path by path, by the reference (routing/body_avro.py)
and by the native reader alike, each with the writer schema of its own id (two versions of the schema here)."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, Producer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from subroute.kafka.schema_registry import RegistrySettings, WriterSchemas
from subroute.routing import body_avro
from subroute.routing.native_avro import NativeAvroReader
from tests.conftest import KafkaCluster


@dataclass(frozen=True)
class Read:
    name: str
    path: str
    declared: str | None = None

    @property
    def tokens(self) -> tuple[str, ...]:
        return tuple(self.path[1:].split("/"))


def order_schema(version: int) -> dict[str, Any]:
    fields: list[dict[str, Any]] = [
        {
            "name": "customer",
            "type": {
                "type": "record",
                "name": "Customer",
                "fields": [
                    {"name": "id", "type": "long"},
                    {"name": "tier", "type": {"type": "enum", "name": "Tier", "symbols": ["gold", "silver"]}},
                ],
            },
        },
        {
            "name": "items",
            "type": {
                "type": "array",
                "items": {
                    "type": "record",
                    "name": "Item",
                    "fields": [{"name": "sku", "type": "string"}, {"name": "qty", "type": "int"}],
                },
            },
        },
        {"name": "price", "type": "double"},
        {"name": "coupon", "type": ["null", "string"], "default": None},
        {"name": "attributes", "type": {"type": "map", "values": "string"}, "default": {}},
    ]
    if version == 2:  # a field before the others: the body's layout moves, the paths do not
        fields.insert(0, {"name": "channel", "type": "string", "default": "web"})
    return {"type": "record", "name": "Order", "namespace": "shop", "fields": fields}


ORDERS = [
    (
        1,
        {
            "customer": {"id": 42, "tier": "gold"},
            "items": [{"sku": "A-1", "qty": 2}, {"sku": "B-7", "qty": 1}],
            "price": 19.5,
            "coupon": None,
            "attributes": {"gift": "yes"},
        },
    ),
    (
        2,
        {
            "channel": "app",
            "customer": {"id": -7, "tier": "silver"},
            "items": [{"sku": "C-3", "qty": 5}],
            "price": 3.25,
            "coupon": "WINTER",
            "attributes": {},
        },
    ),
]
READS = [
    Read("CustomerId", "/customer/id", "int"),
    Read("Tier", "/customer/tier"),
    Read("Sku", "/items/0/sku", "string"),
    Read("SecondQty", "/items/1/qty"),
    Read("Price", "/price"),
    Read("Coupon", "/coupon"),
    Read("Gift", "/attributes/gift"),
    Read("Wrong", "/price", "string"),
]
EXPECTED = [
    (
        {
            "CustomerId": 42,
            "Tier": "gold",
            "Sku": "A-1",
            "SecondQty": 1,
            "Price": 19.5,
            "Gift": "yes",
        },
        {"Wrong": 1},
    ),
    ({"CustomerId": -7, "Tier": "silver", "Sku": "C-3", "Price": 3.25, "Coupon": "WINTER"}, {"Wrong": 1}),
]


def _produced_and_consumed(kafka: KafkaCluster, registry: SchemaRegistryClient, topic: str) -> list[bytes]:
    producer = Producer({"bootstrap.servers": kafka.bootstrap_servers})
    for version, order in ORDERS:
        serialize = AvroSerializer(registry, json.dumps(order_schema(version)))
        value = serialize(order, SerializationContext(topic, MessageField.VALUE))
        producer.produce(topic, value=value)
    assert producer.flush(30) == 0
    consumer = Consumer(
        {"bootstrap.servers": kafka.bootstrap_servers, "group.id": topic, "auto.offset.reset": "earliest"}
    )
    try:
        consumer.subscribe([topic])
        values: list[bytes] = []
        deadline = time.monotonic() + 60
        while len(values) < len(ORDERS) and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                values.append(message.value())
    finally:
        consumer.close()
    return values


def test_values_the_avro_serializer_wrote_are_read_by_path_by_reference_and_native_alike(
    kafka: KafkaCluster, schema_registry: str, unique: str
) -> None:
    registry = SchemaRegistryClient({"url": schema_registry})
    values = _produced_and_consumed(kafka, registry, unique)
    assert len(values) == len(ORDERS)
    schemas = WriterSchemas(RegistrySettings.of(schema_registry), body_avro.writer_schema_chain)
    ids = [body_avro.schema_id(value) for value in values]
    assert None not in ids and len(set(ids)) == 2  # two versions, two ids
    for value, expected in zip(values, EXPECTED, strict=True):
        assert body_avro.read_framed(value, READS, schemas.get) == expected
        writer = schemas.get(body_avro.schema_id(value) or 0)
        assert writer is not None
        props, failures = NativeAvroReader(writer, READS).read(value[body_avro.WIRE_HEADER_BYTES :])
        assert ({k: (type(v), v) for k, v in props.items()}, failures) == (
            {k: (type(v), v) for k, v in expected[0].items()},
            expected[1],
        )
    # the apply-time check knows the registered schema as the producer wrote it
    latest = schemas.get(ids[1] or 0)
    assert latest is not None
    assert body_avro.schema_property_type(latest, "/items/0/qty", ("items", "0", "qty"), None) == "int"
