"""What to do with records whose delivery failed, at-least-once. Pure: the checkpoint carries it out.

librdkafka has already retried what it could when it reports a failure, so a failed record is retried a few
more times with backoff (only it: what was delivered is not produced again), a destination topic that has gone
is re-created once, and a record that still cannot be delivered goes to its app's dead-letter topic as a stub
(no value; reason ``too-large`` or ``undeliverable``). One bad destination then never stops the others, and
the input offsets are committed once every record of the batch is delivered or dead-lettered. Only when a
dead-letter stub itself cannot be delivered is the batch read again (a rewind: duplicates, never loss).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from confluent_kafka import KafkaError

from subroute import wire
from subroute.routing.envelope import OutRecord, app_of, dead_letter_stub

MAX_ATTEMPTS = 4  # produce attempts of one failed record after librdkafka's own, before it is dead-lettered

# A topic deleted under the worker: by name, by partition, or (Kafka 4's topic ids) by the id the producer knew,
# which a broker answers non-retriably once the name points at another topic or none.
MISSING_TOPIC = frozenset(
    {
        KafkaError.UNKNOWN_TOPIC_OR_PART,
        KafkaError._UNKNOWN_TOPIC,
        KafkaError._UNKNOWN_PARTITION,
        KafkaError.UNKNOWN_TOPIC_ID,
        KafkaError.INCONSISTENT_TOPIC_ID,
    }
)
TOO_LARGE = frozenset({KafkaError.MSG_SIZE_TOO_LARGE, KafkaError.RECORD_LIST_TOO_LARGE})
# Not marked retriable by the client, yet worth another try: the broker or network was slow.
TIMEOUTS = frozenset({KafkaError._MSG_TIMED_OUT, KafkaError._TIMED_OUT, KafkaError.REQUEST_TIMED_OUT})


@dataclass(frozen=True)
class Failure:
    record: OutRecord
    code: int
    retriable: bool
    error: str


@dataclass
class Redelivery:
    retry: list[OutRecord] = field(default_factory=list)
    recreate: set[str] = field(default_factory=set)  # destination topics to create again before retrying
    dead_letter: list[tuple[OutRecord, Failure]] = field(default_factory=list)  # (stub, why)
    rewind: bool = False  # a dead-letter stub failed too: read the batch again


def resolve(failures: list[Failure], sent: list[OutRecord]) -> list[Failure]:
    """Failures with their records as produced: a delivery report carries topic, key and value but not the
    headers (the source, the app...), so each failure takes the headers of a sent record with the same topic,
    key and value (each sent record used once)."""
    by_content: dict[tuple[str, bytes | None, bytes | None], list[OutRecord]] = {}
    for record in sent:
        by_content.setdefault((record[0], record[2], record[1]), []).append(record)
    resolved = []
    for failure in failures:
        topic, value, key = failure.record[0], failure.record[1], failure.record[2]
        matches = by_content.get((topic, key, value))
        record = matches.pop() if matches else failure.record
        resolved.append(Failure(record, failure.code, failure.retriable, failure.error))
    return resolved


def backoff(attempt: int) -> float:
    """Seconds to wait before retry ``attempt`` (1, 2, ...)."""
    return min(0.2 * 2.0 ** (attempt - 1), 5.0)


def plan(failures: list[Failure], attempt: int, prefix: str) -> Redelivery:
    """Failures of delivery ``attempt`` (0: the batch's first) -> what to produce next."""
    step = Redelivery()
    for failure in failures:
        topic = failure.record[0]
        if topic == wire.dlq_topic(prefix, app_of(failure.record)):
            step.rewind = True  # nowhere left to put it
        elif failure.code in TOO_LARGE:
            step.dead_letter.append((dead_letter_stub(prefix, failure.record, "too-large"), failure))
        elif failure.code in MISSING_TOPIC and attempt == 0:
            step.recreate.add(topic)
            step.retry.append(failure.record)
        elif (failure.retriable or failure.code in TIMEOUTS or failure.code in MISSING_TOPIC) and (
            attempt + 1 < MAX_ATTEMPTS
        ):
            step.retry.append(failure.record)
        else:
            step.dead_letter.append((dead_letter_stub(prefix, failure.record, wire.UNDELIVERABLE), failure))
    return step
