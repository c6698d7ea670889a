"""Plumbing for the reliability tests: a throttled input stream that records what the broker acknowledged, worker
processes with their metrics, reading every app topic back completely, and writing config records directly."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition

from subroute import wire
from subroute.config.codec import ConfigValue, encode
from subroute.kafka.clients import admin_client, existing_topics
from subroute.ops.settings import Settings
from tests.reliability.ledger import Output, Sent

ROOT = Path(__file__).resolve().parents[2]
WorkerEnv = {"SUBROUTE_KAFKA_SESSION_TIMEOUT_MS": "6000"}

# key, value, headers, timestamp (None: the producer's clock)
Message = tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]], int | None]


def props_headers(props: dict[str, object]) -> list[tuple[str, bytes | None]]:
    return [(k, (str(v).lower() if isinstance(v, bool) else str(v)).encode()) for k, v in props.items()]


class Stream:
    """Produces messages to one topic (optionally at ``rate`` per second) in a thread and keeps, for each one,
    what the broker acknowledged: topic, partition, offset, timestamp. ``sent`` is the ledger's input side.

    ``allowed``: produce only that many messages until ``allow`` raises it (None: no limit). A test whose
    faults take longer than planned holds the stream so that it still flows when the later faults strike;
    after a hold the pace starts afresh, so the stream never bursts to catch up with its schedule."""

    def __init__(
        self,
        settings: Settings,
        topic: str,
        messages: Iterable[Message],
        rate: float | None = None,
        allowed: int | None = None,
    ) -> None:
        self.settings = settings
        self.topic = topic
        self.messages = messages
        self.rate = rate
        self.sent: list[Sent] = []
        self.failures: list[str] = []
        self.produced = 0
        self._allowed = allowed
        self._gate = threading.Condition()
        self._thread = threading.Thread(target=self._run, name="stream", daemon=True)
        self.done = threading.Event()

    def allow(self, count: int | None) -> None:
        """Let the stream produce up to ``count`` messages in all (None: all of them)."""
        with self._gate:
            self._allowed = count
            self._gate.notify_all()

    def _hold(self, index: int, producer: Producer) -> bool:
        """Wait while message ``index`` is beyond what is allowed; True if the stream had to wait."""
        held = False
        with self._gate:
            while self._allowed is not None and index >= self._allowed:
                held = True
                producer.poll(0)
                self._gate.wait(0.1)
        return held

    def start(self) -> Stream:
        self._thread.start()
        return self

    def join(self, timeout: float = 600) -> list[Sent]:
        self._thread.join(timeout)
        assert not self._thread.is_alive(), "the input stream did not finish"
        assert not self.failures, f"{len(self.failures)} input records not acknowledged: {self.failures[:3]}"
        return self.sent

    def _run(self) -> None:
        producer = Producer(
            self.settings.client_config({"linger.ms": 5, "enable.idempotence": True, "acks": "all"})
        )
        started = time.monotonic()
        try:
            for i, (key, value, headers, timestamp) in enumerate(self.messages):
                if self._hold(i, producer) and self.rate is not None:
                    started = time.monotonic() - i / self.rate
                if self.rate is not None:
                    delay = started + i / self.rate - time.monotonic()
                    if delay > 0:
                        producer.poll(0)
                        time.sleep(delay)
                kwargs: dict[str, Any] = {}
                if timestamp is not None:
                    kwargs["timestamp"] = timestamp
                while True:
                    try:
                        producer.produce(
                            self.topic,
                            value=value,
                            key=key,
                            headers=headers,
                            on_delivery=self._delivered(key, value, headers),
                            **kwargs,
                        )
                        break
                    except BufferError:
                        producer.poll(0.05)
                self.produced += 1
                if i % 1000 == 0:
                    producer.poll(0)
            remaining = producer.flush(300)
            if remaining:
                self.failures.append(f"{remaining} records still queued after 300 s")
        finally:
            self.done.set()

    def _delivered(
        self, key: bytes | None, value: bytes | None, headers: list[tuple[str, bytes | None]]
    ) -> Callable[[KafkaError | None, Any], None]:
        def on_delivery(error: KafkaError | None, message: Any) -> None:
            if error is not None:
                self.failures.append(str(error))
                return
            self.sent.append(
                Sent(
                    message.topic(),
                    message.partition(),
                    message.offset(),
                    key,
                    value,
                    tuple(headers),
                    message.timestamp()[1],
                )
            )

        return on_delivery


class WorkerProcess:
    """``subroute worker`` as its own process (so it can be SIGKILLed), with its metrics endpoint scraped."""

    def __init__(
        self,
        settings: Settings,
        *args: str,
        env: dict[str, str] | None = None,
        log_dir: Path | None = None,
    ) -> None:
        self.log = tempfile.NamedTemporaryFile(  # noqa: SIM115  (kept open for the process's lifetime)
            "w+b", prefix="worker-", suffix=".log", dir=log_dir, delete=False
        )
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "subroute.cli",
                "worker",
                "--bootstrap-servers",
                settings.bootstrap_servers,
                "--topic-prefix",
                settings.topic_prefix,
                "--metrics-port",
                "0",
                *args,
            ],
            env={**os.environ, **WorkerEnv, **(env or {})},
            stdout=subprocess.PIPE,
            stderr=self.log,
            cwd=ROOT,
        )
        self.port: int | None = None
        self._port_seen = threading.Event()
        threading.Thread(target=self._read_stdout, daemon=True).start()

    def _read_stdout(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            found = re.search(rb"metrics on :(\d+)", line)
            if found:
                self.port = int(found.group(1))
                self._port_seen.set()

    def metrics(self, timeout: float = 2.0) -> dict[str, float]:
        """Every sample of /metrics: ``name{labels}`` -> value; empty if the endpoint is not up."""
        if self.port is None and not self._port_seen.wait(0):
            return {}
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=timeout) as response:
                text = response.read().decode()
        except OSError:
            return {}
        return parse_metrics(text)

    def messages_in(self) -> float:
        return self.metrics().get("subroute_messages_in_total", 0.0)

    def alive(self) -> bool:
        return self.process.poll() is None

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)

    def terminate(self, timeout: float = 60) -> int:
        with contextlib.suppress(ProcessLookupError):
            self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout)

    def wait(self, timeout: float) -> int:
        return self.process.wait(timeout)

    def log_tail(self, chars: int = 4000) -> str:
        self.log.flush()
        return Path(self.log.name).read_bytes()[-chars:].decode(errors="replace")

    def notable(self, limit: int = 40) -> list[str]:
        """The worker's warning and error lines (rebalances, refused commits, rewinds), the first ``limit``: what
        a test prints beside a ledger's findings."""
        self.log.flush()
        lines = Path(self.log.name).read_bytes().decode(errors="replace").splitlines()
        return [line for line in lines if '"level": "warning"' in line or '"level": "error"' in line][:limit]

    def routed_again(self) -> dict[tuple[str, int], list[tuple[int, int]]]:
        """The input offsets this worker logged as routed again after a refused commit (a rebalance took its
        partitions meanwhile): per partition, ``(first, end)`` ranges, end exclusive."""
        self.log.flush()
        ranges: dict[tuple[str, int], list[tuple[int, int]]] = {}
        for line in Path(self.log.name).read_bytes().decode(errors="replace").splitlines():
            if '"routed_again"' not in line:
                continue
            text = json.loads(line)["routed_again"]
            for part in filter(None, text.split(", ")):
                where, _, span = part.rpartition("=")
                topic, _, partition = where.rpartition("/")
                first, _, end = span.partition("..")
                ranges.setdefault((topic, int(partition)), []).append((int(first), int(end)))
        return ranges

    def close(self) -> None:
        if self.alive():
            self.kill()
        self.log.close()
        if os.environ.get("SUBROUTE_RELIABILITY_KEEP_LOGS"):
            print(f"worker log kept: {self.log.name}")
            return
        with contextlib.suppress(OSError):
            os.unlink(self.log.name)


