"""The worker's producer and its commits: how the input offsets of routed records become durable.

Records are produced as they are decided; their input positions gather in a ``CommitWindow`` that is committed
at an interval (``window``), not after every batch:

* at-least-once: flush, then commit the window's input offsets once every record is acknowledged. A record
  whose delivery failed is retried, its topic re-created if it went, or dead-lettered as a stub
  (``redelivery``): only it is produced again. Only if a dead-letter stub fails too, seek back to the window's
  first offsets and route it again (duplicates, never loss).
* exactly-once: the window is one transaction holding its routed records and its input offsets; a failed
  transaction is aborted and the window re-read; a fatal one (fenced by a newer worker with our id) ends the
  worker.

A commit refused because the group rebalanced meanwhile is not an error: the partitions' new owner routes those
records again. The worker commits before partitions are revoked, before a new config version is taken and at
shutdown. Everything here runs on the poll-loop thread (the revoke callback runs inside its poll).
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from typing import cast

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition

from subroute.ops.metrics import RouterMetrics
from subroute.ops.settings import Settings
from subroute.routing.envelope import Headers, OutRecord, app_of
from subroute.worker import redelivery
from subroute.worker.tally import BatchTally
from subroute.worker.window import CommitInterval, CommitWindow

log = logging.getLogger(__name__)

AT_LEAST_ONCE = "at-least-once"
EXACTLY_ONCE = "exactly-once"
GUARANTEES = (AT_LEAST_ONCE, EXACTLY_ONCE)

# Commit errors that mean "these partitions may no longer be yours", not "something is broken".
_MEMBERSHIP_LOST = frozenset(
    {
        KafkaError.ILLEGAL_GENERATION,
        KafkaError.UNKNOWN_MEMBER_ID,
        KafkaError.REBALANCE_IN_PROGRESS,
        KafkaError._ASSIGNMENT_LOST,
        KafkaError.FENCED_INSTANCE_ID,
    }
)


# Offset commit metadata: the config version the committed records were routed under. A worker newly assigned
# the partition routes it only under that version or a later one (``Assignment``), so a rebalance never moves a
# partition back to an older config (message groups would flip between consumer groups).
_VERSION_METADATA = "subroute.config-version="


def version_metadata(version: int) -> str:
    return f"{_VERSION_METADATA}{version}"


def version_of(metadata: str | None) -> int | None:
    """The config version in a commit's metadata; None when there is none (another writer, an older worker,
    a broker that drops commit metadata)."""
    if not metadata or not metadata.startswith(_VERSION_METADATA):
        return None
    digits = metadata[len(_VERSION_METADATA) :]
    return int(digits) if digits.isdigit() and len(digits) < 20 else None


class Checkpoint:
    def __init__(
        self,
        settings: Settings,
        consumer: Consumer,
        guarantee: str,
        transactional_id: str | None = None,
        metrics: RouterMetrics | None = None,
        repair_topics: Callable[[set[str]], None] | None = None,
        interval: CommitInterval | None = None,
    ) -> None:
        self.consumer = consumer
        self.interval = interval or CommitInterval()
        self.window = CommitWindow()
        self._in_transaction = False
        self.metrics = metrics or RouterMetrics()
        self.exactly_once = guarantee == EXACTLY_ONCE
        self.prefix = settings.topic_prefix
        self.repair_topics = repair_topics  # creates missing destination topics with their layout
        self._failures: list[redelivery.Failure] = []
        overrides: dict[str, object] = {
            "acks": "all",
            "enable.idempotence": True,
            # Failures are all the worker needs to hear of: a report per delivered record costs a callback each.
            "on_delivery": self._on_delivery,
            "delivery.report.only.error": True,
            # A destination that was deleted is re-created by the worker with its layout (partitions,
            # retention), not by the broker's defaults.
            "allow.auto.create.topics": False,
        }
        if self.exactly_once:
            overrides["transactional.id"] = (
                transactional_id or f"{settings.topic_prefix}.router.{uuid.uuid4().hex[:12]}"
            )
        self.producer = Producer(
            settings.client_config(
                overrides,
                # a crashed worker's open transaction blocks read_committed readers until this runs out
                defaults={"linger.ms": 5, "transaction.timeout.ms": 15_000},
            )
        )
        if self.exactly_once:
            self.producer.init_transactions(30)

    def begin(self) -> None:
        """Before a batch is produced: under exactly-once, open the window's transaction if none is open."""
        if self.exactly_once and not self._in_transaction:
            self.producer.begin_transaction()
            self._in_transaction = True

    def add(self, tally: BatchTally) -> None:
        """A batch routed and produced: its positions join the window."""
        self.window.add(tally, time.monotonic())

    def commit_if_due(self, drained: bool) -> None:
        """Commit the window when it is full, old enough, or ``drained`` (the last poll was not a full batch)."""
        if self.window.due(self.interval, time.monotonic(), drained):
            self.commit()

    def produce_waiting(self, record: OutRecord) -> None:
        """Produce, waiting for deliveries to drain while the local queue is full."""
        topic, value, key, headers, timestamp = record
        while True:
            try:
                # the stubs want list[tuple[str, str | bytes | None]]
                self.producer.produce(topic, value=value, key=key, headers=headers, timestamp=timestamp)  # type: ignore[arg-type]
                return
            except BufferError:
                self.producer.poll(0.05)
            except KafkaException as exc:
                self.refused(record, exc)
                return

    def refused(self, record: OutRecord, exc: KafkaException) -> None:
        """``produce()`` refused ``record`` at once (its topic is known to be gone): a failed delivery. Other
        errors there are bugs or fatal, and propagate."""
        error: KafkaError = exc.args[0]
        if error.code() not in redelivery.MISSING_TOPIC:
            raise exc
        self.metrics.delivery_failures.inc()
        self._failures.append(redelivery.Failure(record, error.code(), error.retriable(), str(error)))

    def commit(self) -> None:
        """Make the window durable (or, on failure, read it again) and open a new one."""
        window, self.window = self.window, CommitWindow()
        metadata = version_metadata(window.version)
        offsets = [TopicPartition(t, p, o, metadata=metadata) for (t, p), o in window.offsets.items()]
        if self.exactly_once:
            if self._in_transaction:
                self._in_transaction = False
                self._commit_transaction(offsets, window)
            return
        if window.empty and not self._failures:
            return
        self.producer.flush()
        if self._failures and not self._redeliver(window.sent):
            log.error("a dead-letter stub was not acknowledged either; re-reading the window (at-least-once)")
            self.rewind(window)
            return
        if offsets:
            try:
                self.consumer.commit(offsets=offsets, asynchronous=False)
            except KafkaException as exc:
                if exc.args[0].code() not in _MEMBERSHIP_LOST:
                    raise
                # The group rebalanced (or expelled us) meanwhile: the partitions' new owner re-routes from the
                # last commit (duplicates, at-least-once); partitions we keep are committed with the next window.
                log.warning(
                    "commit refused after a rebalance; the window will be routed again",
                    extra={"fields": {"error": str(exc)}},
                )

    def _redeliver(self, sent: list[OutRecord]) -> bool:
        """Carry out ``redelivery.plan`` until every failed record is delivered or dead-lettered; False when a
        dead-letter stub failed (the batch must be read again)."""
        attempt = 0
        while self._failures:
            failures = redelivery.resolve(self._failures, sent)
            step = redelivery.plan(failures, attempt, self.prefix)
            self._failures = []
            if step.rewind:
                return False
            if step.recreate and self.repair_topics is not None:
                log.warning(
                    "destination topics missing; creating them again",
                    extra={"fields": {"topics": sorted(step.recreate)}},
                )
                self.repair_topics(step.recreate)
            attempt += 1
            if step.retry:
                time.sleep(redelivery.backoff(attempt))
            for stub, failure in step.dead_letter:
                reason = "too-large" if failure.code in redelivery.TOO_LARGE else "undeliverable"
                self.metrics.dead_lettered.labels(app_of(stub), reason).inc()
                log.error(
                    "record not deliverable; dead-lettered without its value",
                    extra={"fields": {"topic": failure.record[0], "error": failure.error}},
                )
            sent = [*step.retry, *(stub for stub, _ in step.dead_letter)]
            for record in sent:
                self.produce_waiting(record)
            self.producer.flush()
        return True

    def _commit_transaction(self, offsets: list[TopicPartition], window: CommitWindow) -> None:
        try:
            if offsets:
                self.producer.send_offsets_to_transaction(
                    offsets, self.consumer.consumer_group_metadata(), 30
                )
            self.producer.commit_transaction(30)
        except KafkaException as exc:
            if exc.args[0].fatal():
                # fenced by a newer worker with our transactional id: it owns the work now; nothing of this
                # batch was committed
                log.error("transaction fenced or fatal; exiting", extra={"fields": {"error": str(exc)}})
                raise
            log.error(
                "transaction failed; aborting and re-reading the window",
                extra={"fields": {"error": str(exc)}},
            )
            self.producer.abort_transaction(30)  # if even this fails, exit: the broker aborts it later
            self.metrics.transactions_aborted.inc()
            missing = {f.record[0] for f in self._failures if f.code in redelivery.MISSING_TOPIC}
            self._failures = []
            if missing and self.repair_topics is not None:
                self.repair_topics(missing)  # else the window read again would fail the same way
            self.rewind(window)

    def rewind(self, window: CommitWindow) -> None:
        self.metrics.rewinds.inc()
        for (topic, partition), offset in window.first_offsets.items():
            try:
                self.consumer.seek(TopicPartition(topic, partition, offset))
            except (
                KafkaException
            ):  # no longer ours (revoked meanwhile): its new owner reads from the last commit
                continue

    def close(self) -> None:
        """At shutdown: commit what was routed, then deliver whatever is still queued."""
        try:
            self.commit()
        finally:
            self.producer.flush(30)

    def _on_delivery(self, error: KafkaError | None, message: Message) -> None:
        if error is not None:
            record = (
                message.topic() or "",
                message.value(),
                message.key(),
                cast(Headers, list(message.headers() or ())),  # as produced: (str, bytes | None) pairs
                message.timestamp()[1],
            )
            self._failures.append(redelivery.Failure(record, error.code(), error.retriable(), str(error)))
            self.metrics.delivery_failures.inc()
            log.error("delivery failed", extra={"fields": {"topic": message.topic(), "error": str(error)}})
