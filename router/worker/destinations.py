"""The topics the worker routes to: created before a config version is taken, created again when one goes.

Runs on the poll-loop thread. A version whose topics cannot be created (the cluster refuses the partition count,
authorization, a broker down) is not taken: the previous version stays in force and the creation is tried again
every ``RETRY_SECONDS``, instead of the worker crashing on it, and every worker after it.
"""

from __future__ import annotations

import logging
import time

from subroute.config.model import Config
from subroute.config.topics import TopicPolicy, app_topics, sized_by
from subroute.kafka.clients import AdminClient, KafkaException, ensure_topics, existing_topics
from subroute.ops.metrics import RouterMetrics

log = logging.getLogger(__name__)

RETRY_SECONDS = 10.0


# per app: name, inputs, partitions, whether it has priority bands, its groups
TopicLayout = tuple[tuple[str, tuple[str, ...], int | None, bool, tuple[str, ...]], ...]


def topic_layout(config: Config) -> TopicLayout:
    """What decides the topics ``config.topics.app_topics`` asks for: apps, their inputs and sizes, groups, bands.
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


class Destinations:
    def __init__(self, admin: AdminClient, prefix: str, policy: TopicPolicy, metrics: RouterMetrics) -> None:
        self._admin: AdminClient | None = admin
        self._prefix = prefix
        self._policy = policy
        self._metrics = metrics
        self._ensured: TopicLayout | None = None  # the layout whose topics exist
        self._failed_at = float("-inf")

    def ready(self, config: Config) -> bool:
        """True once every topic ``config`` routes to exists (created here if need be)."""
        layout = topic_layout(config)
        if layout == self._ensured:
            return True
        if time.monotonic() - self._failed_at < RETRY_SECONDS:
            return False
        try:
            self.create(config)
        except (KafkaException, TimeoutError) as exc:
            self._failed_at = time.monotonic()
            self._metrics.topic_creation_failures.inc()
            log.error(
                "topics of a config version cannot be created; the version in force stays until they can",
                extra={"fields": {"version": config.version, "error": str(exc)}},
            )
            return False
        self._ensured = layout
        return True

    def create(self, config: Config) -> None:
        """Create the topics ``config`` needs that do not exist (again), with their layout, sized from the inputs
        that exist now."""
        if self._admin is None:
            raise RuntimeError("the worker's destinations are closed")
        sizes = sized_by(existing_topics(self._admin))
        created = ensure_topics(self._admin, app_topics(config, self._prefix, sizes, self._policy))
        if created:
            log.info("destination topics created", extra={"fields": {"topics": sorted(created)}})

    def close(self) -> None:
        """Let the admin client go (it has no close of its own): it is destroyed with its last reference, and
        keeps no connection to the cluster after the worker stops, even while the worker object lives on (its
        metrics read its gauges)."""
        self._admin = None
