"""Records waiting for different groups do not hold each other up (issue 24, item 3), on a real broker.

BlazingMQ keeps each consumer's backlog apart: a message that waits for one consumer never holds up those that
another consumer could take. Here an app has two groups, ``vip`` and ``general``, both absent at first, and their
records interleaved on one pending partition. When ``vip`` attaches it receives every record waiting for it at
once, in arrival order, although the partition's first record waits for ``general``; the ``general`` records
stay where they are (nothing copied, the router's committed position stays at the first of them) and arrive in
order when ``general`` attaches. Nothing is duplicated or lost, across a worker killed and restarted in the
middle, and the expiry sweep leaves the records routed past the head alone.
"""

from __future__ import annotations

import signal
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
    read,
    worker_process,
)
from tests.integration.test_presence_capacity import Attached, present

BILLING = """
apps:
  billing:
    inputs: [INPUT]
    properties: {tier: string}
    presence: required
    groups:
      vip: {subscriptions: [{expression: 'tier == "vip"'}]}
      general: {subscriptions: [{expression: 'tier == "general"'}]}
"""

COUNT = 40  # records m0..m39: even ones for general (m0 first), odd ones for vip


def wait(
    condition: Callable[[], bool], what: str, timeout: float = 60.0, found: Callable[[], object] | None = None
) -> None:
    """Until ``condition()``; on timeout, the failure says what ``found()`` gives then."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}" + (f"; found {found()}" if found else ""))
        time.sleep(0.2)


def interleaved(count: int = COUNT, **extra: object) -> list[dict[str, object]]:
    return [{"tier": "general" if i % 2 == 0 else "vip", **extra} for i in range(count)]


def values(env: Env, group: str) -> list[str]:
    return [m.value().decode() for m in read(env, env.topic("billing", group))]


def router_commit(env: Env) -> TopicPartition:
    """The router group's commit of pending partition 0 (read, never joined)."""
    reader = Consumer(
        env.settings.client_config(
            {"group.id": wire.worker_group_id(env.prefix), "enable.auto.commit": False}
        )
    )
    try:
        [tp] = reader.committed([TopicPartition(wire.pending_topic(env.prefix, "billing"), 0)], timeout=10)
        return tp
    finally:
        reader.close()


def parked(env: Env) -> list[str]:
    return [m.value().decode() for m in read(env, wire.pending_topic(env.prefix, "billing"))]


def wait_parked(env: Env, count: int) -> None:
    wait(
        lambda: len(parked(env)) == count, "every record parked (nobody attached)", found=lambda: parked(env)
    )


def past_every_pending_record(env: Env) -> Callable[[], bool]:
    """Whether the router has committed past the last pending record (under exactly-once the partition holds
    transaction markers too: offsets are not counts)."""
    end = read(env, wire.pending_topic(env.prefix, "billing"))[-1].offset() + 1
    return lambda: router_commit(env).offset >= end


VIP = [f"m{i}" for i in range(1, COUNT, 2)]
GENERAL = [f"m{i}" for i in range(0, COUNT, 2)]


@pytest.mark.parametrize("guarantee", GUARANTEES)
def test_an_attached_group_gets_its_waiting_records_past_those_waiting_for_an_absent_one(
    kafka, unique, guarantee: str
) -> None:
    if kafka.is_tansu:
        pytest.skip("Tansu lists no members of live groups: presence is not measurable (docs/brokers.md)")
    env = make_env(kafka.bootstrap_servers, unique)
    assert apply(env, BILLING) == 0
    with BackgroundWorker(env, guarantee=guarantee) as worker:
        wait(worker.worker.ready, "the worker to be ready")
        produce(env, interleaved())
        wait_parked(env, COUNT)
        with Attached(env, "billing", "vip") as vip:
            wait(lambda: len(vip.received) == len(VIP), "vip to receive every record waiting for it")
            assert vip.received == VIP  # in arrival order, past the general ones
            # the general ones stay where they are: nothing copied, the position at the first of them
            wait(
                lambda: router_commit(env).offset == 0 and router_commit(env).metadata is not None, "a commit"
            )
            assert parked(env) == [f"m{i}" for i in range(COUNT)]
        with Attached(env, "billing", "general") as general:
            wait(lambda: len(general.received) == len(GENERAL), "general to receive its records")
            assert general.received == GENERAL
        wait(past_every_pending_record(env), "the router to commit past every pending record")
    assert values(env, "vip") == VIP and values(env, "general") == GENERAL  # nothing twice, nothing lost
    assert len(parked(env)) == COUNT  # nothing parked again


