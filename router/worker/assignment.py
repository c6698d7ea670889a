"""Which partitions the worker holds, which pending partitions it has paused, and what it subscribes to.

The callbacks run inside the consumer's poll, on the poll-loop thread; so does everything else here.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence

from confluent_kafka import Consumer, TopicPartition

from router import names
from router.config.model import Config
from router.ops.metrics import RouterMetrics

log = logging.getLogger(__name__)

Partition = tuple[str, int]


def subscription_topics(config: Config, prefix: str) -> tuple[str, ...]:
    """Every app's inputs (names and ``^`` regexes) and its pending topic."""
    topics: set[str] = set()
    for app in config.apps.values():
        topics.update(app.inputs)
        topics.add(names.pending_topic(prefix, app.name))
    return tuple(sorted(topics))


def topic_layout(config: Config) -> object:
    """What decides the topics ``kafka.topics.app_topics`` asks for: apps, their inputs and sizes, groups, bands.
    Topics are ensured again only when this changes, not on every subscription change."""
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


def partition_names(partitions: Sequence[TopicPartition]) -> list[str]:
    return [f"{p.topic}/{p.partition}" for p in partitions]


class Assignment:
    def __init__(self, metrics: RouterMetrics, on_change: Callable[[], None]) -> None:
        self.metrics = metrics
        self.on_change = on_change  # after every assignment change (the worker updates its readiness)
        self.assigned: set[Partition] = set()
        self.paused: set[Partition] = set()  # pending partitions waiting for a newer config version
        self.last_resume = time.monotonic()
        self.subscribed: tuple[str, ...] = ()

    def follow(self, consumer: Consumer | None, config: Config, prefix: str) -> None:
        """Subscribe to what ``config`` reads (when that changed), and give parked records a new look."""
        wanted = subscription_topics(config, prefix)
        if wanted != self.subscribed and consumer is not None:
            if wanted:
                consumer.subscribe(list(wanted), on_assign=self.on_assign, on_revoke=self.on_revoke)
            else:
                consumer.unsubscribe()
            self.subscribed = wanted
        self.resume_parked(consumer)

    def sweep(self, consumer: Consumer, every: float) -> None:
        """Resume parked partitions every ``every`` seconds, so that expired records leave for the dead letters."""
        if self.paused and time.monotonic() - self.last_resume > every:
            self.resume_parked(consumer)

    def on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self.assigned.update((p.topic, p.partition) for p in partitions)
        self.metrics.assigned_partitions.set(len(self.assigned))
        self.metrics.rebalances.inc()
        log.info(
            "partitions assigned",
            extra={"fields": {"added": partition_names(partitions), "now": len(self.assigned)}},
        )
        self.on_change()

    def on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        log.info("partitions revoked", extra={"fields": {"removed": partition_names(partitions)}})
        gone = {(p.topic, p.partition) for p in partitions}
        self.assigned -= gone
        self.paused -= gone
        self.metrics.assigned_partitions.set(len(self.assigned))
        self.on_change()

    def park(self, consumer: Consumer, partition: Partition, offset: int) -> None:
        """Stop reading a pending partition at ``offset`` until ``resume_parked``."""
        consumer.seek(TopicPartition(partition[0], partition[1], offset))
        consumer.pause([TopicPartition(*partition)])
        self.paused.add(partition)

    def resume_parked(self, consumer: Consumer | None) -> None:
        if self.paused and consumer is not None:
            consumer.resume([TopicPartition(t, p) for t, p in self.paused])
            self.paused.clear()
        self.last_resume = time.monotonic()