_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*(?:\{[^}]*\})?)\s+(\S+)$")


def parse_metrics(text: str) -> dict[str, float]:
    samples: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        found = _SAMPLE.match(line.strip())
        if found:
            samples[found.group(1)] = float(found.group(2))
    return samples


def metric_sum(samples: dict[str, float], name: str) -> float:
    """The sum of a metric over all its label sets."""
    return sum(v for k, v in samples.items() if k == name or k.startswith(name + "{"))


def app_topics(settings: Settings, apps: Iterable[str]) -> list[str]:
    """Every existing topic of the apps: groups (all bands), pending and dead letters."""
    prefix = settings.topic_prefix
    present = existing_topics(admin_client(settings))
    wanted = {f"{prefix}.{app}." for app in apps}
    return sorted(t for t in present if any(t.startswith(w) for w in wanted))


def read_outputs(
    settings: Settings, topics: Sequence[str], *, read_committed: bool = False, max_wait: float = 300
) -> list[Output]:
    """Every record of every partition of ``topics`` from the beginning to the end the fetches report.

    Fails (rather than returning a short list) when a partition does not reach its end within ``max_wait``.
    """
    consumer = Consumer(
        settings.client_config(
            {
                "group.id": f"ledger-reader-{time.monotonic_ns()}",
                "enable.auto.commit": False,
                "enable.partition.eof": True,
                "isolation.level": "read_committed" if read_committed else "read_uncommitted",
            }
        )
    )
    out: list[Output] = []
    try:
        partitions: list[TopicPartition] = []
        metadata = consumer.list_topics(timeout=10)
        for topic in topics:
            info = metadata.topics.get(topic)
            if info is None or info.error is not None:
                continue
            partitions.extend(TopicPartition(topic, p, OFFSET_BEGINNING) for p in info.partitions)
        if not partitions:
            return out
        consumer.assign(partitions)
        pending = {(tp.topic, tp.partition) for tp in partitions}
        deadline = time.monotonic() + max_wait
        while pending:
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"partitions not read to their end within {max_wait} s: {sorted(pending)[:5]}"
                )
            for message in consumer.consume(5000, timeout=0.5):
                error = message.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        pending.discard((message.topic(), message.partition()))
                        continue
                    raise KafkaException(error)
                out.append(
                    Output(
                        message.topic(),
                        message.partition(),
                        message.offset(),
                        message.key(),
                        message.value(),
                        tuple(message.headers() or ()),
                    )
                )
        return out
    finally:
        consumer.close()


