"""One batch, routed: every record decided, wrapped in its envelopes and produced; its positions tallied.

Runs on the poll-loop thread. A pending record that is not due yet stops its partition for the rest of the
batch (the partition is parked until the config changes); so does a waiting record (no consumer, no room) that
still has to wait: it is not written again, so waiting records leave in arrival order (routing/parking.py).
When the partition's sweep is due, the records behind the one it stopped at are read on instead, and those that
have expired leave (worker/sweeps.py); records an earlier pass took are passed over when routing reaches them.
Input records are decided together, in one native evaluation of the batch (``Router.route_batch``), after the
pending records, which are decided one by one as they come (each may stop its partition). Anything unexpected
while routing a record dead-letters it with reason ``rejected`` instead of stopping the worker.
"""

from __future__ import annotations

import logging

from confluent_kafka import Consumer, KafkaError, KafkaException, Message

from subroute.ops.metrics import RouterMetrics
from subroute.routing.decisions import (
    Action,
    Decision,
    Lag,
    Router,
    RouteResult,
    RoutingTable,
)
from subroute.routing.envelope import (
    Envelopes,
    InputRecord,
    OutRecord,
    app_of,
    dead_letter_stub,
    records_for,
    without_forged_headers,
)
from subroute.routing.expiration import message_expiration
from subroute.routing.parking import is_due, pending_topics, waiting_reason
from subroute.wire import HEADER_PREFIX, REJECTED, WAITING_REASONS
from subroute.worker.assignment import Assignment
from subroute.worker.checkpoint import Checkpoint
from subroute.worker.sweeps import DEFAULT_SWEEP_SECONDS, PartitionSweep, Sweeps
from subroute.worker.tally import BatchTally, add_counts, count_decision

log = logging.getLogger(__name__)


