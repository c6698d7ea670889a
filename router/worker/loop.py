"""The router worker: one poll loop that routes input records to group, pending and dead-letter topics.

Threads: ``run`` and everything it calls (consume, route, produce, commit, the rebalance callbacks) run on the
poll-loop thread; the ``TableBuilder`` runs on the config store's thread (it compiles each new config off the hot path);
``healthy`` and ``ready`` on the HTTP server's; ``stop`` on any (the CLI's signal handler). The loop takes a new
table only between batches, so a message is routed entirely under one config version.

Per batch (docs/design.md §2, §5): route every record (``routing``), wrap the decisions in envelopes and produce
them; the input offsets gather in the checkpoint's commit window, made durable at an interval, when the input
drains, before a new table is taken and before partitions are revoked (``checkpoint``, ``window``). Pending
topics are read by the same consumer group: each partition is passed over again when a config version, a group's
presence or a group's count could let a waiting record go, and what can go is routed past the records that still
wait (``pending``, ``routing.passes``); expired records leave at every sweep. Message groups stay with the consumer group holding their outstanding messages
(``routing.holders``): the checkpoint's delivery reports and window numbers, and the capacity monitor's
committed offsets, keep that up to date; a worker assigned partitions reads it back from the group topics first
(``held_groups``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping

from confluent_kafka import Consumer, KafkaException, Message, TopicPartition

from subroute import wire
from subroute.config.avro_schema import needs_schema_registry
from subroute.config.model import Config
from subroute.config.store import ConfigStore, no_apps_warning
from subroute.config.topics import TopicPolicy
from subroute.errors import SubrouteError
from subroute.kafka.clients import admin_client
from subroute.kafka.schema_registry import Backoff, RegistryUnavailable
from subroute.ops.metrics import RouterMetrics
from subroute.ops.settings import Settings
from subroute.routing import native_avro
from subroute.routing.capacity import groups_holding
from subroute.routing.decisions import RoutingTable
from subroute.worker import progress
from subroute.worker.assignment import Assignment
from subroute.worker.batch import BatchRouter
from subroute.worker.capacity import CapacityMonitor
from subroute.worker.checkpoint import AT_LEAST_ONCE, EXACTLY_ONCE, GUARANTEES, Checkpoint
from subroute.worker.consumers import ConsumerView
from subroute.worker.destinations import Destinations
from subroute.worker.held_groups import restore_holders
from subroute.worker.options import WorkerOptions, worker_consumer_config
from subroute.worker.pending import PendingPartitions
from subroute.worker.schemas import BatchSchemas
from subroute.worker.tables import TableBuilder, routing_collection
from subroute.worker.tally import BatchTally, count_labels
from subroute.worker.waiting import WaitingReport

__all__ = ["AT_LEAST_ONCE", "EXACTLY_ONCE", "GUARANTEES", "StartupTimeout", "Worker", "WorkerOptions"]

log = logging.getLogger(__name__)


class StartupTimeout(SubrouteError):
    """The brokers could not be reached (or refused this client) for the whole start-up timeout."""

    def __init__(self, settings: Settings, seconds: float, trouble: str | None) -> None:
        reason = trouble or "no answer"
        super().__init__(
            f"could not read the config topic {settings.config_topic} from {settings.bootstrap_servers} within "
            f"{seconds:g} s ({reason}); check the address, --topic-prefix and the security settings "
            "(--kafka-config), or wait longer with --startup-timeout"
        )


class Worker:
    def __init__(
        self, settings: Settings, options: WorkerOptions, metrics: RouterMetrics | None = None
    ) -> None:
        self.settings, self.options, self.prefix = settings, options, settings.topic_prefix
        self.metrics = metrics or RouterMetrics()
        self.pending = PendingPartitions(self.prefix, options.pending_sweep_seconds)
        self.batches = BatchRouter(self.prefix, self.metrics, self.pending)
        self.store: ConfigStore[RoutingTable] = ConfigStore(
            settings, TableBuilder(self.metrics), metrics=self.metrics
        )
        self.capacity = CapacityMonitor(
            settings, options.capacity_refresh_seconds, self.metrics, options.presence_refresh_seconds
        )
        self.consumers = ConsumerView(self.capacity, self._woken)  # what decisions read of the consumers
        self.waiting = WaitingReport(self.prefix)  # says which consumer groups records wait for
        self.assignment = Assignment(
            self.metrics,
            before_revoke=self._commit,
            on_assigned=self.pending.assigned,
            on_revoked=self.pending.revoked,
            on_added=self._restore_holders,
        )
        # Read at each scrape, not set on events: readiness also ends when the config store stops following,
        # which no event of the poll loop reports.
        self.metrics.ready.set_function(lambda: 1.0 if self.ready() else 0.0)
        self.metrics.idle.set_function(lambda: 1.0 if self.idle() else 0.0)
        self.consumer: Consumer | None = None
        self.checkpoint: Checkpoint | None = None
        self.destinations = Destinations(
            admin_client(settings), self.prefix, TopicPolicy.of(settings), self.metrics
        )
        self._stop = threading.Event()
        self._last_loop = time.monotonic()
        self._lag_measured = 0.0
        self._table: RoutingTable | None = None  # the table in force (the poll loop's)
        self._config: Config | None = None
        self.schemas = BatchSchemas(
            options.schema_registry, self.prefix
        )  # Avro writer schemas by id (worker/schemas.py)
        # Avro bodies of the records decided here rather than by the native decider, read by the native reader
        self.batches.router.read_body = native_avro.read_body
        self.registry_backoff = Backoff()
        # why the last batch waits for the schema registry, if it does (``ready``)
        self.registry_trouble: str | None = None

    def healthy(self) -> bool:
        """The poll loop turns and the config store still follows the config topic (``/healthz``)."""
        return time.monotonic() - self._last_loop < 60 and self.store.following()

    def ready(self) -> bool:
        """Config read to its end and still followed, partitions assigned, and the schema registry readable when
        records need it (``/readyz``)."""
        return self._config_ready() and bool(self.assignment.assigned) and self.registry_trouble is None

    def idle(self) -> bool:
        """Not ready only because the group gave this worker no partition (more workers than partitions): the
        config is caught up and followed, and the worker is in the group. Alerts on readiness leave it out."""
        assignment = self.assignment
        return self._config_ready() and assignment.joined and not assignment.assigned

    def _config_ready(self) -> bool:
        return self.store.ready and self.store.following()

    def stop(self, *_: object) -> None:
        self._stop.set()

    def run(self) -> int:
        """Route until stopped (0), or until idle with ``exit_on_idle`` (0); 3 when the config cannot be read.

        Raises ``StartupTimeout`` when the config topic is not read to its end within ``startup_timeout``.
        """
        self.store.start()
        started = time.monotonic()
        limit = self.options.startup_timeout
        while not self.store.wait_ready(1.0):
            if self._stop.is_set():
                self.store.close()
                self.destinations.close()
                return 0
            if not self.store.alive:  # it logged why (a config topic not one compacted partition, say)
                log.error("the config store stopped before the config was read; not routing")
                self.destinations.close()
                return 3
            if limit > 0 and time.monotonic() - started > limit:
                self.store.close()
                self.capacity.close()
                raise StartupTimeout(self.settings, limit, self.store.trouble)
        self._open_clients()
        consumer, checkpoint = self.consumer, self.checkpoint
        assert consumer is not None and checkpoint is not None
        try:
            with routing_collection():  # the collector's thresholds while routing (tables.py)
                self._poll_loop(consumer, checkpoint)
        finally:
            self._close()
        return 0

    def _poll_loop(self, consumer: Consumer, checkpoint: Checkpoint) -> None:
        """Route until stopped, or until idle and caught up for ``exit_on_idle`` seconds."""
        idle_since: float | None = None
        while not self._stop.is_set():
            self._last_loop = now = time.monotonic()
            table = self._take_table()
            if table is None:  # the first version's topics cannot be created yet (destinations logs why)
                self._stop.wait(1.0)
                continue
            self.assignment.release(consumer, table.version, self.store.settled_at)
            self.consumers.follow(checkpoint.settled_through)  # wakes pending partitions (``_woken``)
            self.pending.tick(consumer, self.assignment, table, _now_ms())
            first = consumer.poll(self.options.poll_timeout)
            # A batch never waits to fill up: a record waits for the batch before it, not the ones after it.
            batch = [first, *consumer.consume(self.options.batch_size - 1, timeout=0)] if first else []
            if now - self._lag_measured > 5:
                self._lag_measured = now
                progress.publish_lag(
                    consumer,
                    self.assignment.assigned,
                    self.prefix,
                    self.metrics,
                    self.pending.backlog(),
                )
            if batch and not self._schemas_ready(table, batch):
                continue  # put back: read again after the backoff wait
            if batch:
                idle_since = None
                self._process_batch(table, batch)
            else:  # a sweep may reach its partition's end without a record (transaction markers)
                self.batches.settle(table, consumer, self.assignment, checkpoint, _now_ms())
                if self.options.exit_on_idle is not None and progress.caught_up(consumer, self.assignment):
                    idle_since = idle_since or now
                    if now - idle_since >= self.options.exit_on_idle:
                        log.info("idle and caught up: exiting")
                        return
                else:
                    idle_since = None
            # nothing more to read for now: committing at once costs no throughput and adds no latency
            short = len(batch) < self.options.batch_size
            checkpoint.commit_if_due(short and progress.nothing_fetched_ahead(consumer, self.assignment))

    def _take_table(self) -> RoutingTable | None:
        """The store's newest table once the topics it routes to exist; until then the one in force."""
        config, table = self.store.snapshot()
        if table is self._table or not self.destinations.ready(config):
            return self._table
        self._commit()  # what was routed under the old version is committed under it
        self._table, self._config = table, config
        self.metrics.plan_version.set(table.version)
        self.metrics.plan_subscriptions.set(table.expression_count)
        self.capacity.watch(config)
        self.capacity.start()
        self._follow_holders(config)
        self.assignment.follow(self.consumer, config, self.prefix)
        if self.consumer is not None:  # records that stay may go under it: passed over again
            self.pending.renew(self.consumer, self.assignment, table, _now_ms())
        log.info(
            "config version in force", extra={"fields": {"version": table.version, "apps": len(config.apps)}}
        )
        warning = no_apps_warning(self.settings, config)
        if warning is not None:
            log.warning(warning)
        framed = sorted(a.name for a in config.apps.values() if needs_schema_registry(a))
        if framed and self.options.schema_registry is None:
            log.warning(
                "apps read Avro in Confluent's wire format but no schema registry is set: their records will wait "
                "(give --schema-registry-url or SUBROUTE_SCHEMA_REGISTRY_URL)",
                extra={"fields": {"apps": framed}},
            )
        return table

    def _follow_holders(self, config: Config) -> None:
        """Message groups of the config in force: delivery reports on their group topics position them; those
        held by a group no longer grouping messages are forgotten."""
        holding = groups_holding(config)
        holders = self.consumers.holders
        holders.topics = {wire.group_topic(self.prefix, app, group): (app, group) for app, group in holding}
        holders.keep(set(holding))
        if self.checkpoint is not None:
            self.checkpoint.on_reported = (
                (lambda m: holders.reported(m.topic() or "", m.partition() or 0, m.offset() or 0, m.key()))
                if holding
                else None
            )

    def _restore_holders(self) -> None:
        """Partitions were assigned: before routing them, read back which groups hold message groups (the
        previous owner's placements). A failure is logged: routing goes on with what this worker knows."""
        if self._config is None or not groups_holding(self._config):
            return
        try:
            restore_holders(self.settings, self._config, self.consumers.holders)
        except Exception:
            log.exception("reading back held message groups failed; routing with what this worker holds")

    def _open_clients(self) -> None:
        self.consumer = Consumer(worker_consumer_config(self.settings, self.options.session_timeout_ms))
        options = self.options
        self.checkpoint = Checkpoint(
            self.settings,
            self.consumer,
            options.guarantee,
            options.transactional_id,
            self.metrics,
            repair_topics=lambda _missing: self.destinations.create(self._config or Config()),
            interval=options.commit_interval,
            producers=options.producers,
            on_rewind=self._rewound,
        )
        self._table = None
        self._take_table()

    def _process_batch(self, table: RoutingTable, batch: list[Message]) -> BatchTally:
        assert self.consumer is not None and self.checkpoint is not None
        started = time.perf_counter()
        self.checkpoint.begin()
        lag, now_ms = self.consumers.snapshot, _now_ms()
        self.consumers.holders.window = self.checkpoint.window.number  # the window this batch's records join
        args = (self.consumer, self.assignment, self.checkpoint)
        tally = self.batches.route_batch(table, batch, lag, now_ms, *args)
        counted = count_labels(tally.decisions)  # counted once, for the waiting report and the metrics
        self.waiting.note(counted.items(), lag.absent)
        tally.publish(self.metrics, counted)
        self.checkpoint.add(tally)
        self.metrics.batch_seconds.observe(time.perf_counter() - started)
        return tally

    def _schemas_ready(self, table: RoutingTable, batch: list[Message]) -> bool:
        """Fetch the writer schemas the batch's framed Avro values need, for its decisions to read. When the
        registry cannot be read, nothing of the batch is routed: its partitions are sought back to its first
        offsets (so nothing past them joins the commit window), the wait is reported (``/readyz``, metrics, a
        log line) and the loop reads them again after a backoff wait (False)."""
        records = ((m.topic() or "", m.value()) for m in batch if m.error() is None)
        try:
            writer_of = self.schemas.prepare(table, records)
        except RegistryUnavailable as exc:
            self.registry_trouble = str(exc)
            self.metrics.schema_registry_unavailable.set(1)
            self.metrics.schema_registry_errors.inc()
            self._put_back(batch)
            # What earlier batches routed is made durable now (the outage may last): an exactly-once
            # transaction is not left open through it, and nothing of the held batch is in the window.
            self._commit()
            self._last_loop = time.monotonic()  # waiting on the registry is not a stuck loop (/healthz)
            delay = self.registry_backoff.next_delay()
            log.warning(
                "the schema registry cannot be read: records of Avro apps wait, not routed",
                extra={"fields": {"error": str(exc), "retry_in_seconds": round(delay, 3)}},
            )
            self._stop.wait(delay)
            return False
        if self.registry_trouble is not None:
            log.info("the schema registry is readable again: routing the records that waited")
            self.registry_trouble = None
            self.metrics.schema_registry_unavailable.set(0)
            self.registry_backoff.reset()
        self.batches.router.writer_of = writer_of
        return True

    def _put_back(self, batch: list[Message]) -> None:
        """Seek each partition of ``batch`` back to its first record in it: they are consumed again, in order."""
        assert self.consumer is not None
        first: dict[tuple[str, int], int] = {}
        for message in batch:
            if message.error() is None:
                first.setdefault((message.topic() or "", message.partition() or 0), message.offset() or 0)
        for (topic, partition), offset in first.items():
            try:
                self.consumer.seek(TopicPartition(topic, partition, offset))
            except KafkaException as exc:  # revoked meanwhile: its next owner reads from the committed offset
                log.warning(
                    "could not put a partition back", extra={"fields": {"topic": topic, "error": str(exc)}}
                )

    def _rewound(self, partitions: list[tuple[str, int]]) -> None:
        if self.consumer is not None:
            self.pending.reload(self.consumer, partitions)

    def _woken(self, woken: Mapping[str, frozenset[str]]) -> None:
        """Records of these apps may go now, for these reasons (``ConsumerView``): pass over them again."""
        if self.consumer is not None and self._table is not None:
            self.pending.wake(self.consumer, self.assignment, woken, self._table, _now_ms())

    def _commit(self) -> None:
        if self.checkpoint is not None:
            self.checkpoint.commit()

    def _close(self) -> None:
        if self.checkpoint is not None:
            self.checkpoint.close()
        if self.consumer is not None:
            self.consumer.close()  # leaves the group: partitions move to the other workers at once
        self.capacity.close()
        self.store.close()
        self.destinations.close()
        self.assignment.assigned.clear()  # closed: not ready, nor idle, whatever the store reports
        self.assignment.joined = False


def _now_ms() -> int:
    return int(time.time() * 1000)
