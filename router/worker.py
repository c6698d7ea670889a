"""The router worker: one poll loop that routes input records to group, pending and dead-letter topics.

Per batch (DESIGN.md §2, §5): take the plan in force (swapped only here, between batches), route every record,
produce, then make the input offsets durable: at-least-once flushes the producer and commits only when every
record was acknowledged; exactly-once puts the routed records and the offsets in one transaction.

Pending topics are read by the same consumer group. A pending record parked under config version V is
re-evaluated only under a newer version: meeting one that is not due, the worker seeks back to it and pauses
that partition until the version changes (or the expiration sweep comes round), so nothing spins.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import FrameType
from typing import Any, cast

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from router import names, priority
from router.capacity import CapacityMonitor
from router.config_store import ConfigStore
from router.config_validation import input_matches
from router.kafka_io import Headers, TopicSpec, admin_client, ensure_topics, existing_topics
from router.metrics import RouterMetrics
from router.model import Config
from router.routing import Action, Decision, MessageView, Router, RoutingTable, build_table, is_expired
from router.settings import Settings

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


@dataclass(frozen=True)
class OutRecord:
    topic: str
    value: bytes | None
    key: bytes | None
    headers: Headers
    timestamp: int


@dataclass(slots=True)
class InputRecord:
    """A consumed record with the types confluent-kafka leaves optional pinned down (it came without error)."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: Headers
    timestamp: int

    @classmethod
    def of(cls, message: Message) -> InputRecord:
        return cls(
            cast(str, message.topic()),
            cast(int, message.partition()),
            cast(int, message.offset()),
            message.key(),
            message.value(),
            cast(Headers, message.headers() or []),
            message.timestamp()[1],
        )


@dataclass
class _BatchState:
    offsets: dict[tuple[str, int], int] = field(default_factory=dict)
    first_offsets: dict[tuple[str, int], int] = field(default_factory=dict)
    produced: int = 0


def _routing_headers(decision: Decision, version: int, now_ms: int) -> Headers:
    added: Headers = [(names.APP, decision.app.encode())]
    if decision.group is not None:
        added.append((names.GROUP, decision.group.encode()))
    if decision.subscription is not None:
        added.append((names.SUBSCRIPTION, decision.subscription.encode()))
    added.append((names.CONFIG_VERSION, str(version).encode()))
    added.append((names.ROUTED_AT, str(now_ms).encode()))
    if decision.reason is not None:
        added.append((names.DLQ_REASON, decision.reason.encode()))
    return added


def records_for(
    message: InputRecord,
    decisions: Sequence[Decision],
    table: RoutingTable,
    prefix: str,
    now_ms: int,
    redriven: bool,
) -> list[OutRecord]:
    """The records one input (or pending) record turns into. Value and original headers are kept byte for byte."""
    original = message.headers
    if redriven:
        original = [(k, v) for k, v in original if k not in _PARKING_HEADERS]
        has_source = True
    else:
        has_source = False
    source: Headers = (
        []
        if has_source
        else [(names.SOURCE, names.source_of(message.topic, message.partition, message.offset).encode())]
    )
    marker: Headers = [(names.REDRIVEN, b"pending")] if redriven else []
    timestamp = message.timestamp
    out: list[OutRecord] = []
    for decision in decisions:
        if decision.action is Action.FILTERED:
            continue
        if decision.action is Action.ROUTE:
            assert decision.group is not None
            topic = priority.band_topic(prefix, decision.app, decision.group, decision.band)
            key = decision.key if decision.key is not None else message.key
        elif decision.action is Action.PENDING:
            topic = names.pending_topic(prefix, decision.app)
            key = message.key
        else:
            topic = names.dlq_topic(prefix, decision.app)
            key = message.key
        headers = [*original, *source, *marker, *_routing_headers(decision, table.version, now_ms)]
        out.append(OutRecord(topic, message.value, key, headers, timestamp if timestamp > 0 else now_ms))
    return out


