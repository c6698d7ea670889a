"""What ``subroute queue browse`` costs on a large backlog: ``python tests/perf/bench_queue_browse.py
[--messages N] [--repeat R]``.

A group topic (4 partitions) pre-loaded with ``--messages`` routed-style records (default 1,000,000; 200-byte
values, the router's headers and two properties), none confirmed. In the same run, each figure the median of
``--repeat`` runs:

1. a plain consumer (assigned, never joined) reading the same partitions to their end: the ceiling;
2. ``browse`` with no filter, keeping the 20 oldest (``admin/browse.py``, as the CLI runs it);
3. ``browse`` with a filter that one record in ten matches (every record's header decoded and evaluated).

Each prints records/s and its ratio to the plain consumer's.
"""

from __future__ import annotations

import argparse
import time

import perfkit
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

from subroute import wire
from subroute.admin.browse import browse, unconfirmed_spans
from subroute.client.settles import compile_filter
from subroute.config.model import AppConfig
from subroute.ops.settings import Settings

PARTITIONS = 4
APP = AppConfig("Jobs", ("jobs",), properties={"Kind": "string", "Size": "int"})


def load(s: Settings, topic: str, count: int) -> None:
    headers = [
        [
            *perfkit.ROUTING_HEADERS_SAMPLE,
            ("Kind", b"bad" if i % 10 == 0 else b"good"),
            ("Size", str(i).encode()),
        ]
        for i in range(min(count, 10_000))
    ]
    done = 0
    while done < count:
        chunk = headers[: min(len(headers), count - done)]
        perfkit.produce_input(s, topic, chunk, start=done)
        done += len(chunk)


def plain(s: Settings, topic: str, expected: int) -> float:
    """A plain consumer reading the topic once, as fast as it goes (the records read, nothing else)."""
    consumer = Consumer(
        s.client_config(
            {
                "group.id": "bench-plain",
                "enable.auto.commit": False,
                "enable.partition.eof": True,
                "isolation.level": "read_committed",
            }
        )
    )
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    began = time.perf_counter()
    read, done = 0, 0
    while done < PARTITIONS:
        for message in consumer.consume(1000, timeout=0.2):
            error = message.error()
            if error is None:
                read += 1
            elif error.code() == KafkaError._PARTITION_EOF:
                done += 1
    seconds = time.perf_counter() - began
    consumer.close()
    assert read == expected, (read, expected)
    return read / seconds


def browsing(s: Settings, expected: int, where: str | None) -> float:
    began = time.perf_counter()
    spans = unconfirmed_spans(s, "Jobs", "workers")
    found = browse(
        s, APP, "workers", spans=spans, where=None if where is None else compile_filter(APP, where)
    )
    seconds = time.perf_counter() - began
    assert found.read == expected and found.complete, (found.read, expected)
    assert len(found.records) == 20
    return found.read / seconds


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    perfkit.common_arguments(parser, 1_000_000, repeat=3)
    args = parser.parse_args()
    with perfkit.broker() as b:
        s = perfkit.settings(b.bootstrap_servers)
        topic = wire.group_topic(s.topic_prefix, "Jobs", "workers")
        perfkit.create_topic(s, topic, PARTITIONS)
        began = time.perf_counter()
        load(s, topic, args.messages)
        print(f"loaded {args.messages:,} records in {time.perf_counter() - began:.1f} s", flush=True)
        rates: dict[str, list[float]] = {"plain consumer": [], "browse": [], "browse --filter (1 in 10)": []}
        for _ in range(args.repeat):
            rates["plain consumer"].append(plain(s, topic, args.messages))
            rates["browse"].append(browsing(s, args.messages, None))
            rates["browse --filter (1 in 10)"].append(browsing(s, args.messages, 'Kind == "bad"'))
        ceiling = perfkit.median(rates["plain consumer"])
        for name, figures in rates.items():
            rate = perfkit.median(figures)
            print(
                f"{name:<28} {rate:>10,.0f} records/s  ({perfkit.spread(figures)})  "
                f"{rate / ceiling:.2f} of the plain consumer",
                flush=True,
            )


if __name__ == "__main__":
    main()
