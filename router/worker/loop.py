"""The router worker: one poll loop that routes input records to group, pending and dead-letter topics.

Per batch (DESIGN.md §2, §5): take the plan in force (swapped only here, between batches), route every record,
produce, then make the input offsets durable: at-least-once flushes the producer and commits only when every
record was acknowledged; exactly-once puts the routed records and the offsets in one transaction.

Pending topics are read by the same consumer group. A pending record parked under config version V is
re-evaluated only under a newer version: meeting one that is not due, the worker seeks back to it and pauses
that partition until the version changes (or the expiration sweep comes round), so nothing spins.
"""

from __future__ import annotations

import gc
import logging
import signal
import threading
import time
import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import FrameType
from typing import TypeVar

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from router import names
from router.config.model import Config
from router.config.store import ConfigStore, Pacer
from router.config.validation import input_matches
from router.kafka.io import Headers, admin_client, ensure_topics, existing_topics
from router.kafka.topics import app_topics, largest_input
from router.ops.metrics import RouterMetrics
from router.ops.settings import Settings
from router.routing import priority
from router.routing.capacity import CapacityMonitor
from router.routing.decisions import (
    Action,
    Decision,
    MessageView,
    Router,
    RoutingTable,
    build_table,
)
from router.routing.expiration import is_expired

log = logging.getLogger("subroute.worker")

AT_LEAST_ONCE = "at-least-once"
EXACTLY_ONCE = "exactly-once"
GUARANTEES = (AT_LEAST_ONCE, EXACTLY_ONCE)

# Headers the router stamps when it parks a record; stripped again when the record is redriven.
_PARKING_HEADERS = frozenset(
    {names.APP, names.GROUP, names.SUBSCRIPTION, names.CONFIG_VERSION, names.ROUTED_AT, names.DLQ_REASON}
)


@dataclass(frozen=True)
class WorkerOptions:
    guarantee: str = AT_LEAST_ONCE
    batch_size: int = 2000
    poll_timeout: float = 0.2
    exit_on_idle: float | None = None
    pending_sweep_seconds: float = 30.0
    capacity_refresh_seconds: float = 3.0
    session_timeout_ms: int = 10_000
    # exactly-once: a successor that reuses a dead worker's id fences (aborts) its open transaction at once;
    # with a fresh id the broker aborts it only after transaction.timeout.ms. None: a fresh id per process.
    transactional_id: str | None = None


# (topic, value, key, headers, timestamp): a plain tuple, as one is made per routed record (a NamedTuple's
# constructor is a Python call, several times the cost).
OutRecord = tuple[str, bytes | None, bytes | None, Headers, int]


@dataclass(slots=True)
class InputRecord(MessageView):
    """A consumed record with the types confluent-kafka leaves optional pinned down (it came without error).

    It is the router's ``MessageView`` itself (topic, headers, timestamp), so routing needs no second object.
    """

    partition: int = 0
    offset: int = 0
    key: bytes | None = None
    value: bytes | None = None

    @property
    def headers_list(self) -> Headers:
        return self.headers  # type: ignore[return-value]  # always a list: see ``of``

    @classmethod
    def of(cls, message: Message) -> InputRecord:
        # Without typing.cast (a Python call each): a record consumed without error has its topic, partition
        # and offset, and its headers are a list of (str, bytes | None).
        return cls(
            message.topic(),  # type: ignore[arg-type]
            message.headers() or [],  # type: ignore[arg-type]
            message.timestamp()[1],
            message.partition(),  # type: ignore[arg-type]
            message.offset(),  # type: ignore[arg-type]
            message.key(),
            message.value(),
        )


