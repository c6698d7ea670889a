"""``subroute dlq list|show|redrive`` and ``subroute publish`` (AMPS DefaultPublishTarget) on the real broker."""

from __future__ import annotations

import json

import pytest

from subroute import names
from subroute.cli import main as cli
from tests.integration.client_support import put, queue, take, text
from tests.integration.harness import apply, header, make_env, read

pytestmark = pytest.mark.kafka

JOBS = """
apps:
  Jobs:
    inputs: [INPUT]
    max_cancels: 1
    default_publish: INPUT
    groups:
      workers: {}
  Audit:
    inputs: [INPUT]
    groups:
      all: {}
"""


def test_dead_letters_listed_shown_and_redriven_once(kafka, unique, capsys) -> None:
    env = make_env(kafka.bootstrap_servers, unique)
    assert apply(env, JOBS) == 0
    put(env, "Jobs", "workers", [("bad-1", 1), ("bad-2", 2), ("flaky", 3)])
    with queue(env, "Jobs", "workers") as q:
        for _ in range(3):
            message = take(q)
            if text(message) == "flaky":
                q.cancel(message)  # max_cancels 1: straight to the dead-letter topic
            else:
                q.expire(message)  # reason "rejected"
    capsys.readouterr()

    assert cli(["dlq", "list", "Jobs", *env.common()]) == 0
    listing = capsys.readouterr().out.splitlines()
    assert listing[1].split() == ["max-cancels", "1", "0", "1"]
    assert listing[2].split() == ["rejected", "2", "0", "2"]

    assert cli(["dlq", "show", "Jobs", "--reason", "rejected", "--limit", "1", *env.common()]) == 0
    [shown] = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert (shown["value"]["text"], shown["reason"], shown["group"]) == ("bad-1", "rejected", "workers")
    assert shown["source"] == f"{env.input}/0/1"
    assert [e["event"] for e in shown["history"]] == ["expire", "dead-letter"]

    assert cli(["dlq", "redrive", "Jobs", "--reason", "max-cancels", *env.common()]) == 0
    assert "redriven 1 dead letter(s) with reason max-cancels" in capsys.readouterr().out
    assert cli(["dlq", "redrive", "Jobs", "--reason", "max-cancels", *env.common()]) == 0  # not repeated
    assert "redriven 0" in capsys.readouterr().out
    assert cli(["dlq", "redrive", "Jobs", *env.common()]) == 0  # the rest; the one above is not sent again
    assert "redriven 2 dead letter(s) of Jobs" in capsys.readouterr().out
    assert cli(["dlq", "list", "Jobs", *env.common()]) == 0
    assert capsys.readouterr().out.splitlines()[-1].split() == ["total", "3", "3", "0"]

    back = [m for m in read(env, env.topic("Jobs", "workers")) if header(m, names.REDRIVEN) == "dlq"]
    assert sorted(m.value() for m in back) == [b"bad-1", b"bad-2", b"flaky"]
    flaky = next(m for m in back if m.value() == b"flaky")
    assert header(flaky, names.DELIVERIES) is None and header(flaky, names.DLQ_REASON) is None
    assert header(flaky, names.SOURCE) == f"{env.input}/0/3"

    # Their sources were delivered before: a redrive is on purpose, not a duplicate.
    with queue(env, "Jobs", "workers", max_backlog=3) as q:
        again = sorted(text(take(q)) for _ in range(3))
    assert again == ["bad-1", "bad-2", "flaky"]


def test_publish_writes_to_the_default_publish_topic(kafka, unique, capsys) -> None:
    env = make_env(kafka.bootstrap_servers, unique)
    assert apply(env, JOBS) == 0
    code = cli(
        ["publish", "--app", "Jobs", "--header", "Kind=report", "--key", "k1", "run report", *env.common()]
    )
    assert code == 0
    assert f"published to {env.input}" in capsys.readouterr().out
    [record] = read(env, env.input)
    assert (record.key(), record.value(), header(record, "Kind")) == (b"k1", b"run report", "report")

    assert cli(["publish", "--app", "Audit", "x", *env.common()]) == 2  # no default_publish
    assert "has no default_publish" in capsys.readouterr().err
    assert cli(["publish", "--app", "Nobody", "x", *env.common()]) == 2
