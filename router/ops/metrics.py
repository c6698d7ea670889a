"""Prometheus metrics of a router worker, on an injectable registry.

Labels are bounded: apps and groups come from the configuration (operators control them), reasons are a fixed
set. Nothing message-derived (keys, property values, topics matched by regex) becomes a label.
"""

from __future__ import annotations

from importlib import metadata

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    Histogram,
    Info,
    PlatformCollector,
    ProcessCollector,
)

_SECONDS_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
_AGE_BUCKETS = (0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0, 21600.0, 86400.0)


class RouterMetrics:
    def __init__(self, registry: CollectorRegistry | None = None, runtime: bool = True) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        if runtime:  # process_*, python_* and python_gc_*, as on the default registry
            ProcessCollector(registry=r)
            PlatformCollector(registry=r)
            GCCollector(registry=r)
        self.build = Info("subroute_build", "The subroute release this worker runs.", registry=r)
        self.build.info({"version": metadata.version("subroute")})
        self.record_age = Histogram(
            "subroute_record_age_seconds",
            "Age of input records when routed (producer timestamp to routing); sampled: the first record of "
            "each batch.",
            buckets=_AGE_BUCKETS,
            registry=r,
        )
        self.messages_in = Counter("subroute_messages_in_total", "Input records consumed.", registry=r)
        self.malformed = Counter(
            "subroute_malformed_messages_total", "Input records that could not be read at all.", registry=r
        )
        self.routed = Counter(
            "subroute_routed_total", "Records produced to a group topic.", ["app", "group"], registry=r
        )
        self.filtered = Counter(
            "subroute_filtered_total",
            "Input records skipped for an app by its app filter.",
            ["app"],
            registry=r,
        )
        self.pending = Counter(
            "subroute_pending_total",
            "Records sent to an app's pending topic (no subscription matched).",
            ["app"],
            registry=r,
        )
        self.redriven = Counter(
            "subroute_redriven_total",
            "Pending records routed after a configuration change.",
            ["app"],
            registry=r,
        )
        self.pending_head_stops = Counter(
            "subroute_pending_head_stops_total",
            "Times a pending partition stopped at its head because the offsets routed past it filled the commit "
            "metadata (once per head).",
            ["app"],
            registry=r,
        )
        self.dead_lettered = Counter(
            "subroute_dead_lettered_total",
            "Records sent to an app's dead-letter topic.",
            ["app", "reason"],
            registry=r,
        )
        # Both outcomes of expiration in one counter: with on_expire: drop an expired record is written nowhere,
        # so this is where it shows (action is dead-letter or drop: bounded).
        self.expired = Counter(
            "subroute_expired_total",
            "Records older than their expiration, by what happened to them (dead-letter or drop).",
            ["app", "action"],
            registry=r,
        )
        self.evaluation_errors = Counter(
            "subroute_evaluation_errors_total",
            "Expression evaluations that ended in an error (missing property, wrong type, arithmetic).",
            ["app"],
            registry=r,
        )
        self.property_decode_errors = Counter(
            "subroute_property_decode_errors_total",
            "Properties that could not be decoded: a header value not of the app's declared type, or a body "
            "property (an undecodable body, a leaf of the wrong type), by app and property (its declared or read "
            "name).",
            ["app", "property"],
            registry=r,
        )
        self.dropped_headers = Counter(
            "subroute_dropped_headers_total",
            "subroute.* headers on input records that the router does not take from producers, dropped.",
            registry=r,
        )
        self.delivery_failures = Counter(
            "subroute_delivery_failures_total", "Routed records the broker did not acknowledge.", registry=r
        )
        self.rewinds = Counter(
            "subroute_rewinds_total", "Batches read again after a failed delivery or transaction.", registry=r
        )
        self.transactions_aborted = Counter(
            "subroute_transactions_aborted_total",
            "Exactly-once transactions aborted (the batch is re-read).",
            registry=r,
        )
        self.topic_creation_failures = Counter(
            "subroute_topic_creation_failures_total",
            "Attempts to create the topics of a config version that failed (the version in force stays).",
            registry=r,
        )
        self.config_refused = Counter(
            "subroute_config_refused_total",
            "Config versions refused: not valid as a whole (an undecodable or invalid record); the last good "
            "version stays in force.",
            registry=r,
        )
        self.plan_version = Gauge("subroute_plan_version", "Config version of the plan in force.", registry=r)
        self.plan_subscriptions = Gauge(
            "subroute_plan_subscriptions",
            "Expressions in the plan in force (filters and subscriptions).",
            registry=r,
        )
        self.plan_compile_seconds = Histogram(
            "subroute_plan_compile_seconds",
            "Time to compile a new plan.",
            buckets=_SECONDS_BUCKETS,
            registry=r,
        )
        self.batch_seconds = Histogram(
            "subroute_batch_seconds",
            "Time to route and produce one input batch (its offsets are committed with the commit window).",
            buckets=_SECONDS_BUCKETS,
            registry=r,
        )
        self.flush_seconds = Histogram(
            "subroute_flush_seconds",
            "Time the poll loop waited in one flush for every record produced so far to be acknowledged "
            "(at-least-once: the input drained, closed windows holding too many records, a rebalance, a new "
            "config version, shutdown).",
            buckets=_SECONDS_BUCKETS,
            registry=r,
        )
        self.ready = Gauge(
            "subroute_ready", "1 once the config is caught up and partitions are assigned.", registry=r
        )
        self.idle = Gauge(
            "subroute_idle",
            "1 while the config is caught up and the worker is in the group but was given no partition (more "
            "workers than partitions): not ready, and nothing is wrong.",
            registry=r,
        )
        self.assigned_partitions = Gauge(
            "subroute_assigned_partitions",
            "Partitions (inputs and pending topics) assigned to this worker.",
            registry=r,
        )
        self.rebalances = Counter(
            "subroute_rebalances_total",
            "Partition assignments received from the group (one per rebalance this worker takes part in).",
            registry=r,
        )
        self.input_lag = Gauge(
            "subroute_input_lag_messages",
            "Input records not yet consumed by this worker (assigned input partitions; pending topics excluded).",
            registry=r,
        )
        self.pending_backlog = Gauge(
            "subroute_pending_backlog_messages",
            "Records parked on the pending topics of this worker's assigned partitions, waiting for a subscription.",
            registry=r,
        )
        self.group_present = Gauge(
            "subroute_group_present",
            "1 while a group's Kafka consumer group has live members (presence: required apps), else 0.",
            ["app", "group"],
            registry=r,
        )
        self.group_lag = Gauge(
            "subroute_group_lag_messages",
            "Unconfirmed records of a group (end offset minus committed offset).",
            ["app", "group"],
            registry=r,
        )
        self.message_groups_held = Gauge(
            "subroute_message_groups_held",
            "Message groups (group_by) with messages routed by this worker (or read back from the group topics) "
            "and not yet confirmed: each stays on its consumer group until they are. As of the last measurement.",
            ["app"],
            registry=r,
        )
        self.group_max_unconfirmed = Gauge(
            "subroute_group_max_unconfirmed",
            "The smallest max_unconfirmed among a group's subscriptions, in the config in force (groups without "
            "one have no series): at this lag the group starts to be passed over.",
            ["app", "group"],
            registry=r,
        )
        self.schema_registry_unavailable = Gauge(
            "subroute_schema_registry_unavailable",
            "1 while the records of an Avro app in Confluent's wire format wait because the schema registry "
            "cannot be read (they are read again after a backoff, not routed as if their fields were absent).",
            registry=r,
        )
        self.schema_registry_errors = Counter(
            "subroute_schema_registry_errors_total",
            "Failed reads of the schema registry (each held a batch back for a backoff wait).",
            registry=r,
        )
