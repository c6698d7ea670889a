"""What the Kafka data plane costs in Python (issue 26): ``python tests/perf/bench_native_pipe.py [--messages N]
[--repeat R] [--size 10000] [--unkeyed]``.

The windowed fan-out pipe (``bench_fanout.fanout_pipe``: the ceiling issue 26's fan-out target names) against
the same pipe on librdkafka with no Python in its loop (``tests/perf/native_pipe``, Rust, the ``rdkafka`` crate),
and the worker, on one broker (Apache Kafka by default, Tansu with ``SUBROUTE_TEST_BROKER=tansu``), in one run:

* python pipe: ``fanout_pipe(window=20_000)``, failed deliveries reported only, as the target measures it;
* python pipe, every report: the same with a delivery callback per record, served after each batch (the worker
  counts every record's report against its window);
* native pipe / native pipe, every report: the same two loops in Rust, with the same client settings, headers
  and commit cadence (the Rust pipe polls one record at a time: the crate's consumer has no batch call);
* worker: the worker as shipped at ``--size`` subscriptions (disjoint app filters, ``bench_fanout``'s config).

Each runs over the same pre-loaded input (100,000 records of 200 bytes, five headers) into the same 110
destination topics of 4 partitions, written by an untimed worker first (perfkit.write_destinations), in a
rotation that starts at another one each repetition. Printed per run and as medians: records/s from the first
record to the last commit, and CPU µs per record of the loop's thread (everything the loop does in the client's
calls and, for Python, the interpreter), of the client's whole process (librdkafka's own threads too; for the
worker from its first batch, so without building its table) and of the broker's process. The ratios are to the
python pipe. Where each count starts differs a little: the native pipe's CPU from its first record, the Python
pipes' from the call (their consumer's start, group join and close included), which if anything counts more
against Python; the broker's from the start of each run for all of them.

The Rust pipe is built on first use with ``cargo build --release`` (crates.io; rdkafka-sys compiles its bundled
librdkafka, about 2 minutes) into ``.cache/native_pipe``. Its librdkafka is the crate's bundled one (2.12), not
confluent-kafka's (2.16): the client versions differ, the protocol and settings do not. ``make lint`` checks its
format; ``cargo clippy`` on it is run by hand (it would build librdkafka in every ``make test``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import perfkit
from bench_fanout import Variant, config_of, fanout_pipe
from confluent_kafka import Message

from subroute import wire
from subroute.ops.settings import Settings
from subroute.routing.decisions import RoutingTable
from subroute.worker.loop import WorkerOptions
from subroute.worker.tally import BatchTally

CRATE = Path(__file__).resolve().parent / "native_pipe"
TARGET = perfkit.ROOT / ".cache" / "native_pipe"
WINDOW = 20_000  # records per commit: the worker's default commit interval, bench_fanout's windowed pipe
PARTITIONS = 4


def build_native_pipe() -> Path:
    env = {**os.environ, "CARGO_TARGET_DIR": str(TARGET)}
    subprocess.run(
        ["cargo", "build", "--release", "--quiet", "--manifest-path", str(CRATE / "Cargo.toml")],
        env=env,
        check=True,
    )
    return TARGET / "release" / "native_pipe"


Figures = dict[str, float]  # one run's: rate, thread_cpu_us, process_cpu_us, broker_cpu_us


def python_pipe(
    s: Settings, broker_pid: int | None, source: str, sinks: list[str], messages: int, every: bool
) -> Figures:
    thread, process, broker = time.thread_time(), time.process_time(), perfkit.process_cpu_seconds(broker_pid)
    run = fanout_pipe(s, source, sinks, messages, window=WINDOW, every_report=every)
    return Figures(
        rate=run.rate,
        thread_cpu_us=(time.thread_time() - thread) * 1e6 / messages,
        process_cpu_us=(time.process_time() - process) * 1e6 / messages,
        broker_cpu_us=_per_record(broker, perfkit.process_cpu_seconds(broker_pid), messages),
    )


def native_pipe(
    binary: Path,
    s: Settings,
    broker_pid: int | None,
    source: str,
    sinks: list[str],
    messages: int,
    every: bool,
) -> Figures:
    group = f"{s.topic_prefix}.native.{os.urandom(4).hex()}"
    command = [
        str(binary),
        *("--bootstrap", s.bootstrap_servers, "--source", source, "--sinks", ",".join(sinks)),
        *("--expected", str(messages), "--window", str(WINDOW), "--source-header", wire.SOURCE),
        *(["--every-report"] if every else []),
    ]
    for flag, config in (
        ("--consumer", perfkit.consumer_config(s, group)),
        ("--producer", perfkit.producer_config(s)),
    ):
        for name, value in config.items():
            if name != "bootstrap.servers":
                command += [flag, f"{name}={str(value).lower() if isinstance(value, bool) else value}"]
    for name, value in perfkit.ROUTING_HEADERS_SAMPLE:
        command += ["--header", f"{name}={value.decode()}"]
    broker = perfkit.process_cpu_seconds(broker_pid)  # the process's start and group join included: a bound
    line = subprocess.run(command, capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1]
    after = perfkit.process_cpu_seconds(broker_pid)
    result = json.loads(line)
    expected_reports = messages if every else 0
    if result["records"] != messages or result["failed"] or result["delivered"] != expected_reports:
        raise SystemExit(f"native pipe: {result}")
    return Figures(
        rate=result["rate"],
        thread_cpu_us=result["thread_cpu_us"],
        process_cpu_us=result["process_cpu_us"],
        broker_cpu_us=_per_record(broker, after, messages),
    )


class CpuTimedWorker(perfkit.TimedWorker):
    """The worker, with the CPU its thread, its process and the broker use from its first batch to its end."""

    broker_pid: int | None = None
    started: tuple[float, float, float | None] | None = None
    figures: Figures | None = None

    def _process_batch(self, table: RoutingTable, batch: list[Message]) -> BatchTally:
        if self.started is None:
            self.started = (
                time.thread_time(),
                time.process_time(),
                perfkit.process_cpu_seconds(self.broker_pid),
            )
        return super()._process_batch(table, batch)

    def _close(self) -> None:
        super()._close()  # flushes and commits the last window (perfkit.TimedWorker), then closes the clients
        if self.started is not None:
            thread, process, broker = self.started
            n = self.timing.messages
            self.figures = Figures(
                rate=self.timing.rate,
                thread_cpu_us=(time.thread_time() - thread) * 1e6 / n,
                process_cpu_us=(time.process_time() - process) * 1e6 / n,
                broker_cpu_us=_per_record(broker, perfkit.process_cpu_seconds(self.broker_pid), n),
            )


def worker(s: Settings, broker_pid: int | None, source: str, messages: int) -> Figures:
    w = CpuTimedWorker(s, WorkerOptions(session_timeout_ms=perfkit.SESSION_TIMEOUT_MS), messages)
    w.broker_pid = broker_pid
    w.run()
    perfkit.rewind_worker(s, source, PARTITIONS)
    if w.figures is None or w.timing.produced != messages:
        raise SystemExit(f"worker: {w.timing.produced} records routed for {messages}")
    return w.figures


def _per_record(before: float | None, after: float | None, records: int) -> float:
    return (after - before) * 1e6 / records if before is not None and after is not None else float("nan")


def one_run(binary: Path, args: argparse.Namespace, rep: int, results: dict[str, list[Figures]]) -> None:
    with perfkit.broker() as b:
        s = perfkit.settings(b.bootstrap_servers)
        source = f"{s.topic_prefix}-orders"
        perfkit.create_topic(s, source, PARTITIONS)
        perfkit.produce_input(s, source, perfkit.message_headers(args.messages), keyed=not args.unkeyed)
        config = config_of(Variant(args.size), source, PARTITIONS)
        sinks = perfkit.write_destinations(s, config, source, args.messages, PARTITIONS).sinks
        n, pid = args.messages, b.pid
        runs: list[tuple[str, Callable[[], Figures]]] = [
            ("python pipe", lambda: python_pipe(s, pid, source, sinks, n, every=False)),
            ("python pipe, every report", lambda: python_pipe(s, pid, source, sinks, n, every=True)),
            ("native pipe", lambda: native_pipe(binary, s, pid, source, sinks, n, every=False)),
            ("native pipe, every report", lambda: native_pipe(binary, s, pid, source, sinks, n, every=True)),
            (f"worker, {args.size:,} subscriptions", lambda: worker(s, pid, source, n)),
        ]
        shift = rep % len(runs)
        for name, run in runs[shift:] + runs[:shift]:
            figures = run()
            results.setdefault(name, []).append(figures)
            print(f"  {name:34} {_row(figures)}", flush=True)


def _row(f: dict[str, Any]) -> str:
    return (
        f"{f['rate']:>9,.0f} records/s   CPU µs per record: loop thread {f['thread_cpu_us']:5.2f}, "
        f"process {f['process_cpu_us']:5.2f}, broker {f['broker_cpu_us']:5.2f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    perfkit.common_arguments(parser, messages=100_000, repeat=3)
    parser.add_argument("--size", type=int, default=10_000, help="the worker's subscriptions (10000)")
    perfkit.unkeyed_argument(parser)
    args = parser.parse_args()
    binary = build_native_pipe()
    results: dict[str, list[Figures]] = {}
    for rep in range(args.repeat):
        print(f"run {rep + 1} of {args.repeat}", flush=True)
        one_run(binary, args, rep, results)
    print(f"\nmedians of {args.repeat} runs, and records/s and loop-thread CPU against the python pipe:")
    base = results["python pipe"]
    base_rate = perfkit.median([f["rate"] for f in base])
    base_thread = perfkit.median([f["thread_cpu_us"] for f in base])
    for name, runs in results.items():
        medians = {key: perfkit.median([f[key] for f in runs]) for key in runs[0]}
        print(
            f"  {name:34} {_row(medians)}   x{medians['rate'] / base_rate:.2f} rate, "
            f"x{medians['thread_cpu_us'] / base_thread:.2f} loop CPU"
        )


if __name__ == "__main__":
    main()
