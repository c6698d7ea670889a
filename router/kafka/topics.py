"""The topics a config needs: per app its pending and dead-letter topics, and per group its group topic (or its
ten priority-band topics). One function, used by ``config apply`` (which creates them before any worker runs),
the worker (on every config change) and the consumer client, so they never disagree.

Sizes: an app's ``partitions``, else as many partitions as its largest existing input. Retention: pending and
dead-letter topics hold records that nobody has consumed yet, so they keep them for ``parked_retention_ms``
(unlimited, -1, by default) instead of the broker's default of seven days; group topics keep the broker's
default. Topics that exist already are left as they are.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from subroute import names
from subroute.config.model import Config
from subroute.kafka.io import AdminClient, TopicSpec, ensure_topics, existing_topics
from subroute.routing import priority
from subroute.topic_patterns import input_matches

UNLIMITED = -1


def parked_topic_config(retention_ms: int = UNLIMITED) -> Mapping[str, str]:
    """Settings of pending and dead-letter topics: kept for ``retention_ms`` (-1: forever), never by size."""
    return {"retention.ms": str(retention_ms), "retention.bytes": str(UNLIMITED)}


def group_topics(config: Config, prefix: str, app: str, group: str) -> list[str]:
    """The topics one group reads: its group topic, or its band topics when the app sets ``priority``."""
    if config.apps[app].priority is not None:
        return priority.band_topics(prefix, app, group)
    return [names.group_topic(prefix, app, group)]


def app_topics(
    config: Config,
    prefix: str,
    partitions_of: Callable[[Sequence[str]], int],
    parked_retention_ms: int = UNLIMITED,
) -> list[TopicSpec]:
    """Group, pending and dead-letter topics of every app of ``config``, sized like the app's largest input."""
    parked = parked_topic_config(parked_retention_ms)
    specs: list[TopicSpec] = []
    for app in config.apps.values():
        count = app.partitions or partitions_of(app.inputs)
        specs.append(TopicSpec(names.pending_topic(prefix, app.name), count, parked))
        specs.append(TopicSpec(names.dlq_topic(prefix, app.name), count, parked))
        for group in config.groups_of(app.name):
            specs.extend(
                TopicSpec(topic, count) for topic in group_topics(config, prefix, app.name, group.name)
            )
    return specs


def largest_input(
    inputs: Sequence[str], existing: Mapping[str, int], matches: Callable[[str, str], bool]
) -> int:
    """Partitions of the largest existing topic that ``inputs`` select; 1 when none exists yet."""
    counts = [count for topic, count in existing.items() if any(matches(i, topic) for i in inputs)]
    return max(counts, default=1)


def ensure_app_topics(
    admin: AdminClient, config: Config, prefix: str, parked_retention_ms: int = UNLIMITED
) -> None:
    """Create the topics ``config`` needs that do not exist yet, sized from the inputs that exist now."""

    def partitions_of(inputs: Sequence[str]) -> int:
        return largest_input(inputs, existing_topics(admin), input_matches)

    ensure_topics(admin, app_topics(config, prefix, partitions_of, parked_retention_ms))
