"""Seed 001 (AMPS message queues): a cancelled message, or one whose lease ran out, "is available to another
subscriber". Two real members of one consumer group, the second in its own process: what the first gives back,
the second receives; a lease runs out while its holder is busy (not polling), and the other member gets the
message meanwhile."""

from __future__ import annotations

import json
import queue as queues
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from subroute.client import QueueConsumer
from tests.integration.client_support import committed, put, queue, take, text
from tests.integration.harness import ROOT, Env, apply, make_env

pytestmark = pytest.mark.kafka

JOBS = """
apps:
  Jobs:
    inputs: [INPUT]
    partitions: 2
    max_cancels: 3
    groups:
      workers: {}
"""

Event = dict[str, Any]


class Member:
    """A QueueConsumer in another process (tests/integration/queue_member.py), read through its JSON lines."""

    def __init__(self, env: Env, app: str, group: str, hold: float = 0.0) -> None:
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.integration.queue_member",
                *(env.bootstrap, env.prefix, app, group, str(hold)),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            cwd=ROOT,
            text=True,
        )
        self.events: queues.Queue[Event] = queues.Queue()
        self.seen: list[Event] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.events.put(json.loads(line))

    def wait_for(self, wanted: Callable[[Event], bool], timeout: float = 30.0) -> Event:
        for event in self.seen:
            if wanted(event):
                return event
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            try:
                event = self.events.get(timeout=left)
            except queues.Empty:
                break
            self.seen.append(event)
            if wanted(event):
                return event
        raise AssertionError(f"the other member never reported what was expected; it reported {self.seen}")

    def assigned(self) -> int:
        """How many partitions the member reported last."""
        reports = [e["assigned"] for e in self.seen if "assigned" in e]
        return len(reports[-1]) if reports else 0

    def stop(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()  # the member closes its consumer: commits and leaves the group
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)


@contextmanager
def other_member(env: Env, app: str, group: str, hold: float = 0.0) -> Iterator[Member]:
    member = Member(env, app, group, hold)
    try:
        yield member
    finally:
        member.stop()


def join_beside(
    member: Member, env: Env, app: str = "Jobs", group: str = "workers", **options: Any
) -> QueueConsumer:
    """A member in this process, joined beside ``member`` once the group is balanced: one partition each."""
    member.wait_for(lambda e: len(e.get("assigned", [])) == 2)  # alone in the group: both partitions
    here = queue(env, app, group, **options)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert here.poll(0.2) is None  # nothing was written yet
        if len(here.assignment) == 1:
            break
    assert len(here.assignment) == 1, here.assignment
    member.wait_for(lambda e: len(e.get("assigned", [])) == 1)
    return here


def committed_soon(
    env: Env, partition: int, expected: int = 1, app: str = "Jobs", group: str = "workers"
) -> int:
    """The group's committed offset on ``partition``, waiting up to 15 s for ``expected`` (commits after a
    copy is acknowledged are asynchronous)."""
    deadline = time.monotonic() + 15
    while (position := committed(env, app, group, partition)) != expected and time.monotonic() < deadline:
        time.sleep(0.2)
    return position


def test_a_cancelled_message_goes_to_another_member_of_the_group(kafka, unique) -> None:
    # "To return a message to the queue without processing it, the subscriber provides the cancel option ...
    # AMPS returns the message to the queue just as though the lease had expired" ... "and the message is
    # available to another subscriber".
    env = make_env(kafka.bootstrap_servers, unique)
    assert apply(env, JOBS) == 0
    with other_member(env, "Jobs", "workers") as other:
        here = join_beside(other, env)
        try:
            [(_topic, mine)] = here.assignment
            put(env, "Jobs", "workers", [("job-1", 1)], partition=mine)
            job = take(here)
            assert (text(job), job.partition) == ("job-1", mine)
            assert here.cancel(job)
            got = other.wait_for(lambda e: e.get("value") == "job-1")
            assert got["partition"] != mine
            assert (got["deliveries"], got["cancels"]) == (1, 1)  # counted as before, against max_cancels
            assert here.poll(1.0) is None  # not delivered here again
            assert committed_soon(env, mine) == 1  # the original is settled by its copy
        finally:
            here.close()


def test_a_lease_runs_out_while_its_holder_is_busy_and_another_member_gets_the_message(kafka, unique) -> None:
    # "If the subscriber has not responded by removing the message within the lease period, AMPS revokes the
    # lease and the message is available to another subscriber." The holder here is busy (it does not call
    # poll) for longer than the lease: the lease runs out on time anyway and the other member gets it meanwhile.
    env = make_env(kafka.bootstrap_servers, unique)
    assert apply(env, JOBS) == 0
    with other_member(env, "Jobs", "workers") as other:
        here = join_beside(other, env, lease=1.0)
        try:
            [(_topic, mine)] = here.assignment
            put(env, "Jobs", "workers", [("slow-job", 1)], partition=mine)
            slow = take(here)
            started = time.monotonic()
            # Busy: no call into the consumer until the other member has the message.
            got = other.wait_for(lambda e: e.get("value") == "slow-job")
            assert time.monotonic() - started >= 0.9
            assert got["partition"] != mine
            assert (got["deliveries"], got["cancels"]) == (1, 0)  # a failed delivery, not a cancel
            assert here.stats.lease_expired == 1
            assert not here.ack(slow)  # too late: the lease was revoked
            assert committed_soon(env, mine) == 1  # by the lease thread, once the copy was acknowledged
        finally:
            here.close()


SHOP = """
apps:
  shop:
    inputs: [INPUT]
    partitions: 2
    properties: {Cart: string}
    group_by: Cart
    groups:
      carts: {}
"""


def test_a_cancelled_grouped_message_goes_to_another_member_and_its_group_waits_for_it(kafka, unique) -> None:
    # Seed 002's cart, across two members: "add" is cancelled here and goes to the other member; "remove" must
    # not be processed before the other member has processed "add" (one consumer at a time per group), while
    # another cart goes on here ("distinct message groups would not block each other").
    env = make_env(kafka.bootstrap_servers, unique)
    assert apply(env, SHOP) == 0
    with other_member(env, "shop", "carts", hold=2.0) as other:
        here = join_beside(other, env, "shop", "carts")
        try:
            [(_topic, mine)] = here.assignment
            put(env, "shop", "carts", [("A add", 1), ("A remove", 2)], key=b"A", partition=mine)
            put(env, "shop", "carts", [("B add", 3)], key=b"B", partition=mine)
            add = take(here)
            assert text(add) == "A add"
            assert here.cancel(add)
            got = other.wait_for(lambda e: e.get("value") == "A add")
            assert got["partition"] != mine and (got["deliveries"], got["cancels"]) == (1, 1)
            other_cart = take(here)
            assert text(other_cart) == "B add"
            assert here.ack(other_cart)
            remove = take(here)  # once the other member has acknowledged "add" (it takes 2 s)
            received = time.monotonic()
            assert text(remove) == "A remove"
            acked = other.wait_for(lambda e: e.get("acked") == "A add")
            assert acked["at"] < received
            assert here.ack(remove)
            assert committed_soon(env, mine, 3, "shop", "carts") == 3  # "add" settled by its copy
        finally:
            here.close()
