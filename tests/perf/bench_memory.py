"""Worker memory by config size: ``python tests/perf/bench_memory.py [--sizes 10,10000,100000] [--messages N]
[--repeat R]``.

Each run starts a fresh worker process (the real worker of ``subroute.worker.loop``, in a child process so nothing of
the benchmark is counted), lets it read its config, compile the plan and route ``--messages`` records, then
reads its resident set size from /proc: VmRSS at the end and VmHWM (the peak). The same with a 10-expression
config gives the baseline of the process (Python, confluent-kafka, librdkafka's buffers). Targets: peak RSS at
most 200 MB at 10,000 expressions (issue 7) and at most 150 MB (issue 13); 100,000 is reported.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import perfkit
from perfkit import median, spread, verdict


def status_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


def child(bootstrap: str, prefix: str, messages: int) -> None:
    s = perfkit.settings(bootstrap, prefix)
    worker = perfkit.run_worker(s, messages)
    table = worker.store.snapshot()[1]
    print(
        json.dumps(
            {
                "rss_mb": status_kb("VmRSS") / 1024,
                "peak_mb": status_kb("VmHWM") / 1024,
                "expressions": table.expression_count,
                "routed": worker.timing.produced,
            }
        ),
        flush=True,
    )


def measure(bootstrap: str, topic: str, size: int, messages: int) -> dict[str, float]:
    s = perfkit.settings(bootstrap)
    perfkit.write_config(s, perfkit.subscription_config(size, topic))
    out = subprocess.run(
        [sys.executable, __file__, "--child", bootstrap, s.topic_prefix, str(messages)],
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    ).stdout
    result: dict[str, float] = json.loads(out.strip().splitlines()[-1])
    return result


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[3], int(sys.argv[4]))
        return
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    perfkit.common_arguments(parser, messages=50_000)
    parser.add_argument("--sizes", default="10,10000,100000", help="expressions, comma-separated")
    args = parser.parse_args()
    found: dict[int, list[dict[str, float]]] = {int(size): [] for size in args.sizes.split(",")}
    with perfkit.broker() as b:
        base = perfkit.settings(b.bootstrap_servers)
        topic = f"{base.topic_prefix}-orders"
        perfkit.create_topic(base, topic, 1)
        perfkit.produce_input(base, topic, perfkit.message_headers(args.messages))
        for rep in range(args.repeat):
            for size in found:
                r = measure(b.bootstrap_servers, topic, size, args.messages)
                found[size].append(r)
                print(
                    f"run {rep + 1}: {int(r['expressions']):,} expressions: RSS {r['rss_mb']:.0f} MB, "
                    f"peak {r['peak_mb']:.0f} MB ({int(r['routed']):,} records routed)",
                    flush=True,
                )
    print(f"\nworker process, {args.messages:,} records routed, {args.repeat} runs:")
    for size, runs in found.items():
        rss, peak = [r["rss_mb"] for r in runs], [r["peak_mb"] for r in runs]
        print(f"  {size:,} expressions: RSS {spread(rss)} MB, peak {spread(peak)} MB")
        if size == 10_000:
            big = median(peak)
            print(
                f"  peak RSS with 10,000 expressions: {big:.0f} MB (target <= 150 MB: {verdict(big <= 150)}; "
                f"issue 7's <= 200 MB: {verdict(big <= 200)})"
            )


if __name__ == "__main__":
    main()
