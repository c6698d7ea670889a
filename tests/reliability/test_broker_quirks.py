"""A broker behaviour the reliability tests work around, shown with two plain consumers (no router code).

A group member that leaves (LeaveGroup, as a worker does on SIGTERM) while a rebalance is in progress: Apache
Kafka drops it and completes the rebalance with the others (this test shows it). Tansu 0.6 keeps answering
JoinGroup with the departed member as the leader of the pending generation, so SyncGroup never completes and
no member is assigned again (measured 2026-11-22: never within 40 s, eager and cooperative alike; librdkafka's
log shows "SyncGroup error: Group rebalance in progress" every session timeout). test_sigkill_ledger.py
therefore lets a worker finish its rebalance before it gets its SIGTERM, on Tansu only.

On Tansu this test asserts the quirk, so that it fails (and says to drop the workaround) once Tansu is fixed;
on any other broker it asserts the correct behaviour: the remaining member is assigned again.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

pytestmark = pytest.mark.kafka

SESSION_MS = 6000


def _consumer(bootstrap: str, group: str) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "session.timeout.ms": SESSION_MS,
            "heartbeat.interval.ms": 500,
            "partition.assignment.strategy": "cooperative-sticky",
            "auto.offset.reset": "earliest",
        }
    )


def test_leaving_during_a_rebalance(kafka, unique) -> None:
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap_servers})
    admin.create_topics([NewTopic(unique, 2, 1)])[unique].result(30)
    producer = Producer({"bootstrap.servers": kafka.bootstrap_servers})
    for _ in range(10):
        producer.produce(unique, b"x")
    producer.flush(30)

    first_assigned: list[list[TopicPartition]] = []
    second_assigned: list[list[TopicPartition]] = []
    first = _consumer(kafka.bootstrap_servers, unique)
    first.subscribe([unique], on_assign=lambda _c, parts: first_assigned.append(parts))
    deadline = time.monotonic() + 60
    while not first_assigned and time.monotonic() < deadline:
        first.poll(0.1)
    assert first_assigned, "the first consumer was never assigned"

    second = _consumer(kafka.bootstrap_servers, unique)
    second.subscribe([unique], on_assign=lambda _c, parts: second_assigned.append(parts))
    # The second member's JoinGroup starts a rebalance; the first leaves while it is rejoining.
    until = time.monotonic() + 1.0
    while time.monotonic() < until:
        first.poll(0.05)
        second.poll(0.05)
    first.close()
    deadline = time.monotonic() + 3 * SESSION_MS / 1000
    while not second_assigned and time.monotonic() < deadline:
        second.poll(0.2)
    second.close()

    if kafka.is_tansu:
        assert not second_assigned, (
            "Tansu now completes a rebalance whose leader left: drop the workaround in "
            "tests/reliability/test_sigkill_ledger.py and this test"
        )
    else:
        assert second_assigned, "the group was not reassigned after a member left during a rebalance"
