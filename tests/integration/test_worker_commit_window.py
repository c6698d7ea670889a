"""The commit window on a real broker: offsets are committed when the window is due, not per batch, and a
worker hands partitions over only once what it routed from them is committed."""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, TopicPartition

from subroute import wire
from subroute.worker import progress
from subroute.worker.checkpoint import AT_LEAST_ONCE, EXACTLY_ONCE, Checkpoint
from subroute.worker.tally import BatchTally
from subroute.worker.window import CommitInterval
from tests.integration.harness import BackgroundWorker, Env, apply, make_env, produce, read

pytestmark = pytest.mark.kafka

CONFIG = """
apps:
  a:
    inputs: [INPUT]
    properties: {N: int}
    groups:
      even: {subscriptions: [{expression: 'N % 2 == 0'}]}
      odd: {subscriptions: [{expression: 'N % 2 == 1'}]}
"""


def _committed(consumer: Consumer, topic: str) -> tuple[int, int | None]:
    deadline = time.monotonic() + 20
    while True:
        try:
            (part,) = consumer.committed([TopicPartition(topic, 0)], timeout=10)
            return part.offset, wire.version_of(part.metadata)
        except KafkaException as exc:  # a new group's coordinator may take a moment to be found
            if not exc.args[0].retriable() or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def _tally(topic: str, first: int, last: int, version: int = 7) -> BatchTally:
    tally = BatchTally(version=version, messages_in=last - first)
    tally.first_offsets[(topic, 0)] = first
    tally.offsets[(topic, 0)] = last
    return tally


def test_the_checkpoint_commits_the_window_only_when_it_is_due(kafka, unique) -> None:
    env = make_env(kafka.bootstrap_servers, unique)
    produce(env, [{"N": i} for i in range(300)])

    def version(routed_under: int) -> int | None:  # Tansu drops commit metadata (docs/brokers.md)
        return None if kafka.is_tansu else routed_under

    consumer = Consumer(env.settings.client_config({"group.id": f"{unique}.g", "enable.auto.commit": False}))
    consumer.assign([TopicPartition(env.input, 0, 0)])
    checkpoint = Checkpoint(
        env.settings, consumer, AT_LEAST_ONCE, interval=CommitInterval(records=100, ms=60_000)
    )
    try:
        checkpoint.add(_tally(env.input, 0, 60))
        checkpoint.commit_if_due(drained=False)
        assert _committed(consumer, env.input)[0] < 0, "committed before the window was due"
        checkpoint.add(_tally(env.input, 60, 120))
        checkpoint.commit_if_due(drained=False)  # 120 records >= 100: due
        assert _committed(consumer, env.input) == (120, version(7))
        checkpoint.add(_tally(env.input, 120, 121, version=8))
        checkpoint.commit_if_due(drained=True)  # the input has nothing more: committed at once
        assert _committed(consumer, env.input) == (121, version(8))
        checkpoint.add(_tally(env.input, 121, 130, version=8))
    finally:
        checkpoint.close()  # shutdown commits what is left
    assert _committed(consumer, env.input) == (130, version(8))
    consumer.close()


def test_a_closed_window_is_committed_as_its_reports_arrive_while_the_next_one_fills(kafka, unique) -> None:
    """At-least-once, a due window is closed and committed once every record produced for it is acknowledged,
    without a flush and without waiting for the window after it, which stays uncommitted."""
    env = make_env(kafka.bootstrap_servers, unique)
    assert apply(env, CONFIG) == 0
    produce(env, [{"N": i} for i in range(200)])
    destination = env.topic("a", "even")
    consumer = Consumer(env.settings.client_config({"group.id": f"{unique}.g", "enable.auto.commit": False}))
    consumer.assign([TopicPartition(env.input, 0, 0)])
    checkpoint = Checkpoint(
        env.settings, consumer, AT_LEAST_ONCE, interval=CommitInterval(records=100, ms=60_000)
    )

    def route(first: int, last: int) -> None:
        tally = _tally(env.input, first, last)
        for offset in range(first, last):
            record = (destination, f"m{offset}".encode(), None, [], 0)
            checkpoint.producers.produce_of(destination)(
                destination,
                value=record[1],
                key=None,
                headers=[],
                timestamp=0,
                on_delivery=checkpoint.on_delivery,
            )
            tally.sent.append(record)
        checkpoint.add(tally)

    try:
        route(0, 150)
        checkpoint.commit_if_due(drained=False)  # due: closed, routing goes on
        route(150, 190)  # the next window, not due
        _wait_for(
            lambda: checkpoint.commit_if_due(drained=False) or _committed(consumer, env.input)[0] == 150,
            30,
            "the closed window is committed once its 150 records are acknowledged",
        )
        assert checkpoint.window.records == 40, "the open window was committed or lost"
        assert _committed(consumer, env.input)[0] == 150
    finally:
        checkpoint.close()
    assert _committed(consumer, env.input)[0] == 190
    assert len(read(env, destination)) == 190
    consumer.close()


