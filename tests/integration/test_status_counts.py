"""``subroute status`` counts messages, not offsets (issue 24, finding 1): what waits on an app's pending topic,
by reason, and its dead letters not redriven, equal to what reading the topics shows, after routing, after a
config change, after a redrive, after a drain, and with transaction markers and aborted records on the topics.

The truth each test holds status to is read here, apart from status's own code: the pending topic read
``read_committed`` from the router's committed position (its reason header counted), the group topics, and
``dlq list``; and, where the scenario fixes them, the numbers the produced records make.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from subroute import wire
from subroute.cli import main as cli
from tests.integration.harness import (
    BackgroundWorker,
    Env,
    apply,
    header,
    make_env,
    produce,
    read,
    run_worker,
)
from tests.integration.test_presence_capacity import Attached, present, wait
from tests.integration.test_worker_guarantees import broker_hides_aborted_records

pytestmark = pytest.mark.kafka

COMMITTED = {"isolation.level": "read_committed"}


def status(env: Env, capsys: pytest.CaptureFixture[str], *extra: str) -> dict[str, Any]:
    capsys.readouterr()
    assert cli(["status", "-o", "json", *env.common(), *extra]) == 0
    document: dict[str, Any] = json.loads(capsys.readouterr().out)
    return document


def app_row(document: dict[str, Any], app: str) -> dict[str, Any]:
    [row] = [row for row in document["apps"] if row["app"] == app]
    return row


def router_position(env: Env, topic: str) -> int:
    """The router group's committed offset on partition 0 of ``topic`` (0: none)."""
    reader = Consumer(env.settings.client_config({"group.id": wire.worker_group_id(env.prefix)}))
    try:
        [committed] = reader.committed([TopicPartition(topic, 0)], timeout=10)
        return max(committed.offset, 0)
    finally:
        reader.close()


def pending_truth(env: Env, app: str) -> Counter[str]:
    """What reading the pending topic shows: its committed records from the router's position on, by
    ``subroute.pending-reason`` ("-" for none: matched nothing)."""
    topic = wire.pending_topic(env.prefix, app)
    position = router_position(env, topic)
    return Counter(
        header(m, wire.PENDING_REASON) or "-" for m in read(env, topic, **COMMITTED) if m.offset() >= position
    )


def dlq_list_waiting(env: Env, app: str, capsys: pytest.CaptureFixture[str]) -> int:
    capsys.readouterr()
    assert cli(["dlq", "list", app, "-o", "json", *env.common()]) == 0
    waiting: int = json.loads(capsys.readouterr().out)["total"]["waiting"]
    return waiting


def delivered(env: Env, app: str, group: str) -> int:
    return len(read(env, env.topic(app, group), **COMMITTED))


def until(
    env: Env, capsys: pytest.CaptureFixture[str], done: Callable[[dict[str, Any]], bool], what: str
) -> dict[str, Any]:
    deadline = time.monotonic() + 60
    while True:
        document = status(env, capsys)
        if done(document):
            return document
        assert time.monotonic() < deadline, f"timed out waiting for {what}: {json.dumps(document)}"
        time.sleep(0.5)


WAITS = """
apps:
  billing:
    inputs: [INPUT]
    properties: {Kind: string}
    presence: required
    groups:
      capped: {subscriptions: [{expression: 'Kind == "capped"', max_unconfirmed: 3}]}
      absent: {subscriptions: [{expression: 'Kind == "absent"'}]}
"""


