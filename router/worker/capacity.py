"""The capacity and presence measurements over Kafka, refreshed in the background: each group's unconfirmed
count (lag) and whether its Kafka consumer group has live members (which groups: routing/capacity.py).

lag = end offset - committed offset of the group's consumer group, summed over the partitions of the group topic
and of its priority band topics ``.p1``-``.p9`` (``wire.band_topics``: a band holds the group's messages as much as
the plain topic does); a partition with no commit counts from its start. End offsets are the high watermarks
fetch responses report. Measured every ``lag_interval`` seconds for the groups of apps where some subscription has
a ``max_unconfirmed`` (elsewhere lag decides nothing).

Committed offsets of message groups' holders (Qpid: a message group stays with one consumer while it has
unacknowledged messages): for the groups of apps with ``group_by``, each partition's committed offset on the group
topic, measured with the lag (every ``lag_interval`` seconds); the worker releases the message groups whose
records its holder has committed past (routing/holders.py).

Presence (BlazingMQ routes only to attached consumers): the consumer group ``<prefix>.<app>.<group>`` has live
members, from ``describe_consumer_groups``, every ``presence_interval`` seconds (2 s by default, the worker's
``--presence-refresh-seconds``), for the groups of apps with ``presence: required``. Consumers attach and leave
far less often than records arrive, so a short interval costs one small admin request per refresh.

Some brokers do not report membership: Tansu answers a live one-member group with state STABLE and no members
(docs/brokers.md). A group that is STABLE yet lists nobody is a contradiction, not an empty group,
so that answer is read as "membership not reported" (detected generically, not by naming the broker): presence
cannot be measured there, every group counts as present from then on, and one warning says so.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from confluent_kafka import Consumer, ConsumerGroupState, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin._metadata import ClusterMetadata

from subroute import wire
from subroute.config.model import Config
from subroute.kafka.clients import admin_client, end_offsets
from subroute.ops.metrics import RouterMetrics
from subroute.ops.settings import Settings
from subroute.routing.capacity import (
    GroupId,
    group_limits,
    groups_holding,
    groups_needing_capacity,
    groups_needing_presence,
)
from subroute.routing.holders import Committed

log = logging.getLogger(__name__)

Lag = dict[GroupId, int]

# A group that is STABLE has members by definition: a broker that lists none there does not report membership.
# Only STABLE: a rebalancing group may briefly list nobody on Apache Kafka while its last member leaves, and that
# must not turn presence off for good.
_LIVE_STATES = frozenset({ConsumerGroupState.STABLE})


@dataclass(frozen=True)
class Measurement:
    """One published state of the monitor; replaced whole, never mutated, so readers need no lock."""

    lag: Mapping[GroupId, int] = field(default_factory=lambda: MappingProxyType({}))
    absent: frozenset[GroupId] = frozenset()
    started_at: float = 0.0  # time.monotonic() when the lag measurement began
    # Groups of apps with group_by: committed offset per (topic, partition) of the group topic (holders.py).
    committed: Committed = field(default_factory=lambda: MappingProxyType({}))


def measure_lag(
    admin: AdminClient,
    reader: Consumer,
    prefix: str,
    app: str,
    group: str,
    metadata: ClusterMetadata | None = None,
) -> int | None:
    """The group's unconfirmed count over its group topic and the band topics that exist; None when the group
    topic does not exist. ``metadata``: the cluster's topics, fetched once per refresh for every group."""
    from confluent_kafka import ConsumerGroupTopicPartitions

    if metadata is None:
        metadata = reader.list_topics(timeout=5)
    partitions: list[TopicPartition] = []
    for topic in wire.band_topics(prefix, app, group):
        info = metadata.topics.get(topic)
        if info is None or info.error is not None:
            if topic == wire.group_topic(prefix, app, group):
                return None
            continue
        partitions.extend(TopicPartition(topic, p) for p in info.partitions)
    request = ConsumerGroupTopicPartitions(wire.consumer_group_id(prefix, app, group), partitions)
    future = admin.list_consumer_group_offsets([request])[request.group_id]
    committed = {(tp.topic, tp.partition): tp.offset for tp in future.result(timeout=5).topic_partitions}
    lag = 0
    for topic in {tp.topic for tp in partitions}:
        own = [tp for tp in partitions if tp.topic == topic]
        ends = end_offsets(reader, own)
        for tp in own:
            start = committed.get((topic, tp.partition), -1)
            if start < 0:
                start, _ = reader.get_watermark_offsets(tp, timeout=5)
            lag += max(0, ends[tp.partition] - start)
    return lag


