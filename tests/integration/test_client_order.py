"""Duplicates from router redelivery, message-group order through a cancel (seed 002), priority bands."""

from __future__ import annotations

import time

import pytest

from subroute import wire
from subroute.client import QueueConsumer
from tests.integration.client_support import put, queue, take, text
from tests.integration.harness import apply, make_env

pytestmark = pytest.mark.kafka


def drain(q: QueueConsumer, idle: float = 1.5) -> list[str]:
    """Poll and acknowledge: the first message may wait for the group join, then until ``idle`` seconds pass."""
    got: list[str] = []
    while (message := q.poll(idle if got else 15.0)) is not None:
        got.append(text(message))
        q.ack(message)
    return got


def test_router_redelivery_is_dropped_but_records_resent_on_purpose_are_not(kafka, unique) -> None:
    env = make_env(kafka.bootstrap_servers, unique)
    assert apply(env, "apps:\n  billing:\n    inputs: [INPUT]\n    groups:\n      general: {}\n") == 0
    put(env, "billing", "general", [("a0", 0), ("a1", 1), ("a2", 2)])
    # The router died before committing its input offsets and routed 1 and 2 again.
    put(env, "billing", "general", [("dup-a1", 1), ("dup-a2", 2)])
    put(env, "billing", "general", [("cancel-copy-a0", 0)], headers=[(wire.DELIVERIES, b"1")])
    put(env, "billing", "general", [("pending-redrive-a1", 1)], headers=[(wire.REDRIVEN, b"pending")])
    put(env, "billing", "general", [("dlq-redrive-a2", 2)], headers=[(wire.REDRIVEN, b"dlq")])
    put(env, "billing", "general", [("a3", 3), ("no-source", None)])
    with queue(env, "billing", "general", max_backlog=4) as first:
        assert drain(first) == [
            "a0",
            "a1",
            "a2",
            "cancel-copy-a0",
            "pending-redrive-a1",
            "dlq-redrive-a2",
            "a3",
            "no-source",
        ]
        assert first.stats.duplicates == 2

    # A restarted consumer reads back the records before its committed offset and still knows a3 and a2.
    put(env, "billing", "general", [("dup-a2-again", 2), ("dup-a3", 3), ("a4", 4)])
    with queue(env, "billing", "general") as restarted:
        assert drain(restarted) == ["a4"]
        assert restarted.stats.duplicates == 2


def test_a_cancelled_grouped_message_keeps_its_place_in_the_group(kafka, unique) -> None:
    # Seed 002's cart: "add" then "remove" must not be processed as "remove" then "add". The consumer cancels
    # the add (it could not process it yet); the remove must not overtake it, while another cart goes on.
    env = make_env(kafka.bootstrap_servers, unique)
    config = """
apps:
  shop:
    inputs: [INPUT]
    properties: {Cart: string}
    group_by: Cart
    groups:
      carts: {}
"""
    assert apply(env, config) == 0
    put(env, "shop", "carts", [("A add", 1), ("A remove", 2)], key=b"A")
    put(env, "shop", "carts", [("B add", 3)], key=b"B")
    put(env, "shop", "carts", [("A checkout", 4)], key=b"A")
    order: list[str] = []
    with queue(env, "shop", "carts") as q:
        first = take(q)
        assert text(first) == "A add"
        q.cancel(first)
        order = drain(q)
    assert order == ["B add", "A add", "A remove", "A checkout"]


def test_higher_priority_bands_are_delivered_first_under_backlog(kafka, unique) -> None:
    # AMPS Priority: "Higher priority messages are delivered first, regardless of the order in which messages
    # have been published to the queue."
    env = make_env(kafka.bootstrap_servers, unique)
    config = """
apps:
  orders:
    inputs: [INPUT]
    properties: {Urgency: int}
    priority: Urgency
    groups:
      risk: {}
"""
    assert apply(env, config) == 0
    with queue(env, "orders", "risk") as q:  # creates the missing band topics
        band = {b: wire.band_topic(env.prefix, "orders", "risk", b) for b in (0, 4, 9)}
        put(env, "orders", "risk", [(f"low-{i}", i) for i in range(5)], topic=band[0])
        put(env, "orders", "risk", [(f"mid-{i}", 10 + i) for i in range(2)], topic=band[4])
        put(env, "orders", "risk", [(f"high-{i}", 20 + i) for i in range(3)], topic=band[9])
        first = take(q)  # whatever was fetched first; the backlog (1) is now full
        deadline = time.monotonic() + 15
        while q.buffered < 9 and time.monotonic() < deadline:
            assert q.poll(0.2) is None
        assert q.buffered == 9
        q.ack(first)
        rest = drain(q)
    expected = (
        [f"high-{i}" for i in range(3)] + [f"mid-{i}" for i in range(2)] + [f"low-{i}" for i in range(5)]
    )
    expected.remove(text(first))
    assert rest == expected
