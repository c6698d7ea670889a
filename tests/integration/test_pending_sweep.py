"""The expiry sweep of pending partitions, end to end on a real broker (issue 22, item 8).

A pending partition is read in order and stops at its first record that cannot go. A record that matches nothing
waits there for a config change, with no expiration of its own; an expired record behind it must still leave
(dead letter, or nothing with ``on_expire: drop``) within the sweep interval, without a config change, while the
router's committed position stays at the head so that nothing still waiting is skipped; and it leaves once,
across a restart of the worker and the config change that finally routes the head.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from confluent_kafka import Consumer, TopicPartition

from subroute import wire
from subroute.worker.checkpoint import GUARANTEES
from tests.integration.harness import (
    BackgroundWorker,
    Env,
    apply,
    header,
    make_env,
    produce,
    produce_raw,
    read,
)

SWEEP = 2.0  # the workers' sweep interval here (the default is 30 s)

NOTHING_MATCHES = """
apps:
  a:
    inputs: [INPUT]
    properties: {N: int}
    ON_EXPIRE
    groups:
      g: {subscriptions: [{expression: 'N > 100'}]}
"""

NOW_IT_MATCHES = """
apps:
  a:
    inputs: [INPUT]
    properties: {N: int}
    ON_EXPIRE
    groups:
      g: {subscriptions: [{expression: 'N > 0'}]}
"""


def wait(condition: Callable[[], bool], what: str, timeout: float = 45.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def dead_letters(env: Env) -> list[tuple[bytes, str | None]]:
    return [(m.value(), header(m, wire.DLQ_REASON)) for m in read(env, wire.dlq_topic(env.prefix, "a"))]


def router_position(env: Env, topic: str) -> int:
    """The router group's committed offset of partition 0 of ``topic`` (read, never joined)."""
    reader = Consumer(
        env.settings.client_config(
            {"group.id": wire.worker_group_id(env.prefix), "enable.auto.commit": False}
        )
    )
    try:
        [tp] = reader.committed([TopicPartition(topic, 0)], timeout=10)
        return int(tp.offset)
    finally:
        reader.close()


def routed_past_every_pending_record(env: Env, pending: str) -> Callable[[], bool]:
    """Whether the router has committed past the last record of ``pending`` (so it has routed or passed over
    every one: what it wrote for them is acknowledged)."""
    end = read(env, pending)[-1].offset() + 1
    return lambda: router_position(env, pending) >= end


# exactly-once: the pending topic ends in transaction markers, which the sweep reads past to its end
@pytest.mark.parametrize("guarantee", GUARANTEES)
def test_an_expired_record_behind_one_that_matches_nothing_is_dead_lettered_within_the_sweep(
    kafka, unique, guarantee: str
) -> None:
    env = make_env(kafka.bootstrap_servers, unique)
    assert apply(env, NOTHING_MATCHES.replace("ON_EXPIRE", "")) == 0
    pending = wire.pending_topic(env.prefix, "a")
    # m1 must be parked before it expires (one routed already expired is dead-lettered at once, never parked):
    # 4 s leaves room on a loaded machine.
    expiring = {wire.EXPIRATION: "4s"}
    # m0 matches nothing and never expires: the head of the pending partition until a config change. m1 and m3
    # expire behind it; m2 waits as m0 does.
    with BackgroundWorker(env, guarantee=guarantee, pending_sweep_seconds=SWEEP) as worker:
        wait(worker.worker.ready, "the worker to be ready")
        version = worker.metrics.plan_version._value.get()
        produce(env, [{"N": 1}, {"N": 2, **expiring}, {"N": 3}])
        wait(lambda: dead_letters(env) == [(b"m1", "expired")], "m1 to be dead-lettered behind m0")
        assert worker.metrics.plan_version._value.get() == version  # no config change did it
    assert router_position(env, pending) == 0  # m0 (and m2 behind it) still wait: nothing skipped
    assert [m.value() for m in read(env, pending)] == [b"m0", b"m1", b"m2"]  # nothing copied either

    # A new worker learns from the commit what was dead-lettered: m1 is not written again, m3 is.
    produce_raw(env, [(None, b"m3", [("N", b"4"), (wire.EXPIRATION, b"1s")])])
    with BackgroundWorker(env, guarantee=guarantee, pending_sweep_seconds=SWEEP):
        wait(lambda: len(dead_letters(env)) >= 2, "m3 to be dead-lettered")
    assert dead_letters(env) == [(b"m1", "expired"), (b"m3", "expired")]

    # Once a subscription matches them, the ones still waiting are routed in order; m1 and m3 are not routed
    # after their dead letters.
    assert apply(env, NOW_IT_MATCHES.replace("ON_EXPIRE", "")) == 0
    with BackgroundWorker(env, guarantee=guarantee, pending_sweep_seconds=SWEEP):
        wait(routed_past_every_pending_record(env, pending), "the router to pass every pending record")
    assert [m.value() for m in read(env, env.topic("a", "g"))] == [b"m0", b"m2"]
    assert len(dead_letters(env)) == 2


def test_with_on_expire_drop_the_expired_record_behind_the_head_is_dropped_within_the_sweep(
    kafka, unique
) -> None:
    env = make_env(kafka.bootstrap_servers, unique)
    assert apply(env, NOTHING_MATCHES.replace("ON_EXPIRE", "on_expire: drop")) == 0
    with BackgroundWorker(env, pending_sweep_seconds=SWEEP) as worker:
        wait(worker.worker.ready, "the worker to be ready")
        produce(env, [{"N": 1}, {"N": 2, wire.EXPIRATION: "1s"}, {"N": 3}])
        expired = worker.metrics.expired.labels("a", "drop")
        wait(lambda: expired._value.get() == 1, "m1 to be dropped behind m0")
        assert apply(env, NOW_IT_MATCHES.replace("ON_EXPIRE", "on_expire: drop")) == 0
        pending = wire.pending_topic(env.prefix, "a")
        wait(routed_past_every_pending_record(env, pending), "the router to pass every pending record")
        assert expired._value.get() == 1
    assert [m.value() for m in read(env, env.topic("a", "g"))] == [b"m0", b"m2"]
    assert dead_letters(env) == []
