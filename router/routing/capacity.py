"""The capacity snapshot: each group's unconfirmed count (lag) on its group topic, refreshed in the background.

lag = end offset - committed offset of the group's consumer group, summed over the topic's partitions (a
partition with no commit counts from its start). End offsets are the high watermarks fetch responses report.
"""

from __future__ import annotations

import logging
import threading

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

from subroute import names
from subroute.config.model import Config
from subroute.kafka.io import admin_client, end_offsets
from subroute.ops.metrics import RouterMetrics
from subroute.ops.settings import Settings

log = logging.getLogger(__name__)

Lag = dict[tuple[str, str], int]


def groups_needing_capacity(config: Config) -> list[tuple[str, str]]:
    """Groups whose lag can change a decision: some subscription of the app has a max_unconfirmed."""
    wanted: list[tuple[str, str]] = []
    for app in config.apps.values():
        groups = config.groups_of(app.name)
        if any(s.max_unconfirmed is not None for g in groups for s in g.subscriptions):
            wanted.extend((app.name, g.name) for g in groups)
    return wanted


def group_limits(config: Config) -> dict[tuple[str, str], int]:
    """Each group's smallest max_unconfirmed (groups whose subscriptions set none are left out): the lag at
    which the first of its subscriptions stops taking records while another candidate has room."""
    limits: dict[tuple[str, str], int] = {}
    for app in config.apps.values():
        for group in config.groups_of(app.name):
            given = [s.max_unconfirmed for s in group.subscriptions if s.max_unconfirmed is not None]
            if given:
                limits[(app.name, group.name)] = min(given)
    return limits


def measure_lag(admin: AdminClient, reader: Consumer, prefix: str, app: str, group: str) -> int | None:
    from confluent_kafka import ConsumerGroupTopicPartitions

    topic = names.group_topic(prefix, app, group)
    metadata = reader.list_topics(topic, timeout=5)
    info = metadata.topics.get(topic)
    if info is None or info.error is not None:
        return None
    partitions = [TopicPartition(topic, p) for p in info.partitions]
    request = ConsumerGroupTopicPartitions(names.consumer_group_id(prefix, app, group), partitions)
    future = admin.list_consumer_group_offsets([request])[request.group_id]
    committed = {tp.partition: tp.offset for tp in future.result(timeout=5).topic_partitions}
    ends = end_offsets(reader, partitions)
    lag = 0
    for tp in partitions:
        start = committed.get(tp.partition, -1)
        if start < 0:
            start, _ = reader.get_watermark_offsets(tp, timeout=5)
        lag += max(0, ends[tp.partition] - start)
    return lag


class CapacityMonitor:
    def __init__(self, settings: Settings, interval: float, metrics: RouterMetrics | None = None) -> None:
        self.settings = settings
        self.interval = interval
        self.metrics = metrics
        self._groups: list[tuple[str, str]] = []
        self._limits: dict[tuple[str, str], int] = {}
        self._lag: Lag = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def watch(self, config: Config) -> None:
        with self._lock:
            self._groups = groups_needing_capacity(config)
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
        """Measure once now (the first routed message already sees real capacity), then refresh in the
        background while some group's lag matters. Idempotent."""
        if self._groups and self._thread is None:
            self._measure_once()
            self._thread = threading.Thread(target=self._run, name="capacity", daemon=True)
            self._thread.start()

    def snapshot(self) -> Lag:
        return self._lag  # replaced whole, never mutated: safe to read without the lock

    def refresh(self, admin: AdminClient, reader: Consumer) -> None:
        with self._lock:
            groups = list(self._groups)
        fresh: Lag = {}
        for app, group in groups:
            try:
                lag = measure_lag(admin, reader, self.settings.topic_prefix, app, group)
            except Exception as exc:  # a slow admin call must not take routing down; keep the last figure
                log.warning(
                    "lag refresh failed", extra={"fields": {"app": app, "group": group, "error": str(exc)}}
                )
                lag = self._lag.get((app, group))
            if lag is not None:
                fresh[(app, group)] = lag
                if self.metrics is not None:
                    self.metrics.group_lag.labels(app, group).set(lag)
        # Groups no longer measured (removed, or their limits went) lose their series: no stale lag stays.
        if self.metrics is not None:
            for app, group in self._lag.keys() - fresh.keys():
                self.metrics.group_lag.remove(app, group)
        self._lag = fresh

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
                self.refresh(admin, reader)
                self._stop.wait(self.interval)
        finally:
            reader.close()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
