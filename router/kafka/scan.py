"""Reading partitions from given offsets to their end, to count what they hold (``subroute status``).

Committed records only (``isolation.level=read_committed``): transaction markers and the records of aborted
transactions are not messages, so they are never given. "The end" is where each partition ended when the read
began (the caller's snapshot): a partition is done at that offset, or at the end of what it holds (the last
stable offset, past the markers). The read is bounded: at most ``limit`` records of each topic, and
``max_wait`` seconds in all; what it did not read to the end is in ``Scan.unfinished``, so a count made of it
is a floor. Records come in batches (one consume call each) and are dropped as they are counted: memory does not
grow with the topics.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import NamedTuple, cast

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from subroute.ops.settings import Settings

Partition = tuple[str, int]
Headers = list[tuple[str, bytes | None]]

BATCH = 1000  # records per consume call (larger ones measured no faster)
FETCH_QUEUE_KB = 16 * 1024  # what the reader fetches ahead (librdkafka's default is 64 MB)


class Stored(NamedTuple):  # a tuple: made once per record read, it must be cheap
    topic: str
    partition: int
    offset: int
    timestamp_ms: int
    headers: Headers
    key: bytes | None = None
    value: bytes | None = None


@dataclass
class Scan:
    """``spans``: per partition, (first offset, end); ``limit``: records per topic (None: no limit)."""

    settings: Settings
    spans: Mapping[Partition, tuple[int, int]]
    limit: int | None = None
    max_wait: float = 60.0
    unfinished: set[Partition] = field(default_factory=set)  # what the read stopped short of the end of
    read: dict[str, int] = field(default_factory=dict)  # records given, per topic

    def batches(self) -> Iterator[list[Stored]]:
        wanted = {where: span for where, span in self.spans.items() if span[0] < span[1]}
        self.unfinished = set(wanted)
        if not wanted:
            return
        consumer = Consumer(
            self.settings.client_config(
                {
                    "group.id": "subroute-scan",  # assigned, never joined, never committed
                    "enable.auto.commit": False,
                    "isolation.level": "read_committed",
                    "enable.partition.eof": True,
                    "queued.max.messages.kbytes": FETCH_QUEUE_KB,
                }
            )
        )
        try:
            consumer.assign([TopicPartition(t, p, start) for (t, p), (start, _) in wanted.items()])
            deadline = time.monotonic() + self.max_wait
            reading = set(wanted)
            while reading and time.monotonic() < deadline:
                batch: list[Stored] = []
                for message in consumer.consume(BATCH, timeout=0.2):
                    where = (cast(str, message.topic()), cast(int, message.partition()))
                    if where not in reading:
                        continue  # done (or over its topic's limit) while this was fetched
                    error = message.error()
                    if error is not None:
                        if error.code() != KafkaError._PARTITION_EOF:
                            raise KafkaException(error)
                        self._done(consumer, reading, where, finished=True)
                        continue
                    offset = cast(int, message.offset())
                    end = wanted[where][1]
                    if offset >= end:  # written since the read began
                        self._done(consumer, reading, where, finished=True)
                        continue
                    topic = where[0]
                    if self.limit is not None and self.read.get(topic, 0) >= self.limit:
                        for other in [w for w in reading if w[0] == topic]:
                            self._done(consumer, reading, other, finished=False)
                        continue
                    self.read[topic] = self.read.get(topic, 0) + 1
                    batch.append(
                        Stored(
                            topic,
                            where[1],
                            offset,
                            message.timestamp()[1],
                            cast(Headers, message.headers() or []),
                            message.key(),
                            message.value(),
                        )
                    )
                    if offset + 1 >= end:
                        self._done(consumer, reading, where, finished=True)
                if batch:
                    yield batch
        finally:
            consumer.close()

    def _done(self, consumer: Consumer, reading: set[Partition], where: Partition, *, finished: bool) -> None:
        reading.discard(where)
        if finished:
            self.unfinished.discard(where)
        consumer.pause([TopicPartition(*where)])  # fetch no more of it
