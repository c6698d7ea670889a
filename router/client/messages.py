"""What the consumer client hands out and reports: the delivered message, the client's counters, its error, and
the delivery semantics it can be asked for. Values only: no Kafka client here."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import cast

from confluent_kafka import Message

from subroute import wire
from subroute.errors import SubrouteError
from subroute.wire import CANCELS, Headers, header_value, int_header

AT_LEAST_ONCE = "at-least-once"
AT_MOST_ONCE = "at-most-once"
SEMANTICS = (AT_LEAST_ONCE, AT_MOST_ONCE)


class QueueError(SubrouteError, RuntimeError):
    """The queue cannot be used as asked (unknown app, no default_publish, a produce that failed)."""


@dataclass(slots=True, eq=False)
class QueueMessage:
    """One delivered message. ``deliveries``: failed deliveries before this one; ``cancels``: cancels so far."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: Headers
    timestamp: int  # epoch ms (Kafka CreateTime of the original publish)
    band: int = 0
    deliveries: int = 0
    cancels: int = 0
    lease_deadline: float | None = None  # time.monotonic() by which to settle it

    @classmethod
    def of(cls, message: Message, band: int) -> QueueMessage:
        headers = cast(Headers, message.headers() or [])
        return cls(
            cast(str, message.topic()),
            cast(int, message.partition()),
            cast(int, message.offset()),
            message.key(),
            message.value(),
            headers,
            message.timestamp()[1],
            band,
            int_header(headers, wire.DELIVERIES),
            int_header(headers, CANCELS),
        )

    @property
    def id(self) -> tuple[str, int, int]:
        return (self.topic, self.partition, self.offset)

    def header(self, name: str) -> str | None:
        return header_value(self.headers, name)


@dataclass
class QueueStats:
    delivered: int = 0
    acked: int = 0
    cancelled: int = 0
    lease_expired: int = 0
    duplicates: int = 0
    dead_lettered: dict[str, int] = field(default_factory=dict)
    replaced: int = (
        0  # routed under a replaced subscription they no longer match: back through the pending topic
    )
    settled: int = 0  # settled by an operator's ``subroute queue ack`` (a settle entry), never delivered
    failed_writes: int = 0  # writes of given-back messages (copies, dead letters) that failed and are retried
    # Messages that expired here, by what became of them: "dead-letter" (once the dead letter is acknowledged) or
    # "drop" (the app's on_expire: drop; removed without a write). The router counts its own in
    # subroute_expired_total.
    expired: dict[str, int] = field(default_factory=dict)


def now_ms() -> int:
    """The time of a history event: epoch milliseconds."""
    return int(time.time() * 1000)


def where(message: QueueMessage) -> dict[str, object]:
    """Where ``message`` was, as the fields of a history event."""
    return {"topic": message.topic, "partition": message.partition, "offset": message.offset}