@dataclass
class _BatchState:
    offsets: dict[tuple[str, int], int] = field(default_factory=dict)
    first_offsets: dict[tuple[str, int], int] = field(default_factory=dict)
    produced: int = 0
    # Counted per batch, then added to the metrics once: a labelled counter costs a lock and a lookup per call.
    # Most decisions are made once per table, so a batch holds few distinct ones: ``_tally`` counts them.
    decisions: list[Decision] = field(default_factory=list)
    filtered: list[Sequence[Decision]] = field(default_factory=list)
    decode_errors: dict[str, int] = field(default_factory=dict)
    evaluation_errors: dict[str, int] = field(default_factory=dict)
    messages_in: int = 0


_T = TypeVar("_T")


def _tally(items: list[_T]) -> list[tuple[_T, int]]:
    """Each distinct object of ``items`` (by identity) with the number of times it occurs; in C, not per item
    in Python. The list keeps the objects alive, so their ids stay theirs meanwhile."""
    distinct = dict(zip(map(id, items), items, strict=True))
    return [(distinct[key], count) for key, count in Counter(map(id, items)).items()]


def destination(decision: Decision, prefix: str) -> str:
    """The topic a (non-filtered) decision writes to."""
    if decision.action is Action.ROUTE:
        assert decision.group is not None
        return priority.band_topic(prefix, decision.app, decision.group, decision.band)
    if decision.action is Action.PENDING:
        return names.pending_topic(prefix, decision.app)
    return names.dlq_topic(prefix, decision.app)


class _Outputs:
    """The topic and the routing headers of each decision, made once per decision object and config version.

    The routing headers keep their order (source, app, group, subscription, config version, routing time,
    dead-letter reason); the source (topic/partition/offset) varies per record, the routing time per batch.
    """

    def __init__(self, prefix: str, table: RoutingTable) -> None:
        self.prefix = prefix
        self.table = table
        self._version = (names.CONFIG_VERSION, str(table.version).encode())
        self._stamp = (-1, self._version, (names.ROUTED_AT, b""))
        # id(decision) -> (decision, topic, headers before the stamp, headers after it). The entry keeps the
        # decision alive, so no other object can take its id while it is cached.
        self.made: dict[int, tuple[Decision, str, Headers, Headers]] = {}

    def stamp(self, now_ms: int) -> tuple[int, tuple[str, bytes], tuple[str, bytes]]:
        """``(now_ms, config version header, routing time header)``."""
        if self._stamp[0] != now_ms:
            self._stamp = (now_ms, self._version, (names.ROUTED_AT, str(now_ms).encode()))
        return self._stamp

    def make(self, decision: Decision) -> tuple[Decision, str, Headers, Headers]:
        """A decision's entry of ``made``, on its first use (``made.get(id(decision)) or make(decision)``)."""
        before: Headers = [(names.APP, decision.app.encode())]
        if decision.group is not None:
            before.append((names.GROUP, decision.group.encode()))
        if decision.subscription is not None:
            before.append((names.SUBSCRIPTION, decision.subscription.encode()))
        after: Headers = [] if decision.reason is None else [(names.DLQ_REASON, decision.reason.encode())]
        if len(self.made) >= 100_000:  # decisions made per message (message groups, bands) come and go
            self.made.clear()
        made = self.made[id(decision)] = (decision, destination(decision, self.prefix), before, after)
        return made


def records_for(
    message: InputRecord,
    decisions: Sequence[Decision],
    table: RoutingTable,
    prefix: str,
    now_ms: int,
    redriven: bool,
    outputs: _Outputs | None = None,
) -> list[OutRecord]:
    """The records one input (or pending) record turns into. Value and original headers are kept byte for byte."""
    if outputs is None or outputs.table is not table:
        outputs = _Outputs(prefix, table)
    made = outputs.made
    _, version, routed_at = outputs.stamp(now_ms)
    original = message.headers_list
    if redriven:
        original = [(k, v) for k, v in original if k not in _PARKING_HEADERS]
        source = (names.REDRIVEN, b"pending")
    else:
        source = (names.SOURCE, names.source_of(message.topic, message.partition, message.offset).encode())
    timestamp = message.timestamp_ms if message.timestamp_ms > 0 else now_ms
    out: list[OutRecord] = []
    for decision in decisions:
        action = decision.action
        if action is Action.FILTERED:
            continue
        _, topic, before, after = made.get(id(decision)) or outputs.make(decision)
        key = decision.key if action is Action.ROUTE and decision.key is not None else message.key
        headers = [*original, source, *before, version, routed_at, *after]
        out.append((topic, message.value, key, headers, timestamp))
    return out


