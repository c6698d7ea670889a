"""Deleting a group with --drain (issue 14): its unconsumed messages go back through the app's pending topic and
reach another group of the app; none lost, none twice."""

from __future__ import annotations

from collections import Counter

import pytest
from confluent_kafka import Consumer, TopicPartition

from subroute import wire
from subroute.cli import main as cli
from tests.integration.harness import apply, header, make_env, produce, read, run_worker

pytestmark = pytest.mark.kafka

CONFIG = """
apps:
  jobs:
    inputs: [INPUT]
    properties: {Urgency: int, Seq: int}
    priority: Urgency
    groups:
      old:
        subscriptions: [{expression: 'Seq >= 0', priority: 10}]
      new: {}
"""


def _commit(env, group: str, topic: str, offset: int) -> None:
    """The group's consumers processed the first ``offset`` records of ``topic`` (partition 0)."""
    consumer = Consumer(
        env.settings.client_config(
            {"group.id": wire.consumer_group_id(env.prefix, "jobs", group), "enable.auto.commit": False}
        )
    )
    try:
        consumer.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=False)
    finally:
        consumer.close()


def _committed(env, group: str, topic: str) -> int:
    consumer = Consumer(
        env.settings.client_config({"group.id": wire.consumer_group_id(env.prefix, "jobs", group)})
    )
    try:
        [tp] = consumer.committed([TopicPartition(topic, 0)], timeout=10)
        return tp.offset
    finally:
        consumer.close()


def test_delete_group_with_drain_reroutes_unconsumed_messages_once(
    kafka, unique, capsys: pytest.CaptureFixture[str]
) -> None:
    env = make_env(kafka.bootstrap_servers, unique)
    assert apply(env, CONFIG) == 0
    # 20 messages, every one to "old" (priority 10); Urgency 5 puts every fourth in the .p5 band topic.
    produce(env, [{"Seq": i, "Urgency": 5 if i % 4 == 0 else 0} for i in range(20)])
    run_worker(env)
    old_topic = env.topic("jobs", "old")
    band5 = wire.band_topic(env.prefix, "jobs", "old", 5)
    plain = read(env, old_topic)
    banded = read(env, band5)
    assert len(plain) == 15 and len(banded) == 5 and read(env, env.topic("jobs", "new")) == []
    # The group's consumers processed the first 6 plain records and the first 2 banded ones.
    _commit(env, "old", old_topic, 6)
    _commit(env, "old", band5, 2)
    unconsumed = {header(m, "Seq") for m in plain[6:]} | {header(m, "Seq") for m in banded[2:]}
    assert len(unconsumed) == 12

    args = ["config", "delete", "group", "jobs", "old", "--drain", "--drain-settle-seconds", "0.5"]
    capsys.readouterr()
    assert cli([*args, "--dry-run", *env.common()]) == 0  # writes nothing, drains nothing
    out = capsys.readouterr().out
    assert (
        f"would drain 9 record(s) of {old_topic}\n" in out and f"would drain 3 record(s) of {band5}\n" in out
    )
    pending_topic = wire.pending_topic(env.prefix, "jobs")
    assert f"and drain its 12 unconsumed record(s) to {pending_topic}; nothing written" in out
    assert read(env, wire.pending_topic(env.prefix, "jobs")) == []
    assert cli([*args, *env.common()]) == 0
    pending = read(env, wire.pending_topic(env.prefix, "jobs"))
    assert {header(m, "Seq") for m in pending} == unconsumed
    assert all(header(m, wire.PENDING_REASON) == wire.REPLACED for m in pending)
    last_events = [wire.history_of(m.headers())[-1] for m in pending]
    assert all((e["event"], e["reason"]) == (wire.REPLACED, wire.GROUP_DELETED) for e in last_events)
    # The group's offsets are at the end: a second drain (of the deleted group) finds nothing.
    assert (_committed(env, "old", old_topic), _committed(env, "old", band5)) == (15, 5)
    assert cli([*args, *env.common()]) == 0
    assert len(read(env, wire.pending_topic(env.prefix, "jobs"))) == 12

    # The router routes them under the current configuration: to "new", each once, with its original source.
    run_worker(env)
    routed = read(env, env.topic("jobs", "new")) + read(env, wire.band_topic(env.prefix, "jobs", "new", 5))
    seqs = Counter(header(m, "Seq") for m in routed)
    assert set(seqs) == unconsumed and set(seqs.values()) == {1}
    sources = {header(m, "Seq"): header(m, wire.SOURCE) for m in routed}
    assert all(sources[s] == f"{env.input}/0/{s}" for s in unconsumed)
    assert all(header(m, wire.REDRIVEN) == "pending" for m in routed)


def test_drain_is_refused_while_the_group_has_consumers(kafka, unique) -> None:
    env = make_env(kafka.bootstrap_servers, unique)
    assert apply(env, CONFIG) == 0
    member = Consumer(
        env.settings.client_config(
            {"group.id": wire.consumer_group_id(env.prefix, "jobs", "old"), "session.timeout.ms": 6000}
        )
    )
    try:
        member.subscribe([env.topic("jobs", "old")])
        for _ in range(40):  # until it has joined
            member.poll(0.5)
            if member.assignment():
                break
        assert member.assignment()
        assert cli(["config", "delete", "group", "jobs", "old", "--drain", *env.common()]) == 2
        assert cli(["config", "delete", "group", "jobs", "old", "--drain", "--dry-run", *env.common()]) == 2
    finally:
        member.close()
    # Nothing was written: the group is still configured.
    assert cli(["config", "delete", "group", "jobs", "old", *env.common()]) == 0
