"""What a worker prints when it cannot work: one line and an exit code, never a traceback or a flood.

Each case runs ``subroute worker`` as a process, as an operator would: a taken metrics port (exit 2), an
unreachable broker and a failed SASL handshake (exit 3 after --startup-timeout), a prefix with no configuration
(a warning naming the prefix). Every line on stderr is a JSON log line except the final ``subroute worker:`` one.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys

import pytest

from tests.integration.harness import ROOT, make_env

pytestmark = pytest.mark.kafka


def worker(
    *args: str, env: dict[str, str] | None = None, timeout: float = 90
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "subroute.cli", "worker", *args],
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
    )


def log_lines(stderr: str) -> tuple[list[dict[str, object]], list[str]]:
    """The JSON log entries, and every other line."""
    entries, others = [], []
    for line in stderr.splitlines():
        try:
            entries.append(json.loads(line))
        except ValueError:
            others.append(line)
    return entries, others


def test_a_taken_metrics_port_is_one_line_and_exit_2(kafka, unique) -> None:
    env = make_env(kafka.bootstrap_servers, unique)
    with socket.socket() as taken:
        taken.bind(("0.0.0.0", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = worker(*env.common(), "--metrics-port", str(port))
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    [line] = done.stderr.splitlines()
    assert line.startswith(f"subroute worker: cannot serve /metrics on port {port}: ")
    assert "--metrics-port" in line


def test_an_unreachable_broker_is_reported_once_then_exit_3() -> None:
    with socket.socket() as closed:  # a port nothing listens on
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    done = worker(
        "--bootstrap-servers", f"127.0.0.1:{port}", "--metrics-port", "-1", "--startup-timeout", "6"
    )
    assert done.returncode == 3
    entries, others = log_lines(done.stderr)
    # librdkafka retries the connection every few ms for 6 s: the log says so once per kind of message
    refused = [e for e in entries if "Connection refused" in str(e["msg"])]
    assert 1 <= len(refused) <= 2, refused
    assert len(entries) <= 6, entries
    assert not any(line.startswith("%") for line in others)  # nothing from librdkafka's own stderr log
    [last] = others
    assert last.startswith(
        f"subroute worker: could not read the config topic subroute.config from 127.0.0.1:{port} within 6 s"
    )
    assert "Connection refused" in last


def test_a_failed_sasl_handshake_is_reported_once_then_exit_3(kafka, unique) -> None:
    """README's SASL settings against a broker without SASL: the handshake fails on every retry."""
    env = make_env(kafka.bootstrap_servers, unique)
    done = worker(
        *env.common(),
        "--metrics-port",
        "-1",
        "--startup-timeout",
        "6",
        "--kafka-config",
        "security.protocol=SASL_PLAINTEXT",
        "--kafka-config",
        "sasl.mechanism=SCRAM-SHA-512",
        env={"SUBROUTE_KAFKA_SASL_USERNAME": "router", "SUBROUTE_KAFKA_SASL_PASSWORD": "secret-7c1"},
    )
    assert done.returncode == 3
    entries, others = log_lines(done.stderr)
    assert len(entries) <= 6, entries
    [last] = others
    assert last.startswith("subroute worker: could not read the config topic ") and "SASL" in last
    assert "secret-7c1" not in done.stderr


def test_a_prefix_without_configuration_is_a_warning(kafka, unique) -> None:
    env = make_env(kafka.bootstrap_servers, unique)  # nothing applied under this prefix
    process = subprocess.Popen(
        [sys.executable, "-m", "subroute.cli", "worker", *env.common(), "--metrics-port", "-1"],
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        assert process.stderr is not None
        warning: dict[str, object] | None = None
        for line in process.stderr:  # a worker with no input never idles: read until the warning
            entry = json.loads(line)
            if entry["level"] == "warning":
                warning = entry
                break
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=60)
    finally:
        process.kill()
    assert process.returncode == 0
    assert warning is not None
    assert str(warning["msg"]).startswith(f"no configuration under topic prefix {env.prefix!r}")
    assert "--topic-prefix" in str(warning["msg"])
