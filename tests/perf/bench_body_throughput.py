"""Worker throughput on JSON bodies against the fan-out pipe, beside the same records with the values as headers:
``python tests/perf/bench_body_throughput.py [--sizes 10,10000] [--messages N] [--repeat R] [--partitions P]``.

Issue 25's third benchmark. One local broker (Apache Kafka by default, Tansu with ``SUBROUTE_TEST_BROKER=tansu``),
two pre-loaded input topics of the same records: each carries the same 1 KB JSON order of 30 fields
(bench_body_properties.py's), with all five routing properties as headers on one topic, and on the other only
App and OrderType as headers, CustomerId, Amount and Region read from the body (``format: json``, ``path:``).
10 apps x 10 consumer groups (bench_fanout.py's layout: 110 destinations). Measured in turn, in the same run,
each as input records per second from its first batch until its last records are acknowledged and committed:

* fan-out pipe (over each input): consume a batch, produce each record to one of the 110 destinations chosen by
  an index, with the router's six routing headers, flush, commit: the router's ceiling with no routing work
  (bench_fanout.py's, a commit per batch); and windowed, committing every 20,000 records as the worker does;
* the worker as shipped at each of ``--sizes`` subscriptions, on the header input and on the body input.

Prints records/s, each worker's ratio to the two fan-out pipes over its own input, and body / headers; with
``--repeat`` above 1, the medians too. A worker routes the whole header input once, untimed, before anything is
measured (the broker warms up, and every destination is written: each run, pipe or worker, writes the same
ones, its group rewound to the input's start between runs), and the fan-out pipe once, untimed, too; each
repetition starts with the other kind of input.
"""

from __future__ import annotations

import argparse
import random
import time
from collections.abc import Sequence

import bench_fanout
import perfkit
from bench_body_properties import PATHS, body_config, order_value
from confluent_kafka import Producer

from subroute.config.model import Config
from subroute.ops.settings import Settings
from subroute.wire import Headers

KINDS = ("headers", "JSON body")
WINDOW = 20_000  # the windowed pipe commits as the worker does: every 20,000 records, or when drained


def produce(s: Settings, topic: str, records: Sequence[tuple[bytes, Headers]]) -> None:
    producer = Producer(s.client_config({"linger.ms": 5, "enable.idempotence": True, "acks": "all"}))
    for i, (value, headers) in enumerate(records):
        while True:
            try:
                producer.produce(topic, value=value, key=f"k{i}".encode(), headers=headers)
                break
            except BufferError:
                producer.poll(0.05)
    producer.flush(120)


def inputs(count: int, seed: int = 5) -> dict[str, list[tuple[bytes, Headers]]]:
    """The same ``count`` orders for each kind: every record has the same 1 KB JSON value; the header kind has
    the five properties as headers, the body kind only the two the body does not hold."""
    rng = random.Random(seed)
    out: dict[str, list[tuple[bytes, Headers]]] = {kind: [] for kind in KINDS}
    for headers in perfkit.message_headers(count, seed=seed):
        values = dict(headers)
        value = order_value(rng, int(values["CustomerId"]), int(values["Amount"]), values["Region"].decode())
        out["headers"].append((value, headers))
        out["JSON body"].append((value, [(k, v) for k, v in headers if k not in PATHS]))
    return out


def config_for(kind: str, size: int, topic: str, partitions: int) -> Config:
    config = perfkit.subscription_config(
        size, topic, groups_per_app=bench_fanout.GROUPS_PER_APP, partitions=partitions, every_group=True
    )
    return body_config(config) if kind == "JSON body" else config


