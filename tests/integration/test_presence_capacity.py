"""Presence and capacity that holds, end to end on a real broker with the project's consumer client attached.

BlazingMQ routes only to attached consumers, highest priority first, and never past a consumer's maxUnconfirmed:
a worker follows the consumer groups' membership (every ``presence_refresh_seconds``) and their unconfirmed counts,
parks what has nowhere to go on the app's pending topic, and routes it, in arrival order, once a consumer
attaches or confirms. Membership is measured on Apache Kafka only (Tansu lists no members, docs/brokers.md):
there every group counts as present, which the last test checks.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable

import pytest
from confluent_kafka import Consumer, TopicPartition

from subroute import wire
from subroute.client import QueueMessage
from subroute.kafka.clients import end_offsets
from tests.integration.client_support import queue, text
from tests.integration.harness import BackgroundWorker, Env, apply, header, make_env, produce, read

REFRESH = 2.0  # the worker's default presence refresh

TIERS = """
apps:
  a:
    inputs: [INPUT]
    properties: {N: int}
    presence: required
    groups:
      top: {subscriptions: [{expression: 'N >= 0', priority: 10}]}
      low: {subscriptions: [{expression: 'N >= 0', priority: 1}]}
"""


def wait(condition: Callable[[], bool], what: str, timeout: float = 30.0) -> float:
    """Seconds it took ``condition`` to hold."""
    started = time.monotonic()
    while not condition():
        if time.monotonic() - started > timeout:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)
    return time.monotonic() - started


class Attached:
    """One consumer of a group (the project's QueueConsumer) polling in its own thread: the group is present
    while it runs. It acknowledges what it receives while ``acking`` is set, and holds it otherwise."""

    def __init__(
        self, env: Env, app: str, group: str, *, acking: bool = True, max_backlog: int = 1000
    ) -> None:
        self.env, self.app, self.group, self.max_backlog = env, app, group, max_backlog
        self.received: list[str] = []
        self.acking = threading.Event()
        if acking:
            self.acking.set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._error: BaseException | None = None

    def _run(self) -> None:
        try:
            held: list[QueueMessage] = []
            with queue(self.env, self.app, self.group, max_backlog=self.max_backlog) as consumer:
                while not self._stop.is_set():
                    message = consumer.poll(0.2)
                    if message is not None:
                        self.received.append(text(message))
                        held.append(message)
                    if self.acking.is_set() and held:
                        for one in held:
                            consumer.ack(one)
                        held.clear()
        except BaseException as exc:  # surfaced by stop()
            self._error = exc

    def start(self) -> Attached:
        self._thread.start()
        return self

    def stop(self) -> None:
        """Close the consumer: it leaves its group at once."""
        self._stop.set()
        self._thread.join(timeout=30)
        if self._error is not None:
            raise self._error

    def __enter__(self) -> Attached:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def present(worker: BackgroundWorker, app: str, group: str) -> bool:
    """The worker counts the group as present, in its gauge and in what its next batch is routed with.

    The gauge is set on the capacity monitor's thread; the poll loop takes the same measurement into its routing
    snapshot only before its next poll. Records produced as soon as the gauge changed could still be routed
    with the previous view (to the group that just left, or past the one that just came back)."""
    gauge = worker.metrics.group_present.labels(app, group)._value.get() == 1
    return gauge and (app, group) not in worker.worker.consumers.snapshot.absent


def absent(worker: BackgroundWorker, app: str, group: str) -> bool:
    """The worker counts the group as gone, in its gauge and in what its next batch is routed with."""
    gauge = worker.metrics.group_present.labels(app, group)._value.get() == 0
    return gauge and (app, group) in worker.worker.consumers.snapshot.absent


def values_of(env: Env, app: str, group: str) -> list[str]:
    return [m.value().decode() for m in read(env, env.topic(app, group))]


def unconfirmed(env: Env, app: str, group: str) -> int:
    """End offset minus the group's commit on partition 0 of its group topic, as the broker has them now."""
    group_id = wire.consumer_group_id(env.prefix, app, group)
    # assigned and read here, never joined: it must not commit for the group it looks at
    reader = Consumer(env.settings.client_config({"group.id": group_id, "enable.auto.commit": False}))
    try:
        tp = TopicPartition(env.topic(app, group), 0)
        [committed] = reader.committed([tp], timeout=10)
        end = end_offsets(reader, [tp])[0]
        return end - max(committed.offset, 0)
    finally:
        reader.close()


def test_messages_follow_the_highest_priority_group_that_is_attached(kafka, unique) -> None:
    if kafka.is_tansu:
        pytest.skip("Tansu lists no members of live groups: presence is not measurable (docs/brokers.md)")
    env = make_env(kafka.bootstrap_servers, unique)
    assert apply(env, TIERS) == 0
    with BackgroundWorker(env) as worker:
        wait(worker.worker.ready, "the worker to be ready")
        top, low = Attached(env, "a", "top").start(), Attached(env, "a", "low").start()
        try:
            wait(lambda: present(worker, "a", "top") and present(worker, "a", "low"), "both groups present")
            produce(env, [{"N": i} for i in range(5)])
            wait(lambda: len(top.received) == 5, "the top group to get the first five")
            assert low.received == []

            top.stop()  # the top group's only consumer leaves
            # No assertion on how long it took (timings are not asserted: the machine may be loaded); the
            # wait's own bound is a liveness check. The refresh interval is what it takes on a quiet machine.
            wait(lambda: absent(worker, "a", "top"), "the worker to see the top group leave")
            produce(env, [{"N": i} for i in range(5, 10)])
            wait(lambda: len(low.received) == 5, "the next priority to get the next five")
            assert low.received == [f"m{i}" for i in range(5)]  # values count per produce call

            top = Attached(env, "a", "top").start()  # it comes back
            wait(lambda: present(worker, "a", "top"), "the worker to see the top group return")
            produce(env, [{"N": i} for i in range(10, 15)])
            # a new consumer of the top group: it starts after the first five, which were confirmed
            wait(lambda: len(top.received) == 5, "the top group to get the last five")
            assert len(low.received) == 5
        finally:
            top.stop()
            low.stop()
    assert len(values_of(env, "a", "top")) == 10 and len(values_of(env, "a", "low")) == 5
    assert read(env, wire.pending_topic(env.prefix, "a")) == []


def test_with_nobody_attached_messages_wait_and_go_in_order_once_a_consumer_attaches(
    kafka, unique, caplog: pytest.LogCaptureFixture
) -> None:
    if kafka.is_tansu:
        pytest.skip("Tansu lists no members of live groups: presence is not measurable (docs/brokers.md)")
    env = make_env(kafka.bootstrap_servers, unique)
    assert apply(env, TIERS) == 0
    with BackgroundWorker(env) as worker:
        wait(worker.worker.ready, "the worker to be ready")
        produce(env, [{"N": i} for i in range(20)])
        pending = wire.pending_topic(env.prefix, "a")
        wait(lambda: len(read(env, pending)) == 20, "twenty records parked")
        parked = read(env, pending)
        assert {header(m, wire.PENDING_REASON) for m in parked} == {"no-consumer"}
        time.sleep(REFRESH * 2)  # nothing is written again while they wait (no re-parking loop)
        assert len(read(env, pending)) == 20
        # the worker said once what they wait for: the consumer groups to start, or presence: ignored
        [said] = [r.getMessage() for r in caplog.records if r.name == "subroute.worker.waiting"]
        groups = f"{wire.consumer_group_id(env.prefix, 'a', 'low')}, {wire.consumer_group_id(env.prefix, 'a', 'top')}"
        assert f"no live member in Kafka consumer group(s) {groups}" in said and "presence: ignored" in said
        assert values_of(env, "a", "top") == values_of(env, "a", "low") == []

        with Attached(env, "a", "low") as low:  # only the lower priority attaches: it gets them, in order
            wait(lambda: len(low.received) == 20, "the parked records to reach the attached group")
            assert low.received == [f"m{i}" for i in range(20)]
    assert len(read(env, pending)) == 20  # routed from where they were parked, not parked again
    assert values_of(env, "a", "top") == []


CAPPED = """
apps:
  a:
    inputs: [INPUT]
    properties: {N: int}
    presence: required
    groups:
      top: {subscriptions: [{expression: 'N >= 0', priority: 10, max_unconfirmed: 4}]}
      low: {subscriptions: [{expression: 'N >= 0', priority: 1}]}
"""


def test_capacity_holds_and_waiting_messages_flow_in_arrival_order_once_confirmed(kafka, unique) -> None:
    env = make_env(kafka.bootstrap_servers, unique)
    assert apply(env, CAPPED) == 0
    with BackgroundWorker(env, capacity_refresh_seconds=1.0) as worker:
        wait(worker.worker.ready, "the worker to be ready")
        with Attached(env, "a", "low"), Attached(env, "a", "top", acking=False) as top:
            if kafka.is_tansu:  # membership is not reported there: every group counts as present once seen
                wait(
                    lambda: worker.worker.capacity.membership_unreported, "membership detected as unreported"
                )
            else:
                wait(lambda: present(worker, "a", "top") and present(worker, "a", "low"), "both present")
            produce(env, [{"N": i} for i in range(30)])  # in one burst: far more than one refresh's worth
            wait(lambda: len(top.received) == 4, "the top group to fill up")
            time.sleep(3.0)  # several lag refreshes: still nothing past max_unconfirmed, nothing spilled
            assert values_of(env, "a", "top") == [f"m{i}" for i in range(4)]
            assert values_of(env, "a", "low") == []
            pending = read(env, wire.pending_topic(env.prefix, "a"))
            assert [m.value().decode() for m in pending] == [f"m{i}" for i in range(4, 30)]
            assert {header(m, wire.PENDING_REASON) for m in pending} == {"capacity"}

            top.acking.set()  # the consumer confirms: room frees, the waiting ones follow in arrival order
            highest = 0
            deadline = time.monotonic() + 60
            while len(top.received) < 30 and time.monotonic() < deadline:
                highest = max(highest, unconfirmed(env, "a", "top"))
                time.sleep(0.2)
            assert top.received == [f"m{i}" for i in range(30)]
            assert highest <= 4
    assert values_of(env, "a", "top") == [f"m{i}" for i in range(30)]
    assert values_of(env, "a", "low") == []
    assert len(read(env, wire.pending_topic(env.prefix, "a"))) == 26  # each parked once


def test_presence_ignored_routes_to_a_group_with_nobody_attached(kafka, unique) -> None:
    env = make_env(kafka.bootstrap_servers, unique)
    assert apply(env, TIERS.replace("presence: required", "presence: ignored")) == 0
    produce(env, [{"N": i} for i in range(3)])
    with BackgroundWorker(env):
        wait(lambda: len(values_of(env, "a", "top")) == 3, "routing to the absent top group")
    assert read(env, wire.pending_topic(env.prefix, "a")) == []


def test_where_membership_is_not_reported_every_group_counts_as_present(kafka, unique) -> None:
    """Tansu answers a live group with no members: the worker must not park everything there."""
    env = make_env(kafka.bootstrap_servers, unique)
    assert apply(env, TIERS) == 0
    with BackgroundWorker(env) as worker:
        wait(worker.worker.ready, "the worker to be ready")
        with Attached(env, "a", "top") as top:
            if kafka.is_tansu:
                wait(
                    lambda: worker.worker.capacity.membership_unreported, "membership detected as unreported"
                )
            else:
                wait(lambda: present(worker, "a", "top"), "the top group present")
            produce(env, [{"N": i} for i in range(3)])
            wait(lambda: len(top.received) == 3, "the attached group to get them")


def test_a_record_that_matches_nothing_does_not_hold_up_waiting_ones(kafka, unique) -> None:
    if kafka.is_tansu:
        pytest.skip("Tansu lists no members of live groups: presence is not measurable (docs/brokers.md)")
    env = make_env(kafka.bootstrap_servers, unique)
    assert apply(env, TIERS) == 0
    pending = wire.pending_topic(env.prefix, "a")
    with BackgroundWorker(env) as worker:
        wait(worker.worker.ready, "the worker to be ready")
        produce(env, [{"N": -1}, *({"N": i} for i in range(1, 6))])  # m0 matches nothing; m1-m5 wait
        wait(lambda: len(read(env, pending)) >= 6, "six records parked")
        with Attached(env, "a", "top") as top:
            wait(lambda: len(top.received) == 5, "the waiting records to pass the unmatched one")
            assert top.received == [f"m{i}" for i in range(1, 6)]
    # m0 stays where it is, nothing copied: it still waits for a subscription that matches it
    assert [m.value() for m in read(env, pending)] == [f"m{i}".encode() for i in range(6)]


CONSUMER_PROCESS = """
import sys
from subroute.client import QueueConsumer
from subroute.config.store import read_app
from subroute.ops.settings import Settings

bootstrap, prefix, app, group = sys.argv[1:5]
settings = Settings(bootstrap_servers=bootstrap, topic_prefix=prefix)
config = {"session.timeout.ms": 6000}
with QueueConsumer(settings, app, group, app_config=read_app(settings, app), consumer_config=config) as queue:
    while True:
        message = queue.poll(0.5)
        if message is not None:
            queue.ack(message)
"""


def test_a_crashed_consumer_process_counts_as_gone_once_its_session_expires(kafka, unique) -> None:
    if kafka.is_tansu:
        pytest.skip("Tansu lists no members of live groups: presence is not measurable (docs/brokers.md)")
    env = make_env(kafka.bootstrap_servers, unique)
    assert apply(env, TIERS) == 0
    with BackgroundWorker(env) as worker, Attached(env, "a", "low") as low:
        wait(worker.worker.ready, "the worker to be ready")
        process = subprocess.Popen(
            [sys.executable, "-c", CONSUMER_PROCESS, env.bootstrap, env.prefix, "a", "top"],
            stderr=subprocess.DEVNULL,
        )
        try:
            wait(lambda: present(worker, "a", "top"), "the consumer process to join")
            produce(env, [{"N": i} for i in range(3)])
            wait(lambda: len(values_of(env, "a", "top")) == 3, "the top group to get the first three")
            process.send_signal(signal.SIGKILL)  # no LeaveGroup: the broker notices when the session expires
            process.wait(10)
            # the session timeout (6 s), then one refresh; the wait's bound is generous, nothing is timed
            wait(lambda: absent(worker, "a", "top"), "the crashed consumer's group to count as gone", 60)
            produce(env, [{"N": i} for i in range(3, 6)])
            wait(lambda: len(low.received) == 3, "the next priority to get the next three")
        finally:
            process.kill()
            process.wait(10)
    assert len(values_of(env, "a", "top")) == 3
