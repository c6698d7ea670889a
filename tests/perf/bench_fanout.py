"""The worker against its own Kafka I/O ceiling: ``python tests/perf/bench_fanout.py [--messages N] [--repeat R]``.

One local broker (Apache Kafka by default), one pre-loaded input topic of ``--partitions`` partitions (200-byte
values, five headers), 10 apps x 10 consumer groups at 1,000 subscriptions: 100 group topics and 10 dead-letter
topics of the same partition count. Measured in turn, in the same run, each as input records per second from
its first batch until its last records are acknowledged and committed:

* pipe: consume a batch, produce each record with its headers to one topic, flush, commit (per batch);
* fan-out pipe: the same loop writing each record to one of the 110 destinations, chosen by an index, with the
  router's six routing headers: the router's ceiling with no routing work (per batch, as the issue measured it);
* fan-out pipe, windowed: the same, committing as the worker now does (every 20,000 records or when drained);
* the worker as shipped (commit window), and with ``--commit-interval-records 1`` (a commit per batch: the
  stop-and-wait loop it replaced), both at the default batch (2,000) and at ``--batch-size 10000``.

Prints each figure and its ratio to the fan-out pipe of the same run. A worker routes the whole input once,
untimed, before anything is measured: the broker warms up.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence

import perfkit
from confluent_kafka import Consumer, Producer, TopicPartition
from perfkit import spread

from subroute import names
from subroute.kafka.io import TopicSpec, admin_client, ensure_topics
from subroute.ops.settings import Settings
from subroute.worker.window import CommitInterval

GROUPS_PER_APP = 10
SUBSCRIPTIONS = 1_000


def fanout_pipe(
    s: Settings, source: str, sinks: Sequence[str], expected: int, window: int | None, batch_size: int = 2000
) -> perfkit.Run:
    """Consume, produce each record to ``sinks[i % len(sinks)]`` with the routing headers, commit: after every
    batch (``window`` None: flush and a synchronous commit), or once ``window`` records are produced or a poll
    comes back short (one flush, then the commit)."""
    consumer = Consumer(perfkit.consumer_config(s, f"{s.topic_prefix}.fanout"))
    producer = Producer({**perfkit.producer_config(s), "delivery.report.only.error": True})
    consumer.subscribe([source])
    run = perfkit.Run()
    offsets: dict[tuple[str, int], int] = {}
    pending = 0
    produce, count = producer.produce, len(sinks)
    try:
        while run.messages < expected:
            batch = consumer.consume(batch_size, timeout=0.2)
            if not batch:
                continue
            run.first = run.first or time.perf_counter()
            for i, m in enumerate(batch, start=run.messages):
                topic, partition, offset = m.topic(), m.partition(), m.offset()
                headers = [
                    *(m.headers() or ()),
                    (names.SOURCE, f"{topic}/{partition}/{offset}".encode()),
                    *perfkit.ROUTING_HEADERS_SAMPLE,
                ]
                while True:
                    try:
                        produce(sinks[i % count], value=m.value(), key=m.key(), headers=headers)
                        break
                    except BufferError:
                        producer.poll(0.05)
                offsets[(topic, partition)] = offset + 1
            run.messages += len(batch)
            pending += len(batch)
            if window is None or pending >= window or len(batch) < batch_size or run.messages >= expected:
                producer.flush()
                consumer.commit(
                    offsets=[TopicPartition(t, p, o) for (t, p), o in offsets.items()], asynchronous=False
                )
                pending = 0
            run.last = time.perf_counter()
    finally:
        consumer.close()
    run.produced = run.messages
    return run


def ready_topics(s: Settings, specs: Sequence[TopicSpec]) -> None:
    """Create ``specs`` and write one record to each partition: a topic just created has no leaders yet, and the
    first run to write to 440 new partitions would otherwise be timed waiting for them."""
    ensure_topics(admin_client(s), list(specs))
    producer = Producer(perfkit.producer_config(s))
    for spec in specs:
        for partition in range(spec.partitions):
            producer.produce(spec.name, value=b"warm-up", partition=partition)
    producer.flush(120)


def drop_topics(s: Settings, topics: Sequence[str]) -> None:
    admin = admin_client(s)  # kept alive until every future has its answer
    for future in admin.delete_topics(list(topics), operation_timeout=60).values():
        future.result()


def one_run(args: argparse.Namespace, rep: int, results: dict[str, list[float]]) -> None:
    with perfkit.broker() as b:
        base = perfkit.settings(b.bootstrap_servers)
        topic = f"{base.topic_prefix}-orders"
        perfkit.create_topic(base, topic, args.partitions)
        perfkit.produce_input(base, topic, perfkit.message_headers(args.messages))
        config = perfkit.subscription_config(
            SUBSCRIPTIONS, topic, groups_per_app=GROUPS_PER_APP, partitions=args.partitions
        )
        sinks = [
            spec.name
            for spec in perfkit.output_topics(base, config)
            if not spec.name.endswith(".pending")  # the pipe writes where the worker writes
        ]
        ready_topics(base, [TopicSpec(name, args.partitions) for name in sinks])
        # Untimed: a worker over the whole input first. The first runs on a new broker were measured up to 3x
        # slower than the last ones whatever they ran (the broker warms up), which hid every difference.
        warm = perfkit.settings(b.bootstrap_servers)
        ready_topics(warm, perfkit.output_topics(warm, config))
        perfkit.write_config(warm, config)
        perfkit.run_worker(warm, args.messages)
        drop_topics(warm, [spec.name for spec in perfkit.output_topics(warm, config)])
        figures = {
            "pipe": perfkit.run_pipe(
                perfkit.settings(b.bootstrap_servers), topic, f"{topic}-copy", args.messages
            ),
            "fan-out pipe": fanout_pipe(base, topic, sinks, args.messages, window=None),
        }
        windowed = perfkit.settings(b.bootstrap_servers)
        figures["fan-out pipe, windowed"] = fanout_pipe(windowed, topic, sinks, args.messages, window=20_000)
        variants = [
            (batch_size, label, interval)
            for batch_size in (2_000, 10_000)
            for label, interval in (("window", CommitInterval()), ("per batch", CommitInterval(1, 0)))
        ]
        # The broker gets faster as it warms up: each run starts the rotation at another variant.
        shift = rep % len(variants)
        for batch_size, label, interval in variants[shift:] + variants[:shift]:
            s = perfkit.settings(b.bootstrap_servers)
            ready_topics(s, perfkit.output_topics(s, config))
            perfkit.write_config(s, config)
            worker = perfkit.run_worker(s, args.messages, batch_size=batch_size, commit_interval=interval)
            figures[f"worker, batch {batch_size:,}, commit {label}"] = worker.timing
            # Each run routes to topics of its own: delete them, so that every run meets a broker with the
            # same number of partitions (it slows as they grow).
            drop_topics(s, [spec.name for spec in perfkit.output_topics(s, config)])
        ceiling = figures["fan-out pipe"].rate
        print(f"({len(sinks)} destinations of {args.partitions} partitions, {SUBSCRIPTIONS} subscriptions)")
        for name, run in figures.items():
            results.setdefault(name, []).append(run.rate)
            print(f"  {name:42} {run.rate:>10,.0f} records/s   {run.rate / ceiling:5.2f} of the fan-out pipe")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    perfkit.common_arguments(parser, messages=200_000, repeat=1)
    parser.add_argument("--partitions", type=int, default=4, help="input and destination partitions (4)")
    perfkit.python_routing_argument(parser)
    args = parser.parse_args()
    if args.python_routing:
        perfkit.use_python_routing()
    results: dict[str, list[float]] = {}
    for rep in range(args.repeat):
        print(f"run {rep + 1} of {args.repeat}", flush=True)
        one_run(args, rep, results)
    ceiling = results["fan-out pipe"]
    print("\nmedians (records/s) and ratio of medians to the fan-out pipe:")
    for name, rates in results.items():
        ratio = perfkit.median(rates) / perfkit.median(ceiling)
        print(f"  {name:42} {spread(rates):>32}   {ratio:5.2f}")


if __name__ == "__main__":
    main()
