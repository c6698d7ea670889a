"""Delivery guarantees on a real broker: SIGKILL a worker mid-stream, start another, count what arrived."""

from __future__ import annotations

import signal
import time
import uuid
from collections import Counter

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from subroute.worker.window import DEFAULT_COMMIT_RECORDS
from tests.integration.harness import Env, apply, make_env, produce, read, worker_process

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
COUNT = 60_000


def _end_offset(env: Env, topic: str) -> int:
    consumer = Consumer(env.settings.client_config({"group.id": "probe"}))
    try:
        metadata = consumer.list_topics(topic, timeout=5).topics[topic]
        return sum(
            consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=5)[1]
            for p in metadata.partitions
        )
    finally:
        consumer.close()


def _kill_midstream_then_finish(env: Env, *args: str) -> None:
    # The first worker takes small batches, and is killed once 2,000 records show on one group topic: it must
    # still be mid-stream then, however fast routing has become (the check below fails otherwise). End offsets
    # lag behind on some brokers (docs/brokers.md: Tansu's ListOffsets is short by a batch), hence the margin.
    first = worker_process(env, "--batch-size", "200", *args)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and _end_offset(env, env.topic("a", "even")) < 2_000:
        assert first.poll() is None, first.stderr.read().decode() if first.stderr else ""
        time.sleep(0.05)
    first.send_signal(signal.SIGKILL)
    first.wait(10)
    routed_before = _end_offset(env, env.topic("a", "even")) + _end_offset(env, env.topic("a", "odd"))
    assert routed_before < COUNT, "the worker finished before it was killed: nothing was tested"
    second = worker_process(env, "--exit-on-idle", "3", *args)
    _, stderr = second.communicate(timeout=180)
    assert second.returncode == 0, stderr.decode()[-3000:]


def _routed_counts(env: Env, **read_settings: object) -> Counter[bytes]:
    messages = read(env, env.topic("a", "even"), **read_settings) + read(
        env, env.topic("a", "odd"), **read_settings
    )
    return Counter(m.value() for m in messages)


def test_at_least_once_sigkill_loses_nothing(kafka, unique) -> None:
    env = make_env(kafka.bootstrap_servers, unique, partitions=2)
    assert apply(env, CONFIG) == 0
    produce(env, [{"N": i} for i in range(COUNT)])
    _kill_midstream_then_finish(env)
    counts = _routed_counts(env)
    expected = {f"m{i}".encode() for i in range(COUNT)}
    assert set(counts) == expected  # every input message routed: no loss
    duplicates = sum(counts.values()) - COUNT
    # at most the killed worker's uncommitted commit window (it may pass its size by one batch) and the batch
    # it was routing
    assert duplicates <= DEFAULT_COMMIT_RECORDS + 2 * 2000


def broker_hides_aborted_records(env: Env) -> bool:
    """Write one aborted transaction and read it back with read_committed (Tansu returns it: docs/brokers.md)."""
    topic = f"{env.prefix}-abort-probe"
    producer = Producer(env.settings.client_config({"transactional.id": f"probe-{uuid.uuid4().hex}"}))
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic, b"aborted")
    producer.flush()
    producer.abort_transaction(30)
    producer.begin_transaction()
    producer.produce(topic, b"committed")
    producer.commit_transaction(30)
    values = [m.value() for m in read(env, topic, **{"isolation.level": "read_committed"})]
    return values == [b"committed"]


def test_exactly_once_sigkill_no_loss_and_no_duplicates_for_read_committed(kafka, unique) -> None:
    env = make_env(kafka.bootstrap_servers, unique, partitions=2)
    assert apply(env, CONFIG) == 0
    produce(env, [{"N": i} for i in range(COUNT)])
    # The successor takes over the killed worker's transactional id (as a restarted pod would), which aborts
    # the transaction the killed worker left open.
    _kill_midstream_then_finish(
        env, "--guarantee", "exactly-once", "--transactional-id", f"{env.prefix}.router.w0"
    )
    counts = _routed_counts(env, **{"isolation.level": "read_committed"})
    assert set(counts) == {f"m{i}".encode() for i in range(COUNT)}
    if kafka.is_tansu and not broker_hides_aborted_records(env):
        pytest.skip(
            "no loss checked; the no-duplicates assertion needs a broker whose read_committed hides aborted "
            "transactions, and Tansu returns them (docs/brokers.md): it runs on Apache Kafka, the default"
        )
    assert max(counts.values()) == 1
