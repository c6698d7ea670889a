"""``subroute status``: per app and group, who is consuming (live members of the group's consumer group), how
much is unconfirmed (lag on the group topic and its priority bands .p1-.p9) against its limit
(``GroupConfig.max_unconfirmed``: the smallest of its subscriptions, the one limit routing holds the group to, as
the ``subroute_group_max_unconfirmed`` gauge); per app, the messages waiting on its pending topic by reason
(read past the router's position, routing/backlog.py) and its dead letters not redriven; per router worker,
the config version in force.

A worker's config version is read from its offset commits: each commit's metadata carries the version the
committed records were routed under (``wire.version_metadata``). A worker's version is the newest
one among the commits of the input partitions assigned to it (a partition idle since an older version keeps
that version's commit); ``None`` until it has committed (or on a broker that drops commit metadata).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import Any

from subroute import wire
from subroute.admin.redrive import waiting as dead_letters_waiting
from subroute.config.avro_schema import needs_schema_registry
from subroute.config.model import Config
from subroute.kafka import clients
from subroute.kafka.groups import (
    Commit,
    GroupDescription,
    Partition,
    committed_offsets,
    describe_groups,
    topic_offsets,
)
from subroute.kafka.scan import Scan
from subroute.ops.settings import Settings
from subroute.routing.backlog import DEFAULT_SOON_MS, Waiting, count
from subroute.routing.capacity import group_limits
from subroute.routing.explain import waiting_advice
from subroute.topic_patterns import input_matches
from subroute.wire import NO_CONSUMER

Offsets = Mapping[Partition, tuple[int, int]]  # (log start, end)

# Records read of each pending and dead-letter topic at most, by default (``--max-read``): past it a count is
# a floor, shown ``≥N``. About a second of reading (docs/runbook.md).
DEFAULT_MAX_READ = 100_000


def lag(topics: list[str], commits: Mapping[Partition, Commit], offsets: Offsets) -> int:
    """Records of ``topics`` past the group's commits (a partition without a commit counts from its start)."""
    total = 0
    for (topic, partition), (start, end) in offsets.items():
        if topic in topics:
            commit = commits.get((topic, partition))
            total += max(0, end - max(commit.offset if commit else start, start))
    return total


def build(
    config: Config,
    prefix: str,
    apps: list[str],
    groups: Mapping[str, GroupDescription],
    commits: Mapping[str, Mapping[Partition, Commit]],
    offsets: Offsets,
    inputs: Iterable[str] = (),
    waiting: Mapping[str, Waiting] | None = None,
    dead_letters: Mapping[str, tuple[int, bool]] | None = None,
    soon_ms: int = DEFAULT_SOON_MS,
) -> dict[str, Any]:
    """The status document from what Kafka said (pure: tested without a broker); ``inputs``: the input topics the
    apps read, whose lag behind the router's commits is shown whether or not a worker runs; ``waiting``: what
    waits on each app's pending topic (routing/backlog.py); ``dead_letters``: each app's dead letters not
    redriven, and whether that is all of them (``soon_ms``: what ``expiring`` looked ahead by)."""
    limits = group_limits(config)  # as the subroute_group_max_unconfirmed gauge and its alert
    app_rows = []
    for app in apps:
        group_rows = []
        for group in config.groups_of(app):
            group_id = wire.consumer_group_id(prefix, app, group.name)
            topics = wire.band_topics(prefix, app, group.name)
            description = groups.get(group_id, GroupDescription(group_id, "dead", ()))
            unconfirmed = lag(topics, commits.get(group_id, {}), offsets)
            limit = limits.get((app, group.name))
            group_rows.append(
                {
                    "group": group.name,
                    "consumer_group": group_id,
                    "state": description.state,
                    "members": len(description.members),
                    # as routing reads presence: None when the broker says the group is live but lists nobody
                    # (it does not report membership: Tansu)
                    "present": True
                    if description.members
                    else None
                    if description.state == "stable"
                    else False,
                    "clients": sorted({m.client_id for m in description.members}),
                    "lag": unconfirmed,
                    "max_unconfirmed": limit,
                    "full": limit is not None and unconfirmed >= limit,
                    "topics": [t for t in topics if any(t == p for p, _ in offsets)],
                }
            )
        counted = (waiting or {}).get(app, Waiting())
        letters, letters_exact = (dead_letters or {}).get(app, (0, True))
        absent = [str(row["group"]) for row in group_rows if row["present"] is False]
        waits_for_consumers = (
            config.apps[app].presence == "required" and counted.by_reason[NO_CONSUMER] > 0 and bool(absent)
        )
        app_rows.append(
            {
                "app": app,
                "presence": config.apps[app].presence,
                # messages on the pending topic not routed yet, each in one reason; a floor when not exact
                "waiting": counted.total,
                "waiting_by_reason": dict(counted.by_reason),
                "waiting_exact": counted.exact,
                # dead letters not redriven yet (dlq list's "waiting")
                "dead_letters": letters,
                "dead_letters_exact": letters_exact,
                "groups": group_rows,
                # what to do when records may be waiting for a consumer (as the worker warns, and explain says)
                "advice": waiting_advice(prefix, app, absent) if waits_for_consumers else None,
                # where body properties are read from (none: headers only), and whether the workers need the
                # Schema Registry for them (Avro in Confluent's wire format): while it cannot be read, the input
                # records of such an app wait on the input (the router's input lag), not on its pending topic
                "body_format": config.apps[app].format,
                "needs_schema_registry": needs_schema_registry(config.apps[app]),
            }
        )
    router_id = wire.worker_group_id(prefix)
    router = groups.get(router_id, GroupDescription(router_id, "dead", ()))
    router_commits = commits.get(router_id, {})
    workers = []
    for member in router.members:
        versions = sorted(
            {v for p in member.partitions if (v := wire.version_of(_metadata(router_commits, p))) is not None}
        )
        backlog = sum(  # input records not routed yet (the pending topics it also reads are counted per app)
            max(0, offsets[p][1] - (router_commits[p].offset if p in router_commits else offsets[p][0]))
            for p in member.partitions
            if p in offsets and not wire.app_of_pending(prefix, p[0])
        )
        workers.append(
            {
                "member_id": member.member_id,
                "client_id": member.client_id,
                "host": member.host,
                "partitions": len(member.partitions),
                "config_version": versions[-1] if versions else None,
                "config_versions": versions,
                "current": bool(versions) and versions[-1] >= config.version,
                "backlog": backlog,
            }
        )
    input_lag = {topic: lag([topic], router_commits, offsets) for topic in sorted(set(inputs))}
    return {
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "config_version": config.version,
        "config_topic": wire.config_topic(prefix),
        "expiring_within_ms": soon_ms,
        "router": {
            "consumer_group": router_id,
            "state": router.state,
            "workers": workers,
            # input records the router has not routed yet (past its commits), by topic: read from the commits,
            # so it shows while no worker runs, which is when it matters most
            "input_lag": input_lag,
        },
        "apps": app_rows,
    }


