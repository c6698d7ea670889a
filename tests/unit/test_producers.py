"""The worker's producers: each destination topic always through one producer (so every partition keeps its
order), the topics spread over all of them, and exactly-once refused with more than one."""

from __future__ import annotations

import subprocess
import sys

import pytest
from confluent_kafka import Producer

from subroute.worker.producers import Producers

UNREACHABLE = {"bootstrap.servers": "127.0.0.1:9", "socket.connection.setup.timeout.ms": 1000}


def producers(count: int) -> Producers:
    return Producers(lambda _: Producer(UNREACHABLE), count)


def test_a_topic_always_goes_through_the_same_producer_and_topics_spread_over_all() -> None:
    pool = producers(4)
    topics = [f"subroute.app{a}.group{g}" for a in range(10) for g in range(10)]
    first = {topic: pool.of(topic) for topic in topics}
    assert all(pool.of(topic) is first[topic] for topic in reversed(topics))
    assert all(pool.produce_of(topic) == first[topic].produce for topic in topics)
    used = {id(p) for p in first.values()}
    assert used == {id(p) for p in pool}  # 100 topics over 4 producers: every one is used


def test_one_producer_takes_every_topic() -> None:
    pool = producers(1)
    assert {id(pool.of(f"t{i}")) for i in range(20)} == {id(pool.first)}


def test_no_producer_is_refused() -> None:
    with pytest.raises(ValueError, match="at least one producer"):
        producers(0)


def test_exactly_once_with_several_producers_is_a_usage_error() -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "subroute.cli",
            "worker",
            "-b",
            "127.0.0.1:9",
            "--guarantee",
            "exactly-once",
            "--producers",
            "2",
            "--metrics-port",
            "-1",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert "--producers must be 1" in done.stderr
