"""The worker against its own Kafka I/O ceiling: ``python tests/perf/bench_fanout.py [--sizes 10,1000,10000]
[--messages N] [--repeat R] [--guarantee at-least-once|exactly-once] [--unkeyed] [--python-routing]``.

One local broker (Apache Kafka by default, Tansu with ``SUBROUTE_TEST_BROKER=tansu``), one pre-loaded input
topic of ``--partitions`` partitions (200-byte values, five headers), 10 apps x 10 consumer groups: 100 group
topics and 10 dead-letter topics of the same partition count, at every size (at 10 subscriptions the groups
without one take every record of their app, in turn). Measured in turn, in the same run, each as input records
per second from its first batch until its last records are acknowledged and committed:

* pipe: consume a batch, produce each record with its headers to one topic, flush, commit (per batch);
* fan-out pipe: the same loop writing each record to one of the 110 destinations, chosen by an index, with the
  router's six routing headers: the router's ceiling with no routing work (per batch, as issue 13 measured it);
* fan-out pipe, windowed: the same, committing as the worker does (every 20,000 records or when drained);
  and with the destinations shared among 4 producers, as ``--producers 4`` shares them (router/worker/producers.py);
* the worker as shipped (batch 2,000, commit window) at each of ``--sizes`` subscriptions, disjoint app filters
  (each record goes to one app);
* the worker on the fan-out workload at 1,000 subscriptions: every record passes three apps' filters, so it is
  routed three times (reported as routed records per second against the pipes' records per second);
* the worker at 1,000 with a commit per batch (``--commit-interval-records 1``: the stop-and-wait loop the
  window replaced), with ``--batch-size 10000``, and with its destinations shared among 4 producers
  (``--producers 4``).

With ``--guarantee exactly-once`` the workers route exactly-once and both fan-out pipes commit as the worker
then does: the input offsets sent to a transaction of one producer, which then commits (``fanout_pipe(...,
transactional=True)``); the variants with 4 producers are left out (a transaction belongs to one producer, and the
worker refuses more than one exactly-once). The plain pipe stays as it is, the same reference in both.

Prints each figure and its ratio to the fan-out pipe, to the windowed fan-out pipe (the same commit cadence as
the worker: the ceiling with no routing work) and to the pipe, all of the same run. A worker routes the whole
input once, untimed, before anything is measured (the broker warms up), into the destinations every later run
writes, back to back: partitions not written just before cost the broker several times the CPU per record
(perfkit.ready_topics), so no run is measured on new topics. The workers run in a rotation that starts at another
one in each repetition (a broker keeps getting faster for a while), each from the input's start
(``perfkit.rewind_worker``).
"""

from __future__ import annotations

import argparse
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

import perfkit
from confluent_kafka import Consumer, Producer, TopicPartition

from subroute import wire
from subroute.config.model import Config
from subroute.ops.settings import Settings
from subroute.worker.checkpoint import AT_LEAST_ONCE, EXACTLY_ONCE
from subroute.worker.producers import Producers
from subroute.worker.window import CommitInterval

GROUPS_PER_APP = 10
SHARED_PRODUCERS = 4  # the pipe and a worker with their destinations shared among this many producers
FANOUT_SIZE = 1_000  # the size of the fan-out workload and of the commit and batch variants