def measure_committed(
    admin: AdminClient, prefix: str, app: str, group: str, metadata: ClusterMetadata
) -> dict[tuple[str, int], int] | None:
    """The group's committed offset per partition of its group topic (-1: none committed); None when the topic
    does not exist. Message groups are refused with priority bands, so the group topic is all there is."""
    from confluent_kafka import ConsumerGroupTopicPartitions

    topic = wire.group_topic(prefix, app, group)
    info = metadata.topics.get(topic)
    if info is None or info.error is not None:
        return None
    request = ConsumerGroupTopicPartitions(
        wire.consumer_group_id(prefix, app, group), [TopicPartition(topic, p) for p in info.partitions]
    )
    future = admin.list_consumer_group_offsets([request])[request.group_id]
    return {(tp.topic, tp.partition): tp.offset for tp in future.result(timeout=5).topic_partitions}


def measure_presence(
    admin: AdminClient, prefix: str, groups: Iterable[GroupId]
) -> dict[GroupId, bool | None]:
    """Per group: True when its consumer group has live members, False when it has none, None when the broker
    answered a live state without listing members (membership not reported). A group the call failed for is
    left out (the caller keeps what it knew)."""
    by_id = {wire.consumer_group_id(prefix, app, group): (app, group) for app, group in groups}
    if not by_id:
        return {}
    found: dict[GroupId, bool | None] = {}
    futures = admin.describe_consumer_groups(list(by_id), request_timeout=5)
    for group_id, future in futures.items():
        try:
            description = future.result(timeout=5)
        except Exception as exc:  # GROUP_ID_NOT_FOUND is an absent group; anything else: unknown this time
            if "GROUP_ID_NOT_FOUND" in str(exc):
                found[by_id[group_id]] = False
            else:
                log.warning(
                    "presence refresh failed", extra={"fields": {"group": group_id, "error": str(exc)}}
                )
            continue
        if description.members:
            found[by_id[group_id]] = True
        elif description.state in _LIVE_STATES:
            found[by_id[group_id]] = None
        else:
            found[by_id[group_id]] = False
    return found


