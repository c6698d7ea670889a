"""The worker's producers and its commits: how the input offsets of routed records become durable.

At-least-once may share the destination topics among several producers, each topic through one of them
(``producers``); exactly-once produces through one transactional producer.

Records are produced as they are decided; their input positions gather in a ``CommitWindow`` that is committed
at an interval (``window``), not after every batch:

* at-least-once: a window that is due is closed and routing goes on; its input offsets are committed once
  every record produced for it has its delivery report (counted per window), closed windows in order. No flush
  is forced while reports are merely slow: only once closed windows hold more than ``MAX_WAITING_RECORDS``
  routed records, and before partitions are revoked, a new table is taken, at shutdown and when the input
  drains, are the producers flushed and everything committed at once. A record
  whose delivery failed is retried, its topic re-created if it went, or dead-lettered as a stub
  (``redelivery``): only it is produced again, and its window waits for that. Only if a dead-letter stub fails
  too, seek back to the window's first offsets and route it (and every later window) again (duplicates, never
  loss).
* exactly-once: the window is one transaction holding its routed records and its input offsets; a failed
  transaction is aborted and the window re-read; a fatal one (fenced by a newer worker with our id) ends the
  worker.

A commit refused because the group rebalanced meanwhile is not an error: the partitions' new owner routes those
records again. The worker commits before partitions are revoked, before a new config version is taken and at
shutdown. Everything here runs on the poll-loop thread (the revoke callback runs inside its poll).

Windows are numbered as they open; ``settled_through`` is the newest whose every record has its delivery report
(delivered, or dead-lettered as a stub), and ``on_reported`` hears of every record delivered: what the worker
needs to know which message groups still have records on their way (routing/holders.py).
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from typing import cast

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition

from subroute import wire
from subroute.ops.metrics import RouterMetrics
from subroute.ops.settings import Settings
from subroute.routing.envelope import OutRecord, app_of
from subroute.worker import redelivery
from subroute.worker.producers import DEFAULT_PRODUCERS, Producers
from subroute.worker.tally import BatchTally
from subroute.worker.window import CommitInterval, CommitWindow, describe_ranges, routed_again

log = logging.getLogger(__name__)

DeliveryCallback = Callable[[KafkaError | None, Message], None]

# Routed records that closed windows may hold while they wait for their delivery reports (at-least-once): beyond
# this the checkpoint flushes, so that a stuck delivery holds routing back instead of letting records pile up in
# memory (a window keeps what it produced until it commits: the records of failed deliveries are found there).
# Below it no flush is forced: reports that are merely slow (hundreds of destination partitions, one per produce
# request) do not stop routing. The producer's own queue (100,000 records by default) bounds the undelivered
# ones; this bounds the delivered ones held behind a window that still waits.
MAX_WAITING_RECORDS = 50_000

# A flush still waiting after this long has the destinations of its records checked, and missing ones created
# again (``_flush``); then it waits on. Seconds: a slow broker costs one topic listing per period.
FLUSH_CHECK_SECONDS = 10.0

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
        producers: int | None = None,
        on_rewind: Callable[[list[tuple[str, int]]], None] | None = None,
        max_waiting_records: int = MAX_WAITING_RECORDS,
    ) -> None:
        self.consumer = consumer
        self.max_waiting_records = max_waiting_records
        # the partitions read again: what the worker remembers of them beyond their commits is void
        self.on_rewind = on_rewind
        self.interval = interval or CommitInterval()
        self.window = CommitWindow()
        self.settled_through = -1  # the newest window (by number) whose records all have their reports
        self.on_reported: Callable[[Message], None] | None = None  # every record delivered
        self._closed: list[
            CommitWindow
        ] = []  # at-least-once: closed, waiting for delivery reports; oldest first
        self._in_transaction = False
        # exactly-once: why the open transaction cannot commit (``produce()`` refused one of its records); it is
        # aborted and its window read again at the next commit, which comes at the end of the batch
        self._doomed: str | None = None
        self.metrics = metrics or RouterMetrics()
        self.exactly_once = guarantee == EXACTLY_ONCE
        self.prefix = settings.topic_prefix
        self.repair_topics = repair_topics  # creates missing destination topics with their layout
        self._failures: list[redelivery.Failure] = []
        overrides: dict[str, object] = {
            "acks": "all",
            "enable.idempotence": True,
            # Reports of records produced without a window's callback (redelivered ones, and every record
            # under exactly-once): the failures, and where the delivered ones went (``on_reported``).
            "on_delivery": self._on_delivery,
            # Every delivery is reported: at-least-once counts them per window (``on_delivery``), which is what
            # lets routing go on meanwhile; both learn each delivered record's offset (message groups' holders).
            "delivery.report.only.error": False,
            # A destination that was deleted is re-created by the worker with its layout (partitions,
            # retention), not by the broker's defaults.
            "allow.auto.create.topics": False,
        }
        if self.exactly_once:
            overrides["transactional.id"] = (
                transactional_id or f"{settings.topic_prefix}.router.{uuid.uuid4().hex[:12]}"
            )
            if producers not in (None, 1):
                raise ValueError("exactly-once routes through one producer: a transaction belongs to one")
        config = settings.client_config(
            overrides,
            # a crashed worker's open transaction blocks read_committed readers until this runs out
            defaults={"linger.ms": 5, "transaction.timeout.ms": 15_000},
        )
        count = producers or DEFAULT_PRODUCERS
        self.producers = Producers(lambda _: Producer(config), count)
        self.producer = self.producers.first  # the transactional one under exactly-once
        if self.exactly_once:
            self.producer.init_transactions(30)
        self.on_delivery = self._reports_for(self.window)

    def begin(self) -> None:
        """Before a batch is produced: under exactly-once, open the window's transaction if none is open."""
        if self.exactly_once and not self._in_transaction:
            self.producer.begin_transaction()
            self._in_transaction = True

    def add(self, tally: BatchTally) -> None:
        """A batch routed and produced: its positions join the window."""
        self.window.add(tally, time.monotonic())

    def commit_if_due(self, drained: bool) -> None:
        """Commit the window when it is full, old enough, or ``drained`` (the last poll was not a full batch).

        At-least-once, a full or old window is closed and committed once its records are acknowledged, while
        routing goes on; closed windows that have settled meanwhile are committed here."""
        if not self.exactly_once:
            # Every delivery is reported (per window): serve the reports as they come, so that librdkafka does not
            # keep each delivered record until the next flush.
            self.producers.poll(0)
        due = self.window.due(self.interval, time.monotonic(), drained) or self._doomed is not None
        if self.exactly_once or drained:
            if due or self._closed:
                self.commit()
            return
        if due:
            self._closed.append(self.window)
            self._open_window()
        if self._closed:
            self._commit_settled()
        if sum(len(w.sent) for w in self._closed) > self.max_waiting_records:
            self.commit()  # the reports are stuck rather than slow: routing waits for them

    def _open_window(self) -> None:
        self.window = CommitWindow(number=self.window.number + 1)
        self.on_delivery = self._reports_for(self.window)

    def _reports_for(self, window: CommitWindow) -> DeliveryCallback | None:
        """The delivery callback of the records produced into ``window`` (called inside the producers' poll
        and flush, on the poll-loop thread); None under exactly-once, where the producer's own callback hears of
        the failures."""
        if self.exactly_once:
            return None

        def delivered(error: KafkaError | None, message: Message) -> None:
            window.acknowledged += 1
            if error is not None:
                window.failures.append(self._failure(error, message))
            elif self.on_reported is not None:
                self.on_reported(message)

        return delivered

    def _commit_settled(self) -> None:
        """Commit the closed windows whose records are all acknowledged, oldest first, up to the first that is
        not (the reports that arrived were served by ``commit_if_due``)."""
        ready: list[CommitWindow] = []
        while self._closed and self._closed[0].settled:
            window = self._closed.pop(0)
            if window.failures and not self._repair(window):
                self._commit_offsets(ready)
                self._rewind_from([window, *self._closed, self.window])
                return
            ready.append(window)
        self._commit_offsets(ready)

    def produce_waiting(
        self,
        record: OutRecord,
        on_delivery: DeliveryCallback | None = None,
    ) -> None:
        """Produce, waiting for deliveries to drain while the local queue is full. ``on_delivery``: the window's
        callback (a routed record); None for a record produced again by ``redelivery``."""
        topic, value, key, headers, timestamp = record
        while True:
            try:
                self.producers.produce_of(topic)(
                    topic, value=value, key=key, headers=headers, timestamp=timestamp, on_delivery=on_delivery
                )
                return
            except BufferError:
                self.producers.of(topic).poll(0.05)
            except KafkaException as exc:
                self.refused(record, exc, in_window=on_delivery is not None)
                return

    def refused(self, record: OutRecord, exc: KafkaException, in_window: bool = True) -> None:
        """``produce()`` refused ``record`` at once (its topic is known to be gone): a failed delivery, of the
        window's records unless ``in_window`` is False (a record produced again by ``redelivery``).

        Exactly-once, the transaction the record was refused from must not commit: it is aborted and the window
        read again. That includes ``_STATE``: the transaction failed meanwhile (the broker refused one of its
        records, an abortable error) and takes no more records. Other errors there are bugs or fatal, and
        propagate."""
        error: KafkaError = exc.args[0]
        if self.exactly_once and error.code() == KafkaError._STATE and self._in_transaction:
            self._doomed = self._doomed or str(exc)
            return
        if error.code() not in redelivery.MISSING_TOPIC:
            raise exc
        if self.exactly_once:
            self._doomed = self._doomed or str(exc)
        self.metrics.delivery_failures.inc()
        failure = redelivery.Failure(record, error.code(), error.retriable(), str(error))
        if self.exactly_once or not in_window:
            self._failures.append(failure)
        else:  # a report of its own: the window counts it as acknowledged, and failed
            self.window.acknowledged += 1
            self.window.failures.append(failure)

    def commit(self) -> None:
        """Make every window durable (or, on failure, read it again) and open a new one: at-least-once, after
        one flush of the producers, so this waits for every record produced so far."""
        window = self.window
        windows, self._closed = [*self._closed, window], []
        self._open_window()
        if self.exactly_once:
            if self._in_transaction:
                self._in_transaction = False
                if self._doomed is not None:
                    self._abort(window, self._doomed)
                else:
                    offsets = _positions(window.offsets, window.metadata, window.version)
                    self._commit_transaction(offsets, window)
            return
        if all(w.empty and not w.failures for w in windows):
            return
        started = time.perf_counter()
        self._flush([w.sent for w in windows])
        self.metrics.flush_seconds.observe(time.perf_counter() - started)
        ready: list[CommitWindow] = []
        for i, closed in enumerate(windows):
            if closed.failures and not self._repair(closed):
                self._commit_offsets(ready)
                self._rewind_from(windows[i:])
                return
            ready.append(closed)
        self._commit_offsets(ready)

    def _repair(self, window: CommitWindow) -> bool:
        """Deliver or dead-letter ``window``'s failed records (``redelivery``); False when a dead-letter stub
        failed too (the window must be read again)."""
        self._failures, window.failures = window.failures, []
        if self._redeliver(window.sent):
            return True
        log.error("a dead-letter stub was not acknowledged either; re-reading the window (at-least-once)")
        return False

    def _commit_offsets(self, windows: list[CommitWindow]) -> None:
        """One offset commit of the positions of ``windows`` (in order: a later position wins), under the newest
        config version among them."""
        if windows:  # acknowledged and repaired, whatever becomes of the commit
            self.settled_through = max(self.settled_through, windows[-1].number)
        positions: dict[tuple[str, int], int] = {}
        metadata: dict[tuple[str, int], str] = {}
        for window in windows:
            positions.update(window.offsets)
            metadata.update(window.metadata)
        if not positions:
            return
        offsets = _positions(positions, metadata, max(window.version for window in windows))
        try:
            self.consumer.commit(offsets=offsets, asynchronous=False)
        except KafkaException as exc:
            if exc.args[0].code() not in _MEMBERSHIP_LOST:
                raise
            # The group rebalanced (or expelled us) meanwhile: the partitions' new owner re-routes from the
            # last commit (duplicates, at-least-once; under the config version in force then); partitions we
            # keep are committed with the next window. Which records those are is logged: offsets from the
            # windows' first to the refused position, per partition.
            log.warning(
                "commit refused after a rebalance; the window will be routed again",
                extra={"fields": {"error": str(exc), "routed_again": describe_ranges(routed_again(windows))}},
            )

    def _rewind_from(self, windows: list[CommitWindow]) -> None:
        """Read ``windows`` again (the first could not be made whole; the others came after it): seek back to
        where each partition first appears in them, and drop them all (nothing of theirs is committed)."""
        first: dict[tuple[str, int], int] = {}
        for window in windows:
            for partition, offset in window.first_offsets.items():
                first.setdefault(partition, offset)
        self._closed = []
        self._open_window()
        merged = CommitWindow()
        merged.first_offsets = first
        self.rewind(merged)

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
                reason = wire.TOO_LARGE if failure.code in redelivery.TOO_LARGE else wire.UNDELIVERABLE
                self.metrics.dead_lettered.labels(app_of(stub), reason).inc()
                log.error(
                    "record not deliverable (%s); dead-lettered without its value",
                    failure.error,
                    extra={"fields": {"topic": failure.record[0], "error": failure.error}},
                )
            sent = [*step.retry, *(stub for stub, _ in step.dead_letter)]
            for record in sent:
                self.produce_waiting(record)
            self._flush([sent])
        return True

    def _flush(self, produced: list[list[OutRecord]]) -> None:
        """Flush until every record produced is acknowledged or failed (at-least-once).

        A destination deleted under the worker is usually reported as a failed delivery (then ``redelivery``
        creates it again). But while the broker's metadata still flips between the old topic and none, librdkafka
        may instead keep retrying the records until ``message.timeout.ms`` (5 minutes by default), and the flush
        waits as long. So every ``FLUSH_CHECK_SECONDS`` the destinations of the ``produced`` records are checked
        and missing ones created again, which lets those retries land."""
        started = time.monotonic()
        while (queued := self.producers.flush(FLUSH_CHECK_SECONDS)) > 0:
            log.warning(
                "flush still waiting for delivery reports; checking that the destinations exist",
                extra={"fields": {"queued": queued, "waited_seconds": round(time.monotonic() - started, 1)}},
            )
            if self.repair_topics is None:
                continue
            # The broker may be what is slow: if the check fails, the flush waits on regardless.
            try:
                self.repair_topics({record[0] for records in produced for record in records})
            except (KafkaException, TimeoutError) as exc:
                log.warning("destinations not checked", extra={"fields": {"error": str(exc)}})

    def _commit_transaction(self, offsets: list[TopicPartition], window: CommitWindow) -> None:
        try:
            if offsets:
                self.producer.send_offsets_to_transaction(
                    offsets, self.consumer.consumer_group_metadata(), 30
                )
            self.producer.commit_transaction(30)
            self.producer.poll(0)  # the reports of the transaction's records, before it counts as settled
            self.settled_through = max(self.settled_through, window.number)
        except KafkaException as exc:
            if exc.args[0].fatal():
                # fenced by a newer worker with our transactional id: it owns the work now; nothing of this
                # batch was committed
                log.error("transaction fenced or fatal; exiting", extra={"fields": {"error": str(exc)}})
                raise
            self._abort(window, str(exc))

    def _abort(self, window: CommitWindow, error: str) -> None:
        """Abort the window's transaction and read the window again (a missing topic is created first)."""
        log.error(
            "transaction failed; aborting and re-reading the window", extra={"fields": {"error": error}}
        )
        self._doomed = None
        self.producer.abort_transaction(30)  # if even this fails, exit: the broker aborts it later
        self.producer.poll(0)  # the reports of its records: failures (the topics missing) and purged ones
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
        if self.on_rewind is not None:
            self.on_rewind(list(window.first_offsets))

    def close(self) -> None:
        """At shutdown: commit what was routed, deliver whatever is still queued, and close the producers."""
        try:
            self.commit()
        finally:
            self.producers.flush(30)
            self.producers.close()

    def _on_delivery(self, error: KafkaError | None, message: Message) -> None:
        if error is not None:
            self._failures.append(self._failure(error, message))
        elif self.on_reported is not None:
            self.on_reported(message)

    def _failure(self, error: KafkaError, message: Message) -> redelivery.Failure:
        record = (
            message.topic() or "",
            message.value(),
            message.key(),
            cast(wire.Headers, list(message.headers() or ())),  # as produced: (str, bytes | None) pairs
            message.timestamp()[1],
        )
        self.metrics.delivery_failures.inc()
        log.error(
            "delivery failed: %s",
            error.str(),
            extra={"fields": {"topic": message.topic(), "error": str(error)}},
        )
        return redelivery.Failure(record, error.code(), error.retriable(), str(error))


def _positions(
    offsets: dict[tuple[str, int], int], metadata: dict[tuple[str, int], str], version: int
) -> list[TopicPartition]:
    """The offsets to commit, each with its metadata: the version, and what a pending partition's says."""
    return [
        TopicPartition(t, p, o, metadata=wire.version_metadata(version, metadata.get((t, p), "")))
        for (t, p), o in offsets.items()
    ]