@pytest.mark.parametrize("guarantee", GUARANTEES)
def test_a_worker_killed_after_routing_past_the_head_is_followed_by_one_that_passes_over_them(
    kafka, unique, guarantee: str
) -> None:
    if kafka.is_tansu:
        pytest.skip("Tansu lists no members of live groups: presence is not measurable (docs/brokers.md)")
    env = make_env(kafka.bootstrap_servers, unique)
    assert apply(env, BILLING) == 0
    first = worker_process(env, "--guarantee", guarantee)
    try:
        produce(env, interleaved())
        wait_parked(env, COUNT)
        with Attached(env, "billing", "vip") as vip:
            wait(lambda: len(vip.received) == len(VIP), "vip to receive every record waiting for it")
            # the routed-past offsets are committed with the position at the head
            wait(
                lambda: "subroute.past=" in (router_commit(env).metadata or ""),
                "the routed-past set committed",
            )
            first.send_signal(signal.SIGKILL)
            first.wait(30)
            assert router_commit(env).offset == 0
            # a new worker passes over what the first routed past the head: vip gets nothing twice
            with BackgroundWorker(env, guarantee=guarantee) as worker:
                wait(worker.worker.ready, "the new worker to be ready")
                wait(lambda: present(worker, "billing", "vip"), "vip present for the new worker")
                with Attached(env, "billing", "general") as general:
                    wait(lambda: len(general.received) == len(GENERAL), "general to receive its records")
                    assert general.received == GENERAL
                wait(past_every_pending_record(env), "the router to commit past every record")
            assert vip.received == VIP
    finally:
        if first.poll() is None:
            first.kill()
            first.wait(30)
    assert values(env, "vip") == VIP and values(env, "general") == GENERAL
    assert len(parked(env)) == COUNT


def test_the_sweep_dead_letters_expired_waiting_records_but_not_those_routed_past_the_head(
    kafka, unique
) -> None:
    if kafka.is_tansu:
        pytest.skip("Tansu lists no members of live groups: presence is not measurable (docs/brokers.md)")
    env = make_env(kafka.bootstrap_servers, unique)
    assert apply(env, BILLING) == 0
    dlq = wire.dlq_topic(env.prefix, "billing")
    # Long enough for each record to be routed (parked) before it expires, even on a loaded machine: a record
    # already expired when routed is dead-lettered at once and never parked, and this test is about the sweep.
    soon, later = {wire.EXPIRATION: "5s"}, {wire.EXPIRATION: "20s"}
    with BackgroundWorker(env, pending_sweep_seconds=1.0) as worker:
        wait(worker.worker.ready, "the worker to be ready")
        # m0 waits for general and never expires: the head. m2 and m4 expire behind it; m1 and m3 wait for vip.
        produced_at = time.monotonic()
        produce(
            env,
            [
                {"tier": "general"},
                {"tier": "vip", **later},
                {"tier": "general", **soon},
                {"tier": "vip", **later},
                {"tier": "general", **soon},
            ],
        )
        wait_parked(env, 5)
        wait(lambda: len(read(env, dlq)) == 2, "m2 and m4 dead-lettered behind the head")
        with Attached(env, "billing", "vip") as vip:
            wait(lambda: len(vip.received) == 2, "vip to receive the two waiting for it")
            assert vip.received == ["m1", "m3"]
        # m1 and m3 expire on the pending topic too, behind the head: the sweeps pass over them (routed)
        time.sleep(max(0.0, produced_at + 20 + 4 - time.monotonic()))
        assert router_commit(env).offset == 0
        with Attached(env, "billing", "general") as general:
            wait(lambda: len(general.received) == 1, "general to receive m0")
            assert general.received == ["m0"]
        wait(past_every_pending_record(env), "the router to commit past every record")
    letters = read(env, dlq)
    assert [m.value().decode() for m in letters] == ["m2", "m4"]
    assert {header(m, wire.DLQ_REASON) for m in letters} == {"expired"}
    assert values(env, "vip") == ["m1", "m3"] and values(env, "general") == ["m0"]


CAPPED = BILLING.replace(
    """vip: {subscriptions: [{expression: 'tier == "vip"'}]}""",
    """vip: {subscriptions: [{expression: 'tier == "vip"', max_unconfirmed: 3}]}""",
)


def test_a_group_at_its_limit_gets_its_waiting_records_in_order_as_it_confirms_past_those_of_an_absent_group(
    kafka, unique
) -> None:
    if kafka.is_tansu:
        pytest.skip("Tansu lists no members of live groups: presence is not measurable (docs/brokers.md)")
    env = make_env(kafka.bootstrap_servers, unique)
    assert apply(env, CAPPED) == 0
    with BackgroundWorker(env, capacity_refresh_seconds=1.0) as worker:
        wait(worker.worker.ready, "the worker to be ready")
        produce(env, interleaved())  # the general ones wait for a consumer, the vip ones too at first
        wait_parked(env, COUNT)
        with Attached(env, "billing", "vip", acking=False) as vip:
            wait(lambda: len(vip.received) == 3, "vip to fill up")
            assert vip.received == VIP[:3]
            vip.acking.set()  # it confirms: the rest follow in order, three at a time, past the general ones
            wait(lambda: len(vip.received) == len(VIP), "vip to receive every record waiting for it")
            assert vip.received == VIP
    assert values(env, "vip") == VIP and values(env, "general") == []
    assert len(parked(env)) == COUNT
