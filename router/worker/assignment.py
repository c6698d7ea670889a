"""Which partitions the worker holds, which it has paused (parked pending partitions, partitions waiting for a
config version), and what it subscribes to. What it reads of a partition's commit beyond its version (a pending
partition's sweep mark) it hands to ``on_assigned``.

The callbacks run inside the consumer's poll, on the poll-loop thread; so does everything else here.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence

from confluent_kafka import Consumer, KafkaException, TopicPartition

from subroute import wire
from subroute.config.model import Config
from subroute.ops.metrics import RouterMetrics

log = logging.getLogger(__name__)

Partition = tuple[str, int]


def subscription_topics(config: Config, prefix: str) -> tuple[str, ...]:
    """Every app's inputs (names and ``^`` regexes) and its pending topic."""
    topics: set[str] = set()
    for app in config.apps.values():
        topics.update(app.inputs)
        topics.add(wire.pending_topic(prefix, app.name))
    return tuple(sorted(topics))


def partition_names(partitions: Sequence[TopicPartition]) -> list[str]:
    return [f"{p.topic}/{p.partition}" for p in partitions]


class Assignment:
    def __init__(
        self,
        metrics: RouterMetrics,
        on_change: Callable[[], None] | None = None,
        before_revoke: Callable[[], None] | None = None,
        on_assigned: Callable[[list[TopicPartition]], None] | None = None,
        on_revoked: Callable[[set[Partition]], None] | None = None,
        on_added: Callable[[], None] | None = None,
    ) -> None:
        self.metrics = metrics
        self.on_change = on_change  # after every assignment change
        # when partitions were added, before any of them is read (the worker reads back its message groups)
        self.on_added = on_added
        self.before_revoke = (
            before_revoke  # the worker commits what it routed while the partitions are its own
        )
        # the partitions assigned, with their commits as read (none when they could not be read), and those
        # revoked: for what the worker keeps per partition
        self.on_assigned = on_assigned
        self.on_revoked = on_revoked
        self.assigned: set[Partition] = set()
        # The group has given this member its share since it (re)joined, possibly none: with more workers than
        # partitions some get nothing, and an empty ``assigned`` then means idle, not stuck joining.
        self.joined = False
        self.paused: set[Partition] = set()  # parked pending partitions (worker/pending.py)
        self.subscribed: tuple[str, ...] = ()
        self.version = 0  # the config version in force (the worker sets it when it takes a table)
        # partition -> the config version it was last routed under, newer than ours: not read until we have it
        self.gated: dict[Partition, int] = {}
        self.gated_at = 0.0

    def follow(self, consumer: Consumer | None, config: Config, prefix: str) -> None:
        """Subscribe to what ``config`` reads (when that changed)."""
        wanted = subscription_topics(config, prefix)
        if wanted != self.subscribed and consumer is not None:
            if wanted:
                consumer.subscribe(list(wanted), on_assign=self.on_assign, on_revoke=self.on_revoke)
            else:
                consumer.unsubscribe()
                self.joined = False
            self.subscribed = wanted

    def resume(self, consumer: Consumer, partitions: Sequence[Partition]) -> None:
        """Resume these parked partitions (a pass reads them again: worker/pending.py)."""
        if partitions:
            consumer.resume([TopicPartition(t, p) for t, p in partitions])
            self.paused.difference_update(partitions)

    def on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        # Assign here rather than after the callback, and pause at once the partitions to hold back.
        committed = self._committed(consumer, partitions)
        if self.on_assigned is not None:
            self.on_assigned(committed)
        newer = self._newer_versions(committed)
        consumer.incremental_assign(partitions)
        if newer:
            consumer.pause([TopicPartition(t, p) for t, p in newer])
            self.gated.update(newer)
            self.gated_at = time.monotonic()
            log.info(
                "partitions held until the config version they were routed under is in force",
                extra={
                    "fields": {
                        "held": sorted(f"{t}/{p}@{v}" for (t, p), v in newer.items()),
                        "version": self.version,
                    }
                },
            )
        self.assigned.update((p.topic, p.partition) for p in partitions)
        # librdkafka calls the assign callback at the end of every rebalance, with an empty list for a member
        # given nothing: that is how an idle worker knows it is in the group.
        self.joined = True
        self.metrics.assigned_partitions.set(len(self.assigned))
        self.metrics.rebalances.inc()
        log.info(
            "partitions assigned",
            extra={"fields": {"added": partition_names(partitions), "now": len(self.assigned)}},
        )
        if partitions and self.on_added is not None:
            self.on_added()
        if self.on_change is not None:
            self.on_change()

    def on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        log.info("partitions revoked", extra={"fields": {"removed": partition_names(partitions)}})
        if self.before_revoke is not None:
            self.before_revoke()
        gone = {(p.topic, p.partition) for p in partitions}
        self.assigned -= gone
        self.paused -= gone
        for partition in gone:
            self.gated.pop(partition, None)
        if self.on_revoked is not None:
            self.on_revoked(gone)
        if not self.assigned:  # everything taken back (a lost membership too): idle only once assigned again
            self.joined = False
        self.metrics.assigned_partitions.set(len(self.assigned))
        if self.on_change is not None:
            self.on_change()

    def park(self, consumer: Consumer, partition: Partition, offset: int) -> None:
        """Stop reading a pending partition at ``offset`` until ``resume``."""
        consumer.seek(TopicPartition(partition[0], partition[1], offset))
        consumer.pause([TopicPartition(*partition)])
        self.paused.add(partition)

    @staticmethod
    def _committed(consumer: Consumer, partitions: list[TopicPartition]) -> list[TopicPartition]:
        """The partitions' commits, with their metadata; none when they cannot be read."""
        if not partitions:
            return []
        try:
            return list(consumer.committed(partitions, timeout=10))
        except KafkaException as exc:  # cannot tell: route them, as before gating existed, and say so
            log.warning(
                "could not read the partitions' commits; not holding any, and no sweep mark known",
                extra={"fields": {"error": str(exc)}},
            )
            return []

    def _newer_versions(self, committed: list[TopicPartition]) -> dict[Partition, int]:
        """The partitions last routed under a config version newer than ours (from their commit metadata)."""
        newer: dict[Partition, int] = {}
        for part in committed:
            version = wire.version_of(part.metadata)
            if version is not None and version > self.version:
                newer[(part.topic, part.partition)] = version
        return newer

    def release(self, consumer: Consumer | None, version: int, settled_at: float) -> None:
        """Resume the gated partitions ``releasable`` names (``settled_at``: the config store's)."""
        self.version = version
        if not self.gated or consumer is None:
            return
        ready, missing = releasable(self.gated, version, settled_at > self.gated_at)
        if missing:
            log.warning(
                "config versions partitions were routed under are not on the config topic; routing them under ours",
                extra={"fields": {"version": version, "held": sorted(f"{t}/{p}" for t, p in missing)}},
            )
        if ready:
            consumer.resume([TopicPartition(t, p) for t, p in ready])
            for partition in ready:
                del self.gated[partition]


def releasable(
    gated: dict[Partition, int], version: int, settled_since_gated: bool
) -> tuple[list[Partition], list[Partition]]:
    """Which held partitions may be routed now, and which of those were waiting for a version that is not coming.

    A partition waits until the version in force reaches the one it was last routed under. Once the config
    store has read the topic to its end and published it all after the partitions were held, a version still
    missing was never on this topic (it was recreated, or the commit came from elsewhere): waiting longer would
    hold the partition forever, so it is routed under the version in force.
    """
    ready = [p for p, wanted in gated.items() if wanted <= version]
    if not settled_since_gated:
        return ready, []
    missing = [p for p in gated if p not in ready]
    return ready + missing, missing
