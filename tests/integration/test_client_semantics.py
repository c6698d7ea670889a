"""Seed 001 (AMPS message queues) on the real broker: delivery semantics on failure, the ack options, the Jobs ->
FailedJobs dead-letter example, backlog, leases, out-of-order acks and expiration."""

from __future__ import annotations

import time

import pytest

from subroute import wire
from subroute.client import AT_MOST_ONCE
from tests.integration.client_support import committed, put, queue, take, text
from tests.integration.harness import apply, header, make_env, read

pytestmark = pytest.mark.kafka

JOBS = """
apps:
  Jobs:
    inputs: [INPUT]
    max_cancels: 3
    max_deliveries: 10
    expiration: 1h
    groups:
      workers: {}
      sensors: {}
"""


def test_a_consumer_that_dies_without_acking(kafka, unique) -> None:
    # "With at-most-once delivery, the message will not be redelivered even if the subscriber fails to process
    # the message. With at-least-once delivery, the message will be redelivered to subscribers until the
    # message is either explicitly acknowledged, explicitly removed, or expired."
    env = make_env(kafka.bootstrap_servers, unique)
    assert apply(env, JOBS) == 0
    put(env, "Jobs", "workers", [("job-1", 1), ("job-2", 2)])
    put(env, "Jobs", "sensors", [("reading-1", 1), ("reading-2", 2)])

    first_worker = queue(env, "Jobs", "workers")
    first_sensor = queue(env, "Jobs", "sensors", semantics=AT_MOST_ONCE)
    assert text(take(first_worker)) == "job-1"
    assert text(take(first_sensor)) == "reading-1"
    first_worker.close()  # gone without acknowledging
    first_sensor.close()

    next_worker = queue(env, "Jobs", "workers")
    next_sensor = queue(env, "Jobs", "sensors", semantics=AT_MOST_ONCE)
    assert text(take(next_worker)) == "job-1"  # at-least-once: redelivered to the next subscriber
    assert text(take(next_sensor)) == "reading-2"  # at-most-once: lost, never repeated
    next_worker.close()
    next_sensor.close()
    assert committed(env, "Jobs", "workers") == -1001  # nothing acknowledged, nothing committed
    assert committed(env, "Jobs", "sensors") == 2  # committed on delivery


def test_ack_options_none_cancel_expire_and_expiration(kafka, unique) -> None:
    # | <none> | successfully processed and removed | cancel | returned to the queue, cancels counted |
    # | expire | immediately expired from the queue |
    env = make_env(kafka.bootstrap_servers, unique)
    assert apply(env, JOBS) == 0
    now_ms = int(time.time() * 1000)
    put(env, "Jobs", "workers", [("done", 1), ("retry", 2), ("unparseable", 3)])
    put(env, "Jobs", "workers", [("stale", 4)], timestamp=now_ms - 2 * 3_600_000)  # older than the app's 1h
    put(
        env,
        "Jobs",
        "workers",
        [("short-lived", 5)],
        headers=[(wire.EXPIRATION, b"1s")],
        timestamp=now_ms - 5000,
    )
    put(env, "Jobs", "workers", [("last", 6)])

    with queue(env, "Jobs", "workers") as q:
        done = take(q)
        assert q.ack(done)
        assert not q.ack(done)  # already removed
        retry = take(q)
        assert text(retry) == "retry" and retry.deliveries == 0
        assert q.cancel(retry)
        unparseable = take(q)
        assert text(unparseable) == "unparseable"
        assert q.expire(unparseable)
        last = take(q)  # "stale" and "short-lived" expired instead of being delivered
        assert text(last) == "last"
        q.ack(last)
        again = take(q)
        assert (text(again), again.deliveries, again.cancels) == ("retry", 1, 1)
        assert again.header(wire.SOURCE) == retry.header(wire.SOURCE)
        q.ack(again)
        assert q.stats.dead_lettered == {"rejected": 1, "expired": 2}
    assert committed(env, "Jobs", "workers") == 7  # 6 records and the cancel's copy

    letters = {m.value(): m for m in read(env, wire.dlq_topic(env.prefix, "Jobs"))}
    assert set(letters) == {b"unparseable", b"stale", b"short-lived"}
    assert header(letters[b"unparseable"], wire.DLQ_REASON) == "rejected"
    assert header(letters[b"stale"], wire.DLQ_REASON) == "expired"
    assert header(letters[b"short-lived"], wire.DLQ_REASON) == "expired"
    # The original value and headers are kept.
    assert header(letters[b"unparseable"], wire.SOURCE) == f"{env.input}/0/3"
    assert header(letters[b"short-lived"], wire.EXPIRATION) == "1s"


