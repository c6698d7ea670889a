"""Kafka I/O of a wide fan-out, without routing: ``python tests/perf/bench_produce_fanout.py [--messages N]
[--repeat R] [--producers 1,2,4,8]``.

Why the worker shares its destination topics among several producers (router/worker/producers.py). librdkafka
puts one partition in each produce request and keeps at most 5 requests in flight per broker connection with
idempotence on, so writing a few records to each of many partitions is bound by request round trips. Here:
``--messages`` records with the router's header count (11), 200-byte values, spread round-robin over 110 topics
of 4 partitions (the benchmarks' 10 apps x 10 groups and 10 dead-letter topics), produced as fast as the client
takes them and then flushed, each topic through one of K producers (as the worker does), for each K of
``--producers``, after an untimed warm-up of every variant. Also, for comparison, one producer without idempotence and 100 requests in flight (which
gives up the ordering guarantees under retries the worker needs). The figure is records per second from the
first produce to the end of the flush; the runs alternate and the median of ``--repeat`` is printed with its
ratio to one producer, measured in the same run.
"""

from __future__ import annotations

import argparse
import time
import zlib
from typing import Any

import perfkit
from confluent_kafka import Producer
from perfkit import median, spread

from subroute.kafka.clients import TopicSpec, admin_client, ensure_topics

TOPICS = 110
PARTITIONS = 4
HEADERS = [(f"h{i}", f"value-{i}".encode()) for i in range(11)]


def produce_all(config: dict[str, Any], count: int, topics: list[str], messages: int) -> float:
    producers = [Producer(config) for _ in range(count)]
    for producer in producers:  # connected and with metadata before the clock starts
        producer.list_topics(timeout=30)
    by_topic = {t: producers[zlib.crc32(t.encode()) % count] for t in topics}
    value = b"v" * perfkit.VALUE_BYTES
    start = time.perf_counter()
    for i in range(messages):
        slot = i % (TOPICS * PARTITIONS)
        topic = topics[slot // PARTITIONS]
        producer = by_topic[topic]
        while True:
            try:
                producer.produce(topic, value, partition=slot % PARTITIONS, headers=HEADERS)
                break
            except BufferError:
                producer.poll(0.01)
    for producer in producers:
        producer.flush()
    return messages / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    perfkit.common_arguments(parser, messages=40_000, repeat=3)
    parser.add_argument("--producers", default="1,2,4,8", help="producer counts, comma-separated (1,2,4,8)")
    args = parser.parse_args()
    counts = [int(c) for c in args.producers.split(",")]
    results: dict[str, list[float]] = {}
    with perfkit.broker() as b:
        s = perfkit.settings(b.bootstrap_servers)
        topics = [f"{s.topic_prefix}-t{i}" for i in range(TOPICS)]
        ensure_topics(admin_client(s), [TopicSpec(t, PARTITIONS) for t in topics])
        idempotent = {**perfkit.producer_config(s), "linger.ms": 5}
        loose = {**idempotent, "enable.idempotence": False, "max.in.flight.requests.per.connection": 100}
        # Untimed: a fresh broker runs several times faster after a few hundred thousand records (its JIT
        # warms up), which would favour whatever runs last.
        for count in counts:
            produce_all(idempotent, count, topics, args.messages * 2)
        variants = [(f"{count} producer(s), idempotent", idempotent, count) for count in counts]
        variants.append(("not idempotent: 1 producer, 100 in flight", loose, 1))
        for rep in range(args.repeat):
            line = []
            shift = rep % len(variants)  # each run starts the rotation at another variant
            for name, config, count in variants[shift:] + variants[:shift]:
                rate = produce_all(config, count, topics, args.messages)
                results.setdefault(name, []).append(rate)
                line.append(f"{name.split(':')[0].split(',')[0]}: {rate:,.0f}/s")
            print(f"run {rep + 1}: " + ", ".join(line), flush=True)
    one = median(results[variants[0][0]])
    print(
        f"\n{args.messages:,} records over {TOPICS * PARTITIONS} partitions, records/s, {args.repeat} runs:"
    )
    for name, rates in results.items():
        print(f"  {name:45} {spread(rates):>36}   {median(rates) / one:5.2f} of {counts[0]}")


if __name__ == "__main__":
    main()
