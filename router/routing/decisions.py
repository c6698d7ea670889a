"""Routing decisions: pure functions of (message properties, the routing table, a capacity and presence snapshot).

docs/design.md §2: for every app reading the record's topic, the app filter first (no match: ``filtered``), then the
app's consumer subscriptions from the highest priority down; among the matching subscriptions of the first
priority level that has a present group, one group with room is chosen by the app's fairness model (or by
rendezvous hashing of the message group). No match at all: ``pending``. A match but nobody attached, or no room:
``pending`` with reason ``no-consumer`` / ``capacity``. Passed the filter but too old: ``dead-letter`` with reason
``expired``, or ``drop`` (reason ``expired``) for an app with ``on_expire: drop``; a record that fails the filter
is ``filtered`` whatever its age.

Nothing here touches Kafka. The worker owns the mutable pieces and passes them in: the round-robin cursors, and
the snapshot's count of what it routed since the last measurement and the holders of message groups
(routing/snapshot.py, routing/holders.py).

This is the reference, and it imports nothing native: routing/native_routing.py builds a table that decides a
batch on the native core (``NativeTable``), and must decide as ``Router.route`` does here.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Collection, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, cast

from subroute import expressions, wire
from subroute.config.model import AppConfig, Config, GroupConfig
from subroute.routing.body import BodyRead, Reading, WriterOf, body_read, read_body
from subroute.routing.expiration import message_expiration, should_drop
from subroute.routing.properties import Decoder, PropertyValue, decode_with, decoders_for
from subroute.routing.snapshot import Snapshot
from subroute.topic_patterns import compile_pattern
from subroute.wire import CAPACITY, EXPIRED, NO_CONSUMER

log = logging.getLogger(__name__)

Props = Mapping[str, PropertyValue]
PlanId = tuple[str, ...]  # ("filter", app, i), ("subscription", app, group, i) or ("band", app, k)
Lag = Mapping[tuple[str, str], int]  # unconfirmed counts by (app, group); see routing/snapshot.py

_NOBODY: frozenset[tuple[str, str]] = frozenset()


class Action(Enum):
    ROUTE = "route"
    PENDING = "pending"
    FILTERED = "filtered"
    DEAD_LETTER = "dead-letter"
    DROP = "drop"  # written nowhere, only counted (an expired record of an app with on_expire: drop)


@dataclass(frozen=True)
class Candidate:
    """One consumer subscription of one group, as the router sees it."""

    group: str
    index: int  # position among the group's subscriptions
    label: str  # the expression text, "*" for a group without subscriptions
    priority: int
    max_unconfirmed: int | None  # the group's (GroupConfig.max_unconfirmed), not the subscription's own
    plan_id: tuple[str, ...] | None  # None: matches any message
    order: int  # configuration order of the group, then the subscription


@dataclass(frozen=True, slots=True)
class Decision:
    app: str
    action: Action
    group: str | None = None
    subscription: str | None = None
    key: bytes | None = None  # the message-group key when the app has group_by
    reason: str | None = None  # dead-letter/drop reason, or why a pending record waits (WAITING_REASONS)
    band: int = 0  # priority band (apps with a priority expression)


@dataclass(frozen=True)
class AppRoute:
    """An app compiled for routing: what it reads, its filter, its own plan and its priority levels, highest
    first.

    The app's filter is evaluated in its environment's filter plan; its consumer subscriptions (and priority
    bands) form a plan of their own, evaluated only for messages that pass the filter (docs/design.md §2, step 1),
    so a message costs the subscriptions of the apps it is for, not those of every app.
    """

    config: AppConfig
    environment: int  # index of the property-type environment it decodes and filters in
    filter_ids: frozenset[tuple[str, ...]]
    levels: tuple[tuple[Candidate, ...], ...]
    input_names: frozenset[str]
    input_patterns: tuple[Any, ...]  # compiled RE2 patterns (router/topic_patterns.py)
    plan: expressions.Plan  # the consumer subscriptions and the priority bands
    # Each candidate with its position in ``levels`` (flattened), which sorts matches into levels.
    by_plan_id: Mapping[Hashable, tuple[int, Candidate]] = field(default_factory=dict)
    unconditional: tuple[tuple[int, Candidate], ...] = ()  # groups without subscriptions: any message
    filtered: Decision | None = None  # the (immutable) decisions most messages get, made once
    pending: Decision | None = None
    routed: Mapping[int, Decision] = field(default_factory=dict)  # by Candidate.order
    # The groups ``levels`` was made from: a later table reuses this app whole while they are unchanged.
    groups: tuple[GroupConfig, ...] = ()

    @property
    def name(self) -> str:
        return self.config.name

    def reads(self, topic: str) -> bool:
        # search semantics, like librdkafka's "^regex" subscriptions (see router/topic_patterns.py)
        return topic in self.input_names or any(p.search(topic) for p in self.input_patterns)


@dataclass(frozen=True)
class Environment:
    """Apps that declare the same properties (types, and sources: header or body path, and body format) share
    one decoding of the headers and the body and one plan of their app filters."""

    types: Mapping[str, str]
    plan: expressions.Plan  # the app filters of the environment's apps
    # The headers worth decoding: those an expression reads and the declared ones (whose decoding failures are
    # counted), each with its decoder. Others are never looked at; nor are headers named as a body property.
    decoders: Mapping[str, Decoder] = field(default_factory=dict)
    format: str = "none"  # the body's format, when ``body`` reads properties from it
    body: tuple[BodyRead, ...] = ()  # the properties read from the record value
    # format avro: the app's schemaless writer schema; None: Confluent's wire format
    schema: str | None = None


def environment_signature(app: AppConfig) -> tuple[object, ...]:
    """What decides an app's environment: each property's type and source, and the body format."""
    props = tuple(sorted((name, kind, app.paths.get(name)) for name, kind in app.properties.items()))
    return (props, app.format if app.paths else "none", app.schema if app.paths else None)


def body_reads(app: AppConfig) -> tuple[BodyRead, ...]:
    """The properties ``app`` reads from the record value, in name order."""
    return tuple(body_read(name, app.paths[name], app.properties[name]) for name in sorted(app.paths))


@dataclass(frozen=True)
class FilterOutcome:
    """For one set of app filters that held: the apps skipped (their decisions made once) and the apps to
    evaluate further."""

    filtered: tuple[Decision, ...]
    passed: tuple[AppRoute, ...]


@dataclass
class EnvironmentGroup:
    """The apps reading one topic that share an environment: one decoding, one filter plan evaluation.

    ``outcomes`` caches what a set of held filters means for these apps; a workload has few such sets.
    """

    environment: Environment
    apps: tuple[AppRoute, ...]
    outcomes: dict[frozenset[Hashable], FilterOutcome] = field(default_factory=dict)

    expiring: bool = False  # an app here has an expiration of its own

    def __post_init__(self) -> None:
        self.expiring = any(app.config.expiration_ms is not None for app in self.apps)

    def outcome(self, held: frozenset[Hashable]) -> FilterOutcome:
        found = self.outcomes.get(held)
        if found is None:
            skipped = [a for a in self.apps if a.filter_ids and a.filter_ids.isdisjoint(held)]
            found = FilterOutcome(
                tuple(a.filtered or Decision(a.name, Action.FILTERED) for a in skipped),
                tuple(a for a in self.apps if a not in skipped),
            )
            if len(self.outcomes) >= 4096:  # filters that vary without bound: keep the cache bounded
                self.outcomes.clear()
            self.outcomes[held] = found
        return found


@dataclass
class RoutingTable:
    """Every app of one config version, compiled; built off the hot path, then only read (its caches aside)."""

    version: int
    apps: tuple[AppRoute, ...]
    environments: tuple[Environment, ...]
    _by_topic: dict[str, tuple[AppRoute, ...]] = field(default_factory=dict)
    _groups: dict[str, tuple[EnvironmentGroup, ...]] = field(default_factory=dict)
    _groups_of_app: dict[str, tuple[EnvironmentGroup, ...]] = field(default_factory=dict)

    def apps_for(self, topic: str) -> tuple[AppRoute, ...]:
        found = self._by_topic.get(topic)
        if found is None:
            found = tuple(app for app in self.apps if app.reads(topic))
            self._by_topic[topic] = found
        return found

    def groups_for(self, topic: str, only_app: str | None = None) -> tuple[EnvironmentGroup, ...]:
        """The apps a record of ``topic`` is routed for (or just ``only_app``), by environment."""
        cache, key = (self._groups, topic) if only_app is None else (self._groups_of_app, only_app)
        found = cache.get(key)
        if found is None:
            apps = self.apps_for(topic) if only_app is None else _only(self, only_app)
            by_env: dict[int, list[AppRoute]] = {}
            for app in apps:
                by_env.setdefault(app.environment, []).append(app)
            found = tuple(
                EnvironmentGroup(self.environments[env], tuple(members)) for env, members in by_env.items()
            )
            cache[key] = found
        return found

    def app(self, name: str) -> AppRoute | None:
        return next((a for a in self.apps if a.name == name), None)

    @property
    def expression_count(self) -> int:
        return sum(len(env.plan) for env in self.environments) + sum(len(app.plan) for app in self.apps)

    def decide_batch(
        self,
        router: Router,
        messages: Sequence[MessageView],
        lag: Lag,
        now_ms: int,
        only_apps: Sequence[str | None] | None,
    ) -> list[RouteResult]:
        """``Router.route_batch``: here ``route`` for each message in turn (a ``native_routing.NativeTable``
        decides the batch natively, with the same results)."""
        return [
            router.route(self, m, lag, now_ms, only_apps[i] if only_apps is not None else None)
            for i, m in enumerate(messages)
        ]


def filter_id(app: str, index: int) -> tuple[str, ...]:
    return ("filter", app, str(index))


def subscription_id(app: str, group: str, index: int) -> tuple[str, ...]:
    return ("subscription", app, group, str(index))


def band_id(app: str, band: int) -> tuple[str, ...]:
    return ("band", app, str(band))


def band_thresholds(app: AppConfig) -> list[expressions.Subscription]:
    """The app's priority as nine shared-plan entries ``(priority) >= k``, k = 1..9.

    The band is how many hold (a value clamped to 0..9); an evaluation error holds none, so it is band 0: AMPS's
    "NaN has the lowest priority", counted as one evaluation error (``error_count``). The plan evaluates the
    shared ``(priority)`` node once per message.
    """
    if app.priority is None:
        return []
    types = dict(app.properties)
    return [
        expressions.Subscription(band_id(app.name, k), f"({app.priority}) >= {k}", app.dialect, types)
        for k in range(wire.LOWEST_BAND + 1, wire.HIGHEST_BAND + 1)
    ]


def error_count(errored: Collection[Hashable]) -> int:
    """The evaluation errors of an app's plan entries that failed: one per consumer subscription, and one for the
    priority expression however many of its nine thresholds failed (it is one expression, evaluated once: AMPS
    takes a priority that cannot be computed as NaN, the lowest, once per message)."""
    thresholds = sum(1 for e in cast(Collection[PlanId], errored) if e[0] == "band")
    return len(errored) - thresholds + (1 if thresholds else 0)


def band_of(app: AppConfig, matched: Collection[Hashable]) -> int:
    if app.priority is None:
        return wire.LOWEST_BAND
    return sum(1 for k in range(1, wire.HIGHEST_BAND + 1) if band_id(app.name, k) in matched)


def _candidates(app: AppConfig, groups: Sequence[GroupConfig]) -> tuple[tuple[Candidate, ...], ...]:
    by_priority: dict[int, list[Candidate]] = {}
    order = 0
    for group in groups:
        limit = group.max_unconfirmed  # one limit per group, whichever of its subscriptions matches
        for index, sub in enumerate(group.effective_subscriptions):
            plan_id = None if sub.expression is None else subscription_id(app.name, group.name, index)
            by_priority.setdefault(sub.priority, []).append(
                Candidate(group.name, index, sub.label, sub.priority, limit, plan_id, order)
            )
            order += 1
    return tuple(tuple(by_priority[p]) for p in sorted(by_priority, reverse=True))


def build_table(
    config: Config, previous: RoutingTable | None = None, pause: Callable[[], None] | None = None
) -> RoutingTable:
    """Compile every app of ``config`` into one table; expressions were validated before they got here.

    With the ``previous`` table, an app whose plan entries are unchanged keeps its compiled plan (plans are
    immutable), so a change to one group recompiles one app, not every expression of the config; and that app
    parses only the expressions that are new to it. An app whose config and groups are unchanged as well is
    reused whole. ``pause`` is called between steps of the work (see ``expressions.compile_plan``).
    """
    before = {app.name: app for app in previous.apps} if previous is not None else {}
    before_filters = (
        {
            (env.format, env.schema, env.body, tuple(sorted(env.types.items()))): env.plan
            for env in previous.environments
        }
        if previous
        else {}
    )
    env_index: dict[tuple[object, ...], int] = {}
    env_filters: list[list[expressions.Subscription]] = []
    env_types: list[Mapping[str, str]] = []
    env_reads: list[set[str]] = []
    env_bodies: list[tuple[str, str | None, tuple[BodyRead, ...]]] = []
    apps: list[AppRoute] = []
    for app in sorted(config.apps.values(), key=lambda a: a.name):
        signature = environment_signature(app)
        if signature not in env_index:
            env_index[signature] = len(env_types)
            env_types.append(dict(app.properties))
            env_filters.append([])
            env_reads.append(set())
            env_bodies.append((app.format, app.schema, body_reads(app)) if app.paths else ("none", None, ()))
        env = env_index[signature]
        types = dict(app.properties)
        filter_ids = []
        for i, text in enumerate(app.filter):
            fid = filter_id(app.name, i)
            env_filters[env].append(expressions.Subscription(fid, text, app.dialect, types))
            filter_ids.append(fid)
        entries = band_thresholds(app)
        groups = config.groups_of(app.name)
        for group in groups:
            for i, sub in enumerate(group.subscriptions):
                if sub.expression is not None:
                    sid = subscription_id(app.name, group.name, i)
                    entries.append(expressions.Subscription(sid, sub.expression, app.dialect, types))
        old = before.get(app.name)
        plan = old.plan if old is not None else None
        if plan is None or plan.subscriptions != tuple(entries):
            plan = expressions.compile_plan(entries, reuse=plan, pause=pause)
        env_reads[env] |= plan.properties
        if pause is not None:
            pause()
        if (
            old is not None
            and old.plan is plan
            and (old.config, old.environment, old.groups) == (app, env, groups)
        ):
            apps.append(old)  # immutable, and everything it was made from is equal
            continue
        levels = _candidates(app, groups)
        candidates = [c for level in levels for c in level]
        apps.append(
            AppRoute(
                config=app,
                environment=env,
                filter_ids=frozenset(filter_ids),
                levels=levels,
                input_names=frozenset(i for i in app.inputs if not i.startswith("^")),
                input_patterns=tuple(compile_pattern(i) for i in app.inputs if i.startswith("^")),
                plan=plan,
                by_plan_id={c.plan_id: (i, c) for i, c in enumerate(candidates) if c.plan_id is not None},
                unconditional=tuple((i, c) for i, c in enumerate(candidates) if c.plan_id is None),
                filtered=Decision(app.name, Action.FILTERED),
                pending=Decision(app.name, Action.PENDING),
                routed={c.order: Decision(app.name, Action.ROUTE, c.group, c.label) for c in candidates},
                groups=groups,
            )
        )
    environments = []
    for env_type, filters, reads, (format, schema, body) in zip(
        env_types, env_filters, env_reads, env_bodies, strict=True
    ):
        filter_plan = before_filters.get((format, schema, body, tuple(sorted(env_type.items()))))
        if filter_plan is None or filter_plan.subscriptions != tuple(filters):
            filter_plan = expressions.compile_plan(filters, reuse=filter_plan, pause=pause)
        from_body = {read.name for read in body}
        readable = (reads | filter_plan.properties | set(env_type)) - from_body
        decoders = decoders_for(env_type, sorted(readable))
        environments.append(Environment(env_type, filter_plan, decoders, format, body, schema))
    return RoutingTable(config.version, tuple(apps), tuple(environments))


# --- choosing among candidates ----------------------------------------------------------------------------------


def _mix64(value: int) -> int:
    """splitmix64's finalizer: spreads a 64-bit value so rendezvous scores are independent per candidate."""
    value = (value ^ (value >> 30)) * 0xBF58476D1CE4E5B9 & 0xFFFFFFFFFFFFFFFF
    value = (value ^ (value >> 27)) * 0x94D049BB133111EB & 0xFFFFFFFFFFFFFFFF
    return value ^ (value >> 31)


