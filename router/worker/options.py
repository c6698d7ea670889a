"""The worker's options, and the settings of its consumer in the router group."""

from __future__ import annotations

from dataclasses import dataclass, field

from subroute import wire
from subroute.kafka.schema_registry import RegistrySettings
from subroute.ops.settings import Settings
from subroute.worker.checkpoint import AT_LEAST_ONCE
from subroute.worker.pending import DEFAULT_SWEEP_SECONDS
from subroute.worker.window import CommitInterval

DEFAULT_STARTUP_TIMEOUT = 60.0


@dataclass(frozen=True)
class WorkerOptions:
    guarantee: str = AT_LEAST_ONCE
    batch_size: int = 2000
    poll_timeout: float = 0.2
    exit_on_idle: float | None = None
    # how often a pending partition with waiting records is swept for expired ones (worker/pending.py)
    pending_sweep_seconds: float = DEFAULT_SWEEP_SECONDS
    capacity_refresh_seconds: float = 3.0
    # how often the consumer groups' membership is read (presence: required apps); 0: every group counts as
    # present (for clusters whose broker does not report membership; it is also detected, worker/capacity.py)
    presence_refresh_seconds: float = 2.0
    session_timeout_ms: int = 10_000
    # see ``window``: the offsets are also committed whenever the input drains
    commit_interval: CommitInterval = field(default_factory=CommitInterval)
    # exactly-once: a successor that reuses a dead worker's id fences (aborts) its open transaction at once;
    # with a fresh id the broker aborts it only after transaction.timeout.ms. None: a fresh id per process.
    transactional_id: str | None = None
    # producers the destination topics are shared among (router/worker/producers.py); None: one. Exactly-once
    # takes one only (a transaction belongs to one producer)
    producers: int | None = None
    # seconds to reach the brokers and read the config topic to its end before giving up (exit 3: a wrong address
    # or failed authentication is one line, not a worker that retries forever); 0 waits for ever. Once routing,
    # the worker rides out a broker outage of any length (its consumers and producers retry by themselves).
    startup_timeout: float = DEFAULT_STARTUP_TIMEOUT
    # where the writer schemas of Avro values in Confluent's wire format are (format: avro without schema:);
    # None: such records wait, the worker not ready, until one is set
    schema_registry: RegistrySettings | None = None


def worker_consumer_config(settings: Settings, session_timeout_ms: int) -> dict[str, object]:
    """The router group's consumer: manual commits, read_committed, cooperative rebalancing."""
    return settings.client_config(
        {
            "group.id": wire.worker_group_id(settings.topic_prefix),
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "enable.partition.eof": False,
        },
        defaults={
            "auto.offset.reset": "earliest",
            "partition.assignment.strategy": "cooperative-sticky",
            "session.timeout.ms": session_timeout_ms,
            "topic.metadata.refresh.interval.ms": 10_000,  # regex inputs see new topics within this
            # a broker that holds an empty fetch for the whole wait adds it to the latency (500 ms default)
            "fetch.wait.max.ms": 50,
        },
    )