def test_after_routing_status_counts_each_waiting_message_once_by_reason(
    kafka, unique, capsys: pytest.CaptureFixture[str]
) -> None:
    if kafka.is_tansu:
        pytest.skip("Tansu lists no members of live groups: presence is not measurable (docs/brokers.md)")
    env = make_env(kafka.bootstrap_servers, unique)
    assert apply(env, WAITS) == 0
    kinds = ["capped", "absent", "other"] * 6 + ["capped"] * 4  # 10 capped, 6 absent, 6 matching nothing
    with BackgroundWorker(env, capacity_refresh_seconds=1.0) as worker:
        wait(worker.worker.ready, "the worker to be ready")
        with Attached(env, "billing", "capped", acking=False) as capped:
            wait(lambda: present(worker, "billing", "capped"), "the capped group present")
            produce(env, [{"Kind": kind} for kind in kinds])
            wait(lambda: len(capped.received) == 3, "the capped group to fill up")
            document = until(
                env,
                capsys,
                lambda d: (
                    sum(d["router"]["input_lag"].values()) == 0
                    and app_row(d, "billing")["waiting"] == len(kinds) - 3
                ),
                "every record routed or parked",
            )
            truth = pending_truth(env, "billing")
            table = (cli(["status", *env.common()]), capsys.readouterr().out)
    billing = app_row(document, "billing")
    assert billing["waiting_by_reason"] == {
        "no-consumer": 6,
        "capacity": 7,
        "no-match": 6,
        "reroute": 0,
        "expiring": 0,
    }
    assert billing["waiting_exact"] and billing["dead_letters"] == 0
    # what reading the topic shows, and every produced record accounted for once
    assert truth == Counter({"no-consumer": 6, "capacity": 7, "-": 6})
    routed = delivered(env, "billing", "capped") + delivered(env, "billing", "absent")
    assert billing["waiting"] + routed == len(kinds)
    # a group row holds the group's own figures, not the app's
    capped_row, absent_row = billing["groups"]
    assert (capped_row["lag"], capped_row["max_unconfirmed"], capped_row["full"]) == (3, 3, True)
    assert absent_row["present"] is False and "waiting" not in absent_row
    assert wire.consumer_group_id(env.prefix, "billing", "absent") in (billing["advice"] or "")
    code, out = table
    assert code == 0
    rows = [line.split() for line in out.splitlines() if line.startswith("billing ")]
    # one app row (the split by reason), then one row per group (its own figures)
    assert rows[0] == ["billing", "19", "6", "7", "6", "0", "0", "0"]
    assert [row[:2] for row in rows[1:]] == [["billing", "capped"], ["billing", "absent"]]

    # a read bounded below what waits says so: a floor, never a guess
    bounded = app_row(status(env, capsys, "--max-read", "5"), "billing")
    assert not bounded["waiting_exact"] and bounded["waiting"] <= 5
    assert cli(["status", "--max-read", "5", *env.common()]) == 0
    assert "≥" in capsys.readouterr().out


ROUTES = """
apps:
  shop:
    inputs: [INPUT]
    properties: {Kind: string}
    groups:
      a: {subscriptions: [{expression: 'Kind == "a"'}]}
"""

ROUTES_MORE = (
    ROUTES
    + """\
      b: {subscriptions: [{expression: 'Kind == "b"'}]}
"""
)


def test_after_a_config_change_what_matched_nothing_is_routed_and_no_longer_counted(
    kafka, unique, capsys: pytest.CaptureFixture[str]
) -> None:
    env = make_env(kafka.bootstrap_servers, unique)
    assert apply(env, ROUTES) == 0
    kinds = ["a", "b", "b"] * 5
    produce(env, [{"Kind": kind} for kind in kinds])
    run_worker(env)
    shop = app_row(status(env, capsys), "shop")
    assert (shop["waiting"], shop["waiting_by_reason"]["no-match"]) == (10, 10)
    assert pending_truth(env, "shop") == Counter({"-": 10})

    assert apply(env, ROUTES_MORE) == 0
    # parked under the older version: the worker evaluates them again (no worker runs now)
    shop = app_row(status(env, capsys), "shop")
    assert (shop["waiting"], shop["waiting_by_reason"]["reroute"], shop["waiting_by_reason"]["no-match"]) == (
        10,
        10,
        0,
    )
    run_worker(env)
    shop = app_row(status(env, capsys), "shop")
    assert shop["waiting"] == 0 and shop["waiting_exact"]
    assert pending_truth(env, "shop") == Counter()
    assert (delivered(env, "shop", "a"), delivered(env, "shop", "b")) == (5, 10)
    # the pending topic still holds the ten records: offsets were never the count
    assert len(read(env, wire.pending_topic(env.prefix, "shop"))) == 10


EXPIRING = """
apps:
  jobs:
    inputs: [INPUT]
    properties: {Kind: string}
    groups:
      work: {subscriptions: [{expression: 'Kind == "work"'}]}
"""