def one_run(args: argparse.Namespace, rep: int, results: dict[str, list[float]]) -> None:
    with perfkit.broker() as b:
        base = perfkit.settings(b.bootstrap_servers)
        topics = {kind: f"{base.topic_prefix}-{i}-orders" for i, kind in enumerate(KINDS)}
        for kind, records in inputs(args.messages).items():
            perfkit.create_topic(base, topics[kind], args.partitions)
            produce(base, topics[kind], records)
        warmup = config_for("headers", args.sizes[0], topics["headers"], args.partitions)
        # pipes and workers, both kinds, write these 110 destinations (and the workers their pending topics)
        written = perfkit.write_destinations(base, warmup, topics["headers"], args.messages, args.partitions)
        sinks = written.sinks
        # Untimed too: the pipe once. Whichever pipe ran first was measured 3x slower than the same pipe later.
        bench_fanout.fanout_pipe(base, topics["headers"], sinks, args.messages, window=None)
        figures: dict[str, float] = {}
        order = KINDS if rep % 2 == 0 else KINDS[::-1]
        for window in (None, WINDOW):
            for kind in order:
                figures[pipe_label(kind, window)] = bench_fanout.fanout_pipe(
                    base, topics[kind], sinks, args.messages, window=window
                ).rate
        for size in args.sizes:
            for kind in order:
                config = config_for(kind, size, topics[kind], args.partitions)
                if {spec.name for spec in perfkit.output_topics(base, config)} != written.names:
                    raise SystemExit(f"{kind} at {size}: its destinations are not the ones written before")
                perfkit.write_config(base, config)
                timing = perfkit.run_worker(base, args.messages).timing
                perfkit.rewind_worker(base, topics[kind], args.partitions)
                if timing.produced != timing.messages:
                    raise SystemExit(
                        f"{kind} at {size}: {timing.produced} records routed for {timing.messages}"
                    )
                figures[label(kind, size)] = timing.rate
        print(
            f"({len(sinks)} destinations of {args.partitions} partitions, {args.messages:,} records per run)"
        )
        print_figures(figures, args.sizes)
        for name, rate in figures.items():
            results.setdefault(name, []).append(rate)


def label(kind: str, size: int) -> str:
    return f"worker, {size:,} subscriptions, {kind}"


def pipe_label(kind: str, window: int | None) -> str:
    return f"fan-out pipe{', windowed' if window else ''}, {kind} input"


def print_figures(figures: dict[str, float], sizes: Sequence[int]) -> None:
    print(f"  {'':50} {'records/s':>10} {'/fan-out':>9} {'/windowed':>10} {'body/headers':>13}")
    for window in (None, WINDOW):
        for kind in KINDS:
            print(f"  {pipe_label(kind, window):50} {figures[pipe_label(kind, window)]:>10,.0f}")
    for size in sizes:
        for kind in KINDS:
            rate = figures[label(kind, size)]
            pipe, windowed = (figures[pipe_label(kind, window)] for window in (None, WINDOW))
            against = f"{rate / figures[label('headers', size)]:>12.2f}x" if kind != "headers" else ""
            print(
                f"  {label(kind, size):50} {rate:>10,.0f} {rate / pipe:>9.2f} {rate / windowed:>10.2f} {against:>13}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    perfkit.common_arguments(parser, messages=100_000, repeat=1)
    parser.add_argument("--partitions", type=int, default=4, help="input and destination partitions (4)")
    parser.add_argument(
        "--sizes",
        type=lambda text: [int(size) for size in text.split(",")],
        default=[10, 10_000],
        help="subscriptions, comma-separated (10,10000)",
    )
    args = parser.parse_args()
    began = time.monotonic()
    results: dict[str, list[float]] = {}
    for rep in range(args.repeat):
        print(f"run {rep + 1} of {args.repeat}", flush=True)
        one_run(args, rep, results)
    if args.repeat > 1:
        print(f"\nmedians of {args.repeat} runs (records/s) and the ratios of the medians:")
        print_figures({name: perfkit.median(rates) for name, rates in results.items()}, args.sizes)
    print(f"({time.monotonic() - began:.0f} s)")


if __name__ == "__main__":
    main()