class ConfigWriter:
    """Writes config records (or ``(key, None)`` tombstones) straight to the config topic, in order, with one
    idempotent producer; ``write`` returns once every record is acknowledged."""

    def __init__(self, settings: Settings) -> None:
        self.topic = wire.config_topic(settings.topic_prefix)
        self.producer = Producer(
            settings.client_config({"linger.ms": 1, "enable.idempotence": True, "acks": "all"})
        )
        self.failures: list[str] = []

    def _delivered(self, error: KafkaError | None, _message: Any) -> None:
        if error is not None:
            self.failures.append(str(error))

    def write(self, values: Sequence[ConfigValue | tuple[str, None]]) -> None:
        for value in values:
            if isinstance(value, tuple):
                key, record, headers = value[0], None, []
            else:
                key, record, headers = encode(value)  # type: ignore[assignment]
            self.producer.produce(
                self.topic, key=key.encode(), value=record, headers=headers, on_delivery=self._delivered
            )
        assert self.producer.flush(60) == 0, "config records not acknowledged"
        assert not self.failures, self.failures


def write_config(settings: Settings, values: Sequence[ConfigValue | tuple[str, None]]) -> None:
    ConfigWriter(settings).write(values)


def wait_for(condition: Callable[[], bool], timeout: float, what: str, interval: float = 0.1) -> float:
    """Wait until ``condition()``; returns the seconds it took; fails with ``what`` after ``timeout``."""
    started = time.monotonic()
    while not condition():
        if time.monotonic() - started > timeout:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)
    return time.monotonic() - started