def test_with_transaction_markers_aborted_records_and_a_redrive_status_counts_messages(
    kafka, unique, capsys: pytest.CaptureFixture[str]
) -> None:
    env = make_env(kafka.bootstrap_servers, unique)
    if kafka.is_tansu and not broker_hides_aborted_records(env):
        pytest.skip(
            "a read_committed reader gets aborted records back from Tansu (docs/brokers.md), so they count as "
            "messages there: it runs on Apache Kafka, the default"
        )
    assert apply(env, EXPIRING) == 0
    # 8 expired on arrival (dead letters), 6 matching nothing (waiting), 4 routed; in small batches, so the
    # exactly-once worker commits several transactions (a marker each on every topic it wrote)
    for _ in range(2):
        produce(
            env,
            [
                *({"Kind": "work", wire.EXPIRATION: "1ms"} for _ in range(4)),
                *({"Kind": "idle"} for _ in range(3)),
                *({"Kind": "work"} for _ in range(2)),
            ],
        )
        time.sleep(0.05)  # the expiration runs out before the worker sees them
    run_worker(env, guarantee="exactly-once", batch_size=3)
    pending = wire.pending_topic(env.prefix, "jobs")
    dlq = wire.dlq_topic(env.prefix, "jobs")
    # an aborted transaction on the pending topic (a worker killed mid-batch): records, but no messages
    aborting = Producer(env.settings.client_config({"transactional.id": f"{env.prefix}.aborting"}))
    aborting.init_transactions(30)
    aborting.begin_transaction()
    for _ in range(5):
        aborting.produce(pending, b"aborted", headers=[(wire.CONFIG_VERSION, b"1")])
    aborting.flush(30)
    aborting.abort_transaction(30)
    # the markers are there: the topics end past their records
    assert _end(env, pending) > len(read(env, pending, **COMMITTED)) == 6
    assert _end(env, dlq) > len(read(env, dlq, **COMMITTED)) == 8

    jobs = app_row(status(env, capsys), "jobs")
    assert (jobs["waiting"], jobs["waiting_by_reason"]["no-match"], jobs["dead_letters"]) == (6, 6, 8)
    assert pending_truth(env, "jobs") == Counter({"-": 6})
    assert jobs["dead_letters"] == dlq_list_waiting(env, "jobs", capsys)
    assert delivered(env, "jobs", "work") == 4

    # a redrive of one reason, then of all: status agrees with dlq list's "waiting" after each
    assert cli(["dlq", "redrive", "jobs", "--reason", "expired", *env.common()]) == 0
    assert app_row(status(env, capsys), "jobs")["dead_letters"] == dlq_list_waiting(env, "jobs", capsys) == 0
    assert cli(["dlq", "redrive", "jobs", *env.common()]) == 0
    jobs = app_row(status(env, capsys), "jobs")
    assert jobs["dead_letters"] == dlq_list_waiting(env, "jobs", capsys) == 0 and jobs["dead_letters_exact"]
    assert len(read(env, dlq, **COMMITTED)) == 8  # the dead letters stay on their topic, redriven
    # they went back to the pending topic (routed to no group), their own 1ms expiration run out again
    assert (jobs["waiting"], jobs["waiting_by_reason"]["expiring"]) == (14, 8)
    assert sum(pending_truth(env, "jobs").values()) == 14


def _end(env: Env, topic: str) -> int:
    reader = Consumer(env.settings.client_config({"group.id": f"{env.prefix}.end"}))
    try:
        _, high = reader.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        return int(high)
    finally:
        reader.close()


DRAIN = """
apps:
  jobs:
    inputs: [INPUT]
    properties: {Seq: int}
    groups:
      old: {subscriptions: [{expression: 'Seq >= 0', priority: 10}]}
      new: {}
"""


def test_after_a_drain_the_drained_messages_wait_until_routed_again(
    kafka, unique, capsys: pytest.CaptureFixture[str]
) -> None:
    env = make_env(kafka.bootstrap_servers, unique)
    assert apply(env, DRAIN) == 0
    produce(env, [{"Seq": i} for i in range(12)])
    run_worker(env)
    assert delivered(env, "jobs", "old") == 12 and app_row(status(env, capsys), "jobs")["waiting"] == 0

    args = ["config", "delete", "group", "jobs", "old", "--drain", "--drain-settle-seconds", "0.5"]
    assert cli([*args, *env.common()]) == 0
    # drained back to the pending topic under the old version: waiting to be routed again
    jobs = app_row(status(env, capsys), "jobs")
    assert (jobs["waiting"], jobs["waiting_by_reason"]["reroute"]) == (12, 12)
    assert pending_truth(env, "jobs") == Counter({"replaced": 12})
    assert [row["group"] for row in jobs["groups"]] == ["new"]

    run_worker(env)
    jobs = app_row(status(env, capsys), "jobs")
    assert jobs["waiting"] == 0 and pending_truth(env, "jobs") == Counter()
    assert delivered(env, "jobs", "new") == 12
