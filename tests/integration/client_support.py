"""Helpers for the consumer-client tests: routed-style records written straight to a group topic, and offsets."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from subroute import wire
from subroute.client import QueueConsumer, QueueMessage
from subroute.config.store import read_app
from subroute.kafka.clients import admin_client, close_producer, topic_settings
from tests.integration.harness import Env

# Tansu's first join waits session.timeout.ms / 2 (docs/brokers.md); 6 s suits every broker.
CONSUMER_CONFIG = {"session.timeout.ms": 6000}


def queue(env: Env, app: str, group: str, **options: Any) -> QueueConsumer:
    options.setdefault("app_config", read_app(env.settings, app))
    return QueueConsumer(env.settings, app, group, consumer_config=CONSUMER_CONFIG, **options)


def put(
    env: Env,
    app: str,
    group: str,
    records: Sequence[tuple[str, int | None]],
    *,
    topic: str | None = None,
    key: bytes | None = None,
    headers: Sequence[tuple[str, bytes]] = (),
    timestamp: int = 0,
    partition: int = 0,
) -> None:
    """Write records as the router would: ``(value, source offset or None)`` each, with the routing headers, to
    ``partition`` of the group topic (or ``topic``)."""
    producer = Producer(env.settings.client_config({"linger.ms": 5, "enable.idempotence": True}))
    for value, source in records:
        routing = [(wire.APP, app.encode()), (wire.GROUP, group.encode())]
        if source is not None:
            routing.append((wire.SOURCE, wire.source_of(env.input, 0, source).encode()))
        kwargs: dict[str, Any] = {"value": value.encode(), "key": key, "headers": [*routing, *headers]}
        if timestamp:
            kwargs["timestamp"] = timestamp
        producer.produce(topic or env.topic(app, group), partition=partition, **kwargs)
    producer.flush(30)
    close_producer(producer)


def committed(env: Env, app: str, group: str, partition: int = 0) -> int:
    """The group's committed offset on partition ``partition`` of its group topic (-1001: none)."""
    consumer = Consumer(
        env.settings.client_config({"group.id": wire.consumer_group_id(env.prefix, app, group)})
    )
    try:
        [tp] = consumer.committed([TopicPartition(env.topic(app, group), partition)], timeout=10)
        return tp.offset
    finally:
        consumer.close()


def take(q: QueueConsumer, timeout: float = 15.0) -> QueueMessage:
    message = q.poll(timeout)
    assert message is not None, "no message delivered"
    return message


def text(message: QueueMessage) -> str:
    assert message.value is not None
    return message.value.decode()


def refuse_writes(env: Env, topic: str, refuse: bool = True) -> None:
    """Make the broker refuse every new record of ``topic`` (its ``max.message.bytes`` lowered below any
    record's size), or accept them again (the topic's setting removed). A real broker-side failure: the
    producer gets a permanent delivery error, no mock involved."""
    admin = admin_client(env.settings)
    operation = AlterConfigOpType.SET if refuse else AlterConfigOpType.DELETE
    entry = ConfigEntry("max.message.bytes", "64", incremental_operation=operation)
    resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[entry])
    admin.incremental_alter_configs([resource])[resource].result(30)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        _, settings = topic_settings(admin, topic)
        if (settings.get("max.message.bytes") == "64") == refuse:
            break
        time.sleep(0.1)
    else:
        raise AssertionError(f"max.message.bytes of {topic} not changed")
    time.sleep(0.5)  # the broker applies a topic's new settings to its log just after it reports them


def put_dead_letters(
    env: Env,
    app: str,
    group: str,
    count: int,
    *,
    reasons: Sequence[str] = ("rejected",),
    value: bytes = b"",
) -> None:
    """Write ``count`` dead letters as the client would (value ``dl<i>`` + ``value``, reason by turns, the
    routing headers), spread over the dead-letter topic's partitions."""
    producer = Producer(env.settings.client_config({"linger.ms": 5, "enable.idempotence": True}))
    for i in range(count):
        headers = [
            (wire.APP, app.encode()),
            (wire.GROUP, group.encode()),
            (wire.SOURCE, wire.source_of(env.input, 0, i).encode()),
            (wire.DLQ_REASON, reasons[i % len(reasons)].encode()),
        ]
        producer.produce(
            wire.dlq_topic(env.prefix, app),
            value=f"dl{i}".encode() + value,
            key=str(i).encode(),
            headers=headers,
        )
        if i % 10_000 == 9_999:
            producer.flush(30)
    producer.flush(30)
    close_producer(producer)