def input_ends(sent: Iterable[Sent]) -> dict[tuple[str, int], int]:
    """The end offset of every input partition the stream wrote to (after ``positions_from_log``: as logged)."""
    ends: dict[tuple[str, int], int] = {}
    for s in sent:
        ends[(s.topic, s.partition)] = max(ends.get((s.topic, s.partition), 0), s.offset + 1)
    return ends


def committed_offsets(
    settings: Settings, sent: Iterable[Sent], group: str | None = None
) -> dict[tuple[str, int], int]:
    """The router group's committed offsets on the input partitions (fetched without joining the group)."""
    partitions = list(input_ends(sent))
    consumer = Consumer(
        settings.client_config({"group.id": group or wire.worker_group_id(settings.topic_prefix)})
    )
    try:
        found = consumer.committed([TopicPartition(t, p) for t, p in partitions], timeout=10)
        return {(tp.topic, tp.partition): tp.offset for tp in found}
    finally:
        consumer.close()


@dataclass(frozen=True)
class LoggedInput:
    """The ledger's input side as the input log holds it (``sent``), and how it differed from the delivery
    reports: records found elsewhere or more than once (``moved``), and records acknowledged but absent from
    the log (``missing``: the broker lost them, which no router can make up for)."""

    sent: list[Sent]
    moved: list[str]
    missing: list[str]

    def summary(self) -> str:
        disagreements = [*self.missing, *self.moved]
        return f"{len(disagreements)} delivery report(s) disagree with the input log: {disagreements[:5]}"


def positions_from_log(settings: Settings, sent: list[Sent]) -> LoggedInput:
    """Place each sent record where the input log has it.

    Delivery reports are not a reliable ground truth under faults: after a network cut an idempotent
    producer's retry can be acknowledged without an offset, and the embedded broker once reported the same
    offsets for two batches of a fresh partition (CI, 2026-11-22). The worker routes what is in the log, so
    the ledger must too. Values are unique per test stream: read the input back and place each sent record
    where its value is; a value the log holds twice becomes two inputs.
    """
    from subroute.kafka.clients import read_to_end

    where: dict[bytes, list[tuple[int, int, int]]] = {}
    for topic in {s.topic for s in sent}:
        for message in read_to_end(settings, topic, idle_timeout=2.0, max_wait=180):
            value = message.value()
            if value is not None:
                position = (message.partition() or 0, message.offset() or 0, message.timestamp()[1])
                where.setdefault(value, []).append(position)
    placed: list[Sent] = []
    moved: list[str] = []
    missing: list[str] = []
    for s in sent:
        positions = where.get(s.value or b"", [])
        if not positions:
            missing.append(f"{s.source}: acknowledged but not in the log")
            continue
        if len(positions) > 1:
            moved.append(f"{s.source}: in the log {len(positions)} times")
        for partition, offset, timestamp in positions:
            if (partition, offset) != (s.partition, s.offset):
                moved.append(f"{s.source}: the log has it at {partition}/{offset}")
            placed.append(replace(s, partition=partition, offset=offset, timestamp=timestamp))
    return LoggedInput(placed, moved, missing)


def committed_to_end(settings: Settings, sent: Iterable[Sent], ends: dict[tuple[str, int], int]) -> bool:
    """The router group has committed every input partition up to ``ends`` (see ``input_ends``)."""
    return all(o >= ends[tp] for tp, o in committed_offsets(settings, sent).items())