def fanout_pipe(
    s: Settings,
    source: str,
    sinks: Sequence[str],
    expected: int,
    window: int | None,
    batch_size: int = 2000,
    producers: int = 1,
    every_report: bool = False,
    transactional: bool = False,
) -> perfkit.Run:
    """Consume, produce each record to ``sinks[i % len(sinks)]`` with the routing headers, commit: after every
    batch (``window`` None: flush and a synchronous commit), or once ``window`` records are produced or a poll
    comes back short (one flush, then the commit). Each sink goes through one of ``producers`` producers, shared
    out as the worker shares its topics (router/worker/producers.py). Only failed deliveries are reported, unless
    ``every_report``: then each record's report is counted, as the worker counts its windows' reports.

    ``transactional``: the exactly-once form of the same loop, as the worker commits exactly-once
    (worker/checkpoint.py): one producer with a transactional id; each commit is the input offsets sent to the
    open transaction and the transaction committed (which waits for its records, as the flush does)."""
    # a group of its own: each pipe reads the whole input
    consumer = Consumer(perfkit.consumer_config(s, f"{s.topic_prefix}.fanout.{uuid.uuid4().hex[:8]}"))
    reported = [0]

    def count(error: object, message: object) -> None:
        reported[0] += 1

    settings: dict[str, object] = {"delivery.report.only.error": not every_report}
    if transactional:
        if producers != 1:
            raise ValueError("a transaction belongs to one producer")
        settings["transactional.id"] = f"{s.topic_prefix}.fanout.{uuid.uuid4().hex[:8]}"
    pool = Producers(lambda _: Producer({**perfkit.producer_config(s), **settings}), producers)
    if transactional:
        pool.first.init_transactions(30)
    consumer.subscribe([source])
    run = perfkit.Run()
    offsets: dict[tuple[str, int], int] = {}
    pending = 0
    produce, sinks_count = [pool.of(sink).produce for sink in sinks], len(sinks)
    try:
        while run.messages < expected:
            batch = consumer.consume(batch_size, timeout=0.2)
            if not batch:
                continue
            run.first = run.first or time.perf_counter()
            if transactional and pending == 0:  # a window's first batch: its transaction opens
                pool.first.begin_transaction()
            for i, m in enumerate(batch, start=run.messages):
                topic, partition, offset = m.topic(), m.partition(), m.offset()
                headers = [
                    *(m.headers() or ()),
                    (wire.SOURCE, f"{topic}/{partition}/{offset}".encode()),
                    *perfkit.ROUTING_HEADERS_SAMPLE,
                ]
                while True:
                    try:
                        sink = sinks[i % sinks_count]
                        if every_report:
                            produce[i % sinks_count](
                                sink, value=m.value(), key=m.key(), headers=headers, on_delivery=count
                            )
                        else:  # the target's ceiling, as it was measured
                            produce[i % sinks_count](sink, value=m.value(), key=m.key(), headers=headers)
                        break
                    except BufferError:
                        pool.poll(0.05)
                offsets[(topic, partition)] = offset + 1
            if every_report:
                pool.poll(0)  # serve the batch's reports, as the worker does between batches
            run.messages += len(batch)
            pending += len(batch)
            if window is None or pending >= window or len(batch) < batch_size or run.messages >= expected:
                positions = [TopicPartition(t, p, o) for (t, p), o in offsets.items()]
                if transactional:
                    pool.first.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(), 30)
                    pool.first.commit_transaction(30)
                else:
                    pool.flush()
                    consumer.commit(offsets=positions, asynchronous=False)
                pending = 0
            run.last = time.perf_counter()
    finally:
        consumer.close()
    if every_report and reported[0] != run.messages:
        raise RuntimeError(f"fan-out pipe: {reported[0]} delivery reports for {run.messages} records")
    run.produced = run.messages
    return run


@dataclass(frozen=True)
class Variant:
    """One worker run: ``size`` subscriptions, each record passing ``fanout`` apps' filters."""

    size: int
    fanout: int = 1
    batch_size: int = 2_000
    commit_per_batch: bool = False  # a commit after every batch: the stop-and-wait loop the window replaced
    producers: int | None = None  # None: the worker's default

    @property
    def label(self) -> str:
        label = f"worker, {self.size:,} subscriptions"
        if self.fanout > 1:
            label += f", fan-out x{self.fanout} (routed records/s)"
        if self.batch_size != 2_000:
            label += f", batch {self.batch_size:,}"
        if self.commit_per_batch:
            label += ", commit per batch"
        if self.producers is not None:
            label += f", {self.producers} producer(s)"
        return label


def variants(sizes: Sequence[int], guarantee: str) -> list[Variant]:
    shared = [Variant(FANOUT_SIZE, producers=SHARED_PRODUCERS)] if guarantee == AT_LEAST_ONCE else []
    return [
        *(Variant(size) for size in sizes),
        Variant(FANOUT_SIZE, fanout=3),
        Variant(FANOUT_SIZE, commit_per_batch=True),
        Variant(FANOUT_SIZE, batch_size=10_000),
        *shared,  # exactly-once routes through one producer: a transaction belongs to one
    ]


def config_of(variant: Variant, topic: str, partitions: int) -> Config:
    return perfkit.subscription_config(
        variant.size,
        topic,
        fanout=variant.fanout,
        groups_per_app=GROUPS_PER_APP,
        partitions=partitions,
        every_group=True,
    )


