"""Router and consumer client together (seed 001): several underlying topics, priority, expiration."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Producer

from subroute import wire
from subroute.cli import main as cli
from subroute.client import QueueMessage
from subroute.kafka.clients import TopicSpec, admin_client, ensure_topics
from tests.integration.client_support import committed, put, queue, take, text
from tests.integration.harness import apply, header, make_env, produce, read, run_worker

pytestmark = pytest.mark.kafka


def test_several_underlying_topics_and_default_publish_targets(kafka, unique) -> None:
    # seed 001, "Using Multiple Underlying Topics": the table, row by row.
    env = make_env(kafka.bootstrap_servers, unique)
    orders, analytics_direct, risk_direct = (
        f"{unique}-ORDERS",
        f"{unique}-ORDERS_ANALYTICS_DIRECT",
        f"{unique}-ORDERS_RISK_DIRECT",
    )
    ensure_topics(admin_client(env.settings), [TopicSpec(t) for t in (orders, analytics_direct, risk_direct)])
    assert (
        apply(
            env,
            f"""
apps:
  ORDERS_ANALYTICS:
    inputs: ['^{orders}$|^{analytics_direct}$']
    default_publish: {analytics_direct}
    groups: {{all: {{}}}}
  ORDERS_RISK:
    inputs: ['^{orders}$|^{risk_direct}$']
    default_publish: {risk_direct}
    groups: {{all: {{}}}}
""",
        )
        == 0
    )
    produce(env, [{"Row": "1"}], topic=orders)  # ORDERS: both queues
    assert cli(["publish", "--app", "ORDERS_ANALYTICS", "--header", "Row=2", "two", *env.common()]) == 0
    assert cli(["publish", "--app", "ORDERS_RISK", "--header", "Row=3", "three", *env.common()]) == 0
    produce(env, [{"Row": "4"}], topic=analytics_direct)  # ORDERS_ANALYTICS_DIRECT: analytics
    produce(env, [{"Row": "5"}], topic=risk_direct)  # ORDERS_RISK_DIRECT: risk
    run_worker(env)
    rows = {
        app: sorted(header(m, "Row") or "" for m in read(env, env.topic(app, "all")))
        for app in ("ORDERS_ANALYTICS", "ORDERS_RISK")
    }
    assert rows == {"ORDERS_ANALYTICS": ["1", "2", "4"], "ORDERS_RISK": ["1", "3", "5"]}


def test_router_writes_priority_bands_and_the_client_delivers_higher_first(kafka, unique) -> None:
    env = make_env(kafka.bootstrap_servers, unique)
    assert (
        apply(
            env,
            """
apps:
  jobs:
    inputs: [INPUT]
    properties: {Urgency: int}
    priority: Urgency * 3
    groups:
      workers: {}
""",
        )
        == 0
    )
    urgencies = [0, 1, 3, 0, 2, 1, 3, 0]
    produce(env, [{"Urgency": u, "Seq": i} for i, u in enumerate(urgencies)])
    run_worker(env)
    assert [header(m, "Seq") for m in read(env, f"{env.topic('jobs', 'workers')}.p9")] == ["2", "6"]
    with queue(env, "jobs", "workers") as q:
        first = q.poll(15)
        assert first is not None
        deadline = time.monotonic() + 15
        while q.buffered < len(urgencies) - 1 and time.monotonic() < deadline:
            assert q.poll(0.2) is None  # backlog 1: nothing more until the first is acknowledged
        q.ack(first)
        delivered = [first]
        while len(delivered) < len(urgencies):
            message = q.poll(10)
            assert message is not None
            delivered.append(message)
            q.ack(message)
    rest = [int(header_of(m, "Urgency")) for m in delivered[1:]]
    assert rest == sorted(rest, reverse=True)  # highest band first, arrival order within a band


def header_of(message: QueueMessage, name: str) -> str:
    return next(v.decode() for k, v in message.headers if k == name and v is not None)


def test_expired_input_messages_are_dead_lettered_by_the_router(kafka, unique) -> None:
    env = make_env(kafka.bootstrap_servers, unique)
    assert (
        apply(
            env,
            """
apps:
  a:
    inputs: [INPUT]
    expiration: 30s
    groups: {all: {}}