class CapacityMonitor:
    def __init__(
        self,
        settings: Settings,
        interval: float,
        metrics: RouterMetrics | None = None,
        presence_interval: float = 2.0,
    ) -> None:
        """``interval``: seconds between lag measurements; ``presence_interval``: between presence measurements
        (0 turns presence off: every group counts as present)."""
        self.settings = settings
        self.interval = interval
        self.presence_interval = presence_interval
        self.metrics = metrics
        self._groups: list[GroupId] = []
        self._holding: list[GroupId] = []  # groups whose committed offsets release message groups
        self._presence_groups: list[GroupId] = []
        self._measurement = Measurement()
        self._limits: dict[tuple[str, str], int] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lag_due = 0.0
        # the broker lists no members of live groups: presence cannot be measured, every group counts as present
        self.membership_unreported = False
        self._presence_measured = False  # the first measurement is news of every group, not of changes

    def watch(self, config: Config) -> None:
        with self._lock:
            self._groups = groups_needing_capacity(config)
            self._holding = groups_holding(config)
            self._presence_groups = groups_needing_presence(config) if self.presence_interval > 0 else []
        self._lag_due = 0.0  # new groups: measure their lag at the next turn
        self._publish_limits(group_limits(config))

    def _publish_limits(self, limits: dict[tuple[str, str], int]) -> None:
        """The limits of the config in force as gauges; a group removed (or whose limit went) loses its series,
        so that an alert comparing lag with the limit does not hold on to a group that no longer has one."""
        if self.metrics is None:
            return
        for app, group in self._limits.keys() - limits.keys():
            self.metrics.group_max_unconfirmed.remove(app, group)
        for (app, group), limit in limits.items():
            self.metrics.group_max_unconfirmed.labels(app, group).set(limit)
        self._limits = limits

    def start(self) -> None:
        """Measure once now (the first routed message already sees real capacity and presence), then refresh in
        the background while some group's lag or presence matters. Idempotent."""
        if (self._groups or self._holding or self._presence_groups) and self._thread is None:
            self._measure_once()
            self._thread = threading.Thread(target=self._run, name="capacity", daemon=True)
            self._thread.start()

    def snapshot(self) -> Mapping[GroupId, int]:
        """The measured lag (a plain mapping, for explain and the tests)."""
        return self._measurement.lag

    def measurement(self) -> Measurement:
        return self._measurement  # replaced whole, never mutated: safe to read without the lock

    def refresh(self, admin: AdminClient, reader: Consumer) -> None:
        """Measure lag and presence now."""
        self._refresh_lag(admin, reader)
        self._refresh_presence(admin)

    def _refresh_lag(self, admin: AdminClient, reader: Consumer) -> None:
        with self._lock:
            groups = list(self._groups)
            holding = list(self._holding)
        started = time.monotonic()
        self._lag_due = started + self.interval
        before = self._measurement
        fresh: Lag = {}
        metadata: ClusterMetadata | None = None
        for app, group in groups:
            try:
                if metadata is None:
                    metadata = reader.list_topics(timeout=5)
                lag = measure_lag(admin, reader, self.settings.topic_prefix, app, group, metadata)
            except Exception as exc:  # a slow admin call must not take routing down; keep the last figure
                log.warning(
                    "lag refresh failed", extra={"fields": {"app": app, "group": group, "error": str(exc)}}
                )
                lag = before.lag.get((app, group))
            if lag is not None:
                fresh[(app, group)] = lag
                if self.metrics is not None:
                    self.metrics.group_lag.labels(app, group).set(lag)
        # Groups no longer measured (removed, or their limits went) lose their series: no stale lag stays.
        if self.metrics is not None:
            for app, group in before.lag.keys() - fresh.keys():
                self.metrics.group_lag.remove(app, group)
        committed: dict[GroupId, Mapping[tuple[str, int], int]] = {}
        for app, group in holding:
            offsets: Mapping[tuple[str, int], int] | None
            try:
                if metadata is None:
                    metadata = reader.list_topics(timeout=5)
                offsets = measure_committed(admin, self.settings.topic_prefix, app, group, metadata)
            except Exception as exc:  # keep the last figure: an older commit releases nothing early
                log.warning(
                    "commit refresh failed", extra={"fields": {"app": app, "group": group, "error": str(exc)}}
                )
                offsets = before.committed.get((app, group))
            if offsets is not None:
                committed[(app, group)] = offsets
        # Both refreshes run on one thread at a time (the monitor's, or the caller's before it starts), so the
        # presence published last is still this one.
        self._measurement = Measurement(
            MappingProxyType(fresh), self._measurement.absent, started, MappingProxyType(committed)
        )

    def _refresh_presence(self, admin: AdminClient) -> None:
        with self._lock:
            groups = list(self._presence_groups)
        if self.membership_unreported or not groups:
            if self._measurement.absent:
                current = self._measurement
                self._measurement = Measurement(
                    current.lag, frozenset(), current.started_at, current.committed
                )
            return
        before = self._measurement.absent
        try:
            found = measure_presence(admin, self.settings.topic_prefix, groups)
        except Exception as exc:  # keep what was known: a failed refresh is no news about the consumers
            log.warning("presence refresh failed", extra={"fields": {"error": str(exc)}})
            return
        if any(present is None for present in found.values()):
            self.membership_unreported = True
            log.warning(
                "the broker lists no members of live consumer groups: presence cannot be measured, every group "
                "counts as present (presence: required has no effect on this cluster)",
                extra={"fields": {"groups": sorted(f"{a}/{g}" for (a, g), p in found.items() if p is None)}},
            )
            absent: frozenset[GroupId] = frozenset()
        else:
            # a group the call failed for keeps what was known of it (a new one counts as present)
            absent = frozenset(k for k in groups if (found[k] is False if k in found else k in before))
        if self.metrics is not None:
            for app, group in groups:
                self.metrics.group_present.labels(app, group).set(0 if (app, group) in absent else 1)
        if not self._presence_measured:  # before the first measurement every group counted as present
            self._presence_measured = True
            log.info(
                "consumer presence measured",
                extra={
                    "fields": {
                        "attached": sorted(f"{a}/{g}" for a, g in set(groups) - absent),
                        "absent": sorted(f"{a}/{g}" for a, g in absent),
                    }
                },
            )
        elif absent != before:
            log.info(
                "consumer presence changed",
                extra={
                    "fields": {
                        "attached": sorted(f"{a}/{g}" for a, g in before - absent),
                        "left": sorted(f"{a}/{g}" for a, g in absent - before),
                    }
                },
            )
        current = self._measurement
        self._measurement = Measurement(current.lag, absent, current.started_at, current.committed)

    def _measure_once(self) -> None:
        reader = Consumer(
            self.settings.client_config({"group.id": "subroute-capacity", "enable.auto.commit": False})
        )
        try:
            self.refresh(admin_client(self.settings), reader)
        finally:
            reader.close()

    def _run(self) -> None:
        admin = admin_client(self.settings)
        reader = Consumer(
            self.settings.client_config({"group.id": "subroute-capacity", "enable.auto.commit": False})
        )
        try:
            while not self._stop.is_set():
                measuring = self._groups or self._holding
                if measuring and time.monotonic() >= self._lag_due:
                    self._refresh_lag(admin, reader)
                if self._presence_groups:
                    self._refresh_presence(admin)
                waits = [self.interval]
                if self._presence_groups:
                    waits.append(self.presence_interval)
                if measuring:
                    waits.append(max(0.05, self._lag_due - time.monotonic()))
                self._stop.wait(min(waits))
        finally:
            reader.close()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
