"""One batch, routed: every record decided, wrapped in its envelopes and produced; its positions tallied.

Runs on the poll-loop thread. The batch is read natively (routing/native_inputs.py), its records sorted into
those of input topics and those of pending topics. Input records are decided together, in one native
evaluation of the batch (``Router.route_batch``); records of pending topics are decided one by one, in offset
order, by the rules of routing/passes.py: a record that can go now is routed, even behind records that still
wait (the head); one that still waits stays where it is, and so does every later record of its message group;
what earlier passes routed past the head, or the sweeps took, is passed over. The partition's state (position,
routed-past offsets, the pass under way) is worker/pending.py's. Anything unexpected while routing a record
dead-letters it with reason ``rejected`` instead of stopping the worker.
"""

from __future__ import annotations

import logging
from itertools import chain
from operator import attrgetter, itemgetter

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition

from subroute.ops.metrics import RouterMetrics
from subroute.routing.decisions import (
    Action,
    Decision,
    Lag,
    Router,
    RouteResult,
    RoutingTable,
    group_key_of,
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
from subroute.routing.expiration import is_expired, message_expiration
from subroute.routing.native_envelope import input_records
from subroute.routing.native_inputs import read_inputs
from subroute.routing.parking import is_due, pending_topics
from subroute.routing.passes import EXPIRED as STAYS_EXPIRED
from subroute.routing.passes import NO_MATCH, Ledger
from subroute.routing.sweep import deadline
from subroute.wire import EXPIRED, HEADER_PREFIX, REJECTED, WAITING_REASONS
from subroute.worker.assignment import Assignment
from subroute.worker.checkpoint import Checkpoint
from subroute.worker.pending import DEFAULT_SWEEP_SECONDS, PendingPartition, PendingPartitions
from subroute.worker.tally import BatchTally, add_counts, add_nested_counts, count_decision

log = logging.getLogger(__name__)

_WAITS_REMEMBERED = 10_000  # distinct header sets remembered per pass as waiting (PendingPartition.waits)

_headers_of, _name_of = attrgetter("headers"), itemgetter(0)
_SEPARATED_PREFIX = "\x00" + HEADER_PREFIX


def _names_any_routers_header(inputs: list[InputRecord]) -> bool:
    """Whether a header of ``inputs`` may be named like the router's own (``subroute.``), in one pass in C over
    the batch's header names joined: a Python step per header cost about 0.5 µs per record, this 0.2 (issue
    26). A name holding the separator may give a false yes, never a false no: the caller then looks record by
    record."""
    names = map(_name_of, chain.from_iterable(map(_headers_of, inputs)))
    return _SEPARATED_PREFIX in "\x00" + "\x00".join(names)


class BatchRouter:
    def __init__(self, prefix: str, metrics: RouterMetrics, pending: PendingPartitions | None = None) -> None:
        self.prefix = prefix
        self.metrics = metrics
        self.pending = pending or PendingPartitions(prefix, DEFAULT_SWEEP_SECONDS)
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
        pending_app = pending_topics(self.prefix, table)
        self.pending.follow(lag)
        if self._envelopes is None or self._envelopes.table is not table:
            self._envelopes = Envelopes(self.prefix, table)
        # Locals, not attribute lookups, in the loops: they run once per record.
        envelopes, route = self._envelopes, self._route
        offsets, first_offsets = tally.offsets, tally.first_offsets
        touched: dict[tuple[str, int], PendingPartition] = {}
        read = read_inputs(batch, pending_app)
        for raw in read.errors:
            error = raw.error()
            if error is not None and error.code() != KafkaError._PARTITION_EOF:
                log.warning("consume error", extra={"fields": {"error": str(error)}})
        # Pending records are decided as they come, in offset order; input records are decided together below.
        # A partition holds one kind only, so each partition's records are still produced in order.
        for message in read.pending:
            tp = (message.topic, message.partition)
            state = touched.get(tp) or touched.setdefault(
                tp, self.pending.state(tp, pending_app[message.topic])
            )
            self._pending(state, message, table, now_ms, tally, checkpoint, consumer)
        inputs = read.inputs
        for span in read.spans:
            first_offsets.setdefault((span.topic, span.partition), span.first)
        if _names_any_routers_header(inputs):  # producers may not set the router's own headers
            for message in inputs:
                for name, _ in message.headers_list:
                    if name.startswith(HEADER_PREFIX):
                        message.headers, dropped = without_forged_headers(message.headers_list)
                        tally.dropped_headers += dropped
                        break
        tally.messages_in += len(inputs)
        aged = next((m.timestamp_ms for m in inputs if m.timestamp_ms > 0), None)
        if aged is not None:  # producer timestamp to routing, of the first input record that has one
            tally.age_ms = now_ms - aged
        results = self._decide(table, inputs, lag, now_ms)
        if results is not None:  # the whole batch decided at once: its records assembled at once too
            for result in results:
                _count(result, tally)
            routed = [result.routed for result in results]
            self._produce(input_records(inputs, routed, now_ms, envelopes), tally, checkpoint)
        else:  # each record routed on its own; one that fails is dead-lettered alone
            for message in inputs:
                records = route(table, message, lag, now_ms, None, tally, envelopes)
                if records:
                    self._produce(records, tally, checkpoint)
        for span in read.spans:
            offsets[(span.topic, span.partition)] = span.end
        self.pending.settle(consumer, assignment, table, tally, now_ms)  # passes that read to the end
        for tp, state in touched.items():
            if state.ledger is not None:
                offsets[tp] = state.ledger.position
                tally.metadata[tp] = state.metadata()
        return tally

    def _pending(
        self,
        state: PendingPartition,
        message: InputRecord,
        table: RoutingTable,
        now_ms: int,
        tally: BatchTally,
        checkpoint: Checkpoint,
        consumer: Consumer,
    ) -> None:
        """One record of a pending partition, in offset order (routing/passes.py)."""
        offset = message.offset
        current = state.current
        if current is None and offset < state.frontier:
            return  # decided already (given before a seek took effect)
        if current is not None:
            read, seek_to = current.cursor.step(offset)
            if seek_to is not None:
                consumer.seek(TopicPartition(message.topic, message.partition, seek_to))
            if not read:
                return
        ledger = self.pending.ledger(state, offset, now_ms, table)
        tally.first_offsets.setdefault((message.topic, message.partition), ledger.position)
        ledger.reach(offset)
        if ledger.gone(offset):
            return
        timestamp = message.timestamp_ms
        own = message_expiration(message.headers_list) if timestamp > 0 else None
        mark = state.mark
        if mark is not None and mark.has_left(offset, timestamp, own):  # a sweep took it
            ledger.passed(offset)
            return
        if current is not None and current.clock.has_left(offset, timestamp, own):
            # expired by the pass's clock: taken (its mark says so once the pass ends), whatever else it waits for
            self._take(state, ledger, message, table, current.clock.at_ms, tally, checkpoint)
            return
        settled = (
            state.memory.unchanged(offset, current.decides)
            if current is not None and current.routing
            else None
        )
        if settled is not None:  # it waits for what no change since concerned: it stays, undecided
            self._stays_again(state, ledger, message, table, settled)
            stays = True
        elif current is None or current.routing or offset >= state.frontier:
            stays = self._redrive(state, ledger, message, table, now_ms, tally, checkpoint)
        else:
            stays = True  # a sweep over records decided already: they stay unless expired (above)
        state.frontier = max(state.frontier, offset + 1)
        if stays and current is not None:  # when it will have expired: where the next sweep reads
            due_at = deadline(timestamp, own, current.stretches.limit_ms)
            if due_at is not None:
                current.stretches.note(offset, due_at)

    def _redrive(
        self,
        state: PendingPartition,
        ledger: Ledger,
        message: InputRecord,
        table: RoutingTable,
        now_ms: int,
        tally: BatchTally,
        checkpoint: Checkpoint,
    ) -> bool:
        """Decide a pending record that went nowhere yet: routed (past the head if some record stays before it),
        or it stays (True)."""
        offset = message.offset
        if ledger.waiting and state.table is not None:
            table = state.table  # the staying records' table, until the next pass
        app = table.app(state.app)
        headers = message.headers_list
        if app is None or not is_due(
            self.prefix, table, message.topic, headers, message.timestamp_ms, now_ms
        ):
            ledger.stayed(offset, NO_MATCH)  # it matches nothing under this version (or its app is gone)
            return True
        key = group_key_of(app.config, headers) if app.config.group_by is not None else None
        if not ledger.admits(offset, key):
            if ledger.full and self.pending.said_full(state, (message.topic, message.partition)):
                self.metrics.pending_head_stops.labels(state.app).inc()
            return True
        view = self.pending.view(state)
        probe = None
        if key is None and ledger.holds_groups:  # the view holds: a record like one that stayed stays too
            reads = table.environments[app.environment].decoders
            probe = tuple(pair for pair in headers if pair[0] in reads)
            known = state.waits.get(probe)
            if known is not None and not is_expired(app.config, headers, message.timestamp_ms, now_ms):
                ledger.stayed(offset, known)
                self.pending.concerns(state, known)
                return True
        envelopes = self._envelopes_of(table)
        try:
            result: RouteResult | None = self.router.route(table, message, view, now_ms, only_app=state.app)
        except Exception:  # a bug must not stop the worker or lose the record: dead-letter it, counted
            log.exception(
                "routing failed; dead-lettering the record", extra={"fields": {"topic": message.topic}}
            )
            result = None
        stays = _stays(result)
        if stays is None or (stays == STAYS_EXPIRED and not ledger.waiting):
            if not ledger.waiting:
                state.table = table
            self._produce(
                self._redriven(message, result, state.app, now_ms, tally, envelopes), tally, checkpoint
            )
            ledger.went(offset)
            return False
        if not ledger.waiting:
            state.table = table  # the first record that stays: the pass's table holds from here on
        # a record waiting for a group holds up the later records of its message group (not one that matches
        # nothing, nor an expired one the sweep takes)
        ledger.stayed(offset, stays, key if stays in WAITING_REASONS else None)
        if stays in WAITING_REASONS:
            self.pending.concerns(state, stays)
            if probe is not None and len(state.waits) < _WAITS_REMEMBERED:
                state.waits[probe] = stays
        return True

    def _stays_again(
        self, state: PendingPartition, ledger: Ledger, message: InputRecord, table: RoutingTable, reason: str
    ) -> None:
        """A record that stays for the ``reason`` it stayed for last time, without being decided again."""
        if not ledger.waiting:
            state.table = table
        app = table.app(state.app)
        key = None
        if reason in WAITING_REASONS and app is not None and app.config.group_by is not None:
            key = group_key_of(app.config, message.headers_list)
        self.pending.view(state)  # the view holds from the first record that waits for a group
        ledger.stayed(message.offset, reason, key)
        if reason in WAITING_REASONS:
            self.pending.concerns(state, reason)

    def _take(
        self,
        state: PendingPartition,
        ledger: Ledger,
        message: InputRecord,
        table: RoutingTable,
        clock_ms: int,
        tally: BatchTally,
        checkpoint: Checkpoint,
    ) -> None:
        """A record the pass's clock says has expired: dead-lettered (or dropped) at that clock."""
        envelopes = self._envelopes_of(table)
        try:
            result: RouteResult | None = self.router.route(
                table, message, self.pending.view(state), clock_ms, only_app=state.app
            )
        except Exception:
            log.exception(
                "routing failed; dead-lettering the record", extra={"fields": {"topic": message.topic}}
            )
            result = None
        if _stays(result) not in (
            None,
            STAYS_EXPIRED,
        ):  # it waits although it expired: never drop it unwritten
            log.error(
                "an expired pending record still waits; left for the next pass",
                extra={"fields": {"topic": message.topic}},
            )
            ledger.stayed(message.offset, STAYS_EXPIRED)
            return
        self._produce(
            self._redriven(message, result, state.app, clock_ms, tally, envelopes), tally, checkpoint
        )
        ledger.passed(message.offset)

    def _redriven(
        self,
        message: InputRecord,
        result: RouteResult | None,
        app: str,
        now_ms: int,
        tally: BatchTally,
        envelopes: Envelopes,
    ) -> list[OutRecord]:
        """The records a pending record that goes turns into (a ``rejected`` dead letter when routing failed)."""
        tally.messages_in += 1
        if result is None:
            self.metrics.malformed.inc()
            return records_for(
                message, [Decision(app, Action.DEAD_LETTER, reason=REJECTED)], now_ms, True, envelopes
            )
        if result.decode_errors:
            add_nested_counts(tally.decode_errors, result.decode_errors)
        if result.evaluation_errors:
            add_counts(tally.evaluation_errors, result.evaluation_errors)
        for decision in (*result.routed, *result.filtered):
            count_decision(self.metrics, decision, redriven=True)
        return records_for(message, result.routed, now_ms, True, envelopes)

    def _envelopes_of(self, table: RoutingTable) -> Envelopes:
        envelopes = self._envelopes
        if envelopes is not None and envelopes.table is table:
            return envelopes
        return Envelopes(self.prefix, table)  # a pass's own (older) table

    def settle(
        self,
        table: RoutingTable,
        consumer: Consumer,
        assignment: Assignment,
        checkpoint: Checkpoint,
        now_ms: int,
    ) -> None:
        """Between batches: end the passes that have read to their partition's end (an empty poll can bring it:
        the partition may end in transaction markers)."""
        if (
            self.pending.passing()
        ):  # an empty poll may end a pass: the partition may end in transaction markers
            tally = BatchTally(version=table.version)
            self.pending.settle(consumer, assignment, table, tally, now_ms)
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
    ) -> list[RouteResult] | None:
        """Every input record's decisions, from one native evaluation of the batch; None if that fails: the
        records are then routed one by one (``_route``), a record that fails again dead-lettered alone.
        (The records decided before a failure move the round-robin cursors twice.)"""
        if not messages:
            return []
        try:
            return self.router.route_batch(table, messages, lag, now_ms, [None] * len(messages))
        except Exception:  # a bug must not stop the worker: the Python path decides each record instead
            log.exception("routing the batch failed; routing its records one by one")
            return None

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
        if redriven:
            _count_errors(result, tally)
            waits = result.routed[0] if len(result.routed) == 1 else None
            if waits is not None and waits.action is Action.PENDING and waits.reason in WAITING_REASONS:
                return None
            for decision in (*result.routed, *result.filtered):
                count_decision(self.metrics, decision, redriven=True)
        else:
            _count(result, tally)
        return records_for(message, result.routed, now_ms, redriven, envelopes)


def _count(result: RouteResult, tally: BatchTally) -> None:
    """An input record's decisions and errors, counted in the batch's tally (published once per batch)."""
    _count_errors(result, tally)
    tally.decisions += result.routed
    if result.filtered:  # usually one tuple made once per table for a whole set of skipped apps
        tally.filtered.append(result.filtered)


def _count_errors(result: RouteResult, tally: BatchTally) -> None:
    if result.decode_errors:
        add_nested_counts(tally.decode_errors, result.decode_errors)
    if result.evaluation_errors:
        add_counts(tally.evaluation_errors, result.evaluation_errors)


def _stays(result: RouteResult | None) -> str | None:
    """Why a pending record stays: it waits for a consumer or for room, it matches nothing, or it has expired
    (``passes.EXPIRED``: a dead letter only a sweep may write behind the head); None when it goes."""
    if result is None or len(result.routed) != 1:
        return None
    decision = result.routed[0]
    if decision.action is Action.PENDING:
        return decision.reason if decision.reason in WAITING_REASONS else NO_MATCH
    if decision.reason == EXPIRED and decision.action in (Action.DEAD_LETTER, Action.DROP):
        return STAYS_EXPIRED
    return None
