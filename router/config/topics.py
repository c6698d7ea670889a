"""The topics a config needs, as plain specs (pure: kafka/clients.py creates them): per app its pending and
dead-letter topics, and per group its group topic (or its ten priority-band topics). One function, used by
``config apply`` and ``config topics`` (which create or list them before any worker runs) and the worker (on every
config change), so they never disagree.

Sizes: an app's ``partitions``, else as many partitions as its largest existing input. Retention: pending and
dead-letter topics hold records that nobody has consumed yet, so they keep them for ``parked_retention_ms``
(unlimited, -1, by default) instead of the broker's default of seven days; group topics keep the broker's
default unless ``group_retention_ms`` is set. Replication: the broker's default unless ``replication_factor``
is set (``TopicPolicy``, from the settings). Topics that exist already are left as they are.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from subroute import wire
from subroute.config.model import Config
from subroute.kafka.clients import TopicSpec
from subroute.ops.settings import Settings
from subroute.topic_patterns import input_matches

UNLIMITED = -1


@dataclass(frozen=True)
class TopicPolicy:
    """How the topics subroute creates are made (``Settings``: --replication-factor, --parked-retention-ms,
    --group-retention-ms)."""

    replication_factor: int = -1  # -1: the broker's default.replication.factor
    parked_retention_ms: int = UNLIMITED  # pending and dead-letter topics
    group_retention_ms: int | None = None  # group and band topics; None: the broker's default

    @classmethod
    def of(cls, settings: Settings) -> TopicPolicy:
        return cls(settings.replication_factor, settings.parked_retention_ms, settings.group_retention_ms)


def parked_topic_config(retention_ms: int = UNLIMITED) -> Mapping[str, str]:
    """Settings of pending and dead-letter topics: kept for ``retention_ms`` (-1: forever), never by size."""
    return {"retention.ms": str(retention_ms), "retention.bytes": str(UNLIMITED)}


def group_topics(config: Config, prefix: str, app: str, group: str) -> list[str]:
    """The topics one group reads: its group topic, or its band topics when the app sets ``priority``."""
    if config.apps[app].priority is not None:
        return wire.band_topics(prefix, app, group)
    return [wire.group_topic(prefix, app, group)]


def app_topics(
    config: Config,
    prefix: str,
    partitions_of: Callable[[Sequence[str]], int],
    policy: TopicPolicy = TopicPolicy(),
) -> list[TopicSpec]:
    """Group, pending and dead-letter topics of every app of ``config``, sized like the app's largest input."""
    parked = parked_topic_config(policy.parked_retention_ms)
    grouped = {} if policy.group_retention_ms is None else {"retention.ms": str(policy.group_retention_ms)}
    replicas = policy.replication_factor
    specs: list[TopicSpec] = []
    for app in config.apps.values():
        count = app.partitions or partitions_of(app.inputs)
        specs.append(TopicSpec(wire.pending_topic(prefix, app.name), count, parked, replicas))
        specs.append(TopicSpec(wire.dlq_topic(prefix, app.name), count, parked, replicas))
        for group in config.groups_of(app.name):
            specs.extend(
                TopicSpec(topic, count, grouped, replicas)
                for topic in group_topics(config, prefix, app.name, group.name)
            )
    return specs


def largest_input(inputs: Sequence[str], existing: Mapping[str, int]) -> int:
    """Partitions of the largest existing topic that ``inputs`` select; 1 when none exists yet."""
    counts = [count for topic, count in existing.items() if any(input_matches(i, topic) for i in inputs)]
    return max(counts, default=1)


def sized_by(existing: Mapping[str, int]) -> Callable[[Sequence[str]], int]:
    """``app_topics``'s ``partitions_of`` for the topics that exist now (topic -> partitions): an app's topics
    get as many partitions as its largest existing input."""
    return lambda inputs: largest_input(inputs, existing)


def kubernetes_name(topic: str) -> str:
    """A Kubernetes object name for ``topic``: lower case, ``_`` as ``-``, at most 253 characters, with a short
    hash when that changed anything (two topics must not share a name)."""
    name = topic.lower().replace("_", "-").strip(".-")[:240] or "topic"
    if name != topic:
        name = f"{name}-{_stable_digest(topic)}"
    return name


def _stable_digest(text: str) -> str:
    return hashlib.blake2b(text.encode(), digest_size=4).hexdigest()


def topic_resources(specs: Sequence[TopicSpec], cluster: str) -> list[dict[str, object]]:
    """Strimzi ``KafkaTopic`` resources for ``specs``, for clusters where clients may not create topics."""
    resources: list[dict[str, object]] = []
    for spec in specs:
        body: dict[str, object] = {"topicName": spec.name, "partitions": spec.partitions}
        if spec.replication_factor > 0:
            body["replicas"] = spec.replication_factor
        if spec.config:
            body["config"] = dict(spec.config)
        resources.append(
            {
                "apiVersion": "kafka.strimzi.io/v1beta2",
                "kind": "KafkaTopic",
                "metadata": {"name": kubernetes_name(spec.name), "labels": {"strimzi.io/cluster": cluster}},
                "spec": body,
            }
        )
    return resources
