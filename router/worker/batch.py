"""One batch, routed: every record decided, wrapped in its envelopes and produced; its positions tallied.

Runs on the poll-loop thread. A pending record that is not due yet stops its partition for the rest of the
batch (the partition is parked until the config changes); anything unexpected while routing a record
dead-letters it with reason ``rejected`` instead of stopping the worker.
"""

from __future__ import annotations

import logging

from confluent_kafka import Consumer, KafkaError, KafkaException, Message

from subroute.names import HEADER_PREFIX
from subroute.ops.metrics import RouterMetrics
from subroute.routing.decisions import Action, Decision, Router, RouteResult, RoutingTable
from subroute.routing.envelope import (
    Envelopes,
    InputRecord,
    OutRecord,
    app_of,
    dead_letter_stub,
    records_for,
    without_forged_headers,
)
from subroute.routing.parking import is_due, pending_topics
from subroute.worker.assignment import Assignment
from subroute.worker.checkpoint import Checkpoint
from subroute.worker.tally import BatchTally, add_counts, count_decision

log = logging.getLogger(__name__)

Lag = dict[tuple[str, str], int]


class BatchRouter:
    def __init__(self, prefix: str, metrics: RouterMetrics) -> None:
        self.prefix = prefix
        self.metrics = metrics
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
        parked: dict[tuple[str, int], int] = {}
        pending_app = pending_topics(self.prefix, table)
        if self._envelopes is None or self._envelopes.table is not table:
            self._envelopes = Envelopes(self.prefix, table)
        # Locals, not attribute lookups, in the loops: they run once per record.
        envelopes, produce = self._envelopes, checkpoint.producer.produce
        offsets, first_offsets, sent = tally.offsets, tally.first_offsets, tally.sent
        # First the records to route (and the partitions to park), then their decisions, all at once (the
        # native plan evaluates the batch in one call), then each record's envelopes, produced in order.
        messages: list[InputRecord] = []
        redriven_for: list[str | None] = []
        for raw in batch:
            error = raw.error()
            if error is not None:
                if error.code() != KafkaError._PARTITION_EOF:
                    log.warning("consume error", extra={"fields": {"error": str(error)}})
                continue
            message = InputRecord.of(raw)
            tp = (message.topic, message.partition)
            if tp in stopped:
                continue
            first_offsets.setdefault(tp, message.offset)
            app_name = pending_app.get(message.topic)
            if app_name is not None and not is_due(
                self.prefix, table, message.topic, message.headers_list, message.timestamp_ms, now_ms
            ):
                assignment.park(consumer, tp, message.offset)  # back to it when the config changes
                stopped.add(tp)
                parked[tp] = message.offset
                continue
            if app_name is None:  # an input record: producers may not set the router's own headers
                for name, _ in message.headers_list:
                    if name.startswith(HEADER_PREFIX):
                        message.headers, dropped = without_forged_headers(message.headers_list)
                        tally.dropped_headers += dropped
                        break
            tally.messages_in += 1
            if tally.age_ms is None and app_name is None and message.timestamp_ms > 0:  # not a parked one
                tally.age_ms = now_ms - message.timestamp_ms
            messages.append(message)
            redriven_for.append(app_name)
        results = self._decide(table, messages, lag, now_ms, redriven_for)
        for message, app_name, result in zip(messages, redriven_for, results, strict=True):
            if result is None:
                records = self._route(table, message, lag, now_ms, app_name, tally, envelopes)
            else:
                records = self._records(message, result, now_ms, app_name, tally, envelopes)
            for record in records:
                topic, value, key, headers, timestamp = record
                try:
                    produce(topic, value=value, key=key, headers=headers, timestamp=timestamp)  # type: ignore[arg-type]
                except BufferError:  # local queue full: wait for deliveries to drain
                    checkpoint.produce_waiting(record)
                except KafkaException as exc:
                    if exc.args[0].code() == KafkaError.MSG_SIZE_TOO_LARGE:
                        record = self._too_large(record, tally)
                        checkpoint.produce_waiting(record)
                    else:  # a destination the client knows is gone: handled with the failed deliveries
                        checkpoint.refused(record, exc)
                sent.append(record)
            offsets[(message.topic, message.partition)] = message.offset + 1
        # A parked partition resumes at the record it stopped at (the records routed before it are behind).
        offsets.update(parked)
        return tally

    def _decide(
        self,
        table: RoutingTable,
        messages: list[InputRecord],
        lag: Lag,
        now_ms: int,
        redriven_for: list[str | None],
    ) -> list[RouteResult | None]:
        """Every record's decisions, from one native evaluation of the batch; None for each record if that
        fails: they are then routed one by one (``_route``), a record that fails again dead-lettered alone.
        (The records decided before a failure move the round-robin cursors twice.)"""
        if not messages:
            return []
        try:
            return list(self.router.route_batch(table, messages, lag, now_ms, redriven_for))
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
    ) -> list[OutRecord]:
        try:
            result = self.router.route(table, message, lag, now_ms, only_app=pending_app)
        except Exception:  # a bug must not stop the worker or lose the record: dead-letter it, counted
            log.exception(
                "routing failed; dead-lettering the record", extra={"fields": {"topic": message.topic}}
            )
            apps = [pending_app] if pending_app else [a.name for a in table.apps_for(message.topic)]
            decisions = [Decision(a, Action.DEAD_LETTER, reason="rejected") for a in apps if a]
            self.metrics.malformed.inc()
            return records_for(message, decisions, now_ms, pending_app is not None, envelopes)
        return self._records(message, result, now_ms, pending_app, tally, envelopes)

    def _records(
        self,
        message: InputRecord,
        result: RouteResult,
        now_ms: int,
        pending_app: str | None,
        tally: BatchTally,
        envelopes: Envelopes,
    ) -> list[OutRecord]:
        """One record's decisions counted, and its envelopes."""
        redriven = pending_app is not None
        if result.decode_errors:
            add_counts(tally.decode_errors, result.decode_errors)
        if result.evaluation_errors:
            add_counts(tally.evaluation_errors, result.evaluation_errors)
        if redriven:
            for decision in (*result.routed, *result.filtered):
                count_decision(self.metrics, decision, redriven=True)
        else:
            tally.decisions += result.routed
            if result.filtered:  # usually one tuple made once per table for a whole set of skipped apps
                tally.filtered.append(result.filtered)
        return records_for(message, result.routed, now_ms, redriven, envelopes)
