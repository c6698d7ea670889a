"""``publish``: a message to an app's ``default_publish`` topic (AMPS DefaultPublishTarget), written and
acknowledged before it returns. The router then takes it like any other input of the app."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from confluent_kafka import KafkaError, Message, Producer

from subroute.client.messages import QueueError
from subroute.config.model import AppConfig
from subroute.kafka import clients
from subroute.ops.settings import Settings
from subroute.wire import Headers


def publish(
    settings: Settings,
    app: str,
    value: bytes | None,
    headers: Mapping[str, str] | None = None,
    key: bytes | None = None,
    *,
    app_config: AppConfig,
) -> tuple[str, int, int]:
    """Write a message to the app's ``default_publish`` topic (AMPS DefaultPublishTarget): (topic, partition,
    offset). The router then takes it like any other input of the app. ``app_config``: the app as configured
    (``subroute.config.store.read_app``)."""
    config = app_config
    if not config.default_publish:
        raise QueueError(f"app {app!r} has no default_publish topic")
    producer = clients.producer(settings)
    encoded: Headers = [(k, v.encode()) for k, v in (headers or {}).items()]
    partition, offset = _produce_sync(producer, config.default_publish, value, key, encoded)
    return config.default_publish, partition, offset


def _produce_sync(
    producer: Producer,
    topic: str,
    value: bytes | None,
    key: bytes | None,
    headers: Headers,
    *,
    partition: int | None = None,
    timestamp: int = 0,
    timeout: float = 30.0,
) -> tuple[int, int]:
    """Produce one record and wait for the broker's acknowledgement; (partition, offset) of the record."""
    result: list[Message] = []
    errors: list[KafkaError] = []

    def delivered(error: KafkaError | None, message: Message) -> None:
        if error is not None:
            errors.append(error)
        else:
            result.append(message)

    kwargs: dict[str, Any] = {"value": value, "key": key, "headers": headers, "on_delivery": delivered}
    if partition is not None:
        kwargs["partition"] = partition
    if timestamp > 0:
        kwargs["timestamp"] = timestamp
    producer.produce(topic, **kwargs)
    producer.flush(timeout)
    if errors or not result:
        raise QueueError(f"could not write to {topic}: {errors[0] if errors else 'timed out'}")
    return cast(int, result[0].partition()), cast(int, result[0].offset())
