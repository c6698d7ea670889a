"""The consumer library: AMPS's queue verbs (ack, cancel, expire, leases, max cancels / deliveries) for readers
of a group topic, delivery bookkeeping, dead letters (their redrive is an operator action: subroute.admin).
Any plain Kafka consumer can read a group topic too; this adds the queue semantics on top."""

from subroute.client.messages import (
    AT_LEAST_ONCE,
    AT_MOST_ONCE,
    SEMANTICS,
    QueueError,
    QueueMessage,
    QueueStats,
)
from subroute.client.publisher import publish
from subroute.client.queue_consumer import QueueConsumer

__all__ = [
    "AT_LEAST_ONCE",
    "AT_MOST_ONCE",
    "SEMANTICS",
    "QueueConsumer",
    "QueueError",
    "QueueMessage",
    "QueueStats",
    "publish",
]
