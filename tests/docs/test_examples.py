"""The scripts of examples/ run as their docstrings say, against the real broker: each as a user runs it (a fresh
interpreter, ``--bootstrap``), beside a router worker, with examples/jobs.yaml applied under a prefix of the
test's own (its input topic renamed to one of the test's own too: producers' topics are shared by the session).

The publisher's records are routed to both apps; the queue consumer cancels the job that fails once and acks
every job, the copy included, so its group has confirmed everything on its topic; the plain consumer (no
subroute import) prints the reports with their headers, the producer's and the router's."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from subroute import wire
from subroute.kafka.clients import TopicSpec, admin_client, ensure_topics, group_backlog
from subroute.ops.settings import Settings
from tests.docs.blocks import ROOT
from tests.docs.session import DocSession

pytestmark = pytest.mark.kafka

EXAMPLES = ROOT / "examples"
SCRIPT_TIMEOUT = 180.0


def run(session: DocSession, script: str, *args: str) -> str:
    """Run ``examples/<script>`` with ``--bootstrap`` and the session's topic prefix; its standard output."""
    environment = session.environment
    command = [
        sys.executable,
        str(EXAMPLES / script),
        "--bootstrap",
        environment["SUBROUTE_BOOTSTRAP_SERVERS"],
        "--prefix",
        environment["SUBROUTE_TOPIC_PREFIX"],
        *args,
    ]
    try:
        done = subprocess.run(
            command, cwd=session.workdir, capture_output=True, text=True, timeout=SCRIPT_TIMEOUT, check=False
        )
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(
            f"{script} did not finish within {SCRIPT_TIMEOUT:.0f} s\n--- output\n{exc.stdout!r}\n{exc.stderr!r}"
            f"\n--- worker log\n{session.worker_log.read_text(errors='replace')[-4000:]}"
        ) from None
    assert done.returncode == 0, f"{script} exited {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done.stdout


def apply_jobs(session: DocSession, input_topic: str) -> None:
    """examples/jobs.yaml with its input topic renamed, applied with the CLI a user runs."""
    config = yaml.safe_load((EXAMPLES / "jobs.yaml").read_text())
    for app in config["apps"].values():
        app["inputs"] = [input_topic if topic == "jobs" else topic for topic in app["inputs"]]
        if app.get("default_publish") == "jobs":
            app["default_publish"] = input_topic
    path = session.workdir / "jobs.yaml"
    path.write_text(yaml.safe_dump(config))
    settings = Settings(bootstrap_servers=session.environment["SUBROUTE_BOOTSTRAP_SERVERS"])
    ensure_topics(admin_client(settings), [TopicSpec(input_topic)])  # a producers' topic: one partition
    subroute = Path(sys.executable).parent / "subroute"
    done = subprocess.run(
        [str(subroute), "config", "apply", "-f", str(path)],
        env={**os.environ, **session.environment},
        capture_output=True,
        text=True,
        timeout=SCRIPT_TIMEOUT,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_examples_publish_consume_and_read_headers(kafka, unique: str, tmp_path: Path) -> None:
    input_topic = f"{unique}.jobs"
    with DocSession(tmp_path, kafka.bootstrap_servers, unique) as session:
        apply_jobs(session, input_topic)

        published = run(session, "publish.py", "--app", "jobs", "--header", "Kind=report", '{"job": 1}')
        published += run(
            session, "publish.py", "--app", "jobs", "--header", "Kind=report", '{"job": 2, "fail_once": true}'
        )
        published += run(session, "publish.py", "--app", "jobs", "--header", "Kind=export", '{"job": 3}')
        assert re.findall(r"^published to (\S+) \[0\] at offset (\d+)$", published, re.MULTILINE) == [
            (input_topic, "0"),
            (input_topic, "1"),
            (input_topic, "2"),
        ], published

        consumed = run(session, "queue_consumer.py", "--app", "jobs", "--group", "workers", "--count", "3")
        assert re.findall(r"^cancelled .*\{\"job\": 2", consumed, re.MULTILINE), consumed
        acked = re.findall(r"^acked .* deliveries=(\d) .*\"job\": (\d)", consumed, re.MULTILINE)
        assert sorted(acked) == [("0", "1"), ("0", "3"), ("1", "2")], consumed
        # Everything on the group topic is confirmed: the three jobs and the cancelled job's copy.
        settings = Settings(bootstrap_servers=kafka.bootstrap_servers, topic_prefix=unique)
        workers = wire.group_topic(unique, "jobs", "workers")
        assert group_backlog(settings, wire.consumer_group_id(unique, "jobs", "workers"), workers) == 0

        read = run(session, "plain_consumer.py", "--app", "audit", "--group", "reports", "--count", "2")
        values = re.findall(r"^    value: (.*)$", read, re.MULTILINE)
        assert sorted(values) == ['{"job": 1}', '{"job": 2, "fail_once": true}'], read  # the reports
        assert read.count("    Kind: report") == 2, read  # the producer's header
        assert read.count("    subroute.app: audit") == 2, read  # and the router's
        assert read.count("    subroute.group: reports") == 2, read

        assert session.stop_worker() == 0, session.worker_log.read_text(errors="replace")[-4000:]
