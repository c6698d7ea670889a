"""``subroute status`` on the real broker: presence (live members of each group's consumer group), lag on the
group topic and its priority bands against max_unconfirmed, what waits per app, and the config version each
router worker has committed under (the waiting counts themselves: test_status_counts.py)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
import yaml
from confluent_kafka import Consumer, TopicPartition

from subroute import wire
from subroute.cli import main as cli
from subroute.config.store import read_config
from tests.integration.harness import ROOT, BackgroundWorker, Env, apply, make_env, produce

pytestmark = pytest.mark.kafka

SHOP = """
apps:
  Shop:
    inputs: [INPUT]
    properties: {Kind: string, Urgency: int}
    priority: Urgency
    presence: ignored  # route to the groups before their consumers attach
    groups:
      fast:
        subscriptions:
          - {expression: 'Kind == "a"', max_unconfirmed: 10}
      slow:
        subscriptions:
          - {expression: 'Kind == "b"'}
"""


def status(env: Env, capsys: pytest.CaptureFixture[str], *extra: str) -> dict[str, object]:
    capsys.readouterr()
    assert cli(["status", "-o", "json", *env.common(), *extra]) == 0
    document: dict[str, object] = json.loads(capsys.readouterr().out)
    return document


def join_and_commit(env: Env, app: str, group: str, offset: int) -> Consumer:
    """A plain consumer in the group's consumer group, assigned, with ``offset`` committed on partition 0."""
    consumer = Consumer(
        env.settings.client_config(
            {"group.id": wire.consumer_group_id(env.prefix, app, group), "enable.auto.commit": False}
        )
    )
    consumer.subscribe([env.topic(app, group)])
    deadline = time.monotonic() + 30
    while not consumer.assignment() and time.monotonic() < deadline:
        consumer.poll(0.2)
    assert consumer.assignment(), "the consumer was never assigned"
    consumer.commit(offsets=[TopicPartition(env.topic(app, group), 0, offset)], asynchronous=False)
    return consumer


def test_status_shows_presence_lag_parked_records_and_worker_versions(
    kafka, unique, capsys: pytest.CaptureFixture[str]
) -> None:
    if kafka.is_tansu:
        pytest.skip(
            "Tansu lists no members of live consumer groups (docs/brokers.md): status cannot name the router's "
            "workers or a group's members there; it runs on Apache Kafka, the default"
        )
    env = make_env(kafka.bootstrap_servers, unique)
    assert apply(env, SHOP) == 0
    version = read_config(env.settings).version
    produce(
        env,
        [
            {"Kind": "a", "Urgency": 0},
            {"Kind": "a", "Urgency": 0},
            {"Kind": "a", "Urgency": 5},  # band 5: the .p5 topic
            {"Kind": "a", "Urgency": 5},
            {"Kind": "b", "Urgency": 0},
            {"Kind": "c", "Urgency": 0},  # no subscription matches: pending
            {"Kind": "c", "Urgency": 0},
        ],
    )
    # no worker has run yet: the input lag says what waits for one
    assert status(env, capsys)["router"] == {  # type: ignore[comparison-overlap]
        "consumer_group": wire.worker_group_id(env.prefix),
        "state": "dead",
        "workers": [],
        "input_lag": {env.input: 7},
    }
    with BackgroundWorker(env):
        deadline = time.monotonic() + 60
        while True:
            document = status(env, capsys)
            router = document["router"]
            assert isinstance(router, dict)
            workers = router["workers"]
            if workers and workers[0]["config_version"] == version and workers[0]["backlog"] == 0:
                break
            assert time.monotonic() < deadline, json.dumps(document["router"])
            time.sleep(0.5)
        consumer = join_and_commit(env, "Shop", "fast", 1)
        try:
            document = status(env, capsys)
            table_out = (cli(["status", *env.common()]), capsys.readouterr().out)
            assert cli(["status", "-o", "yaml", "--app", "Shop", *env.common()]) == 0
            as_yaml = yaml.safe_load(capsys.readouterr().out)
        finally:
            consumer.close()

    assert document["config_version"] == version
    [worker] = document["router"]["workers"]  # type: ignore[index]
    assert worker["config_version"] == version and worker["current"] is True
    assert worker["config_versions"] == [version] and worker["partitions"] == 2  # the input and Shop.pending
    [shop] = document["apps"]  # type: ignore[misc]
    assert (shop["app"], shop["waiting"], shop["dead_letters"]) == ("Shop", 2, 0)
    assert shop["waiting_by_reason"]["no-match"] == 2  # the two "c" records
    fast, slow = shop["groups"]
    assert fast["consumer_group"] == wire.consumer_group_id(env.prefix, "Shop", "fast")
    assert (fast["members"], fast["state"]) == (1, "stable")
    # 2 on the base topic, 1 of them confirmed; 2 on the .p5 band, none confirmed
    assert (fast["lag"], fast["max_unconfirmed"], fast["full"]) == (3, 10, False)
    assert f"{env.topic('Shop', 'fast')}.p5" in fast["topics"]
    assert (slow["members"], slow["lag"], slow["max_unconfirmed"], slow["full"]) == (0, 1, None, False)
    assert (fast["present"], slow["present"]) == (True, False)

    code, table = table_out
    assert code == 0 and f"config version {version}" in table
    row = next(line for line in table.splitlines() if line.startswith("Shop") and " fast " in line)
    assert row.split()[:5] == ["Shop", "fast", "1", "(stable)", "3"]
    assert "router workers" in table
    assert as_yaml["apps"][0]["groups"][0]["lag"] == 3

    assert cli(["status", "--app", "Nope", *env.common()]) == 2
    assert "no app 'Nope'" in capsys.readouterr().err


def test_status_watch_prints_until_interrupted(kafka, unique) -> None:
    env = make_env(kafka.bootstrap_servers, unique)
    assert apply(env, SHOP) == 0
    watch = subprocess.Popen(
        [sys.executable, "-m", "subroute.cli", "status", "--watch", "0.2", "-o", "json", *env.common()],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ROOT,
        env=os.environ,
    )
    try:
        assert watch.stdout is not None
        first = json.loads(watch.stdout.readline())
        second = json.loads(watch.stdout.readline())
        assert first["apps"][0]["app"] == second["apps"][0]["app"] == "Shop"
    finally:
        watch.send_signal(signal.SIGINT)
        _, err = watch.communicate(timeout=30)
    assert watch.returncode == 130, err
