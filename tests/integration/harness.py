"""Helpers for tests against the real broker: apply YAML, produce, run a worker, read topics back."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml
from confluent_kafka import Message, Producer

from subroute import wire
from subroute.cli import main as cli
from subroute.kafka.clients import TopicSpec, admin_client, close_producer, ensure_topics, read_to_end
from subroute.ops.metrics import RouterMetrics
from subroute.ops.settings import Settings
from subroute.worker.loop import Worker, WorkerOptions

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Env:
    """One test's corner of the shared broker: its own topic prefix and input topic."""

    settings: Settings
    input: str

    @property
    def prefix(self) -> str:
        return self.settings.topic_prefix

    @property
    def bootstrap(self) -> str:
        return self.settings.bootstrap_servers

    def common(self) -> list[str]:
        return ["--bootstrap-servers", self.bootstrap, "--topic-prefix", self.prefix]

    def topic(self, app: str, group: str) -> str:
        return wire.group_topic(self.prefix, app, group)


def make_env(bootstrap: str, unique: str, partitions: int = 1) -> Env:
    settings = Settings(bootstrap_servers=bootstrap, topic_prefix=unique)
    env = Env(settings, f"{unique}-orders")
    ensure_topics(admin_client(settings), [TopicSpec(env.input, partitions)])
    return env


def apply(env: Env, yaml_text: str, *extra: str) -> int:
    """``config apply`` of ``yaml_text`` (INPUT: the test's input topic).

    Apps that do not say otherwise get ``presence: ignored``: most tests route with nobody attached and read
    the group topics back afterwards, as the Spark job does. Tests of presence set ``presence: required``."""
    text = yaml_text.replace("INPUT", env.input)
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError:  # a test of the CLI's own refusal: apply it as written
        document = None
    if isinstance(document, dict) and isinstance(document.get("apps"), dict):
        for body in document["apps"].values():
            if isinstance(body, dict):
                body.setdefault("presence", "ignored")
        text = yaml.safe_dump(document, sort_keys=False)
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as handle:
        handle.write(text)
    try:
        return cli(["config", "apply", "-f", handle.name, *env.common(), *extra])
    finally:
        os.unlink(handle.name)


def produce(
    env: Env,
    messages: Iterable[dict[str, object]],
    topic: str | None = None,
    key: bytes | None = None,
    key_by: str | None = None,
) -> int:
    """Produce one record per property map (value ``m<i>``); ``key_by`` keys each record by that property."""
    producer = Producer(env.settings.client_config({"linger.ms": 5, "enable.idempotence": True}))
    count = 0
    for i, props in enumerate(messages):
        headers = [
            (k, (str(v).lower() if isinstance(v, bool) else str(v)).encode()) for k, v in props.items()
        ]
        record_key = str(props[key_by]).encode() if key_by and key_by in props else key
        producer.produce(topic or env.input, value=f"m{i}".encode(), key=record_key, headers=headers)
        count += 1
        if count % 10_000 == 0:
            producer.flush()
    producer.flush(30)
    close_producer(producer)
    return count


def produce_raw(
    env: Env, records: Sequence[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]]]]
) -> None:
    producer = Producer(env.settings.client_config({"linger.ms": 5}))
    for key, value, headers in records:
        producer.produce(env.input, value=value, key=key, headers=headers)
    producer.flush(30)
    close_producer(producer)


def run_worker(env: Env, idle: float = 1.5, **options: object) -> RouterMetrics:
    """Run one worker in this process until it is caught up and idle."""
    metrics = RouterMetrics()
    worker = Worker(
        env.settings, WorkerOptions(exit_on_idle=idle, session_timeout_ms=6000, **options), metrics
    )  # type: ignore[arg-type]
    worker.run()
    return metrics


class BackgroundWorker:
    """A worker in a thread, for tests that change things while it routes."""

    def __init__(self, env: Env, **options: object) -> None:
        self.metrics = RouterMetrics()
        self.worker = Worker(env.settings, WorkerOptions(session_timeout_ms=6000, **options), self.metrics)  # type: ignore[arg-type]
        self.thread = threading.Thread(target=self.worker.run, daemon=True)

    def __enter__(self) -> BackgroundWorker:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.worker.stop()
        self.thread.join(timeout=60)


def worker_process(env: Env, *args: str) -> subprocess.Popen[bytes]:
    """A worker as its own process (to SIGKILL it)."""
    return subprocess.Popen(
        [sys.executable, "-m", "subroute.cli", "worker", *env.common(), "--metrics-port", "-1", *args],
        env={**os.environ, "SUBROUTE_KAFKA_SESSION_TIMEOUT_MS": "6000"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        cwd=ROOT,
    )


def read(env: Env, topic: str, **overrides: object) -> list[Message]:
    settings = env.settings
    if overrides:
        settings = Settings(
            settings.bootstrap_servers, settings.topic_prefix, {**settings.kafka_config, **overrides}
        )  # type: ignore[dict-item]
    return list(read_to_end(settings, topic, idle_timeout=1.0))


def header(message: Message, name: str) -> str | None:
    value = None
    for key, raw in message.headers() or ():
        if key == name and raw is not None:
            value = raw.decode()
    return value


def values(messages: Iterable[Message]) -> list[bytes]:
    return [m.value() for m in messages]
