"""Routing decisions: pure functions of (message properties, the routing table, a capacity snapshot).

DESIGN.md §2: for every app reading the record's topic, the app filter first (no match: ``filtered``), then the
app's consumer subscriptions from the highest priority down; among the matching subscriptions of the first
priority level that has any, one group is chosen by the app's fairness model (or by rendezvous hashing of the
message group). No match at all: ``pending``. Too old: ``dead-letter`` with reason ``expired``.

Nothing here touches Kafka. The worker owns the only mutable piece, the round-robin cursors, and passes it in.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import cast

import expressions
from router import names, priority
from router.model import AppConfig, Config, GroupConfig
from router.properties import PropertyValue, decode_headers

Props = Mapping[str, PropertyValue]
PlanId = tuple[str, ...]  # ("filter", app, i) or ("subscription", app, group, i)
Lag = Mapping[tuple[str, str], int]


class Action(Enum):
    ROUTE = "route"
    PENDING = "pending"
    FILTERED = "filtered"
    DEAD_LETTER = "dead-letter"


@dataclass(frozen=True)
class Candidate:
    """One consumer subscription of one group, as the router sees it."""

    group: str
    index: int  # position among the group's subscriptions
    label: str  # the expression text, "*" for a group without subscriptions
    priority: int
    max_unconfirmed: int | None
    plan_id: tuple[str, ...] | None  # None: matches any message
    order: int  # configuration order of the group, then the subscription


@dataclass(frozen=True)
class Decision:
    app: str
    action: Action
    group: str | None = None
    subscription: str | None = None
    key: bytes | None = None  # the message-group key when the app has group_by
    reason: str | None = None  # dead-letter reason
    band: int = 0  # priority band (apps with a priority expression)


@dataclass(frozen=True)
class AppRoute:
    """An app compiled for routing: what it reads, its filter and its priority levels, highest first."""

    config: AppConfig
    environment: int  # index of the property-type environment (and plan) it evaluates in
    filter_ids: frozenset[tuple[str, ...]]
    levels: tuple[tuple[Candidate, ...], ...]
    input_names: frozenset[str]
    input_patterns: tuple[re.Pattern[str], ...]

    @property
    def name(self) -> str:
        return self.config.name

    def reads(self, topic: str) -> bool:
        # search semantics, like librdkafka's "^regex" subscriptions (see config_validation.input_matches)
        return topic in self.input_names or any(p.search(topic) for p in self.input_patterns)


@dataclass(frozen=True)
class Environment:
    """Apps that declare the same property types share one decoding of the headers and one plan."""

    types: Mapping[str, str]
    plan: expressions.Plan


@dataclass
class RoutingTable:
    """Every app of one config version, compiled; built off the hot path, then only read."""

    version: int
    apps: tuple[AppRoute, ...]
    environments: tuple[Environment, ...]
    _by_topic: dict[str, tuple[AppRoute, ...]] = field(default_factory=dict)

    def apps_for(self, topic: str) -> tuple[AppRoute, ...]:
        found = self._by_topic.get(topic)
        if found is None:
            found = tuple(app for app in self.apps if app.reads(topic))
            self._by_topic[topic] = found
        return found

    def app(self, name: str) -> AppRoute | None:
        return next((a for a in self.apps if a.name == name), None)

    @property
    def expression_count(self) -> int:
        return sum(len(env.plan) for env in self.environments)


def filter_id(app: str, index: int) -> tuple[str, ...]:
    return ("filter", app, str(index))


def subscription_id(app: str, group: str, index: int) -> tuple[str, ...]:
    return ("subscription", app, group, str(index))


def band_id(app: str, band: int) -> tuple[str, ...]:
    return ("band", app, str(band))


def band_thresholds(app: AppConfig) -> list[expressions.Subscription]:
    """The app's priority as nine shared-plan entries ``(priority) >= k``, k = 1..9.

    The band is how many hold (a value clamped to 0..9); an evaluation error holds none, so it is band 0: AMPS's
    "NaN has the lowest priority". The plan evaluates the shared ``(priority)`` node once per message.
    """
    if app.priority is None:
        return []
    types = dict(app.properties)
    return [
        expressions.Subscription(band_id(app.name, k), f"({app.priority}) >= {k}", app.dialect, types)
        for k in range(priority.LOWEST_BAND + 1, priority.HIGHEST_BAND + 1)
    ]


def band_of(app: AppConfig, matched: frozenset[PlanId]) -> int:
    if app.priority is None:
        return priority.LOWEST_BAND
    return sum(1 for k in range(1, priority.HIGHEST_BAND + 1) if band_id(app.name, k) in matched)


def _candidates(app: AppConfig, groups: Sequence[GroupConfig]) -> tuple[tuple[Candidate, ...], ...]:
    by_priority: dict[int, list[Candidate]] = {}
    order = 0
    for group in groups:
        for index, sub in enumerate(group.effective_subscriptions):
            plan_id = None if sub.expression is None else subscription_id(app.name, group.name, index)
            by_priority.setdefault(sub.priority, []).append(
                Candidate(group.name, index, sub.label, sub.priority, sub.max_unconfirmed, plan_id, order)
            )
            order += 1
    return tuple(tuple(by_priority[p]) for p in sorted(by_priority, reverse=True))


def build_table(config: Config) -> RoutingTable:
    """Compile every app of ``config`` into one table; expressions were validated before they got here."""
    env_index: dict[tuple[tuple[str, str], ...], int] = {}
    env_subscriptions: list[list[expressions.Subscription]] = []
    env_types: list[Mapping[str, str]] = []
    apps: list[AppRoute] = []
    for app in sorted(config.apps.values(), key=lambda a: a.name):
        signature = tuple(sorted(app.properties.items()))
        if signature not in env_index:
            env_index[signature] = len(env_types)
            env_types.append(dict(app.properties))
            env_subscriptions.append([])
        env = env_index[signature]
        types = dict(app.properties)
        entries = env_subscriptions[env]
        filter_ids = []
        for i, text in enumerate(app.filter):
            fid = filter_id(app.name, i)
            entries.append(expressions.Subscription(fid, text, app.dialect, types))
            filter_ids.append(fid)
        entries.extend(band_thresholds(app))
        groups = config.groups_of(app.name)
        for group in groups:
            for i, sub in enumerate(group.subscriptions):
                if sub.expression is not None:
                    sid = subscription_id(app.name, group.name, i)
                    entries.append(expressions.Subscription(sid, sub.expression, app.dialect, types))
        apps.append(
            AppRoute(
                config=app,
                environment=env,
                filter_ids=frozenset(filter_ids),
                levels=_candidates(app, groups),
                input_names=frozenset(i for i in app.inputs if not i.startswith("^")),
                input_patterns=tuple(re.compile(i) for i in app.inputs if i.startswith("^")),
            )
        )
    environments = tuple(
        Environment(types, expressions.compile_plan(subs))
        for types, subs in zip(env_types, env_subscriptions, strict=True)
    )
    return RoutingTable(config.version, tuple(apps), environments)


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


def choose(
    app: AppRoute,
    matching: Sequence[Candidate],
    group_key: bytes | None,
    lag: Lag,
    cursors: dict[tuple[str, int], int],
) -> Candidate:
    """One candidate among the matching subscriptions of one priority level."""
    if len(matching) == 1:
        return matching[0]
    if group_key is not None:
        # Never rotate a message group: it must stay on one consumer group while the config is unchanged.
        return rendezvous(group_key, matching)
    name = app.name
    fairness = app.config.fairness
    if fairness == "fast":
        return next((c for c in matching if has_room(c, name, lag)), matching[0])
    if fairness == "proportional":
        return max(matching, key=lambda c: free_fraction(c, name, lag))  # max keeps the first on ties
    cursor_key = (name, matching[0].priority)
    start = cursors.get(cursor_key, 0)
    count = len(matching)
    for step in range(count):
        candidate = matching[(start + step) % count]
        if has_room(candidate, name, lag):
            cursors[cursor_key] = start + step + 1
            return candidate
    cursors[cursor_key] = start + 1
    return matching[start % count]


def matching_levels(
    app: AppRoute, matched: frozenset[tuple[str, ...]] | set[tuple[str, ...]]
) -> Iterable[tuple[Candidate, ...]]:
    """The app's priority levels, highest first, each reduced to the candidates the message matches."""
    for level in app.levels:
        hits = tuple(c for c in level if c.plan_id is None or c.plan_id in matched)
        if hits:
            yield hits


