"""The settle topic read by a consumer: the operator's settle entries of its group (``subroute queue ack``), read
to the end when the member starts, then followed as it polls. The rule they make is in ``settles.py``.

Read without a consumer group (assigned, never committed) and ``read_committed``: ``queue ack --dead-letter``
writes its dead letters and its entry in one transaction, so a member never honours an entry whose dead letters
were not written.
"""

from __future__ import annotations

import logging
import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Message, TopicPartition

from subroute import wire
from subroute.client.settles import SettleEntryError, SettleRules
from subroute.config.model import AppConfig
from subroute.kafka import clients
from subroute.ops.settings import Settings

log = logging.getLogger(__name__)

CATCH_UP_SECONDS = 10.0  # how long a starting member waits to read the entries written before it
RETRY_SECONDS = 10.0  # how often a member that could not open the settle topic tries again


def settle_topic_spec(settings: Settings) -> clients.TopicSpec:
    """One compacted partition: an entry per key, removed by a tombstone; one partition keeps them in order."""
    return clients.TopicSpec(
        wire.settle_topic(settings.topic_prefix),
        1,
        {"cleanup.policy": "compact"},
        settings.replication_factor,
    )


def ensure_settle_topic(settings: Settings) -> None:
    clients.ensure_topics(clients.admin_client(settings), [settle_topic_spec(settings)])


class SettleFeed:
    """The entries of ``(app, group)``: ``rules`` is up to date as of the last ``refresh`` (or construction).
    ``create``: create the settle topic when it is missing (a member does, so that it follows the entries written
    later); without it (a reader that must write nothing: ``queue browse``, ``queue ack --dry-run``) a missing
    topic holds no entry."""

    def __init__(self, settings: Settings, app: AppConfig, group: str, *, create: bool = True) -> None:
        self.settings = settings
        self.rules = SettleRules(app, group)
        self._topic = wire.settle_topic(settings.topic_prefix)
        self._create = create
        self._consumer: Consumer | None = None
        self._retry_at = 0.0
        self._open()

    def _open(self) -> None:
        self._retry_at = time.monotonic() + RETRY_SECONDS
        try:
            if self._create:
                ensure_settle_topic(self.settings)
            elif self._topic not in clients.existing_topics(clients.admin_client(self.settings)):
                return
        except KafkaException as exc:  # no right to create it, or the broker is away: try again later
            log.warning("could not open the settle topic; trying again", extra={"error": str(exc)})
            return
        consumer = Consumer(
            self.settings.client_config(
                {
                    "group.id": f"{self._topic}.reader",  # assigned, never joined, never committed
                    "enable.auto.commit": False,
                    "enable.partition.eof": True,
                    "isolation.level": "read_committed",
                },
                defaults={"fetch.wait.max.ms": 100},
            )
        )
        consumer.assign([TopicPartition(self._topic, 0, OFFSET_BEGINNING)])
        self._consumer = consumer
        self._read(until_end=True)

    def refresh(self) -> None:
        """Take what arrived since (never waits for the broker)."""
        if self._consumer is None:
            if time.monotonic() >= self._retry_at:
                self._open()
            return
        self._read(until_end=False)

    def _read(self, *, until_end: bool) -> None:
        assert self._consumer is not None
        deadline = time.monotonic() + CATCH_UP_SECONDS
        while True:
            batch = self._consumer.consume(500, timeout=0.2 if until_end else 0)
            at_end = False
            for message in batch:
                at_end = self._take(message) or at_end
            if not until_end or at_end:
                return
            if time.monotonic() >= deadline:
                log.warning("the settle topic was not read to its end in time; going on with what was read")
                return

    def _take(self, message: Message) -> bool:
        """True at the end of the partition."""
        error = message.error()
        if error is not None:
            if error.code() == KafkaError._PARTITION_EOF:
                return True
            log.warning("settle topic read error", extra={"error": str(error)})
            return False
        key = message.key()
        if key is None:
            return False
        try:
            self.rules.take(key.decode("utf-8", errors="replace"), message.value())
        except SettleEntryError as exc:
            log.warning("a settle record that is no entry is ignored", extra={"error": str(exc)})
        return False

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None
