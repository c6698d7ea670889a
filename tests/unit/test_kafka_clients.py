"""The session's check for Kafka clients left open (tests/kafka_clients.py) finds each kind of client while it
is open, says what holds it, and lets it go once it is closed or dropped. No broker: the clients point at a
port nobody listens on, with their log silenced."""

from __future__ import annotations

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient

from tests.kafka_clients import open_clients

NOWHERE = {"bootstrap.servers": "127.0.0.1:1", "log_level": 0}


def _found(client: object) -> list[str]:
    return [text for c, text in open_clients() if c is client]


def test_an_open_producer_is_found_with_its_holder_and_a_closed_one_is_not() -> None:
    producer = Producer(NOWHERE)
    [text] = _found(producer)
    assert text.startswith("Producer, held by") and "a local of test_an_open_producer" in text
    producer.close()
    assert _found(producer) == []


def test_an_open_consumer_is_found_and_a_closed_one_is_not() -> None:
    consumer = Consumer({**NOWHERE, "group.id": "nobody"})
    assert len(_found(consumer)) == 1
    consumer.close()
    assert _found(consumer) == []


class _Holder:
    def __init__(self) -> None:
        self.admin = AdminClient(NOWHERE)


def test_an_admin_client_is_open_while_referenced_and_named_by_the_attribute_that_holds_it() -> None:
    holder = _Holder()
    [text] = _found(holder.admin)
    assert "test_kafka_clients._Holder [admin]" in text
    del holder.admin
    assert not [t for _, t in open_clients() if "_Holder" in t]
