"""What librdkafka's produce requests carry when one producer fans out to many partitions, from its own
statistics: ``python tests/perf/bench_produce_requests.py [--messages N] [--lingers 5,50]``.

Issue 26 asks whether the worker's gap to a Kafka Streams router on Apache Kafka comes from the client: the
Java producer sends one ProduceRequest per broker holding a batch of every partition that has one ready, and the
question is whether librdkafka does too. Here one idempotent producer with the worker's settings (``acks=all``,
idempotence, ``linger.ms`` from ``--lingers``) writes ``--messages`` records (200-byte values, eleven headers, as
the worker's envelopes carry) to each layout in turn, round-robin over its partitions, as fast as the client
takes them, then flushes:

* fan-out: 110 topics of 4 partitions (440 partitions: the issue's 10 apps x 10 groups and their dead-letter
  topics), the shape the worker writes;
* one topic of 4 partitions, the shape a plain pipe writes.

From librdkafka's statistics (``statistics.interval.ms`` 100, every report kept): produce requests sent
(``brokers[].req.Produce``), records and message batches (one batch is one partition's records in one request:
the sum over reports of each topic's ``batchcnt`` window), the in-flight requests awaiting a response
(``waitresp_cnt``, the largest and mean seen), the request round trip (``rtt``, mean of the reports' means) and
the time records wait in the producer before they are sent (``int_latency``). Printed per layout and linger:
records per second, records per request, partitions (batches) per request, records per batch. The one local
broker (Apache Kafka by default) leads every partition, so every request goes to it.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import dataclass, field
from typing import Any

import perfkit

from subroute.kafka.clients import TopicSpec, admin_client, ensure_topics

FANOUT_TOPICS, PARTITIONS = 110, 4
HEADERS: list[tuple[str, str | bytes | None]] = [(f"h{i}", f"value-{i}".encode()) for i in range(11)]


@dataclass
class Statistics:
    """What the reports of one run add up to."""

    requests: int = 0
    records: int = 0
    batches: int = 0
    waiting: list[int] = field(default_factory=list)
    rtt_us: list[float] = field(default_factory=list)
    queue_us: list[float] = field(default_factory=list)

    def report(self, text: str) -> None:
        stats = json.loads(text)
        brokers = [b for b in stats.get("brokers", {}).values() if b.get("nodeid", -1) >= 0]
        # Cumulative counters: the last report holds the totals.
        self.requests = sum(b.get("req", {}).get("Produce", 0) for b in brokers)
        self.records = stats.get("txmsgs", 0)
        # Rolling windows, rolled over at each report: their counts add up.
        self.batches += sum(t.get("batchcnt", {}).get("cnt", 0) for t in stats.get("topics", {}).values())
        for b in brokers:
            self.waiting.append(b.get("waitresp_cnt", 0))
            if b.get("rtt", {}).get("cnt", 0):
                self.rtt_us.append(b["rtt"]["avg"])
            if b.get("int_latency", {}).get("cnt", 0):
                self.queue_us.append(b["int_latency"]["avg"])


def produce(config: dict[str, Any], layout: list[tuple[str, int]], messages: int) -> tuple[float, Statistics]:
    """Records per second of one run over ``layout`` (topic, partition) slots, and its statistics."""
    from confluent_kafka import Producer

    found = Statistics()
    producer = Producer({**config, "statistics.interval.ms": 100, "stats_cb": found.report})
    try:
        producer.list_topics(timeout=30)  # connected and with metadata before the clock starts
        value = b"v" * perfkit.VALUE_BYTES
        start = time.perf_counter()
        for i in range(messages):
            topic, partition = layout[i % len(layout)]
            while True:
                try:
                    producer.produce(topic, value, partition=partition, headers=HEADERS)
                    break
                except BufferError:
                    producer.poll(0.01)
        producer.flush()
        rate = messages / (time.perf_counter() - start)
        # One more report, so that the last window's batches are counted.
        seen = found.batches, len(found.waiting)
        deadline = time.monotonic() + 2
        while (found.batches, len(found.waiting)) == seen and time.monotonic() < deadline:
            producer.poll(0.05)
        producer.poll(0.25)
    finally:
        producer.flush()
    return rate, found


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    perfkit.common_arguments(parser, messages=200_000, repeat=1)
    parser.add_argument(
        "--lingers", default="5,50", help="linger.ms values, comma-separated (5: the worker's)"
    )
    args = parser.parse_args()
    with perfkit.broker() as b:
        s = perfkit.settings(b.bootstrap_servers)
        fanout = [f"{s.topic_prefix}-fan{i}" for i in range(FANOUT_TOPICS)]
        single = f"{s.topic_prefix}-single"
        ensure_topics(admin_client(s), [TopicSpec(t, PARTITIONS) for t in [*fanout, single]])
        layouts = {
            f"fan-out, {FANOUT_TOPICS * PARTITIONS} partitions": [
                (t, p) for t in fanout for p in range(PARTITIONS)
            ],
            f"one topic, {PARTITIONS} partitions": [(single, p) for p in range(PARTITIONS)],
        }
        base = perfkit.producer_config(s)
        produce(base, layouts[next(iter(layouts))], args.messages)  # untimed: the new broker warms up
        print(
            f"{args.messages:,} records per run, one idempotent producer (acks=all), "
            "librdkafka's statistics every 100 ms"
        )
        print(
            f"{'layout':>24} {'linger':>6} {'records/s':>10} {'requests':>9} {'rec/req':>8} "
            f"{'parts/req':>9} {'rec/batch':>9} {'in flight max/mean':>19} {'rtt ms':>7} {'queued ms':>9}"
        )
        for _ in range(args.repeat):
            for linger in (int(v) for v in args.lingers.split(",")):
                for name, layout in layouts.items():
                    rate, st = produce({**base, "linger.ms": linger}, layout, args.messages)
                    requests = max(st.requests, 1)
                    waiting = st.waiting or [0]
                    print(
                        f"{name:>24} {linger:>6} {rate:>10,.0f} {st.requests:>9,} "
                        f"{st.records / requests:>8.1f} {st.batches / requests:>9.2f} "
                        f"{st.records / max(st.batches, 1):>9.1f} "
                        f"{max(waiting):>9} / {sum(waiting) / len(waiting):>7.2f} "
                        f"{perfkit.median(st.rtt_us or [0]) / 1000:>7.2f} "
                        f"{perfkit.median(st.queue_us or [0]) / 1000:>9.2f}",
                        flush=True,
                    )


if __name__ == "__main__":
    main()
