"""Consumer groups seen from outside (``subroute status``): who is in a group (Admin describe_consumer_groups),
what it committed (Admin list_consumer_group_offsets, with each commit's metadata), and where topics end."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from confluent_kafka import ConsumerGroupTopicPartitions, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from subroute.kafka.clients import reader, watermarks
from subroute.ops.settings import Settings

Partition = tuple[str, int]


@dataclass(frozen=True)
class Member:
    member_id: str
    client_id: str
    host: str
    partitions: tuple[Partition, ...]  # its assignment


@dataclass(frozen=True)
class GroupDescription:
    group_id: str
    state: str  # stable, empty, preparing_rebalance, ..., dead (unknown to the broker)
    members: tuple[Member, ...]


@dataclass(frozen=True)
class Commit:
    offset: int
    metadata: str | None


def describe_groups(
    admin: AdminClient, group_ids: Sequence[str], timeout: float = 10.0
) -> dict[str, GroupDescription]:
    """Live members of each group. A group the broker does not know has state ``dead`` and no members."""
    if not group_ids:
        return {}
    futures = admin.describe_consumer_groups(list(group_ids), request_timeout=timeout)
    described: dict[str, GroupDescription] = {}
    for group_id, future in futures.items():
        try:
            description = future.result(timeout=timeout)
        except KafkaException as exc:
            if (
                exc.args
                and isinstance(exc.args[0], KafkaError)
                and exc.args[0].code() == KafkaError.GROUP_ID_NOT_FOUND
            ):
                described[group_id] = GroupDescription(group_id, "dead", ())
                continue
            raise
        members = tuple(
            Member(
                m.member_id,
                m.client_id,
                m.host,
                tuple(
                    (tp.topic, tp.partition)
                    for tp in (m.assignment.topic_partitions if m.assignment is not None else [])
                ),
            )
            for m in description.members
        )
        state = getattr(description.state, "name", str(description.state)).lower()
        described[group_id] = GroupDescription(group_id, state, members)
    return described


def committed_offsets(admin: AdminClient, group_id: str, timeout: float = 10.0) -> dict[Partition, Commit]:
    """Every offset the group has committed, with the commit's metadata."""
    request = ConsumerGroupTopicPartitions(group_id)
    future = admin.list_consumer_group_offsets([request], request_timeout=timeout)[group_id]
    result = future.result(timeout=timeout)
    return {
        (tp.topic, tp.partition): Commit(tp.offset, getattr(tp, "metadata", None) or None)
        for tp in result.topic_partitions or []
        if tp.offset >= 0
    }


def topic_offsets(
    settings: Settings, topics: Iterable[str], timeout: float = 10.0
) -> dict[Partition, tuple[int, int]]:
    """(log start, end) of every partition of the topics that exist; the end is the high watermark fetch
    responses report (``kafka.clients.watermarks``)."""
    consumer = reader(settings, "subroute-status")
    try:
        metadata = consumer.list_topics(timeout=timeout)
        partitions = [
            TopicPartition(topic, p)
            for topic in dict.fromkeys(topics)
            if (info := metadata.topics.get(topic)) is not None and info.error is None
            for p in info.partitions
        ]
        return watermarks(consumer, partitions) if partitions else {}
    finally:
        consumer.close()
