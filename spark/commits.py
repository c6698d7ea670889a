"""Confirms from Spark: commit the offsets the job has landed to Kafka consumer groups.

A group topic ``<prefix>.<app>.<group>`` is confirmed under that group's own consumer group
(``wire.consumer_group_id``): its lag is what the router counts as the group's unconfirmed messages, so
Spark reading a group topic *is* that group's consumer. Any other topic (pending, dead letters, topics
outside the prefix) is committed under the fallback group, ``<prefix>.spark`` unless ``--group-id`` names
one; ``--group-id`` given explicitly sends every commit there instead (monitoring only: the router then
does not see Spark's progress).

Commits go through ``AdminClient.alter_consumer_group_offsets``: no group join (which some brokers delay by
half a session timeout) and no member that could be fenced. Kafka refuses such commits while the group
has live members, so do not run other consumers in a group that Spark confirms for.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast

from confluent_kafka import ConsumerGroupTopicPartitions, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from subroute import wire

_BAND_SUFFIXES = frozenset(f"p{band}" for band in range(1, 10))


def split_group_topic(prefix: str, topic: str) -> tuple[str, str] | None:
    """(app, group) when ``topic`` is a group topic under ``prefix`` or one of its priority-band topics
    (``.p1`` to ``.p9``: the group's consumer group confirms every band); None for pending, dlq and others."""
    head = f"{prefix}."
    if not topic.startswith(head):
        return None
    parts = topic[len(head) :].split(".")
    if len(parts) == 3 and parts[2] in _BAND_SUFFIXES:
        parts = parts[:2]
    if len(parts) != 2 or not all(wire.NAME_PATTERN.match(p) for p in parts):
        return None
    app, group = parts
    if group in wire.RESERVED_GROUP_NAMES:
        return None
    return app, group


@dataclass(frozen=True)
class CommitPolicy:
    """Which consumer group confirms which topic."""

    prefix: str
    group_id: str | None = None  # one group for everything (no per-group confirms)
    enabled: bool = True

    @property
    def fallback_group(self) -> str:
        return self.group_id or f"{self.prefix}.spark"

    def group_for(self, topic: str) -> str:
        if self.group_id is not None:
            return self.group_id
        parsed = split_group_topic(self.prefix, topic)
        if parsed is None:
            return self.fallback_group
        return wire.consumer_group_id(self.prefix, *parsed)


def by_group(
    policy: CommitPolicy, next_offsets: Mapping[tuple[str, int], int]
) -> dict[str, list[TopicPartition]]:
    grouped: dict[str, list[TopicPartition]] = {}
    for (topic, partition), offset in sorted(next_offsets.items()):
        grouped.setdefault(policy.group_for(topic), []).append(TopicPartition(topic, partition, offset))
    return grouped


def commit(
    admin: AdminClient,
    policy: CommitPolicy,
    next_offsets: Mapping[tuple[str, int], int],
    timeout: float = 30.0,
) -> dict[str, list[TopicPartition]]:
    """Commit ``next_offsets`` (the next offset to read, i.e. last processed + 1); return what was committed."""
    if not policy.enabled or not next_offsets:
        return {}
    grouped = by_group(policy, next_offsets)
    deadline = time.monotonic() + timeout
    # The admin API takes one group per request. A group's coordinator may be moving or still loading (a new
    # group, a broker just started): those answers are retried until the timeout, as a consumer's commit is.
    for group, partitions in grouped.items():
        while True:
            error = _alter(admin, group, partitions, timeout)
            if error is None:
                break
            if error.code() not in _COORDINATOR_BUSY or time.monotonic() > deadline:
                raise KafkaException(error)
            time.sleep(0.2)
    return grouped


_COORDINATOR_BUSY = frozenset(
    {
        KafkaError.NOT_COORDINATOR,
        KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
        KafkaError.COORDINATOR_NOT_AVAILABLE,
    }
)


def _alter(
    admin: AdminClient, group: str, partitions: list[TopicPartition], timeout: float
) -> KafkaError | None:
    """One commit request for ``group``: None when every partition was committed, else the first error."""
    futures: dict[Any, Any] = admin.alter_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group, partitions)], request_timeout=timeout
    )
    for future in futures.values():
        try:
            result = future.result(timeout=timeout)
        except KafkaException as exc:
            return cast(KafkaError, exc.args[0])
        failed = [tp for tp in result.topic_partitions if tp.error is not None]
        if failed:
            return cast(KafkaError, failed[0].error)
    return None