def decide_app(
    app: AppRoute,
    matched: frozenset[PlanId],
    group_key: bytes | None,
    lag: Lag,
    cursors: dict[tuple[str, int], int],
) -> Decision:
    """The decision for one app given the plan's matches for the message (filter already passed)."""
    chosen: Candidate | None = None
    first_level: tuple[Candidate, ...] | None = None
    for hits in matching_levels(app, matched):
        if first_level is None:
            first_level = hits
            if not app.config.spillover:
                break
        if any(has_room(c, app.name, lag) for c in hits):
            chosen = choose(app, hits, group_key, lag, cursors)
            break
    if chosen is None:
        if first_level is None:
            return Decision(app.name, Action.PENDING, key=group_key)
        # No room anywhere (or no spillover): the top level still takes it; Kafka holds the backlog.
        chosen = choose(app, first_level, group_key, lag, cursors)
    return Decision(
        app.name, Action.ROUTE, chosen.group, chosen.label, group_key, band=band_of(app.config, matched)
    )


def group_key_of(app: AppConfig, headers: Sequence[tuple[str, bytes | None]] | None) -> bytes | None:
    """The message-group id (raw header text) or the default group; None when the app has no group_by."""
    if app.group_by is None:
        return None
    value: bytes | None = None
    for name, raw in headers or ():
        if name == app.group_by:
            value = raw
    return value if value else names.DEFAULT_MESSAGE_GROUP.encode()