def _stable_hash(data: bytes) -> int:
    # Python's hash() of str/bytes is salted per process; placement must agree across workers and restarts.
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "big")


def rendezvous(key: bytes, candidates: Sequence[Candidate]) -> Candidate:
    """Highest-random-weight choice: a key stays on its group while the candidate set is unchanged."""
    base = _stable_hash(key)
    return max(candidates, key=lambda c: _mix64(base ^ _stable_hash(c.group.encode())))


def free_fraction(candidate: Candidate, app: str, lag: Lag) -> float:
    if candidate.max_unconfirmed is None:
        return 1.0
    return 1.0 - lag.get((app, candidate.group), 0) / candidate.max_unconfirmed


def has_room(candidate: Candidate, app: str, lag: Lag) -> bool:
    return candidate.max_unconfirmed is None or lag.get((app, candidate.group), 0) < candidate.max_unconfirmed


def _rotate(
    candidates: Sequence[Candidate], cursor_key: tuple[str, int], cursors: dict[tuple[str, int], int]
) -> Candidate:
    start = cursors.get(cursor_key, 0)
    cursors[cursor_key] = start + 1
    return candidates[start % len(candidates)]


def choose(
    app: AppRoute,
    matching: Sequence[Candidate],
    group_key: bytes | None,
    lag: Lag,
    cursors: dict[tuple[str, int], int],
) -> Candidate | None:
    """One candidate with room among the (present) matching subscriptions of one priority level; None when they
    are all at capacity (BlazingMQ maxUnconfirmed: the message waits rather than overfill one)."""
    name = app.name
    if len(matching) == 1:
        only = matching[0]
        return only if has_room(only, name, lag) else None
    if group_key is not None:
        # Never rotate a message group, nor move it because its group is full: it stays on one consumer group
        # while the config and presence are unchanged (Qpid), and waits for room there.
        placed = rendezvous(group_key, matching)
        return placed if has_room(placed, name, lag) else None
    fairness = app.config.fairness
    if fairness == "fast":
        return next((c for c in matching if has_room(c, name, lag)), None)
    roomy = [c for c in matching if has_room(c, name, lag)]
    if not roomy:
        return None
    cursor_key = (name, matching[0].priority)
    if fairness == "proportional":
        # The most free capacity; equals (every group without max_unconfirmed, or as free) take turns, so the
        # load spreads evenly instead of all going to the first in configuration order.
        best = max(free_fraction(c, name, lag) for c in roomy)
        return _rotate([c for c in roomy if free_fraction(c, name, lag) == best], cursor_key, cursors)
    # round-robin: the next in turn that has room
    start = cursors.get(cursor_key, 0)
    count = len(matching)
    for step in range(count):
        candidate = matching[(start + step) % count]
        if has_room(candidate, name, lag):
            cursors[cursor_key] = start + step + 1
            return candidate
    return None  # not reached: roomy is not empty


