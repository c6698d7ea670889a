"""Instruction counts of the native decision path, load-independent: ``valgrind --tool=callgrind
--instr-atstart=no [--cache-sim=yes] python tests/perf/profile_decision_path.py --size N [--workload peer]``.

The table is built with valgrind's instrumentation off (the build of 100,000 subscriptions would take an hour
instrumented); then this script turns it on with ``callgrind_control -i on`` for ``--passes`` passes of
``Router.route_batch`` over the bench's records (``bench_decision_path.py``'s workloads: perfkit's by default,
``--workload peer`` the one in which every record matches one subscription at every size), and off again.
``callgrind_annotate`` on the output then gives the instructions (and with ``--cache-sim=yes`` the simulated
cache misses) per function; divide by ``passes × messages`` for a record's share. Run outside valgrind it
just times the same passes.
"""

from __future__ import annotations

import argparse
import gc
import os
import shutil
import subprocess
import time

from bench_decision_path import workload_argument, workload_config, workload_headers

from subroute.routing.decisions import MessageView, Router
from subroute.routing.native_routing import build_table


def instrument(on: bool) -> None:
    """Turn callgrind's instrumentation on or off for this process (nothing outside valgrind)."""
    control = shutil.which("callgrind_control")
    if control is None or "valgrind" not in os.environ.get("LD_PRELOAD", ""):
        return
    subprocess.run([control, "-i", "on" if on else "off", str(os.getpid())], check=True, capture_output=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=10_000, help="subscriptions (10,000)")
    parser.add_argument("--messages", type=int, default=2_000, help="records per pass (2,000)")
    parser.add_argument("--passes", type=int, default=3, help="instrumented passes (3)")
    workload_argument(parser)
    args = parser.parse_args()
    views = [MessageView("orders", h, 0) for h in workload_headers(args.workload, args.messages)]
    table = build_table(workload_config(args.workload, args.size))
    gc.freeze()
    Router().route_batch(table, views, {}, 0)  # routes registered, caches warm: as in the bench's passes
    instrument(True)
    start = time.process_time()
    for _ in range(args.passes):
        Router().route_batch(table, views, {}, 0)
    spent = time.process_time() - start
    instrument(False)
    records = args.passes * args.messages
    print(
        f"{table.expression_count:,} expressions: {records:,} records, {spent / records * 1e6:.2f} CPU µs/record"
    )


if __name__ == "__main__":
    main()