def _wait_for(condition, timeout: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def _routed(env: Env, **settings: object) -> Counter[bytes]:
    return Counter(
        m.value() for group in ("even", "odd") for m in read(env, env.topic("a", group), **settings)
    )


class _PacedWorker(BackgroundWorker):
    """A worker that routes at most about 1,000 batches a second, so that it is still busy when another joins."""

    def __init__(self, env: Env, **options: object) -> None:
        super().__init__(env, **options)
        route = self.worker._process_batch

        def paced(*args: Any) -> Any:
            time.sleep(0.001)
            return route(*args)

        self.worker._process_batch = paced  # type: ignore[method-assign]

    def routed(self) -> float:
        return self.metrics.messages_in._value.get()


@pytest.mark.parametrize("guarantee", [AT_LEAST_ONCE, EXACTLY_ONCE])
def test_a_worker_joining_mid_stream_causes_no_duplicates(kafka, unique, guarantee: str) -> None:
    """The first worker's window never fills and never drains (a poll of one record is always a full batch, and
    the input has a backlog): only the commit before its partitions are revoked keeps the joining worker from
    routing them again."""
    count = 8_000
    env = make_env(kafka.bootstrap_servers, unique, partitions=4)
    assert apply(env, CONFIG) == 0
    produce(env, [{"N": i} for i in range(count)])
    options = {"guarantee": guarantee, "batch_size": 1, "commit_interval": CommitInterval(10**9, 10**9)}
    with _PacedWorker(env, **options) as first:
        _wait_for(lambda: first.routed() > 0, 60, "the first worker routes")
        with _PacedWorker(env, **options) as second:
            _wait_for(lambda: first.routed() + second.routed() >= count, 120, "both workers route the rest")
            assert second.routed() > 0, "the second worker got no partitions before the first finished"
            assert first.routed() < count
    routed = _routed(env, **{"isolation.level": "read_committed"})
    assert set(routed) == {f"m{i}".encode() for i in range(count)}
    assert max(routed.values()) == 1, "records routed twice: partitions were handed over uncommitted"


def test_the_input_counts_as_drained_only_when_nothing_is_fetched_beyond_the_position(kafka, unique) -> None:
    env = make_env(kafka.bootstrap_servers, unique)
    produce(env, [{"N": i} for i in range(10)])
    consumer = Consumer(
        env.settings.client_config(
            {"group.id": f"{unique}.g", "enable.auto.commit": False, "auto.offset.reset": "earliest"}
        )
    )
    held = _Held({(env.input, 0)}, set())
    consumer.assign([TopicPartition(env.input, 0, 0)])
    try:
        got = consumer.consume(4, timeout=10)
        assert len(got) == 4
        assert not progress.nothing_fetched_ahead(consumer, held), (
            "6 records were fetched beyond the position"
        )
        assert progress.nothing_fetched_ahead(consumer, _Held({(env.input, 0)}, {(env.input, 0)})), (
            "a paused partition waits on purpose"
        )
        while len(got) < 10:
            got += consumer.consume(10 - len(got), timeout=10)
        assert progress.nothing_fetched_ahead(consumer, held)
    finally:
        consumer.close()


class _Held:
    def __init__(self, assigned: set[tuple[str, int]], paused: set[tuple[str, int]]) -> None:
        self.assigned, self.paused = assigned, paused
