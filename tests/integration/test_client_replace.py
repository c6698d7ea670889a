"""Seed 001 (AMPS message queues), replace: "The queue consumer is guaranteed that, after the replace occurs,
only messages that match the new subscription will be delivered." The router, the config store and the consumer
client together on the real broker."""

from __future__ import annotations

import pytest

from subroute import wire
from subroute.config.store import ConfigStore, read_config
from tests.integration.client_support import queue, take, text
from tests.integration.harness import apply, header, make_env, produce, read, run_worker

pytestmark = pytest.mark.kafka

BEFORE = """
apps:
  shop:
    inputs: [INPUT]
    properties: {Size: int}
    presence: ignored  # no consumer of small is attached while the router routes
    groups:
      workers:
        subscriptions:
          - {expression: 'Size > 0'}
      small:
        subscriptions:
          - {expression: 'Size < 0'}
"""

AFTER = BEFORE.replace("Size > 0", "Size > 5").replace("Size < 0", "Size <= 5")


def test_after_a_replace_only_messages_matching_the_new_subscription_are_delivered(kafka, unique) -> None:
    env = make_env(kafka.bootstrap_servers, unique)
    assert apply(env, BEFORE) == 0
    produce(env, [{"Size": 3}, {"Size": 10}])  # m0, m1
    run_worker(env)  # both to workers, under the first version
    assert sorted(m.value() for m in read(env, env.topic("shop", "workers"))) == [b"m0", b"m1"]

    assert apply(env, AFTER) == 0  # workers now take Size > 5 only; small takes the rest
    version = read_config(env.settings).version
    with ConfigStore(env.settings, build=lambda config: None) as store:
        assert store.wait_version(version, timeout=30)
        with queue(env, "shop", "workers", current_config=lambda: store.snapshot()[0]) as q:
            delivered = take(q)
            assert text(delivered) == "m1"  # routed under the old subscription, but matches the new one
            q.ack(delivered)
            assert q.poll(2.0) is None  # m0 does not match Size > 5: not delivered
            assert q.stats.replaced == 1

    [parked] = read(env, wire.pending_topic(env.prefix, "shop"))
    assert parked.value() == b"m0"
    assert header(parked, wire.PENDING_REASON) == "replaced"
    assert [e["event"] for e in wire.history_of(parked.headers())] == ["replaced"]

    run_worker(env)  # the router routes it again, under the version in force: to small
    [rerouted] = read(env, env.topic("shop", "small"))
    assert rerouted.value() == b"m0"
    assert header(rerouted, wire.SUBSCRIPTION) == "Size <= 5"
    assert header(rerouted, wire.REDRIVEN) == "pending"
    assert header(rerouted, wire.CONFIG_VERSION) == str(version)
    # A plain Kafka consumer of the group topic sees what was routed there, as before.
    assert sorted(m.value() for m in read(env, env.topic("shop", "workers"))) == [b"m0", b"m1"]