def parse_duration_ms(text: str) -> int | None:
    """``subroute.expiration`` header values: "30s", "5m", "1h", "250ms" or plain milliseconds."""
    match = re.fullmatch(r"\s*(\d+)\s*(ms|s|m|h|d)?\s*", text)
    if not match:
        return None
    unit = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}[match.group(2) or "ms"]
    return int(match.group(1)) * unit


def expiration_of(app: AppConfig, headers: Sequence[tuple[str, bytes | None]] | None) -> int | None:
    """The message's own ``subroute.expiration`` wins over the app's."""
    for name, raw in headers or ():
        if name == names.EXPIRATION and raw:
            try:
                parsed = parse_duration_ms(raw.decode("ascii"))
            except UnicodeDecodeError:
                parsed = None
            if parsed is not None:
                return parsed
    return app.expiration_ms


def is_expired(
    app: AppConfig, headers: Sequence[tuple[str, bytes | None]] | None, timestamp_ms: int, now_ms: int
) -> bool:
    limit = expiration_of(app, headers)
    return limit is not None and timestamp_ms > 0 and now_ms - timestamp_ms > limit


@dataclass
class MessageView:
    """What the router needs of one record (also built from explain's --header arguments)."""

    topic: str
    headers: Sequence[tuple[str, bytes | None]] | None
    timestamp_ms: int = 0


@dataclass
class RouteResult:
    decisions: list[Decision]
    evaluation_errors: dict[str, int]
    decode_errors: dict[str, int]


class Router:
    """Applies a RoutingTable to messages. Holds the round-robin cursors (the only mutable routing state)."""

    def __init__(self) -> None:
        self.cursors: dict[tuple[str, int], int] = {}

    def route(
        self,
        table: RoutingTable,
        message: MessageView,
        lag: Lag,
        now_ms: int,
        only_app: str | None = None,
    ) -> RouteResult:
        apps = table.apps_for(message.topic) if only_app is None else _only(table, only_app)
        decisions: list[Decision] = []
        evaluation_errors: dict[str, int] = {}
        decode_errors: dict[str, int] = {}
        evaluated: dict[int, tuple[frozenset[PlanId], frozenset[PlanId], int]] = {}
        for app in apps:
            config = app.config
            if is_expired(config, message.headers, message.timestamp_ms, now_ms):
                decisions.append(Decision(app.name, Action.DEAD_LETTER, reason="expired"))
                continue
            result = evaluated.get(app.environment)
            if result is None:
                env = table.environments[app.environment]
                props, failures = decode_headers(message.headers, env.types)
                matched, errored = env.plan.match_with_errors(props)
                result = (cast(frozenset[PlanId], matched), cast(frozenset[PlanId], errored), failures)
                evaluated[app.environment] = result
            matched, errored, failures = result
            if failures:
                decode_errors[app.name] = failures
            if errored:
                own = sum(1 for e in errored if e[1] == app.name)
                if own:
                    evaluation_errors[app.name] = own
            if app.filter_ids and app.filter_ids.isdisjoint(matched):
                decisions.append(Decision(app.name, Action.FILTERED))
                continue
            key = group_key_of(config, message.headers)
            decisions.append(decide_app(app, matched, key, lag, self.cursors))
        return RouteResult(decisions, evaluation_errors, decode_errors)


def _only(table: RoutingTable, app_name: str) -> tuple[AppRoute, ...]:
    app = table.app(app_name)
    return (app,) if app is not None else ()
