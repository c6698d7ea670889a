"""``subroute dlq list|show|redrive`` and ``subroute publish`` (AMPS DefaultPublishTarget) on the real broker."""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
import time
from collections import Counter

import pytest
import yaml

from subroute import wire
from subroute.cli import main as cli
from tests.integration.client_support import put, put_dead_letters, queue, take, text
from tests.integration.harness import ROOT, Env, apply, header, make_env, read
from tests.integration.test_worker_guarantees import broker_hides_aborted_records

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
    assert cli(["dlq", "list", "Jobs", "-o", "json", *env.common()]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["reasons"]["rejected"] == {"dead_letters": 2, "redriven": 0, "waiting": 2}
    assert document["total"] == {"dead_letters": 3, "redriven": 0, "waiting": 3}
    assert cli(["dlq", "list", "Jobs", "-o", "yaml", *env.common()]) == 0
    assert yaml.safe_load(capsys.readouterr().out) == document

    assert cli(["dlq", "show", "Jobs", "--reason", "rejected", "--limit", "2", *env.common()]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].split()[:3] == ["partition", "offset", "reason"] and len(table) == 3
    assert "'bad-1'" in table[1] and "rejected" in table[1]
    assert cli(["dlq", "show", "Jobs", "-o", "yaml", "--limit", "1", *env.common()]) == 0
    assert yaml.safe_load(capsys.readouterr().out)["dead_letters"][0]["offset"] == 0
    assert (
        cli(["dlq", "show", "Jobs", "--reason", "rejected", "--limit", "1", "-o", "json", *env.common()]) == 0
    )
    [shown] = json.loads(capsys.readouterr().out)["dead_letters"]
    assert (shown["value"]["text"], shown["reason"], shown["group"]) == ("bad-1", "rejected", "workers")
    assert shown["source"] == f"{env.input}/0/1"
    assert [e["event"] for e in shown["history"]] == ["expire", "dead-letter"]

    # --dry-run: where they would go, and nothing written: no copy, no redrive position committed
    group_topic = env.topic("Jobs", "workers")
    before = len(read(env, group_topic))
    assert cli(["dlq", "redrive", "Jobs", "--dry-run", *env.common()]) == 0
    out = capsys.readouterr().out
    assert f"       3 -> {group_topic}" in out
    assert "dry run: would redrive 3 dead letter(s) of Jobs; nothing written" in out
    assert len(read(env, group_topic)) == before
    assert cli(["dlq", "redrive", "Jobs", "--reason", "max-cancels", "--dry-run", *env.common()]) == 0
    dry = capsys.readouterr()
    assert "would redrive 1 dead letter(s) with reason max-cancels" in dry.out
    assert "1 would be redriven" in dry.err and " 1 redriven" not in dry.err  # its progress says so too
    assert cli(["dlq", "list", "Jobs", "-o", "json", *env.common()]) == 0
    assert json.loads(capsys.readouterr().out)["total"] == {"dead_letters": 3, "redriven": 0, "waiting": 3}

    assert cli(["dlq", "redrive", "Jobs", "--reason", "max-cancels", *env.common()]) == 0
    assert "redriven 1 dead letter(s) with reason max-cancels" in capsys.readouterr().out
    assert len(read(env, group_topic)) == before + 1
    assert cli(["dlq", "redrive", "Jobs", "--dry-run", *env.common()]) == 0  # the one redriven is not counted
    assert "would redrive 2 dead letter(s) of Jobs" in capsys.readouterr().out
    assert cli(["dlq", "redrive", "Jobs", "--reason", "max-cancels", *env.common()]) == 0  # not repeated
    assert "redriven 0" in capsys.readouterr().out
    assert cli(["dlq", "redrive", "Jobs", *env.common()]) == 0  # the rest; the one above is not sent again
    assert "redriven 2 dead letter(s) of Jobs" in capsys.readouterr().out
    assert cli(["dlq", "list", "Jobs", *env.common()]) == 0
    assert capsys.readouterr().out.splitlines()[-1].split() == ["total", "3", "3", "0"]

    back = [m for m in read(env, env.topic("Jobs", "workers")) if header(m, wire.REDRIVEN) == "dlq"]
    assert sorted(m.value() for m in back) == [b"bad-1", b"bad-2", b"flaky"]
    flaky = next(m for m in back if m.value() == b"flaky")
    assert header(flaky, wire.DELIVERIES) is None and header(flaky, wire.DLQ_REASON) is None
    assert header(flaky, wire.SOURCE) == f"{env.input}/0/3"

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


def test_redrive_goes_batch_by_batch_with_progress_on_stderr(kafka, unique, capsys) -> None:
    env = make_env(kafka.bootstrap_servers, unique, partitions=2)
    assert apply(env, JOBS) == 0
    put_dead_letters(env, "Jobs", "workers", 2_500, reasons=("rejected", "max-cancels"))
    capsys.readouterr()

    assert cli(["dlq", "redrive", "Jobs", "--reason", "rejected", *env.common()]) == 0
    out, err = capsys.readouterr()
    assert "redriven 1250 dead letter(s) with reason rejected of Jobs" in out
    progress = [line for line in err.splitlines() if line.startswith("redrive Jobs: ")]
    # one line per committed batch of at most 1000 records read, then the totals
    assert [line.split(": ")[1].split(",")[0] for line in progress[:-1]] == [
        "1000 read",
        "2000 read",
        "2500 read",
    ]
    assert progress[-1] == "redrive Jobs: done: 2500 read, 1250 redriven, 1250 skipped"

    assert cli(["dlq", "redrive", "Jobs", *env.common()]) == 0  # the others; the rejected are not sent again
    out, err = capsys.readouterr()
    assert "redriven 1250 dead letter(s) of Jobs" in out
    assert err.splitlines()[-1] == "redrive Jobs: done: 2500 read, 1250 redriven, 1250 skipped"
    back = read(env, env.topic("Jobs", "workers"), **{"isolation.level": "read_committed"})
    assert sorted(Counter(m.value() for m in back).values()) == [1] * 2_500


def _redrive_process(env: Env) -> subprocess.Popen[bytes]:
    """``subroute dlq redrive Jobs`` as its own process (to SIGKILL it), stdout and stderr in one pipe."""
    return subprocess.Popen(
        [sys.executable, "-u", "-m", "subroute.cli", "dlq", "redrive", "Jobs", *env.common()],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        cwd=ROOT,
        env=os.environ.copy(),
    )


def _kill_after_progress(process: subprocess.Popen[bytes], lines: int, timeout: float = 120.0) -> list[str]:
    """SIGKILL ``process`` as soon as it has printed ``lines`` progress lines; what it printed."""
    assert process.stdout is not None
    selector = selectors.DefaultSelector()
    selector.register(process.stdout, selectors.EVENT_READ)
    printed: list[str] = []
    deadline = time.monotonic() + timeout
    while sum(line.startswith("redrive") for line in printed) < lines:
        assert time.monotonic() < deadline, f"no progress: {printed}"
        if selector.select(timeout=1.0):
            raw = process.stdout.readline()
            assert raw, f"the redrive ended before it was killed: {printed}"
            printed.append(raw.decode().rstrip())
    process.send_signal(signal.SIGKILL)
    process.wait(30)
    assert process.returncode == -signal.SIGKILL, f"the redrive finished before it was killed: {printed}"
    return printed


def test_a_redrive_killed_at_any_point_redrives_each_dead_letter_once(kafka, unique) -> None:
    count = 20_000
    env = make_env(kafka.bootstrap_servers, unique, partitions=2)
    assert apply(env, JOBS) == 0
    put_dead_letters(env, "Jobs", "workers", count)
    target = env.topic("Jobs", "workers")
    for progress_lines in (1, 3):  # killed twice, wherever it happens to be after that line
        _kill_after_progress(_redrive_process(env), progress_lines)
    committed_before = len(read(env, target, **{"isolation.level": "read_committed"}))
    assert 0 < committed_before < count
    last = _redrive_process(env)
    out, _ = last.communicate(timeout=300)
    assert last.returncode == 0, out.decode()[-3000:]
    assert f"redriven {count - committed_before} dead letter(s) of Jobs" in out.decode()

    back = read(env, target, **{"isolation.level": "read_committed"})
    counts = Counter(m.value() for m in back)
    assert set(counts) == {f"dl{i}".encode() for i in range(count)}  # none lost
    assert all(header(m, wire.REDRIVEN) == "dlq" for m in back)
    if kafka.is_tansu and not broker_hides_aborted_records(env):
        pytest.skip(
            "no loss checked; the no-duplicates assertion needs a broker whose read_committed hides aborted "
            "transactions, and Tansu returns them (docs/brokers.md): it runs on Apache Kafka, the default"
        )
    assert max(counts.values()) == 1  # none twice


_MEASURE = """
import resource, sys
from subroute.cli.main import main
import subroute.cli.queue, subroute.admin.redrive
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
code = main(sys.argv[1:])
print("peak-growth-kb", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before, file=sys.stderr)
sys.exit(code)
"""


def _redrive_peak_growth_kb(env: Env) -> int:
    result = subprocess.run(
        [sys.executable, "-c", _MEASURE, "dlq", "redrive", "Jobs", *env.common()],
        capture_output=True,
        cwd=ROOT,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr.decode()[-3000:]
    [line] = [x for x in result.stderr.decode().splitlines() if x.startswith("peak-growth-kb")]
    return int(line.split()[1])


def test_redrive_memory_does_not_grow_with_the_dead_letter_topic(kafka, unique) -> None:
    env = make_env(kafka.bootstrap_servers, unique)
    assert apply(env, JOBS) == 0
    payload = b"x" * 250_000
    put_dead_letters(env, "Jobs", "workers", 8, value=payload)  # 2 MB
    small = _redrive_peak_growth_kb(env)
    put_dead_letters(env, "Jobs", "workers", 320, value=payload)  # 80 MB more
    large = _redrive_peak_growth_kb(env)
    assert large - small < 40_000, (
        f"peak RSS grew by {small} kB for 2 MB of dead letters, {large} kB for 80 MB"
    )


def _redrive_with_stderr_on_a_terminal(env: Env, *argv: str) -> tuple[int, str, str]:
    """Run ``dlq redrive`` with stderr on a pseudo-terminal (stdout a pipe): (exit code, stdout, stderr)."""
    import pty

    leader, follower = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "subroute.cli", "dlq", "redrive", *argv, *env.common()],
        stdout=subprocess.PIPE,
        stderr=follower,
        cwd=ROOT,
    )
    os.close(follower)
    chunks: list[bytes] = []
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:  # the terminal closed: the command is done
            break
        if not chunk:
            break
        chunks.append(chunk)
    out, _ = process.communicate(timeout=120)
    os.close(leader)
    return process.returncode, out.decode(), b"".join(chunks).decode(errors="replace")


def test_redrive_shows_a_bar_on_a_terminal_and_lines_in_a_pipe(kafka, unique) -> None:
    env = make_env(kafka.bootstrap_servers, unique)
    assert apply(env, JOBS) == 0
    put_dead_letters(env, "Jobs", "workers", 2500)
    code, out, err = _redrive_with_stderr_on_a_terminal(env, "Jobs", "--dry-run")
    assert code == 0, err
    assert "would redrive 2500 dead letter(s)" in out
    assert "redrive Jobs:" in err and "letter" in err and "\r" in err  # tqdm's bar, redrawn in place
    assert "2500 read" not in err.replace("done: 2500 read", "")  # no line per batch on a terminal
    piped = subprocess.run(
        [sys.executable, "-m", "subroute.cli", "dlq", "redrive", "Jobs", "--dry-run", *env.common()],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert piped.returncode == 0
    assert "\r" not in piped.stderr
    assert (
        "redrive Jobs: 1000 read, 1000 would be redriven, 0 skipped" in piped.stderr.splitlines()
    )  # a line per batch, saying that it is a dry run
