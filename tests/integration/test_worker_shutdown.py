"""A worker that has stopped leaves no Kafka client open, even while its caller keeps its metrics (which read
the worker's gauges): a client left open keeps connecting to the cluster, and once the cluster is gone (the end
of `make demo`, of a test session) prints librdkafka's "Connection refused" every few seconds."""

from __future__ import annotations

import pytest

from tests.integration.harness import apply, make_env, produce, run_worker
from tests.kafka_clients import open_clients

pytestmark = pytest.mark.kafka


def test_a_stopped_worker_has_closed_every_kafka_client_it_opened(kafka, unique) -> None:
    env = make_env(kafka.bootstrap_servers, unique)
    assert apply(env, "apps:\n  a:\n    inputs: [INPUT]\n    groups:\n      g: {}\n") == 0
    produce(env, [{"n": 1}])
    before = [client for client, _ in open_clients()]  # held: an id alone could be a new client's
    metrics = run_worker(env, idle=1.0)
    assert metrics.messages_in._value.get() == 1  # it ran, and its metrics are still held here
    assert [text for client, text in open_clients() if not any(client is b for b in before)] == []
