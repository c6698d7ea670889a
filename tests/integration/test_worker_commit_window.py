"""The commit window on a real broker: offsets are committed when the window is due, not per batch, and a
worker hands partitions over only once what it routed from them is committed."""

from __future__ import annotations

import dataclasses
import time
from collections import Counter
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, TopicPartition
from prometheus_client import CollectorRegistry

from subroute import wire
from subroute.ops.metrics import RouterMetrics
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


def _produce_window(checkpoint: Checkpoint, env: Env, first: int, last: int) -> None:
    """Produce records ``first..last`` (end exclusive) of the input into the open window, as the worker does."""
    destination = env.topic("a", "even")
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
    try:
        _produce_window(checkpoint, env, 0, 150)
        checkpoint.commit_if_due(drained=False)  # due: closed, routing goes on
        _produce_window(checkpoint, env, 150, 190)  # the next window, not due
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


def _slow_reports(env: Env, unique: str) -> tuple[Env, Consumer]:
    """An env whose producers hold each batch for 3 s (``linger.ms``): delivery reports come late, as from a
    slow broker, unless a flush sends the batches at once. And a consumer assigned its input partition."""
    assert apply(env, CONFIG) == 0
    produce(env, [{"N": i} for i in range(400)])
    slow = dataclasses.replace(
        env, settings=dataclasses.replace(env.settings, kafka_config={"linger.ms": "3000"})
    )
    consumer = Consumer(env.settings.client_config({"group.id": f"{unique}.g", "enable.auto.commit": False}))
    consumer.assign([TopicPartition(env.input, 0, 0)])
    return slow, consumer


def test_closed_windows_wait_for_slow_reports_without_a_flush(kafka, unique) -> None:
    """At-least-once, a window that comes due while the one before it still waits for its delivery reports is
    closed too, and routing goes on: no flush is forced while the reports are merely slow. Both windows are
    committed, in order, once their reports have come."""
    env, consumer = _slow_reports(make_env(kafka.bootstrap_servers, unique), unique)
    checkpoint = Checkpoint(
        env.settings, consumer, AT_LEAST_ONCE, interval=CommitInterval(records=100, ms=60_000)
    )
    try:
        _produce_window(checkpoint, env, 0, 150)
        checkpoint.commit_if_due(drained=False)  # due: closed
        _produce_window(checkpoint, env, 150, 300)
        checkpoint.commit_if_due(drained=False)  # due too, while the first still waits
        assert len(checkpoint.producers.first) > 0, "the producer was flushed: routing was held back"
        assert _committed(consumer, env.input)[0] < 0, "committed before the reports came"
        _produce_window(checkpoint, env, 300, 320)  # the open window, not due
        _wait_for(
            lambda: checkpoint.commit_if_due(drained=False) or _committed(consumer, env.input)[0] == 300,
            30,
            "both closed windows are committed once their reports have come",
        )
        assert checkpoint.window.records == 20, "the open window was committed or lost"
    finally:
        checkpoint.close()
    assert _committed(consumer, env.input)[0] == 320
    assert len(read(env, env.topic("a", "even"))) == 320
    consumer.close()


def test_closed_windows_holding_too_many_records_are_flushed(kafka, unique) -> None:
    """What closed windows may hold while their reports are slow is bounded (they keep what they produced until
    they commit): beyond ``max_waiting_records``, the producers are flushed and everything is committed, routing
    held back meanwhile."""
    env, consumer = _slow_reports(make_env(kafka.bootstrap_servers, unique), unique)
    checkpoint = Checkpoint(
        env.settings,
        consumer,
        AT_LEAST_ONCE,
        interval=CommitInterval(records=100, ms=60_000),
        max_waiting_records=250,
    )
    try:
        _produce_window(checkpoint, env, 0, 150)
        checkpoint.commit_if_due(drained=False)  # closed: 150 records wait, within the bound
        assert _committed(consumer, env.input)[0] < 0
        _produce_window(checkpoint, env, 150, 300)
        checkpoint.commit_if_due(drained=False)  # 300 records would wait: flushed and committed
        assert len(checkpoint.producers.first) == 0, "not flushed"
        assert _committed(consumer, env.input)[0] == 300
    finally:
        checkpoint.close()
    consumer.close()


def test_the_time_waited_in_flushes_is_a_metric(kafka, unique) -> None:
    """At-least-once, each flush the loop waits in (here: the input drained) is observed in
    ``subroute_flush_seconds``; a commit with nothing produced flushes nothing and observes nothing."""
    env = make_env(kafka.bootstrap_servers, unique)
    assert apply(env, CONFIG) == 0
    produce(env, [{"N": i} for i in range(50)])
    metrics = RouterMetrics(CollectorRegistry(), runtime=False)
    consumer = Consumer(env.settings.client_config({"group.id": f"{unique}.g", "enable.auto.commit": False}))
    consumer.assign([TopicPartition(env.input, 0, 0)])
    checkpoint = Checkpoint(env.settings, consumer, AT_LEAST_ONCE, metrics=metrics)

    def flushes() -> float:
        return metrics.registry.get_sample_value("subroute_flush_seconds_count") or 0.0

    try:
        checkpoint.commit_if_due(drained=True)  # nothing routed: no flush
        assert flushes() == 0
        _produce_window(checkpoint, env, 0, 50)
        checkpoint.commit_if_due(drained=True)
        assert flushes() == 1
        assert _committed(consumer, env.input)[0] == 50
    finally:
        checkpoint.close()
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