def one_per_group(level: Sequence[Candidate]) -> Sequence[Candidate]:
    """Each group of a level once, by its first matching subscription in configuration order (the label stamped
    on what it gets): turns and ties are among consumers, not subscriptions (BlazingMQ round-robins across
    consumers), so a group with two matching subscriptions gets no more than another."""
    groups = {c.group for c in level}
    if len(groups) == len(level):
        return level
    first: dict[str, Candidate] = {}
    for candidate in level:
        first.setdefault(candidate.group, candidate)
    return list(first.values())


def matching_levels(app: AppRoute, matched: Collection[Hashable]) -> list[tuple[Candidate, ...]]:
    """The app's priority levels, highest first, each reduced to the candidates the message matches (in
    configuration order). Works from the matches, so its cost does not grow with the app's subscriptions."""
    by_id = app.by_plan_id
    hits = [hit for hit in map(by_id.get, matched) if hit is not None]
    if app.unconditional:
        hits.extend(app.unconditional)
    if len(hits) <= 1:
        return [(hits[0][1],)] if hits else []
    hits.sort()  # positions are unique: the candidates themselves are never compared
    levels: list[tuple[Candidate, ...]] = []
    level: list[Candidate] = []
    for _, candidate in hits:
        if level and candidate.priority != level[0].priority:
            levels.append(tuple(level))
            level = []
        level.append(candidate)
    levels.append(tuple(level))
    return levels


