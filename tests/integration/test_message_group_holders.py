"""One consumer group at a time holds a message group (seed 002; README, Routing, step 5), end to end on a real
broker: while a message group has records on a group's topic that the group has not committed past, its next
messages go there too, whatever subscription they match; once the group commits past them, the next message is
placed by its own subscription. A worker that starts reads that back from the group topics. And a message
group's waiting records share one pending partition (issue 22, items 3 and 4)."""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable

import pytest
from confluent_kafka import Consumer, TopicPartition

from subroute import wire
from tests.integration.harness import (
    BackgroundWorker,
    Env,
    apply,
    header,
    make_env,
    produce,
    read,
    run_worker,
)

pytestmark = pytest.mark.kafka

SPLIT = """
apps:
  billing:
    inputs: [INPUT]
    properties: {Cust: string, Amt: int}
    group_by: Cust
    groups:
      vip: {subscriptions: [{expression: 'Amt > 1000'}]}
      general: {subscriptions: [{expression: 'Amt == 10'}]}
"""


def wait_for(condition: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.1)


def placed(env: Env) -> dict[str, list[tuple[str, str]]]:
    """Per group, (message group, Amt) of each record on its topic, in order."""
    return {
        group: [(m.key().decode(), header(m, "Amt") or "") for m in read(env, env.topic("billing", group))]
        for group in ("vip", "general")
    }


def confirm(env: Env, group: str) -> None:
    """Commit ``group``'s consumer group past everything on its topic (what a consumer that acknowledged it all
    does)."""
    topic = env.topic("billing", group)
    consumer = Consumer(
        env.settings.client_config(
            {
                "group.id": wire.consumer_group_id(env.prefix, "billing", group),
                "enable.auto.commit": False,
            }
        )
    )
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        ends = [
            TopicPartition(topic, p, consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1])
            for p in partitions
        ]
        consumer.commit(offsets=ends, asynchronous=False)
    finally:
        consumer.close()


def held(worker: BackgroundWorker) -> float | None:
    """subroute_message_groups_held{app="billing"} as a scrape reads it (None: no series)."""
    return worker.metrics.registry.get_sample_value("subroute_message_groups_held", {"app": "billing"})


# Exactly-once: the transaction's delivery reports give the offsets that release a message group.
@pytest.mark.parametrize("guarantee", ["at-least-once", "exactly-once"])
def test_a_message_group_stays_on_its_group_until_confirmed_whatever_subscription_matches(
    kafka, unique, guarantee: str
) -> None:
    env = make_env(kafka.bootstrap_servers, unique)
    assert apply(env, SPLIT) == 0
    with BackgroundWorker(env, capacity_refresh_seconds=0.5, guarantee=guarantee) as worker:
        # A's first message matches general's subscription, its second vip's: both go to general, which holds
        # the group while its first message is unconfirmed (one batch: the second follows the first there).
        produce(env, [{"Cust": "A", "Amt": 10}, {"Cust": "A", "Amt": 5000}, {"Cust": "B", "Amt": 5000}])
        wait_for(lambda: sum(map(len, placed(env).values())) == 3, "the first three records routed")
        assert placed(env) == {"vip": [("B", "5000")], "general": [("A", "10"), ("A", "5000")]}
        # measured since, and general has confirmed nothing: A (on general) and B (on vip) are still held
        wait_for(lambda: held(worker) == 2, "a measurement holding both message groups")
        produce(env, [{"Cust": "A", "Amt": 5000}])
        wait_for(lambda: len(placed(env)["general"]) == 3, "A's third message routed to general")
        confirm(env, "general")
        # general has committed past all of A's messages: A is free, B (unconfirmed on vip) is not
        wait_for(lambda: held(worker) == 1, "A released once general committed past it")
        produce(env, [{"Cust": "A", "Amt": 5000}])
        wait_for(lambda: len(placed(env)["vip"]) == 2, "A's fourth message routed")
    assert placed(env) == {
        "vip": [("B", "5000"), ("A", "5000")],
        "general": [("A", "10"), ("A", "5000"), ("A", "5000")],
    }


def test_a_worker_that_starts_reads_back_which_group_holds_a_message_group(kafka, unique) -> None:
    env = make_env(kafka.bootstrap_servers, unique)
    assert apply(env, SPLIT) == 0
    produce(env, [{"Cust": "A", "Amt": 10}])
    run_worker(env)
    # A new worker (a restart, or another taking the partition over) finds A unconfirmed on general's topic.
    produce(env, [{"Cust": "A", "Amt": 5000}])
    run_worker(env)
    assert placed(env) == {"vip": [], "general": [("A", "10"), ("A", "5000")]}
    confirm(env, "general")
    produce(env, [{"Cust": "A", "Amt": 5000}])
    run_worker(env)  # nothing unconfirmed to read back: placed by its subscription
    assert placed(env)["vip"] == [("A", "5000")]


def test_a_message_groups_waiting_records_share_one_pending_partition(kafka, unique) -> None:
    env = make_env(kafka.bootstrap_servers, unique, partitions=3)
    nobody = """
apps:
  carts:
    inputs: [INPUT]
    properties: {Cart: string, Seq: int}
    group_by: Cart
    presence: required
    groups:
      g: {}
"""
    assert apply(env, nobody) == 0
    # Producers key by Seq, not by cart: each cart's records come from every input partition.
    produce(env, [{"Cart": f"c{i % 4}", "Seq": i} for i in range(40)], key_by="Seq")
    run_worker(env)  # no consumer of g attached: every record waits (no-consumer)
    where: dict[str, set[int]] = defaultdict(set)
    parked = read(env, wire.pending_topic(env.prefix, "carts"))
    assert len(parked) == 40
    for m in parked:
        assert header(m, wire.PENDING_REASON) == "no-consumer"
        where[m.key().decode()].add(m.partition())
    assert set(where) == {"c0", "c1", "c2", "c3"}
    assert all(len(partitions) == 1 for partitions in where.values()), where
