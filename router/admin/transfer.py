"""Copying records in one Kafka transaction with the reading group's new position: the loop a drain and a redrive
share.

The copies and the commit of the group that read them (``send_offsets_to_transaction``) are one transaction:
either both are there, or neither, so an action killed at any point, or run again, copies no record twice and
loses none (a ``read_committed`` reader sees each copy once). The transactional id is the action's own: a new
producer with it fences a killed one and aborts its open transaction.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import cast

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition

from subroute import wire
from subroute.kafka import clients
from subroute.ops.settings import Settings

# How long the broker lets a transaction stay open: an action killed mid-transaction holds read_committed readers
# of the topics it wrote that long, at most, unless it runs again first (and so aborts it).
TRANSACTION_TIMEOUT_MS = 60_000


@dataclass(frozen=True, slots=True)
class Copy:
    """One record to write: ``timestamp`` in epoch ms, or 0 for the time it is written."""

    topic: str
    key: bytes | None
    value: bytes | None
    headers: wire.Headers
    timestamp: int = 0


def transactional_producer(settings: Settings, transactional_id: str, timeout: float) -> Producer:
    """A producer of ``transactional_id`` with its transactions initialised (which fences an earlier producer of
    the same id and aborts its open transaction). Raises ``KafkaException`` when Kafka refuses."""
    producer = clients.producer(
        settings, **{"transactional.id": transactional_id, "transaction.timeout.ms": TRANSACTION_TIMEOUT_MS}
    )
    producer.init_transactions(timeout)
    return producer


def copy_in_transaction(
    producer: Producer,
    reader: Consumer,
    copies: Iterable[Copy],
    positions: Callable[[], Sequence[TopicPartition]],
    timeout: float,
) -> bool:
    """One transaction: every one of ``copies``, then ``positions()`` committed for ``reader``'s consumer group
    (asked once the copies are written: where the reading got to). False, and the transaction aborted, when there
    is no position to commit (nothing was read). Any failure aborts the transaction (nothing of it is visible)
    and is raised: ``KafkaException``, ``BufferError``, or what iterating ``copies`` raised."""
    failures: list[str] = []

    def delivered(error: KafkaError | None, _message: Message) -> None:
        if error is not None:
            failures.append(str(error))

    producer.begin_transaction()
    try:
        for copy in copies:
            # our Headers: the client's stubs take str values too, and a list is invariant
            headers = cast(list[tuple[str, str | bytes | None]], copy.headers)
            if copy.timestamp > 0:
                producer.produce(
                    copy.topic,
                    value=copy.value,
                    key=copy.key,
                    headers=headers,
                    timestamp=copy.timestamp,
                    on_delivery=delivered,
                )
            else:
                producer.produce(
                    copy.topic, value=copy.value, key=copy.key, headers=headers, on_delivery=delivered
                )
            producer.poll(0)
        offsets = list(positions())
        if not offsets:
            producer.abort_transaction(timeout)
            return False
        producer.send_offsets_to_transaction(offsets, reader.consumer_group_metadata(), timeout)
        producer.commit_transaction(timeout)
    except BaseException:
        with contextlib.suppress(KafkaException):  # fatal or fenced: the broker aborts it anyway
            producer.abort_transaction(timeout)
        raise
    if failures:  # a committed transaction holds every record; this is belt and braces
        raise RuntimeError("copies not written: " + "; ".join(failures))
    return True
