"""Routing table compile time: ``python tests/perf/bench_table_compile.py [--sizes 10000 100000] [--repeat R]``.

``build_table`` of the benchmark config (``perfkit.subscription_config``) at each size, with the native plan
(the worker's table) and without it (the Python plans alone, as ``--python-routing``), in one process:

* full: a first build, from nothing (every expression parsed, the Python plans compiled, the native plan
  lowered and built);
* one-group change: a rebuild after one group of app3 (a fifth of its subscriptions) is rewritten, given the
  previous table, as the config thread does on a config record (alone here; in the worker the build shares
  the GIL with routing). Also the share of ``build_native`` (lowering
  and the Rust build) in it, and of the Rust build alone (``_native.NativePlan``).

Wall and CPU seconds of the calling thread (median of ``--repeat`` rebuilds; one full build per size and mode,
the 100,000 ones take about half a minute each). No broker needed.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import perfkit
from perfkit import median

from subroute.config.model import Config, GroupConfig, SubscriptionConfig
from subroute.routing import native_plan, native_routing
from subroute.routing.decisions import RoutingTable
from subroute.routing.native_routing import build_table


@contextmanager
def timed_calls(owner: Any, name: str, into: list[float]) -> Iterator[None]:
    """Wall time of each call of ``owner.name`` appended to ``into``, while inside."""
    inner = getattr(owner, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return inner(*args, **kwargs)
        finally:
            into.append(time.perf_counter() - started)

    setattr(owner, name, wrapper)
    try:
        yield
    finally:
        setattr(owner, name, inner)


def changed(config: Config, step: int) -> Config:
    """One group of app3 rewritten (as ``bench_config_swap.py`` rewrites it), differently at each step."""
    old = config.groups[("app3", "g1")]
    subs = tuple(SubscriptionConfig(f"{s.expression} && Amount != {7 + step}", 1) for s in old.subscriptions)
    groups = dict(config.groups)
    groups[("app3", "g1")] = GroupConfig("app3", "g1", subs, old.order)
    return dataclasses.replace(config, version=config.version + 1 + step, groups=groups)


def clock(work: Callable[[], RoutingTable]) -> tuple[RoutingTable, float, float]:
    gc.collect()
    wall, cpu = time.perf_counter(), time.thread_time()
    table = work()
    return table, time.perf_counter() - wall, time.thread_time() - cpu


def measure(size: int, repeat: int, native: bool) -> dict[str, float]:
    config = perfkit.subscription_config(size, "orders")
    saved = native_routing.build_native
    if not native:
        perfkit.use_python_routing()
    try:
        table, full_wall, full_cpu = clock(lambda: build_table(config))
        walls: list[float] = []
        cpus: list[float] = []
        native_walls: list[float] = []
        rust_walls: list[float] = []
        for step in range(repeat):
            current = changed(config, step)  # against the previous table: that one group differs
            with (
                timed_calls(native_routing, "build_native", native_walls),
                timed_calls(native_plan._native, "NativePlan", rust_walls),
            ):
                table, wall, cpu = clock(lambda c=current, t=table: build_table(c, t))  # type: ignore[misc]
            walls.append(wall)
            cpus.append(cpu)
    finally:
        native_routing.build_native = saved
    out = {
        "full_wall": full_wall,
        "full_cpu": full_cpu,
        "change_wall": median(walls),
        "change_cpu": median(cpus),
    }
    if native:
        out["native_wall"] = median(native_walls)
        out["rust_wall"] = median(rust_walls)
        assert table.native is not None
        out["lowered"] = table.native.plan.stats["lowered"]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000], help="expressions")
    parser.add_argument("--repeat", type=int, default=3, help="one-group rebuilds per size and mode (median)")
    args = parser.parse_args()
    for size in args.sizes:
        for native in (True, False):
            r = measure(size, args.repeat, native)
            mode = "native plan + Python plans" if native else "Python plans only         "
            line = (
                f"{size:>7,} expressions, {mode}: full build {r['full_wall']:.2f} s wall "
                f"({r['full_cpu']:.2f} s CPU); one-group change {r['change_wall'] * 1e3:.0f} ms wall "
                f"({r['change_cpu'] * 1e3:.0f} ms CPU)"
            )
            if native:
                line += (
                    f", of which the native plan {r['native_wall'] * 1e3:.0f} ms (Rust build "
                    f"{r['rust_wall'] * 1e3:.0f} ms; {r['lowered']:.0f} entries lowered)"
                )
            print(line, flush=True)


if __name__ == "__main__":
    main()
