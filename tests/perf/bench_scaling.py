"""Two worker processes against one: ``python tests/perf/bench_scaling.py [--messages N] [--repeat R]``.

A 4-partition input is pre-loaded; per run, one worker process routes it all (1,000 expressions, disjoint
app filters), then two worker processes in one consumer group route a second copy of it. Each worker records
its batches (monotonic clock, shared by the processes of one machine). Reported: the rate of one worker, the
rate of two over the whole run (from the first batch of either to the last batch of either, joining and the
partition assignment included) and over the window in which both were routing, and the ratio.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

import perfkit
from perfkit import median, spread

from subroute.worker.loop import WorkerOptions


def child(bootstrap: str, prefix: str) -> None:
    s = perfkit.settings(bootstrap, prefix)
    worker = perfkit.TimedWorker(
        s, WorkerOptions(session_timeout_ms=perfkit.SESSION_TIMEOUT_MS, exit_on_idle=3.0)
    )
    worker.run()
    print(json.dumps(worker.timing.batches), flush=True)


def workers(bootstrap: str, topic: str, count: int) -> list[list[tuple[float, float, int, int]]]:
    s = perfkit.settings(bootstrap)
    perfkit.write_config(s, perfkit.subscription_config(1_000, topic))
    procs = [
        subprocess.Popen(
            [sys.executable, __file__, "--child", bootstrap, s.topic_prefix],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        for _ in range(count)
    ]
    out = []
    for p in procs:
        stdout, _ = p.communicate(timeout=900)
        out.append([tuple(b) for b in json.loads(stdout.strip().splitlines()[-1])])
    return out  # type: ignore[return-value]


def rates(runs: list[list[tuple[float, float, int, int]]]) -> tuple[float, float]:
    """(whole-run rate, rate while every worker was routing)."""
    batches = [b for r in runs for b in r]
    total = sum(b[2] for b in batches)
    whole = total / (max(b[1] for b in batches) - min(b[0] for b in batches))
    start = max(r[0][0] for r in runs if r)
    end = min(r[-1][1] for r in runs if r)
    inside = [b for b in batches if b[0] >= start and b[1] <= end]
    window = sum(b[2] for b in inside) / (end - start) if end > start else float("nan")
    return whole, window


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[3])
        return
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    perfkit.common_arguments(parser, messages=200_000)
    args = parser.parse_args()
    one: list[float] = []
    two: list[float] = []
    two_window: list[float] = []
    for rep in range(args.repeat):
        # A fresh broker per run (it slows as its memory fills); the order of the two alternates per run.
        with perfkit.broker() as b:
            base = perfkit.settings(b.bootstrap_servers)
            topic = f"{base.topic_prefix}-orders"
            perfkit.create_topic(base, topic, 4)
            perfkit.produce_input(base, topic, perfkit.message_headers(args.messages))
            if rep % 2 == 0:
                single = workers(b.bootstrap_servers, topic, 1)
                pair = workers(b.bootstrap_servers, topic, 2)
            else:
                pair = workers(b.bootstrap_servers, topic, 2)
                single = workers(b.bootstrap_servers, topic, 1)
        assert sum(x[2] for r in single for x in r) == sum(x[2] for r in pair for x in r) == args.messages
        one.append(rates(single)[0])
        whole, window = rates(pair)
        two.append(whole)
        two_window.append(window)
        split = "/".join(f"{sum(x[2] for x in r):,}" for r in pair)
        print(
            f"run {rep + 1}: one worker {one[-1]:,.0f}/s; two workers {whole:,.0f}/s "
            f"({window:,.0f}/s while both routed; records {split}); ratio {whole / one[-1]:.2f}",
            flush=True,
        )
    print(f"\n4-partition input, {args.messages:,} records, 1,000 expressions, {args.repeat} runs:")
    print(f"  one worker: {spread(one)} records/s")
    print(
        f"  two workers: {spread(two)} records/s over the whole run, {spread(two_window)} while both routed"
    )
    ratios = [t / o for t, o in zip(two, one, strict=True)]
    print(f"  two workers vs one: {median(ratios):.2f}x (per run {', '.join(f'{r:.2f}' for r in ratios)})")


if __name__ == "__main__":
    main()