def top_level(app: AppRoute, matched: Collection[Hashable]) -> tuple[Candidate, ...]:
    """The first of ``matching_levels`` (empty when nothing matches), without making the others: what an app
    without spillover decides from."""
    hits = list(filter(None, map(app.by_plan_id.get, matched)))
    if app.unconditional:
        hits += app.unconditional
    if len(hits) <= 1:
        return (hits[0][1],) if hits else ()
    hits.sort()  # positions are unique: the candidates themselves are never compared
    top = hits[0][1].priority
    level = []
    for _, candidate in hits:
        if candidate.priority != top:
            break
        level.append(candidate)
    return tuple(level)


def decide_app(
    app: AppRoute,
    matched: Collection[Hashable],
    group_key: bytes | None,
    lag: Lag,
    cursors: dict[tuple[str, int], int],
) -> Decision:
    """The decision for one app given the plan's matches for the message (filter already passed).

    ``lag`` is the capacity snapshot: unconfirmed counts, and, when it is a ``snapshot.Snapshot``, the groups whose
    consumers are absent. From the highest priority down, absent groups are skipped (BlazingMQ routes only to
    attached consumers); the first level with a present candidate decides: one with room is chosen, or, when all
    are at capacity, the message waits (reason ``capacity``), unless the app spills over to the next level with
    a present candidate. No present candidate at any level: it waits (reason ``no-consumer``). No match: pending.
    A message group that a present group of the app holds (the snapshot's ``holders``: it has messages
    outstanding there) goes to that group whatever it matched, or waits there for room; what is routed with a
    group key is held (routing/holders.py).
    """
    config = app.config
    name = app.name
    absent = _NOBODY
    if isinstance(lag, Snapshot) and name in lag.absent_apps and config.presence == "required":
        absent = lag.absent  # otherwise everyone this app may route to is there: the fast path below
    if config.spillover or absent:
        levels = matching_levels(app, matched)
    else:
        top = top_level(app, matched)
        levels = [top] if top else []
    if not levels:
        if group_key is None and app.pending is not None:
            return app.pending
        return Decision(name, Action.PENDING, key=group_key)
    chosen: Candidate | None = None
    waiting = NO_CONSUMER
    held = _held(app, matched, group_key, lag, absent) if group_key is not None else None
    if held is not None:
        # The message group follows the consumer group holding its outstanding messages, whichever subscription
        # matched, and waits there for room: neither capacity nor spillover moves it (seed 002).
        waiting = CAPACITY
        chosen = held if has_room(held, name, lag) else None
    else:
        for level in levels:
            present: Sequence[Candidate] = (
                [c for c in level if (name, c.group) not in absent] if absent else level
            )
            if not present:
                continue  # skipped at its priority: nobody is attached there
            if len(present) > 1:
                present = one_per_group(present)
            waiting = CAPACITY
            chosen = choose(app, present, group_key, lag, cursors)
            if chosen is not None or not config.spillover:
                break
    if chosen is None:
        return Decision(name, Action.PENDING, key=group_key, reason=waiting)
    if isinstance(lag, Snapshot):
        if lag.measured:
            lag.note_routed((name, chosen.group))
        if group_key is not None:
            lag.holders.hold(name, group_key, chosen.group)
    band = wire.LOWEST_BAND if config.priority is None else band_of(config, matched)
    if group_key is None and band == wire.LOWEST_BAND:
        made = app.routed.get(chosen.order)
        if made is not None:
            return made
    return Decision(name, Action.ROUTE, chosen.group, chosen.label, group_key, band=band)


