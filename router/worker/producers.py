"""The worker's producers: the destination topics shared out among ``--producers`` producers (default one).

Why the option: librdkafka puts one partition in each produce request, and with idempotence on it keeps at most
5 requests in flight per broker connection (confluentinc/librdkafka#1700). A router writes to hundreds of
destination partitions, a few records each per request, so where request round trips are long (a remote
cluster) one producer may be bound by them rather than by bytes, and several producers put more requests in
flight. Where the broker's CPU binds, they do not help: on this project's 2-core machine with a local Apache
Kafka, 40,000 records over 440 partitions went at 121,000 records/s through one producer and 87,000-113,000
through 2, 4 or 8 (``tests/perf/bench_produce_fanout.py``; docs/performance.md), so the default is one.

Each destination topic always goes through the same producer (a CRC-32 of its name), so every partition's records
are produced, retried and acknowledged in order by one idempotent producer, as with one producer. Exactly-once
keeps one producer: a transaction belongs to one producer, and the window's records and input offsets must
commit together.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterator
from typing import Protocol, cast

from confluent_kafka import KafkaError, Message, Producer

from subroute import wire
from subroute.kafka.clients import close_producer

# Measured: more did not help where the broker's CPU binds (see above); each producer costs a connection and a
# librdkafka thread per broker.
DEFAULT_PRODUCERS = 1


class Produce(Protocol):
    def __call__(
        self,
        topic: str,
        *,
        value: bytes | None,
        key: bytes | None,
        headers: wire.Headers,
        timestamp: int,
        on_delivery: Callable[[KafkaError | None, Message], None] | None = None,
    ) -> None: ...


class Producers:
    """``count`` producers made by ``make(index)``; a topic's records always go through the same one."""

    def __init__(self, make: Callable[[int], Producer], count: int) -> None:
        if count < 1:
            raise ValueError(f"a worker needs at least one producer, not {count}")
        self.all = tuple(make(i) for i in range(count))
        self._by_topic: dict[str, Producer] = {}
        self._produce: dict[str, Produce] = {}

    def __iter__(self) -> Iterator[Producer]:
        return iter(self.all)

    def __len__(self) -> int:
        return len(self.all)

    @property
    def first(self) -> Producer:
        """The producer of a worker with one (exactly-once: the transactional one)."""
        return self.all[0]

    def close(self) -> None:
        """After a flush: close each producer that has nothing left to deliver (``kafka.clients.close_producer``)."""
        for producer in self.all:
            close_producer(producer)

    def of(self, topic: str) -> Producer:
        found = self._by_topic.get(topic)
        if found is None:
            found = self.all[zlib.crc32(topic.encode()) % len(self.all)]
            if len(self._by_topic) >= 65_536:  # regex inputs may route to topics without bound
                self._by_topic.clear()
                self._produce.clear()
            self._by_topic[topic] = found
        return found

    def produce_of(self, topic: str) -> Produce:
        """The bound ``produce`` of ``topic``'s producer (called once per routed record: kept, not looked up)."""
        found = self._produce.get(topic)
        if found is None:
            found = cast(Produce, self.of(topic).produce)  # the client's stubs type headers more narrowly
            self._produce[topic] = found
        return found

    def flush(self, timeout: float | None = None) -> int:
        """Flush every producer; the records still queued (0 once everything is acknowledged or failed)."""
        # Each flush waits for its own producer; the others' I/O threads keep sending meanwhile.
        return sum(p.flush() if timeout is None else p.flush(timeout) for p in self.all)

    def poll(self, timeout: float) -> None:
        for producer in self.all:
            producer.poll(timeout / len(self.all))