def _metadata(commits: Mapping[Partition, Commit], partition: Partition) -> str | None:
    commit = commits.get(partition)
    return commit.metadata if commit else None


def collect(
    settings: Settings,
    config: Config,
    apps: list[str],
    *,
    soon_ms: int = DEFAULT_SOON_MS,
    max_read: int | None = DEFAULT_MAX_READ,
) -> dict[str, Any]:
    """Ask Kafka (Admin: describe groups, committed offsets; a reader: where topics start and end; the pending
    and dead-letter topics read past the router's and the redrives' positions, at most ``max_read`` records
    each), then build."""
    prefix = settings.topic_prefix
    admin = clients.admin_client(settings)
    group_ids = [
        wire.consumer_group_id(prefix, app, group.name) for app in apps for group in config.groups_of(app)
    ]
    router_id = wire.worker_group_id(prefix)
    groups = describe_groups(admin, [*group_ids, router_id])
    commits = {group_id: committed_offsets(admin, group_id) for group_id in [*group_ids, router_id]}
    topics = [
        *(
            t
            for app in apps
            for group in config.groups_of(app)
            for t in wire.band_topics(prefix, app, group.name)
        ),
        *(wire.pending_topic(prefix, app) for app in apps),
        *(wire.dlq_topic(prefix, app) for app in apps),
    ]
    router_partitions = {p for member in groups[router_id].members for p in member.partitions}
    topics += sorted({topic for topic, _ in router_partitions})
    existing = clients.existing_topics(admin)
    inputs = sorted(
        {t for app in apps for entry in config.apps[app].inputs for t in existing if input_matches(entry, t)}
    )
    topics += inputs
    offsets = topic_offsets(settings, topics)
    now_ms = int(time.time() * 1000)
    waiting = _waiting(settings, config, apps, commits.get(router_id, {}), offsets, now_ms, soon_ms, max_read)
    dead_letters = {
        app: dead_letters_waiting(
            settings,
            app,
            {p: end for (t, p), (_, end) in offsets.items() if t == wire.dlq_topic(prefix, app)},
            max_read,
        )
        for app in apps
    }
    return build(
        config, prefix, apps, groups, commits, offsets, inputs, waiting, dead_letters, soon_ms=soon_ms
    )


def waiting_messages(settings: Settings, config: Config, apps: list[str]) -> dict[str, Waiting]:
    """What waits on each app's pending topic, in messages, read to the end: what ``status`` counts, unbounded."""
    admin = clients.admin_client(settings)
    router_commits = committed_offsets(admin, wire.worker_group_id(settings.topic_prefix))
    offsets = topic_offsets(settings, [wire.pending_topic(settings.topic_prefix, app) for app in apps])
    now_ms = int(time.time() * 1000)
    return _waiting(settings, config, apps, router_commits, offsets, now_ms, DEFAULT_SOON_MS, None)


def _waiting(
    settings: Settings,
    config: Config,
    apps: list[str],
    router_commits: Mapping[Partition, Commit],
    offsets: Offsets,
    now_ms: int,
    soon_ms: int,
    max_read: int | None,
) -> dict[str, Waiting]:
    """Each app's pending topic read from the router's position to its end, in one bounded read, counted."""
    app_of = {wire.pending_topic(settings.topic_prefix, app): app for app in apps}
    spans = {
        where: (max(commit.offset, start) if (commit := router_commits.get(where)) else start, end)
        for where, (start, end) in offsets.items()
        if where[0] in app_of
    }
    commits = {app: {p: c for (t, p), c in router_commits.items() if app_of.get(t) == app} for app in apps}
    waiting = {app: Waiting() for app in apps}
    scan = Scan(settings, spans, limit=max_read)
    for batch in scan.batches():
        for topic in {record.topic for record in batch}:
            app = app_of[topic]
            mine = (record for record in batch if record.topic == topic)
            count(mine, commits[app], config.apps[app], config.version, now_ms, soon_ms, into=waiting[app])
    for topic, _ in scan.unfinished:
        waiting[app_of[topic]].exact = False
    return waiting