def _held(
    app: AppRoute,
    matched: Collection[Hashable],
    group_key: bytes,
    lag: Lag,
    absent: Collection[tuple[str, str]],
) -> Candidate | None:
    """The subscription a message of a held message group goes by: one of the holding consumer group's, the
    first (highest priority, configuration order) that the message matches, else its first (the group follows
    its holder even where the holder's own subscriptions do not match, and that subscription's label then
    stamps it; the holder's one limit applies either way). None when nothing holds the group, when its holder's consumers left (Qpid frees
    a group when its consumer goes) or when the holder is no longer a group of the app: placed afresh."""
    if not isinstance(lag, Snapshot):
        return None
    holder = lag.holders.holder(app.name, group_key)
    if holder is None or (app.name, holder) in absent:
        return None
    own = [c for level in app.levels for c in level if c.group == holder]
    if not own:
        return None
    return next((c for c in own if c.plan_id is None or c.plan_id in matched), own[0])


def group_key_of(app: AppConfig, headers: wire.HeadersIn | None) -> bytes | None:
    """The message-group id (raw header text) or the app's default group (``default_group``, else
    ``subroute.no-group``); None when the app has no group_by."""
    if app.group_by is None:
        return None
    value: bytes | None = None
    for name, raw in headers or ():
        if name == app.group_by:
            value = raw
    if value:
        return value
    return (app.default_group or wire.DEFAULT_MESSAGE_GROUP).encode()


