"""``subroute dev broker``: a real broker in the foreground, its bootstrap line first, gone after SIGTERM."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer

from subroute.dev import jars as dev_jars

ROOT = Path(__file__).resolve().parents[2]


def _roundtrip(bootstrap: str) -> list[bytes | None]:
    producer = Producer({"bootstrap.servers": bootstrap})
    producer.produce("dev-broker-check", b"hello")
    assert producer.flush(30) == 0
    # Tansu completes a group's first join only after most of the session timeout: 6 s, not librdkafka's 45 s.
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "dev-broker-check",
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 6000,
        }
    )
    consumer.subscribe(["dev-broker-check"])
    values: list[bytes | None] = []
    deadline = time.monotonic() + 30
    while not values and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            values.append(message.value())
    consumer.close()
    return values


@pytest.mark.parametrize("engine", ["kafka", "tansu"])
def test_dev_broker_prints_bootstrap_first_serves_and_cleans_up(engine: str) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "subroute.cli", "dev", "broker", "--port", "0", "--engine", engine],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        first = process.stdout.readline()
        match = re.fullmatch(r"bootstrap (127\.0\.0\.1:\d+)\n", first)
        assert match, f"first stdout line: {first!r}"
        assert _roundtrip(match.group(1)) == [b"hello"]
        # The broker must hear the SIGTERM it is stopped with: a stop signal blocked in it (inherited from the
        # CLI, which waits for one) left Tansu running until it was killed, 15 s later.
        [broker] = Path(f"/proc/{process.pid}/task/{process.pid}/children").read_text().split()
        blocked = int(
            re.search(r"^SigBlk:\s*([0-9a-f]+)$", Path(f"/proc/{broker}/status").read_text(), re.M)[1], 16
        )
        assert not blocked & (1 << (signal.SIGTERM - 1) | 1 << (signal.SIGINT - 1)), f"SigBlk {blocked:x}"
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 0, stderr
    if engine == "kafka":
        log = re.search(r"kafka broker log: (\S+)", stderr)
        assert log, stderr
        assert not Path(log.group(1)).parent.exists(), "the broker's directory outlived it"


def test_jars_resolved_once_are_found_without_maven(monkeypatch: pytest.MonkeyPatch) -> None:
    """A second run downloads nothing: with the cache filled, resolving needs neither Maven nor the network."""
    first = dev_jars.resolve("kafka")
    monkeypatch.setattr(dev_jars.shutil, "which", lambda _name: None)
    assert dev_jars.resolve("kafka") == first
    assert any(jar.name.startswith("kafka_2.13-") for jar in dev_jars.jar_files("kafka"))


_PROBE = """package probe;

public final class Probe {
    public static void main(String[] args) {
        System.out.println(new org.apache.kafka.common.TopicPartition("t", %d));
    }
}
"""


def _run_probe(sources: Path) -> str:
    command = ["java", "-cp", dev_jars.java_classpath("kafka", sources), "probe.Probe"]
    return subprocess.run(command, capture_output=True, text=True, check=True).stdout.strip()


def test_java_sources_compiled_once_against_a_profile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """javac compiles a source folder against a profile's jars, cached like them: found again without javac, and
    compiled again once a source changes (tests/perf/bench_streams_peer.py builds its Kafka Streams router so)."""
    (tmp_path / "probe").mkdir()
    source = tmp_path / "probe" / "Probe.java"
    source.write_text(_PROBE % 1)
    classes = dev_jars.compile_java("kafka", tmp_path)
    assert (classes / "probe" / "Probe.class").is_file()
    assert dev_jars.compile_java("kafka", tmp_path) == classes
    assert _run_probe(tmp_path) == "t-1"  # the class path holds the classes and the profile's jars
    source.write_text(_PROBE % 2)
    changed = dev_jars.compile_java("kafka", tmp_path)
    assert changed != classes
    assert _run_probe(tmp_path) == "t-2"
    monkeypatch.setattr(dev_jars.shutil, "which", lambda _name: None)
    assert dev_jars.compile_java("kafka", tmp_path) == changed


def test_java_source_that_does_not_compile_is_an_error_naming_it(tmp_path: Path) -> None:
    (tmp_path / "Broken.java").write_text("public final class Broken { int x = ; }\n")
    with pytest.raises(dev_jars.JarsNotAvailable, match=r"Broken\.java:1"):
        dev_jars.compile_java("kafka", tmp_path)
    with pytest.raises(dev_jars.JarsNotAvailable, match=r"Broken\.java:1"):
        dev_jars.compile_java("kafka", tmp_path)  # nothing half-made was cached
