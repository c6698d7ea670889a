"""What has stopped leaves no Kafka client open: a worker (even while its caller keeps its metrics, which read
the worker's gauges) and a consumer client. A client left open keeps connecting to the cluster and, once the
cluster is gone (the end of `make demo`, of a test session), prints librdkafka's "Connection refused" every
few seconds."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.integration.client_support import put, queue, take
from tests.integration.harness import apply, make_env, produce, run_worker
from tests.kafka_clients import open_clients

pytestmark = pytest.mark.kafka

APP = "apps:\n  a:\n    inputs: [INPUT]\n    groups:\n      g: {}\n"


def opened_by(action: Callable[[], object]) -> list[str]:
    """The clients ``action`` opened that are still open when it returns."""
    before = [client for client, _ in open_clients()]  # held: an id alone could be a new client's
    action()
    return [text for client, text in open_clients() if not any(client is b for b in before)]


def test_a_stopped_worker_has_closed_every_kafka_client_it_opened(kafka, unique) -> None:
    env = make_env(kafka.bootstrap_servers, unique)
    assert apply(env, APP) == 0
    produce(env, [{"n": 1}])
    runs = []
    assert opened_by(lambda: runs.append(run_worker(env, idle=1.0))) == []
    assert runs[0].messages_in._value.get() == 1  # it ran, and its metrics are still held here


def test_a_closed_queue_consumer_has_closed_every_kafka_client_it_opened(kafka, unique) -> None:
    env = make_env(kafka.bootstrap_servers, unique)
    assert apply(env, APP) == 0
    put(env, "a", "g", [("job", 1)])
    held = []

    def consume() -> None:
        with queue(env, "a", "g") as consumer:
            held.append(consumer)  # the caller keeps it after close
            consumer.ack(take(consumer))

    assert opened_by(consume) == []