def app_topics(config: Config, prefix: str, partitions_of: Callable[[Sequence[str]], int]) -> list[TopicSpec]:
    """Group, pending and dead-letter topics the config needs, sized like the app's largest input."""
    specs: list[TopicSpec] = []
    for app in config.apps.values():
        count = app.partitions or partitions_of(app.inputs)
        specs.append(TopicSpec(names.pending_topic(prefix, app.name), count))
        specs.append(TopicSpec(names.dlq_topic(prefix, app.name), count))
        for group in config.groups_of(app.name):
            # An app with a priority expression writes to ten band topics per group (router/priority.py).
            topics = (
                priority.band_topics(prefix, app.name, group.name)
                if app.priority is not None
                else [names.group_topic(prefix, app.name, group.name)]
            )
            specs.extend(TopicSpec(topic, count) for topic in topics)
    return specs


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
        self._table_version = -1
        self._subscribed: tuple[str, ...] = ()
        self._admin: AdminClient = admin_client(settings)
        self.store: ConfigStore[RoutingTable] = ConfigStore(settings, self._build, metrics=self.metrics)
        self.capacity = CapacityMonitor(settings, options.capacity_refresh_seconds, self.metrics)
        self.consumer: Consumer | None = None
        self.producer: Producer | None = None
        self._delivery_failures = 0

    # --- health -------------------------------------------------------------------------------------------------

    def healthy(self) -> bool:
        return time.monotonic() - self._last_loop < 60

    def ready(self) -> bool:
        return self.store.ready and bool(self._assigned)

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
        table = build_table(config)
        self.metrics.plan_compile_seconds.observe(time.perf_counter() - started)
        return table

    def _partitions_of(self, inputs: Sequence[str]) -> int:
        present = existing_topics(self._admin)
        counts = [n for topic, n in present.items() if any(input_matches(i, topic) for i in inputs)]
        return max(counts, default=1)

    def _take_table(self) -> RoutingTable:
        config, table = self.store.snapshot()
        if table.version != self._table_version:
            self._on_new_table(config, table)
        return table

    def _on_new_table(self, config: Config, table: RoutingTable) -> None:
        ensure_topics(self._admin, app_topics(config, self.prefix, self._partitions_of))
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

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        gone = {(p.topic, p.partition) for p in partitions}
        self._assigned -= gone
        self._paused_pending -= gone
        self.metrics.ready.set(1 if self.ready() else 0)

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
                batch = self.consumer.consume(self.options.batch_size, timeout=self.options.poll_timeout)
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
            },
        )
        producer_overrides: dict[str, object] = {"acks": "all", "enable.idempotence": True}
        if self.options.guarantee == EXACTLY_ONCE:
            producer_overrides["transactional.id"] = f"{self.prefix}.router.{uuid.uuid4().hex[:12]}"
        self.consumer = Consumer(consumer_config)
        self.producer = Producer(self.settings.client_config(producer_overrides, defaults={"linger.ms": 5}))
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
            state.first_offsets.setdefault(tp, message.offset)
            app_name = pending_app.get(message.topic)
            if app_name is not None and not self._due(message, table):
                # Not re-evaluable yet: come back to it when the config changes.
                self.consumer.seek(TopicPartition(tp[0], tp[1], message.offset))
                self.consumer.pause([TopicPartition(tp[0], tp[1])])
                self._paused_pending.add(tp)
                stopped.add(tp)
                state.offsets[tp] = message.offset
                continue
            self.metrics.messages_in.inc()
            for record in self._route(table, message, lag, now_ms, app_name):
                self._produce(record)
                state.produced += 1
            state.offsets[tp] = message.offset + 1
        self._commit(state, eos)
        self.metrics.batch_seconds.observe(time.perf_counter() - started)

    def _pending_topics(self, table: RoutingTable) -> dict[str, str]:
        return {names.pending_topic(self.prefix, app.name): app.name for app in table.apps}

    def _due(self, message: InputRecord, table: RoutingTable) -> bool:
        """A parked record is re-evaluated under a newer config, or when the expiration sweep comes round."""
        for key, value in message.headers:
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
        return is_expired(app.config, message.headers, message.timestamp, int(time.time() * 1000))

    def _route(
        self,
        table: RoutingTable,
        message: InputRecord,
        lag: dict[tuple[str, str], int],
        now_ms: int,
        pending_app: str | None,
    ) -> list[OutRecord]:
        view = MessageView(message.topic, message.headers, message.timestamp)
        try:
            result = self.router.route(table, view, lag, now_ms, only_app=pending_app)
        except Exception:  # a bug must not stop the worker or lose the record: dead-letter it, counted
            log.exception(
                "routing failed; dead-lettering the record", extra={"fields": {"topic": message.topic}}
            )
            apps = [pending_app] if pending_app else [a.name for a in table.apps_for(message.topic)]
            decisions = [Decision(a, Action.DEAD_LETTER, reason="rejected") for a in apps if a]
            self.metrics.malformed.inc()
            return records_for(message, decisions, table, self.prefix, now_ms, pending_app is not None)
        for app, count in result.decode_errors.items():
            self.metrics.property_decode_errors.labels(app).inc(count)
        for app, count in result.evaluation_errors.items():
            self.metrics.evaluation_errors.labels(app).inc(count)
        for decision in result.decisions:
            self._count(decision, pending_app is not None)
        return records_for(message, result.decisions, table, self.prefix, now_ms, pending_app is not None)

    def _count(self, decision: Decision, redriven: bool) -> None:
        m = self.metrics
        if decision.action is Action.ROUTE:
            m.routed.labels(decision.app, decision.group).inc()
            if redriven:
                m.redriven.labels(decision.app).inc()
        elif decision.action is Action.FILTERED:
            m.filtered.labels(decision.app).inc()
        elif decision.action is Action.PENDING:
            if not redriven:
                m.pending.labels(decision.app).inc()
        else:
            m.dead_lettered.labels(decision.app, decision.reason or "unknown").inc()

    def _on_delivery(self, error: KafkaError | None, message: Message) -> None:
        if error is not None:
            self._delivery_failures += 1
            log.error("delivery failed", extra={"fields": {"topic": message.topic(), "error": str(error)}})

    def _produce(self, record: OutRecord) -> None:
        assert self.producer is not None
        while True:
            try:
                self.producer.produce(
                    record.topic,
                    value=record.value,
                    key=record.key,
                    headers=cast(Any, record.headers),  # the stubs want list[tuple[str, str | bytes | None]]
                    timestamp=record.timestamp,
                    on_delivery=self._on_delivery,
                )
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
                log.error(
                    "transaction failed; aborting and re-reading the batch",
                    extra={"fields": {"error": str(exc)}},
                )
                self.producer.abort_transaction(30)
                self._rewind(state)
            return
        self.producer.flush()
        if self._delivery_failures:
            self._delivery_failures = 0
            log.error("some records were not acknowledged; re-reading the batch (at-least-once)")
            self._rewind(state)
            return
        if offsets:
            self.consumer.commit(offsets=offsets, asynchronous=False)

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