class BatchRouter:
    def __init__(self, prefix: str, metrics: RouterMetrics, sweeps: Sweeps | None = None) -> None:
        self.prefix = prefix
        self.metrics = metrics
        self.sweeps = sweeps or Sweeps(prefix, DEFAULT_SWEEP_SECONDS)
        self.router = Router()  # keeps the round-robin cursors across batches
        self._envelopes: Envelopes | None = None  # topics and routing headers of the table in force

    def route_batch(
        self,
        table: RoutingTable,
        batch: list[Message],
        lag: Lag,
        now_ms: int,
        consumer: Consumer,
        assignment: Assignment,
        checkpoint: Checkpoint,
    ) -> BatchTally:
        tally = BatchTally(version=table.version)
        stopped: set[tuple[str, int]] = set()
        pending_app = pending_topics(self.prefix, table)
        if self._envelopes is None or self._envelopes.table is not table:
            self._envelopes = Envelopes(self.prefix, table)
        # Locals, not attribute lookups, in the loops: they run once per record.
        envelopes, route, sweeps = self._envelopes, self._route, self.sweeps.partitions
        offsets, first_offsets = tally.offsets, tally.first_offsets
        waiting_at: dict[tuple[str, int], int] | None = None  # made on first need: see _last_waiting
        # Pending records are decided as they come; input records are gathered and decided together below.
        # A partition holds one kind only, so each partition's records are still produced in order.
        inputs: list[InputRecord] = []
        for index, raw in enumerate(batch):
            error = raw.error()
            if error is not None:
                if error.code() != KafkaError._PARTITION_EOF:
                    log.warning("consume error", extra={"fields": {"error": str(error)}})
                continue
            message = InputRecord.of(raw)
            tp = (message.topic, message.partition)
            if tp in stopped:
                continue
            app_name = pending_app.get(message.topic)
            records: list[OutRecord] | None
            if (
                app_name is not None
                and tp in sweeps
                and self._swept(sweeps[tp], message, lag, tally, checkpoint, consumer, assignment, stopped)
            ):
                continue
            first_offsets.setdefault(tp, message.offset)
            if app_name is None:
                for name, _ in message.headers_list:  # producers may not set the router's own headers
                    if name.startswith(HEADER_PREFIX):
                        message.headers, dropped = without_forged_headers(message.headers_list)
                        tally.dropped_headers += dropped
                        break
                tally.messages_in += 1
                if tally.age_ms is None and message.timestamp_ms > 0:
                    tally.age_ms = now_ms - message.timestamp_ms
                inputs.append(message)
                continue
            if not is_due(
                self.prefix, table, message.topic, message.headers_list, message.timestamp_ms, now_ms
            ):
                if waiting_at is None:
                    waiting_at = _last_waiting(batch, pending_app)
                if waiting_at.get(tp, -1) <= index:  # back to it when the config changes
                    self._hold(consumer, assignment, message, app_name, table, now_ms, offsets, stopped)
                    continue
                # A record that matches nothing would hold up the records behind it that wait for a consumer
                # or for room (and may go now): it moves behind them, unchanged (same version, so still not
                # due). Only when such a record follows in this batch, so nothing is copied round and round.
                records = [
                    (message.topic, message.value, message.key, message.headers_list, message.timestamp_ms)
                ]
            else:
                records = route(table, message, lag, now_ms, app_name, tally, envelopes)
                if records is None:  # a waiting record that still waits: the partition stops here until woken
                    self._hold(consumer, assignment, message, app_name, table, now_ms, offsets, stopped)
                    continue
                tally.messages_in += 1
            self._produce(records, tally, checkpoint)
            offsets[tp] = message.offset + 1
        results = self._decide(table, inputs, lag, now_ms)
        for message, result in zip(inputs, results, strict=True):
            if result is None:
                records = route(table, message, lag, now_ms, None, tally, envelopes)
            else:
                records = self._records(message, result, now_ms, None, tally, envelopes)
            if records:
                self._produce(records, tally, checkpoint)
            offsets[(message.topic, message.partition)] = message.offset + 1
        self.sweeps.settle(consumer, assignment, table, tally)
        for tp, position in offsets.items():
            if tp[0] in pending_app:
                tally.marks[tp] = self.sweeps.committable(tp, position)
        return tally

    def _hold(
        self,
        consumer: Consumer,
        assignment: Assignment,
        message: InputRecord,
        app: str,
        table: RoutingTable,
        now_ms: int,
        offsets: dict[tuple[str, int], int],
        stopped: set[tuple[str, int]],
    ) -> None:
        """``message`` cannot go: its pending partition's position stays at it. The records behind it are read
        on if the partition's sweep is due; otherwise the partition is parked here."""
        tp = (message.topic, message.partition)
        offsets[tp] = message.offset
        assert self._envelopes is not None
        if self.sweeps.start(consumer, tp, message.offset, app, table, self._envelopes, now_ms) is None:
            assignment.park(consumer, tp, message.offset)
            stopped.add(tp)

    def _swept(
        self,
        state: PartitionSweep,
        message: InputRecord,
        lag: Lag,
        tally: BatchTally,
        checkpoint: Checkpoint,
        consumer: Consumer,
        assignment: Assignment,
        stopped: set[tuple[str, int]],
    ) -> bool:
        """Whether the sweep deals with pending ``message``: behind the head while a pass reads (taken when it
        has expired, else left where it is), or taken by an earlier pass (passed over)."""
        tp = (message.topic, message.partition)
        current = state.current
        if current is not None:
            if message.offset > current.head:
                tally.first_offsets.setdefault(tp, current.head)  # a window read again starts at the head
                tally.offsets[tp] = current.head
                if self.sweeps.take(consumer, current, state.mark, message):
                    now_ms = current.clock.at_ms
                    records = self._route(
                        current.table, message, lag, now_ms, current.app, tally, current.envelopes
                    )
                    if records is None:  # it still waits although it expired: never drop it unwritten
                        log.error(
                            "an expired pending record still waits; sweep abandoned",
                            extra={"fields": {"topic": tp[0]}},
                        )
                        self.sweeps.abandon(consumer, assignment, tp)
                        stopped.add(tp)
                    else:
                        tally.messages_in += 1
                        self._produce(records, tally, checkpoint)
                return True
            state.current = None  # read again from its head (a window read again): the pass is over, unmarked
        mark = state.mark
        if mark is not None and mark.reaches_beyond(message.offset):
            timestamp = message.timestamp_ms
            own = message_expiration(message.headers_list) if timestamp > 0 else None
            if mark.has_left(message.offset, timestamp, own):
                tally.first_offsets.setdefault(tp, message.offset)
                tally.offsets[tp] = message.offset + 1
                return True
        return False

    def settle(
        self, table: RoutingTable, consumer: Consumer, assignment: Assignment, checkpoint: Checkpoint
    ) -> None:
        """Between batches: end the passes that have read to their partition's end (an empty poll can bring it:
        the partition may end in transaction markers)."""
        if self.sweeps.passing():
            tally = BatchTally(version=table.version)
            self.sweeps.settle(consumer, assignment, table, tally)
            if tally.offsets:
                checkpoint.begin()
                checkpoint.add(tally)

    def _produce(self, records: list[OutRecord], tally: BatchTally, checkpoint: Checkpoint) -> None:
        produce_of, sent, reports = checkpoint.producers.produce_of, tally.sent, checkpoint.on_delivery
        for record in records:
            topic, value, key, headers, timestamp = record
            try:
                produce_of(topic)(
                    topic, value=value, key=key, headers=headers, timestamp=timestamp, on_delivery=reports
                )
            except BufferError:  # local queue full: wait for deliveries to drain
                checkpoint.produce_waiting(record, reports)
            except KafkaException as exc:
                if exc.args[0].code() == KafkaError.MSG_SIZE_TOO_LARGE:
                    record = self._too_large(record, tally)
                    checkpoint.produce_waiting(record, reports)
                else:  # a destination the client knows is gone: handled with the failed deliveries
                    checkpoint.refused(record, exc)
            sent.append(record)

    def _decide(
        self, table: RoutingTable, messages: list[InputRecord], lag: Lag, now_ms: int
    ) -> list[RouteResult | None]:
        """Every input record's decisions, from one native evaluation of the batch; None for each record if that
        fails: they are then routed one by one (``_route``), a record that fails again dead-lettered alone.
        (The records decided before a failure move the round-robin cursors twice.)"""
        if not messages:
            return []
        try:
            return list(self.router.route_batch(table, messages, lag, now_ms, [None] * len(messages)))
        except Exception:  # a bug must not stop the worker: the Python path decides each record instead
            log.exception("routing the batch failed; routing its records one by one")
            return [None] * len(messages)

    def _too_large(self, record: OutRecord, tally: BatchTally) -> OutRecord:
        """The dead-letter stub of a record too large to produce (its value with the routing headers exceeds the
        producer's message.max.bytes). Without it the record would stop every worker that reads it."""
        stub = dead_letter_stub(self.prefix, record, "too-large")
        tally.decisions.append(Decision(app_of(record), Action.DEAD_LETTER, reason="too-large"))
        log.warning(
            "record too large to produce; dead-lettered without its value",
            extra={"fields": {"topic": record[0]}},
        )
        return stub

    def _route(
        self,
        table: RoutingTable,
        message: InputRecord,
        lag: Lag,
        now_ms: int,
        pending_app: str | None,
        tally: BatchTally,
        envelopes: Envelopes,
    ) -> list[OutRecord] | None:
        """The records to produce for ``message``; None for a pending record that still waits for a consumer or
        for room (writing it again would put it behind the records parked after it)."""
        redriven = pending_app is not None
        try:
            result = self.router.route(table, message, lag, now_ms, only_app=pending_app)
        except Exception:  # a bug must not stop the worker or lose the record: dead-letter it, counted
            log.exception(
                "routing failed; dead-lettering the record", extra={"fields": {"topic": message.topic}}
            )
            apps = [pending_app] if pending_app else [a.name for a in table.apps_for(message.topic)]
            decisions = [Decision(a, Action.DEAD_LETTER, reason=REJECTED) for a in apps if a]
            self.metrics.malformed.inc()
            return records_for(message, decisions, now_ms, redriven, envelopes)
        return self._records(message, result, now_ms, pending_app, tally, envelopes)

    def _records(
        self,
        message: InputRecord,
        result: RouteResult,
        now_ms: int,
        pending_app: str | None,
        tally: BatchTally,
        envelopes: Envelopes,
    ) -> list[OutRecord] | None:
        """One record's decisions counted, and its envelopes; None for a pending record that still waits for a
        consumer or for room (writing it again would put it behind the records parked after it)."""
        redriven = pending_app is not None
        if result.decode_errors:
            add_counts(tally.decode_errors, result.decode_errors)
        if result.evaluation_errors:
            add_counts(tally.evaluation_errors, result.evaluation_errors)
        if redriven:
            waits = result.routed[0] if len(result.routed) == 1 else None
            if waits is not None and waits.action is Action.PENDING and waits.reason in WAITING_REASONS:
                return None
            for decision in (*result.routed, *result.filtered):
                count_decision(self.metrics, decision, redriven=True)
        else:
            tally.decisions += result.routed
            if result.filtered:  # usually one tuple made once per table for a whole set of skipped apps
                tally.filtered.append(result.filtered)
        return records_for(message, result.routed, now_ms, redriven, envelopes)


def _last_waiting(batch: list[Message], pending_app: dict[str, str]) -> dict[tuple[str, int], int]:
    """Per pending partition in ``batch``, the index of its last record that waits for a consumer or for room."""
    found: dict[tuple[str, int], int] = {}
    for index, raw in enumerate(batch):
        topic = raw.topic()
        if topic in pending_app and raw.error() is None:
            record = InputRecord.of(raw)
            if waiting_reason(record.headers_list) is not None:
                found[(record.topic, record.partition)] = index
    return found