def one_run(args: argparse.Namespace, rep: int, results: dict[str, list[float]]) -> None:
    with perfkit.broker() as b:
        base = perfkit.settings(b.bootstrap_servers)
        topic = f"{base.topic_prefix}-orders"
        perfkit.create_topic(base, topic, args.partitions)
        perfkit.produce_input(base, topic, perfkit.message_headers(args.messages), keyed=not args.unkeyed)
        runs = variants(args.sizes, args.guarantee)
        transactional = args.guarantee == EXACTLY_ONCE
        warmup = config_of(runs[0], topic, args.partitions)
        # each run, pipe or worker, writes these 110 destinations (and the worker its pending topics)
        written = perfkit.write_destinations(base, warmup, topic, args.messages, args.partitions)
        sinks = written.sinks
        figures = {
            "pipe": perfkit.run_pipe(
                perfkit.settings(b.bootstrap_servers), topic, f"{topic}-copy", args.messages
            ).rate,
            "fan-out pipe": fanout_pipe(
                base, topic, sinks, args.messages, window=None, transactional=transactional
            ).rate,
        }
        figures["fan-out pipe, windowed"] = fanout_pipe(
            base, topic, sinks, args.messages, window=20_000, transactional=transactional
        ).rate
        if not transactional:
            figures[f"fan-out pipe, windowed, {SHARED_PRODUCERS} producers"] = fanout_pipe(
                base, topic, sinks, args.messages, window=20_000, producers=SHARED_PRODUCERS
            ).rate
        shift = rep % len(runs)
        for variant in runs[shift:] + runs[:shift]:
            config = config_of(variant, topic, args.partitions)
            if {spec.name for spec in perfkit.output_topics(base, config)} != written.names:
                raise SystemExit(f"{variant.label}: its destinations are not the ones written before")
            perfkit.write_config(base, config)
            worker = perfkit.run_worker(
                base,
                args.messages,
                batch_size=variant.batch_size,
                producers=variant.producers,
                guarantee=args.guarantee,
                commit_interval=CommitInterval(1, 0) if variant.commit_per_batch else CommitInterval(),
            )
            perfkit.rewind_worker(base, topic, args.partitions)
            timing = worker.timing
            if variant.fanout == 1 and timing.produced != timing.messages:
                raise SystemExit(f"{variant.label}: {timing.produced} records routed for {timing.messages}")
            figures[variant.label] = timing.produced_rate if variant.fanout > 1 else timing.rate
        print(f"({len(sinks)} destinations of {args.partitions} partitions, {args.guarantee})")
        print_ratios(figures)
        for name, rate in figures.items():
            results.setdefault(name, []).append(rate)


def print_ratios(figures: dict[str, float]) -> None:
    ceiling, windowed, pipe = figures["fan-out pipe"], figures["fan-out pipe, windowed"], figures["pipe"]
    print(f"  {'':58} {'records/s':>10} {'/fan-out':>9} {'/windowed':>10} {'/pipe':>6}")
    for name, rate in figures.items():
        print(
            f"  {name:58} {rate:>10,.0f} {rate / ceiling:>9.2f} {rate / windowed:>10.2f} {rate / pipe:>6.2f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    perfkit.common_arguments(parser, messages=200_000, repeat=1)
    parser.add_argument("--partitions", type=int, default=4, help="input and destination partitions (4)")
    parser.add_argument(
        "--sizes",
        type=lambda text: [int(size) for size in text.split(",")],
        default=[10, 1_000, 10_000],
        help="subscriptions of the disjoint-filter runs, comma-separated (10,1000,10000)",
    )
    parser.add_argument(
        "--guarantee",
        choices=(AT_LEAST_ONCE, EXACTLY_ONCE),
        default=AT_LEAST_ONCE,
        help="the workers' guarantee, and the fan-out pipes' commits: offsets, or transactions (at-least-once)",
    )
    perfkit.unkeyed_argument(parser)
    perfkit.python_routing_argument(parser)
    args = parser.parse_args()
    if args.python_routing:
        perfkit.use_python_routing()
    results: dict[str, list[float]] = {}
    for rep in range(args.repeat):
        print(f"run {rep + 1} of {args.repeat}", flush=True)
        one_run(args, rep, results)
    print(f"\nmedians of {args.repeat} runs (records/s) and the ratios of the medians:")
    print_ratios({name: perfkit.median(rates) for name, rates in results.items()})
    big = max(args.sizes)
    # Issue 26's target: against the pipe that commits on the worker's own cadence.
    target = perfkit.median(results[Variant(big).label]) / perfkit.median(results["fan-out pipe, windowed"])
    if big >= 10_000:
        print(
            f"router / windowed fan-out pipe at {big:,} subscriptions, {args.guarantee}: {target:.2f} (target >= 0.85: "
            f"{perfkit.verdict(target >= 0.85)})"
        )


if __name__ == "__main__":
    main()