""",
        )
        == 0
    )
    producer = Producer(env.settings.client_config())
    now = int(time.time() * 1000)
    producer.produce(env.input, b"old", headers=[("x", b"1")], timestamp=now - 60_000)
    producer.produce(env.input, b"fresh", headers=[("x", b"1")], timestamp=now)
    producer.produce(env.input, b"short-lived", headers=[(wire.EXPIRATION, b"1s")], timestamp=now - 5_000)
    producer.flush(10)
    metrics = run_worker(env)
    assert [m.value() for m in read(env, env.topic("a", "all"))] == [b"fresh"]
    dead = read(env, wire.dlq_topic(env.prefix, "a"))
    assert [(m.value(), header(m, wire.DLQ_REASON)) for m in dead] == [
        (b"old", "expired"),
        (b"short-lived", "expired"),
    ]
    assert metrics.dead_lettered.labels("a", "expired")._value.get() == 2


def test_on_expire_drop_removes_expired_messages_counted_router_and_client(kafka, unique) -> None:
    # seed 001: "If the message has been in the queue longer than the Expiration time ... AMPS removes the message
    # from the queue ... not considered an error". With on_expire: drop nothing is written, only counted; the
    # app next to it keeps subroute's default and dead-letters.
    env = make_env(kafka.bootstrap_servers, unique)
    assert (
        apply(
            env,
            """
apps:
  dropper:
    inputs: [INPUT]
    expiration: 30s
    on_expire: drop
    groups: {all: {}}
  keeper:
    inputs: [INPUT]
    expiration: 30s
    groups: {all: {}}
""",
        )
        == 0
    )
    producer = Producer(env.settings.client_config())
    now = int(time.time() * 1000)
    producer.produce(env.input, b"old", timestamp=now - 60_000)
    producer.produce(env.input, b"fresh", timestamp=now)
    producer.flush(10)
    metrics = run_worker(env)
    assert [m.value() for m in read(env, env.topic("dropper", "all"))] == [b"fresh"]
    assert read(env, wire.dlq_topic(env.prefix, "dropper")) == []
    assert [m.value() for m in read(env, wire.dlq_topic(env.prefix, "keeper"))] == [b"old"]
    assert metrics.expired.labels("dropper", "drop")._value.get() == 1
    assert metrics.expired.labels("keeper", "dead-letter")._value.get() == 1

    # The consumer client: a message that expires on the group topic is removed and committed, not written.
    put(env, "dropper", "all", [("stale", 7)], timestamp=now - 60_000)
    put(env, "dropper", "all", [("last", 8)])
    with queue(env, "dropper", "all") as q:
        delivered = []
        for _ in range(2):  # backlog 1 (the default): one at a time
            message = take(q)
            delivered.append(text(message))
            assert q.ack(message)
        assert delivered == ["fresh", "last"]  # "stale" dropped on the way
        assert q.stats.expired == {"drop": 1} and q.stats.dead_lettered == {}
    assert committed(env, "dropper", "all") == 3  # "stale" settled by the drop, between the two acks
    assert read(env, wire.dlq_topic(env.prefix, "dropper")) == []


def test_proportional_fairness_on_real_lag_picks_clyde(kafka, unique) -> None:
    # seed 001, "Delivery Fairness": Inky 1 of 2, Blinky 3 of 4, Clyde 4 of 10 unacknowledged -> Clyde.
    env = make_env(kafka.bootstrap_servers, unique)
    assert (
        apply(
            env,
            """
apps:
  pac:
    inputs: [INPUT]
    fairness: proportional
    groups:
      Inky: {subscriptions: [{expression: 'exists(N)', max_unconfirmed: 2}]}
      Blinky: {subscriptions: [{expression: 'exists(N)', max_unconfirmed: 4}]}
      Clyde: {subscriptions: [{expression: 'exists(N)', max_unconfirmed: 10}]}
""",
        )
        == 0
    )
    producer = Producer(env.settings.client_config())
    for ghost, outstanding in (("Inky", 1), ("Blinky", 3), ("Clyde", 4)):
        for _ in range(outstanding):  # delivered, never confirmed: the group's lag
            producer.produce(env.topic("pac", ghost), b"earlier")
    producer.flush(10)
    produce(env, [{"N": 1}])
    run_worker(env)
    assert [m.value() for m in read(env, env.topic("pac", "Clyde"))][-1] == b"m0"
    assert len(read(env, env.topic("pac", "Inky"))) == 1 and len(read(env, env.topic("pac", "Blinky"))) == 3
