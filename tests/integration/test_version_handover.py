"""A partition that moves between workers is routed under a config version at least as new as the one its
previous owner routed it under (the version travels in the offset commit metadata)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest
from confluent_kafka import Message

from subroute import wire
from subroute.config.model import Config
from subroute.kafka.clients import producer
from subroute.ops.settings import Settings
from subroute.routing.decisions import RoutingTable
from tests.integration.harness import BackgroundWorker, apply, header, make_env, read

pytestmark = pytest.mark.kafka

BEFORE = """
apps:
  shop:
    inputs: [INPUT]
    groups:
      old: {}
"""
# The new group outranks the old one: what is routed under this version goes to "new".
AFTER = """
apps:
  shop:
    inputs: [INPUT]
    groups:
      old: {}
      new: {subscriptions: [{priority: 10}]}
"""


def wait(condition: Callable[[], bool], what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def produce_to_each(settings: Settings, topic: str, partitions: int, per_partition: int, tag: str) -> None:
    sender = producer(settings)
    for partition in range(partitions):
        for i in range(per_partition):
            sender.produce(topic, value=f"{tag}-{partition}-{i}".encode(), partition=partition)
    assert sender.flush(30) == 0


def source_partition(message: Message) -> int:
    return int((header(message, wire.SOURCE) or "-/-1/-").split("/")[1])


def test_a_partition_waits_for_the_version_its_previous_owner_routed_it_under(kafka, unique) -> None:
    if kafka.is_tansu:
        pytest.skip("Tansu drops offset commit metadata (docs/brokers.md), which carries the version")
    env = make_env(kafka.bootstrap_servers, unique, partitions=4)
    old_topic = wire.group_topic(env.prefix, "shop", "old")
    new_topic = wire.group_topic(env.prefix, "shop", "new")
    assert apply(env, BEFORE) == 0
    fast, slow = BackgroundWorker(env), BackgroundWorker(env)

    def inputs_of(worker: BackgroundWorker) -> set[int]:
        return {p for t, p in worker.worker.assignment.assigned if t == env.input}

    # The slow worker's config store takes any newer version only when the test says so: until then it
    # routes under the first version, as a worker whose store is behind would.
    versions: list[int] = []
    release = threading.Event()
    build = slow.worker.store._build

    def held_build(config: Config) -> RoutingTable:
        versions.append(config.version)
        if config.version > versions[0]:
            release.wait(120)
        return build(config)

    slow.worker.store._build = held_build  # the store calls it for every version
    try:
        with slow:
            wait(lambda: bool(slow.worker.assignment.assigned), "the slow worker's assignment")
            with fast:
                wait(
                    lambda: bool(inputs_of(fast)) and len(inputs_of(fast) | inputs_of(slow)) == 4,
                    "both workers to share the input partitions",
                )
                assert apply(env, AFTER) == 0
                wait(
                    lambda: fast.metrics.plan_version._value.get() > versions[0],
                    "the fast worker's new version",
                )
                moved = inputs_of(fast)
                produce_to_each(env.settings, env.input, 4, 5, "first")
                wait(
                    lambda: {source_partition(m) for m in read(env, new_topic)} == moved,
                    "the fast worker to route its partitions under the new version",
                )
            # The fast worker left: the slow one takes its partitions, last routed under the new version.
            wait(lambda: len(inputs_of(slow)) == 4, "the slow worker to take the fast one's partitions")
            produce_to_each(env.settings, env.input, 4, 5, "second")
            # A worker without the hold would route the moved partitions under the old version now.
            time.sleep(1)
            assert not [m for m in read(env, old_topic) if source_partition(m) in moved]
            assert {p for t, p in slow.worker.assignment.gated if t == env.input} == moved  # held, not lost
            release.set()
            wait(lambda: not slow.worker.assignment.gated, "the hold to end once the new version is in force")
            wait(lambda: len(read(env, new_topic)) + len(read(env, old_topic)) >= 40, "every record routed")
    finally:
        release.set()
    on_old = [m for m in read(env, old_topic) if source_partition(m) in moved]
    assert not on_old, [m.value() for m in on_old]
    second_moved = [
        m for m in read(env, new_topic) if source_partition(m) in moved and m.value().startswith(b"second")
    ]
    assert len(second_moved) == 5 * len(moved)
