"""The decision path at scale, without Kafka: ``python tests/perf/bench_decision_path.py
[--sizes 10,1000,10000,100000] [--messages N] [--repeat R] [--workload perfkit|peer]``.

Issue 13's target: µs per record of the native decision path at 100,000 subscriptions at most 1.5 x the same
at 10. Workload (``--workload``):

* ``perfkit`` (the default, the target's): perfkit's subscription configuration at each size (10 apps, seven
  bmq and three sql92; equality, range windows, IN, string comparisons, mixed; disjoint app filters) and
  perfkit's order headers. A record's matches grow with the size (1 at 10, 6 at 100,000: the kinds' key spaces
  wrap around), so the figure holds the workload's growth as well as the index's;
* ``peer``: the Kafka Streams peer's workload (``peer_workload``: customer ranges split on order type and
  amount), in which every record matches exactly one subscription at every size: the growth of the decision
  path alone, with the same work per record at both ends.

Per size, CPU µs per record (this process's CPU time, so other work on the machine moves it less than wall
time), the median of ``--repeat`` passes over the same ``--messages`` records (every size's table is built first,
then their ``route_batch`` passes are taken in turn, so that the machine's drift over a run moves every size
alike; this project's VM moved the figure at 10 from 1.4 to 2.7 µs between two runs minutes apart):

* ``route_batch``: ``Router.route_batch``, everything the worker asks of routing for a batch (the native plan
  once per batch, then each record's decisions), from raw headers to ``RouteResult``s;
* ``route``: ``Router.route`` record by record, the Python reference (the pure-Python path before issue 13);

and the table's build time (Python plans and the native plan, in the config thread in the worker), the
matches per record (which grow with the size: the work on them is part of the figure) and the candidates per
record: ``listed``, the subscriptions the native plan's indexes handed over (their gates hold), and
``evaluated``, those of them evaluated (in the apps whose filter the record passed); the matches are among
them. ``route_batch`` is checked to decide as ``route`` does on the first 300 records of every size before it
is timed. The last line is issue 13's figure: ``route_batch`` at the largest size over the smallest.

The passes run under the worker's settings of Python's cyclic collector (``worker.tables.routing_collection``),
as ``route_batch`` runs in the worker; ``--python-collector`` keeps Python's defaults (a collection of the young
generation every 700 allocations), as every figure before 2026-11-27 was measured. Under those the collector
walks each young batch's results, which point at the table's prebuilt decisions, and at 100,000 subscriptions
each such pointer is a cache miss (docs/performance.md, "Reads asked for ahead").
"""

from __future__ import annotations

import argparse
import gc
import time
from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import dataclass

import peer_workload
import perfkit
from perfkit import median, verdict

from subroute.config.model import Config
from subroute.routing.decisions import MessageView, Router, RoutingTable
from subroute.routing.native_routing import build_table
from subroute.worker.tables import routing_collection


def one_pass_us(fn: object, table: RoutingTable, views: Sequence[MessageView]) -> float:
    """CPU µs per record of one pass of ``fn`` over ``views``, with a new router."""
    router = Router()
    start = time.process_time()
    fn(router, table, views)  # type: ignore[operator]
    return (time.process_time() - start) / len(views) * 1e6


def cpu_us_per_record(fn: object, table: RoutingTable, views: Sequence[MessageView], repeat: int) -> float:
    return median([one_pass_us(fn, table, views) for _ in range(repeat)])


def batch(router: Router, table: RoutingTable, views: Sequence[MessageView]) -> None:
    router.route_batch(table, views, {}, 0)


def per_record(router: Router, table: RoutingTable, views: Sequence[MessageView]) -> None:
    for view in views:
        router.route(table, view, {}, 0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10,1000,10000,100000", help="subscriptions, comma-separated")
    parser.add_argument(
        "--messages", type=int, default=2_000, help="records per pass (2,000: a worker batch)"
    )
    parser.add_argument("--repeat", type=int, default=5, help="passes per figure, median reported (5)")
    workload_argument(parser)
    parser.add_argument(
        "--python-collector",
        action="store_true",
        help="time under Python's default collector thresholds, not the worker's",
    )
    args = parser.parse_args()
    with nullcontext() if args.python_collector else routing_collection():
        measure(args)


@dataclass
class Prepared:
    """One size's table, built and checked, and what is counted of it."""

    table: RoutingTable
    built_s: float
    matches: float
    listed: float
    evaluated: float


def workload_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--workload",
        choices=("perfkit", "peer"),
        default="perfkit",
        help="perfkit's (the target's; matches grow with the size) or the peer's (one match per record)",
    )