@dataclass(slots=True)
class MessageView:
    """What the router needs of one record (also built from explain's --header arguments)."""

    topic: str
    headers: wire.HeadersIn | None
    timestamp_ms: int = 0
    value: bytes | None = None  # the record's value: read only by apps with body properties (routing/body.py)


@dataclass(slots=True)
class RouteResult:
    """The decisions for one message: ``routed`` (route, pending, dead-letter) and ``filtered`` (skipped by the
    app filter), and the errors met, per app: evaluation errors, and the properties that could not be decoded
    (a header value, or a body property: undecodable body, wrong type), per property name."""

    routed: list[Decision]
    filtered: Sequence[Decision]
    evaluation_errors: dict[str, int]
    decode_errors: dict[str, dict[str, int]]

    @property
    def decisions(self) -> list[Decision]:
        """One decision per app, in app-name order (the table's)."""
        return sorted([*self.routed, *self.filtered], key=lambda d: d.app)


class Router:
    """Applies a RoutingTable to messages. Holds the round-robin cursors (the only mutable routing state)."""

    def __init__(self) -> None:
        self.cursors: dict[tuple[str, int], int] = {}
        # Avro in Confluent's wire format: the writer schema of an id (the worker's, fetched before the batch)
        self.writer_of: WriterOf | None = None
        # How a record's body is read here: the reference, unless a faster reader that agrees with it is given (the
        # worker gives native_avro.read_body, for the records the native decider hands back to ``route``)
        self.read_body: Callable[..., Reading] = read_body

    def route(
        self,
        table: RoutingTable,
        message: MessageView,
        lag: Lag,
        now_ms: int,
        only_app: str | None = None,
    ) -> RouteResult:
        headers = message.headers
        timestamp = message.timestamp_ms
        routed: list[Decision] = []
        filtered: Sequence[Decision] = ()
        evaluation_errors: dict[str, int] = {}
        decode_errors: dict[str, dict[str, int]] = {}
        own_expiration = message_expiration(headers) if timestamp > 0 else None
        cursors = self.cursors
        for group in table.groups_for(message.topic, only_app):
            env = group.environment
            props, failures = decode_with(headers, env.decoders)
            if env.body:
                from_body, body_failures = self.read_body(
                    message.value, env.format, env.body, env.schema, self.writer_of
                )
                props.update(from_body)
                if body_failures:  # the names differ: a header named as a body property is not decoded
                    failures = {**failures, **body_failures}
            held, filter_errors = env.plan.match_with_errors(props)
            outcome = group.outcomes.get(held) or group.outcome(held)
            if failures or filter_errors:
                for app in group.apps:
                    if failures:
                        decode_errors[app.name] = dict(failures)
                    own = sum(1 for e in cast(frozenset[PlanId], filter_errors) if e[1] == app.name)
                    if own:
                        evaluation_errors[app.name] = own
            filtered = outcome.filtered if not filtered else [*filtered, *outcome.filtered]
            # The filter comes first: a record an app does not subscribe to is filtered whatever its age, and only
            # what passes it can expire for the app (docs/design.md §2, step 1).
            expiring = timestamp > 0 and (own_expiration is not None or group.expiring)
            for app in outcome.passed:
                if expiring and _expired(app.config.expiration_ms, own_expiration, timestamp, now_ms):
                    routed.append(expired_decision(app.config))
                    continue
                matched, errored = app.plan.match_with_errors(props)
                if errored:
                    evaluation_errors[app.name] = evaluation_errors.get(app.name, 0) + error_count(errored)
                config = app.config
                key = group_key_of(config, headers) if config.group_by is not None else None
                routed.append(decide_app(app, matched, key, lag, cursors))
        return RouteResult(routed, filtered, evaluation_errors, decode_errors)

    def route_batch(
        self,
        table: RoutingTable,
        messages: Sequence[MessageView],
        lag: Lag,
        now_ms: int,
        only_apps: Sequence[str | None] | None = None,
    ) -> list[RouteResult]:
        """``route`` for each message in turn (``only_apps``: each one's ``only_app``), as the table decides a
        batch (``RoutingTable.decide_batch``): the results are those of ``route``, decision for decision and count
        for count, and the cursors and a ``Snapshot``'s routed counts move as they would. A table of
        ``native_routing.build_table`` decides the batch in one native call; ``route`` and ``decide_app`` stay
        the reference (explain, the oracle tests)."""
        if only_apps is not None and len(only_apps) != len(messages):
            raise ValueError(f"only_apps has {len(only_apps)} entries for {len(messages)} messages")
        return table.decide_batch(self, messages, lag, now_ms, only_apps)


def expired_decision(app: AppConfig) -> Decision:
    """What a record that passed ``app``'s filter and expired becomes: a dead letter (reason ``expired``), or
    dropped when the app says ``on_expire: drop`` (AMPS removes expired messages; subroute keeps them unless
    told)."""
    return Decision(app.name, Action.DROP if should_drop(app) else Action.DEAD_LETTER, reason=EXPIRED)


def _expired(app_limit: int | None, own_limit: int | None, timestamp_ms: int, now_ms: int) -> bool:
    limit = own_limit if own_limit is not None else app_limit
    return limit is not None and now_ms - timestamp_ms > limit


def _only(table: RoutingTable, app_name: str) -> tuple[AppRoute, ...]:
    app = table.app(app_name)
    return (app,) if app is not None else ()