def _topic_layout(config: Config) -> object:
    """What decides the topics ``app_topics`` asks for: apps, their inputs and sizes, their groups, bands."""
    return tuple(
        sorted(
            (
                app.name,
                app.inputs,
                app.partitions,
                app.priority is not None,
                tuple(g.name for g in config.groups_of(app.name)),
            )
            for app in config.apps.values()
        )
    )


def _names(partitions: Sequence[TopicPartition]) -> list[str]:
    return [f"{p.topic}/{p.partition}" for p in partitions]


def _add(into: dict[str, int], counts: dict[str, int]) -> None:
    for name, count in counts.items():
        into[name] = into.get(name, 0) + count


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


class Worker:
    def __init__(
        self, settings: Settings, options: WorkerOptions, metrics: RouterMetrics | None = None
    ) -> None:
        self.settings = settings
        self.options = options
        self.metrics = metrics or RouterMetrics()
        self.router = Router()
        self.prefix = settings.topic_prefix
        self._stop = threading.Event()
        self._last_loop = time.monotonic()
        self._assigned: set[tuple[str, int]] = set()
        self._paused_pending: set[tuple[str, int]] = set()
        self._last_sweep = time.monotonic()
        self._lag_measured = 0.0
        self._table_version = -1
        self._subscribed: tuple[str, ...] = ()
        self._admin: AdminClient = admin_client(settings)
        self.store: ConfigStore[RoutingTable] = ConfigStore(settings, self._build, metrics=self.metrics)
        self.capacity = CapacityMonitor(settings, options.capacity_refresh_seconds, self.metrics)
        self.consumer: Consumer | None = None
        self.producer: Producer | None = None
        self._delivery_failures = 0
        self._last_built: RoutingTable | None = (
            None  # the store thread's last table: unchanged apps reuse plans
        )
        self._topics_ensured: object = None  # the topic layout last ensured (see _topic_layout)
        self._outputs: _Outputs | None = None  # topics and routing headers of the table in force

    # --- health -------------------------------------------------------------------------------------------------

    def healthy(self) -> bool:
        """The poll loop turns and the config store still follows the config topic (``/healthz``)."""
        return time.monotonic() - self._last_loop < 60 and self.store.following()

    def ready(self) -> bool:
        """Config read to its end and still followed, and partitions assigned (``/readyz``)."""
        return self.store.ready and self.store.following() and bool(self._assigned)

    def stop(self, *_: object) -> None:
        self._stop.set()

    def install_signal_handlers(self) -> None:
        def handler(signum: int, frame: FrameType | None) -> None:
            log.info("signal received, finishing the batch", extra={"fields": {"signal": signum}})
            self.stop()

        signal.signal(signal.SIGTERM, handler)
        signal.signal(signal.SIGINT, handler)

    # --- plan -----------------------------------------------------------------------------------------------------

    def _build(self, config: Config) -> RoutingTable:
        started = time.perf_counter()
        # Freeze what is alive first: a full collection set off by the build's allocations then walks only the
        # build's own objects, not all that routing has kept since the last build, in one hold of the GIL.
        gc.freeze()
        # Once a table is in force, routing runs beside this thread: the build gives way to it (see Pacer). The
        # first build has nobody to wait for.
        pause = Pacer() if self._last_built is not None else None
        table = build_table(config, self._last_built, pause)
        self._last_built = table
        # A plan of 10,000 expressions is a million long-lived objects: left to the cyclic collector, each full
        # collection walks them all while holding the GIL (routing stops for a few hundred ms). Frozen, they are
        # skipped; refcounting still frees them when a later table replaces this one.
        gc.freeze()
        self.metrics.plan_compile_seconds.observe(time.perf_counter() - started)
        return table

    def _partitions_of(self, inputs: Sequence[str]) -> int:
        return largest_input(inputs, existing_topics(self._admin), input_matches)

    def _take_table(self) -> RoutingTable:
        config, table = self.store.snapshot()
        if table.version != self._table_version:
            self._on_new_table(config, table)
        return table

    def _on_new_table(self, config: Config, table: RoutingTable) -> None:
        # Between batches: a change of subscriptions only (the usual change) needs no broker round trip here.
        layout = _topic_layout(config)
        if layout != self._topics_ensured:
            specs = app_topics(config, self.prefix, self._partitions_of, self.settings.parked_retention_ms)
            ensure_topics(self._admin, specs)
            self._topics_ensured = layout
        self._table_version = table.version
        self.metrics.plan_version.set(table.version)
        self.metrics.plan_subscriptions.set(table.expression_count)
        self.capacity.watch(config)
        self.capacity.start()
        wanted = self._subscription(config)
        if wanted != self._subscribed and self.consumer is not None:
            if wanted:
                self.consumer.subscribe(list(wanted), on_assign=self._on_assign, on_revoke=self._on_revoke)
            else:
                self.consumer.unsubscribe()
            self._subscribed = wanted
        self._resume_pending()
        log.info(
            "config version in force", extra={"fields": {"version": table.version, "apps": len(config.apps)}}
        )

    def _subscription(self, config: Config) -> tuple[str, ...]:
        topics: set[str] = set()
        for app in config.apps.values():
            topics.update(app.inputs)
            topics.add(names.pending_topic(self.prefix, app.name))
        return tuple(sorted(topics))

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._assigned.update((p.topic, p.partition) for p in partitions)
        self.metrics.ready.set(1 if self.ready() else 0)
        self.metrics.assigned_partitions.set(len(self._assigned))
        self.metrics.rebalances.inc()
        log.info(
            "partitions assigned", extra={"fields": {"added": _names(partitions), "now": len(self._assigned)}}
        )

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        log.info("partitions revoked", extra={"fields": {"removed": _names(partitions)}})
        gone = {(p.topic, p.partition) for p in partitions}
        self._assigned -= gone
        self._paused_pending -= gone
        self.metrics.ready.set(1 if self.ready() else 0)
        self.metrics.assigned_partitions.set(len(self._assigned))

    def _resume_pending(self) -> None:
        if self._paused_pending and self.consumer is not None:
            self.consumer.resume([TopicPartition(t, p) for t, p in self._paused_pending])
            self._paused_pending.clear()
        self._last_sweep = time.monotonic()

    # --- the loop -------------------------------------------------------------------------------------------------

    def run(self) -> int:
        self.store.start()
        while not self.store.wait_ready(1.0):
            if self._stop.is_set():
                self.store.close()
                return 0
            if (
                not self.store.alive
            ):  # it logged why (a config topic that is not one compacted partition, say)
                log.error("the config store stopped before the config was read; not routing")
                return 3
        self._open_clients()
        assert self.consumer is not None and self.producer is not None
        idle_since: float | None = None
        try:
            while not self._stop.is_set():
                self._last_loop = time.monotonic()
                table = self._take_table()
                if (
                    self._paused_pending
                    and time.monotonic() - self._last_sweep > self.options.pending_sweep_seconds
                ):
                    self._resume_pending()
                batch = self._next_batch()
                if time.monotonic() - self._lag_measured > 5:
                    self._measure_input_lag()
                if batch:
                    idle_since = None
                    self._process_batch(table, batch)
                elif self.options.exit_on_idle is not None and self._caught_up():
                    idle_since = idle_since or time.monotonic()
                    if time.monotonic() - idle_since >= self.options.exit_on_idle:
                        log.info("idle and caught up: exiting")
                        break
                else:
                    idle_since = None
        finally:
            self._close()
        return 0

    def _measure_input_lag(self) -> None:
        """subroute_input_lag_messages: records of the assigned partitions not consumed yet (cached watermarks)."""
        assert self.consumer is not None
        self._lag_measured = time.monotonic()
        if not self._assigned:
            self.metrics.input_lag.set(0)
            return
        lag = 0
        for tp in self.consumer.position([TopicPartition(t, p) for t, p in self._assigned]):
            _, high = self.consumer.get_watermark_offsets(tp, cached=True)
            if high is not None and high >= 0 and tp.offset >= 0:
                lag += max(0, high - tp.offset)
        self.metrics.input_lag.set(lag)

    def _next_batch(self) -> list[Message]:
        """Wait for one record, then take what else is already fetched, up to the batch size: a batch never
        waits to fill up, so a record waits for the batch before it, not for the ones after it."""
        assert self.consumer is not None
        first = self.consumer.poll(self.options.poll_timeout)
        if first is None:
            return []
        return [first, *self.consumer.consume(self.options.batch_size - 1, timeout=0)]

    def _open_clients(self) -> None:
        consumer_config = self.settings.client_config(
            {
                "group.id": names.worker_group_id(self.prefix),
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
                "enable.partition.eof": False,
            },
            defaults={
                "auto.offset.reset": "earliest",
                "partition.assignment.strategy": "cooperative-sticky",
                "session.timeout.ms": self.options.session_timeout_ms,
                # regex inputs pick up topics created later within this time
                "topic.metadata.refresh.interval.ms": 10_000,
                # a broker that holds an empty fetch for the whole wait adds it to the latency (500 ms default)
                "fetch.wait.max.ms": 50,
            },
        )
        producer_overrides: dict[str, object] = {
            "acks": "all",
            "enable.idempotence": True,
            # Failures are all the worker needs to hear of: a report per delivered record costs a callback each.
            "on_delivery": self._on_delivery,
            "delivery.report.only.error": True,
        }
        if self.options.guarantee == EXACTLY_ONCE:
            producer_overrides["transactional.id"] = (
                self.options.transactional_id or f"{self.prefix}.router.{uuid.uuid4().hex[:12]}"
            )
        self.consumer = Consumer(consumer_config)
        self.producer = Producer(
            self.settings.client_config(
                producer_overrides,
                # a crashed worker's open transaction blocks read_committed readers until this runs out
                defaults={"linger.ms": 5, "transaction.timeout.ms": 15_000},
            )
        )
        if self.options.guarantee == EXACTLY_ONCE:
            self.producer.init_transactions(30)
        self._table_version = -1
        self._take_table()
        self.metrics.ready.set(1 if self.ready() else 0)

    def _caught_up(self) -> bool:
        """Every assigned partition read to its (fetch-reported) end; paused pending partitions wait on purpose."""
        assert self.consumer is not None
        if not self._assigned:
            return False
        partitions = [TopicPartition(t, p) for t, p in self._assigned if (t, p) not in self._paused_pending]
        if not partitions:
            return True
        positions = self.consumer.position(partitions)
        unknown = [tp for tp in positions if tp.offset < 0]  # nothing consumed from it in this session
        if unknown:
            committed = {
                (tp.topic, tp.partition): tp.offset for tp in self.consumer.committed(unknown, timeout=5)
            }
            for tp in unknown:
                tp.offset = committed.get((tp.topic, tp.partition), -1)
        for tp in positions:
            _, high = self.consumer.get_watermark_offsets(tp, cached=True)
            if high is None or high < 0:
                return False  # no fetch answered yet: the end is unknown
            if tp.offset < 0:
                if high > 0:
                    return False
            elif tp.offset < high:
                return False
        return True

    def _process_batch(self, table: RoutingTable, batch: list[Message]) -> None:
        assert self.consumer is not None and self.producer is not None
        started = time.perf_counter()
        state = _BatchState()
        eos = self.options.guarantee == EXACTLY_ONCE
        if eos:
            self.producer.begin_transaction()
        lag = self.capacity.snapshot()
        now_ms = int(time.time() * 1000)
        stopped: set[tuple[str, int]] = set()
        pending_app = self._pending_topics(table)
        if self._outputs is None or self._outputs.table is not table:
            self._outputs = _Outputs(self.prefix, table)
        outputs = self._outputs
        # Locals, not attribute lookups, in the loop: it runs once per record.
        produce = self.producer.produce
        route = self._route
        offsets = state.offsets
        first_offsets = state.first_offsets
        routed_in = produced = 0
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
            if tp not in first_offsets:
                first_offsets[tp] = message.offset
            app_name = pending_app.get(message.topic)
            if app_name is not None and not self._due(message, table):
                # Not re-evaluable yet: come back to it when the config changes.
                self.consumer.seek(TopicPartition(tp[0], tp[1], message.offset))
                self.consumer.pause([TopicPartition(tp[0], tp[1])])
                self._paused_pending.add(tp)
                stopped.add(tp)
                offsets[tp] = message.offset
                continue
            routed_in += 1
            for record in route(table, message, lag, now_ms, app_name, state, outputs):
                topic, value, key, headers, timestamp = record
                try:
                    produce(topic, value=value, key=key, headers=headers, timestamp=timestamp)  # type: ignore[arg-type]
                except BufferError:  # local queue full: _produce waits for deliveries to drain
                    self._produce(record)
                produced += 1
            offsets[tp] = message.offset + 1
        state.messages_in = routed_in
        state.produced = produced
        self._count_batch(state)
        self._commit(state, eos)
        self.metrics.batch_seconds.observe(time.perf_counter() - started)

    def _pending_topics(self, table: RoutingTable) -> dict[str, str]:
        return {names.pending_topic(self.prefix, app.name): app.name for app in table.apps}

    def _due(self, message: InputRecord, table: RoutingTable) -> bool:
        """A parked record is re-evaluated under a newer config, or when the expiration sweep comes round."""
        for key, value in message.headers_list:
            if key == names.CONFIG_VERSION and value is not None:
                try:
                    parked = int(value)
                except ValueError:
                    return True
                if parked < table.version:
                    return True
        app = table.app(names.app_of_pending(self.prefix, message.topic))
        if app is None:
            return False
        return is_expired(app.config, message.headers, message.timestamp_ms, int(time.time() * 1000))

    def _route(
        self,
        table: RoutingTable,
        message: InputRecord,
        lag: dict[tuple[str, str], int],
        now_ms: int,
        pending_app: str | None,
        state: _BatchState,
        outputs: _Outputs,
    ) -> list[OutRecord]:
        redriven = pending_app is not None
        try:
            result = self.router.route(table, message, lag, now_ms, only_app=pending_app)
        except Exception:  # a bug must not stop the worker or lose the record: dead-letter it, counted
            log.exception(
                "routing failed; dead-lettering the record", extra={"fields": {"topic": message.topic}}
            )
            apps = [pending_app] if pending_app else [a.name for a in table.apps_for(message.topic)]
            decisions = [Decision(a, Action.DEAD_LETTER, reason="rejected") for a in apps if a]
            self.metrics.malformed.inc()
            return records_for(message, decisions, table, self.prefix, now_ms, redriven, outputs)
        if result.decode_errors:
            _add(state.decode_errors, result.decode_errors)
        if result.evaluation_errors:
            _add(state.evaluation_errors, result.evaluation_errors)
        if redriven:
            for decision in result.routed:
                self._count(decision, redriven=True)
            for decision in result.filtered:
                self._count(decision, redriven=True)
        else:
            state.decisions += result.routed
            if result.filtered:
                # Usually one tuple made once per table for a whole set of skipped apps: counted as a whole.
                state.filtered.append(result.filtered)
        return records_for(message, result.routed, table, self.prefix, now_ms, redriven, outputs)

    def _count_batch(self, state: _BatchState) -> None:
        m = self.metrics
        if state.messages_in:
            m.messages_in.inc(state.messages_in)
        for app, count in state.decode_errors.items():
            m.property_decode_errors.labels(app).inc(count)
        for app, count in state.evaluation_errors.items():
            m.evaluation_errors.labels(app).inc(count)
        for decision, count in _tally(state.decisions):
            self._count(decision, redriven=False, count=count)
        for decisions, count in _tally(state.filtered):
            for decision in decisions:
                self._count(decision, redriven=False, count=count)

    def _count(self, decision: Decision, redriven: bool, count: int = 1) -> None:
        m = self.metrics
        if decision.action is Action.ROUTE:
            m.routed.labels(decision.app, decision.group).inc(count)
            if redriven:
                m.redriven.labels(decision.app).inc(count)
        elif decision.action is Action.FILTERED:
            m.filtered.labels(decision.app).inc(count)
        elif decision.action is Action.PENDING:
            if not redriven:
                m.pending.labels(decision.app).inc(count)
        else:
            m.dead_lettered.labels(decision.app, decision.reason or "unknown").inc(count)

    def _on_delivery(self, error: KafkaError | None, message: Message) -> None:
        if error is not None:
            self._delivery_failures += 1
            log.error("delivery failed", extra={"fields": {"topic": message.topic(), "error": str(error)}})

    def _produce(self, record: OutRecord) -> None:
        assert self.producer is not None
        topic, value, key, headers, timestamp = record
        while True:
            try:
                # the stubs want list[tuple[str, str | bytes | None]]
                self.producer.produce(topic, value=value, key=key, headers=headers, timestamp=timestamp)  # type: ignore[arg-type]
                return
            except BufferError:  # local queue full: let deliveries drain
                self.producer.poll(0.05)

    def _commit(self, state: _BatchState, eos: bool) -> None:
        assert self.consumer is not None and self.producer is not None
        offsets = [TopicPartition(t, p, o) for (t, p), o in state.offsets.items()]
        if eos:
            try:
                if offsets:
                    self.producer.send_offsets_to_transaction(
                        offsets, self.consumer.consumer_group_metadata(), 30
                    )
                self.producer.commit_transaction(30)
            except KafkaException as exc:
                if exc.args[0].fatal():
                    # fenced by a newer worker with our transactional id: it owns the work now; nothing of
                    # this batch was committed
                    log.error("transaction fenced or fatal; exiting", extra={"fields": {"error": str(exc)}})
                    raise
                log.error(
                    "transaction failed; aborting and re-reading the batch",
                    extra={"fields": {"error": str(exc)}},
                )
                self.producer.abort_transaction(30)  # if even this fails, exit: the broker aborts it later
                self._rewind(state)
            return
        self.producer.flush()
        if self._delivery_failures:
            self._delivery_failures = 0
            log.error("some records were not acknowledged; re-reading the batch (at-least-once)")
            self._rewind(state)
            return
        if offsets:
            try:
                self.consumer.commit(offsets=offsets, asynchronous=False)
            except KafkaException as exc:
                if exc.args[0].code() not in _MEMBERSHIP_LOST:
                    raise
                # The group rebalanced (or expelled us) during the batch: the partitions' new owner re-routes
                # from the last commit (duplicates, at-least-once); partitions we keep are committed next batch.
                log.warning(
                    "commit refused after a rebalance; the batch will be routed again",
                    extra={"fields": {"error": str(exc)}},
                )

    def _rewind(self, state: _BatchState) -> None:
        assert self.consumer is not None
        for (topic, partition), offset in state.first_offsets.items():
            self.consumer.seek(TopicPartition(topic, partition, offset))

    def _close(self) -> None:
        if self.producer is not None:
            self.producer.flush(30)
        if self.consumer is not None:
            self.consumer.close()  # leaves the group: partitions move to the other workers at once
        self.capacity.close()
        self.store.close()
        self.metrics.ready.set(0)