def test_jobs_max_cancels_3_and_max_deliveries_10_go_to_failed_jobs(kafka, unique) -> None:
    # <MaxCancels>3</MaxCancels> <MaxDeliveries>10</MaxDeliveries>: "expire a message from Jobs on the 3rd time it
    # receives a sow_delete with the cancel operation for that message, or after the 10th unsuccessful delivery",
    # and move it to FailedJobs (here the app's dead-letter topic) with the reason.
    env = make_env(kafka.bootstrap_servers, unique)
    assert apply(env, JOBS) == 0
    put(env, "Jobs", "workers", [("cancelled-job", 1), ("stuck-job", 2)])
    seen = {"cancelled-job": 0, "stuck-job": 0}
    with queue(env, "Jobs", "workers", max_backlog=2, lease=0.2) as q:
        deadline = time.monotonic() + 30
        while sum(q.stats.dead_lettered.values()) < 2 and time.monotonic() < deadline:
            message = q.poll(0.5)
            if message is None:
                continue
            seen[text(message)] += 1
            if text(message) == "cancelled-job":
                q.cancel(message)
            # the stuck job is never acknowledged: its lease runs out
        assert q.stats.dead_lettered == {"max-cancels": 1, "max-deliveries": 1}
    assert seen == {"cancelled-job": 3, "stuck-job": 10}

    failed = {m.value(): m for m in read(env, wire.dlq_topic(env.prefix, "Jobs"))}
    cancelled, stuck = failed[b"cancelled-job"], failed[b"stuck-job"]
    assert header(cancelled, wire.DLQ_REASON) == "max-cancels"
    assert header(stuck, wire.DLQ_REASON) == "max-deliveries"
    assert [e["event"] for e in wire.history_of(cancelled.headers())] == [
        "cancel",
        "cancel",
        "cancel",
        "dead-letter",
    ]
    assert [e["event"] for e in wire.history_of(stuck.headers())] == ["lease-expired"] * 10 + ["dead-letter"]
    assert header(cancelled, wire.SOURCE) == f"{env.input}/0/1"
    assert header(cancelled, wire.GROUP) == "workers"


def test_max_cancels_and_max_deliveries_0_mean_no_maximum(kafka, unique) -> None:
    # AMPS (seed 001): MaxCancels and MaxDeliveries "Default: no maximum (0)". Applied, and the client keeps
    # giving the message back, past any count, and never dead-letters it.
    env = make_env(kafka.bootstrap_servers, unique)
    config = """
apps:
  Jobs:
    inputs: [INPUT]
    max_cancels: 0
    max_deliveries: 0
    groups:
      workers: {}
"""
    assert apply(env, config) == 0
    put(env, "Jobs", "workers", [("retried", 1)])
    with queue(env, "Jobs", "workers") as q:
        assert (q.app_config.max_cancels, q.app_config.max_deliveries) == (0, 0)
        for attempt in range(12):
            message = take(q)
            assert (text(message), message.cancels) == ("retried", attempt)
            assert q.cancel(message)
        last = take(q)
        assert (last.cancels, last.deliveries) == (12, 12)
        q.ack(last)
        assert q.stats.dead_lettered == {}
    assert read(env, wire.dlq_topic(env.prefix, "Jobs")) == []


def test_backlog_1_delivers_one_at_a_time_and_2_pipelines(kafka, unique) -> None:
    # "if a subscriber does not provide a max_backlog on a subscription, AMPS defaults to a max_backlog of 1"
    env = make_env(kafka.bootstrap_servers, unique)
    assert apply(env, JOBS) == 0
    put(env, "Jobs", "workers", [(f"w{i}", i) for i in range(3)])
    put(env, "Jobs", "sensors", [(f"s{i}", i) for i in range(3)])
    with queue(env, "Jobs", "workers") as one, queue(env, "Jobs", "sensors", max_backlog=2) as two:
        w0 = take(one)
        assert one.poll(1.0) is None  # w1 waits for the acknowledgement of w0
        assert one.buffered >= 1
        one.ack(w0)
        assert text(take(one)) == "w1"

        s0, s1 = take(two), take(two)  # pipelined: the next one is already here while s0 is processed
        assert [text(s0), text(s1)] == ["s0", "s1"]
        assert two.poll(0.5) is None
        two.ack(s0)
        assert text(take(two)) == "s2"
        assert two.outstanding == 2


def test_a_lease_that_runs_out_returns_the_message(kafka, unique) -> None:
    # "If the subscriber has not responded by removing the message within the lease period, AMPS revokes the
    # lease and the message is available to another subscriber."
    env = make_env(kafka.bootstrap_servers, unique)
    assert apply(env, JOBS) == 0
    put(env, "Jobs", "workers", [("slow", 1), ("next", 2)])
    with queue(env, "Jobs", "workers", lease=0.5) as q:
        slow = take(q)
        assert slow.lease_deadline is not None
        time.sleep(0.7)
        assert text(take(q)) == "next"  # the lease ran out, which freed the backlog slot
        assert not q.ack(slow)  # too late: the message went back to the queue
        assert q.stats.lease_expired == 1


def test_out_of_order_acks_commit_only_the_contiguous_prefix(kafka, unique) -> None:
    env = make_env(kafka.bootstrap_servers, unique)
    assert apply(env, JOBS) == 0
    put(env, "Jobs", "workers", [(f"m{i}", i) for i in range(4)])
    with queue(env, "Jobs", "workers", max_backlog=4) as q:
        m0, m1, m2, _m3 = (take(q) for _ in range(4))
        q.ack(m2)
        q.ack(m1)
        q.commit()
        assert committed(env, "Jobs", "workers") == -1001  # m0 is still out
        q.ack(m0)
        q.commit()
        assert committed(env, "Jobs", "workers") == 3  # m0..m2; m3 is still out
    assert committed(env, "Jobs", "workers") == 3  # closing commits what is acknowledged, never m3