def workload_config(workload: str, size: int) -> Config:
    if workload == "peer":
        return peer_workload.config(peer_workload.apps(size), "orders", partitions=1)
    return perfkit.subscription_config(size, "orders")


def workload_headers(workload: str, count: int) -> list[perfkit.Headers]:
    if workload == "peer":
        return peer_workload.message_headers(count, seed=5)
    return perfkit.message_headers(count, seed=5)


def prepare(size: int, config: Config, views: Sequence[MessageView]) -> Prepared:
    start = time.perf_counter()
    table = build_table(config)
    built = time.perf_counter() - start
    gc.freeze()  # as the worker does after each build: a full collection would walk the whole plan
    if table.native is None:
        raise SystemExit(f"no native plan at {size} subscriptions: nothing to measure")
    reference, native = Router(), Router()
    expected = [reference.route(table, v, {}, 0) for v in views[:300]]
    if native.route_batch(table, views[:300], {}, 0) != expected:
        raise SystemExit(f"route_batch and route disagree at {size} subscriptions")
    headers = [v.headers for v in views]
    matches = sum(len(m) for m in table.native.plan.match_indexes(headers)) / len(views)
    counts = table.native.plan.candidate_counts(headers)
    listed, evaluated = (sum(c[i] for c in counts) / len(views) for i in (0, 1))
    return Prepared(table, built, matches, listed, evaluated)


def batch_passes_in_turn(
    prepared: dict[int, Prepared], views: Sequence[MessageView], repeat: int
) -> dict[int, float]:
    """``route_batch`` CPU µs per record by size, the median of ``repeat`` passes each, the sizes' passes taken in
    turn (the order reversed every round): the machine's speed drifts over a run by more than the target's margin,
    and in turn the drift moves every size alike."""
    samples: dict[int, list[float]] = {size: [] for size in prepared}
    order = list(prepared)
    for _ in range(repeat):
        for size in order:
            samples[size].append(one_pass_us(batch, prepared[size].table, views))
        order.reverse()
    return {size: median(found) for size, found in samples.items()}


def measure(args: argparse.Namespace) -> None:
    views = [MessageView("orders", h, 0) for h in workload_headers(args.workload, args.messages)]
    sizes = [int(s) for s in args.sizes.split(",")]
    prepared = {size: prepare(size, workload_config(args.workload, size), views) for size in sizes}
    found = batch_passes_in_turn(prepared, views, args.repeat)
    collector = "Python's default" if args.python_collector else "the worker's"
    print(
        f"{args.messages:,} records of the {args.workload} workload per pass, CPU µs per record, median of"
        f" {args.repeat} passes"
        f" (route_batch: the sizes in turn), {collector} collector thresholds"
    )
    print(
        f"{'subscriptions':>13} {'route_batch':>12} {'route':>8} {'ratio':>6} {'matches/rec':>12}"
        f" {'listed/rec':>11} {'evaluated/rec':>14} {'build s':>8}"
    )
    for size, p in prepared.items():
        fast = found[size]
        slow = cpu_us_per_record(per_record, p.table, views, args.repeat)
        print(
            f"{p.table.expression_count:>13,} {fast:>12.2f} {slow:>8.2f} {slow / fast:>5.1f}x {p.matches:>12.1f}"
            f" {p.listed:>11.1f} {p.evaluated:>14.1f} {p.built_s:>8.1f}",
            flush=True,
        )
    smallest, largest = min(found), max(found)
    if smallest != largest:
        growth = found[largest] / found[smallest]
        target = largest >= 100_000 and smallest <= 10 and args.workload == "perfkit"
        tail = f" (target <= 1.5x: {verdict(growth <= 1.5)})" if target else ""
        print(f"growth of route_batch, {largest:,} vs {smallest:,} subscriptions: {growth:.2f}x{tail}")


if __name__ == "__main__":
    main()
