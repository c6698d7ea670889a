"""The native decisions of a table (router/routing/native/src/decide.rs): what ``Router.route`` decides per record,
made for a whole batch in one native call with the GIL released.

``NativeDecisions.build`` describes every app to the native side once, with the table (in the config thread):
its plan positions, candidates, fairness, spillover, presence, group_by, expiration and priority bands, and each
environment's declared header types. Per batch, ``decide`` hands over the records' headers, their apps (a route
index per topic), timestamps and the mutable state (round-robin cursors, unconfirmed counts, absent groups, the
consumer groups holding message groups), and writes back what the batch moved: the cursors, what it routed to
each measured group, and where it placed each keyed record (``Snapshot``, ``Holders.hold``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from subroute import wire
from subroute.config.model import AppConfig
from subroute.routing import _native
from subroute.routing.native_plan import TYPE_CODES, NativePlan
from subroute.routing.snapshot import GroupId, Snapshot

# What this module reads of decisions.py's types (it does not import that module, which imports this one).


class _Candidate(Protocol):
    @property
    def group(self) -> str: ...
    @property
    def priority(self) -> int: ...
    @property
    def max_unconfirmed(self) -> int | None: ...
    @property
    def plan_id(self) -> tuple[str, ...] | None: ...
    @property
    def order(self) -> int: ...


class _App(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def config(self) -> AppConfig: ...
    @property
    def environment(self) -> int: ...
    @property
    def levels(self) -> Sequence[Sequence[_Candidate]]: ...
    @property
    def routed(self) -> Mapping[int, object]: ...


class _Environment(Protocol):
    @property
    def types(self) -> Mapping[str, str]: ...
    @property
    def decoders(self) -> Mapping[str, object]: ...


class _Message(Protocol):
    @property
    def topic(self) -> str: ...
    @property
    def headers(self) -> wire.HeadersIn | None: ...
    @property
    def timestamp_ms(self) -> int: ...


Result = TypeVar("Result")

# After this many records of one batch that need ``Router.route`` (each restarts the native call on the records
# after it), the rest of the batch takes ``Router.route`` too.
MAX_RESTARTS = 8

_FAIRNESS = {"round-robin": 0, "proportional": 1, "fast": 2}


@dataclass
class NativeDecisions:
    """The native decider of one table and the keys its state arrays are indexed by."""

    decider: _native.NativeDecider
    slots: tuple[GroupId, ...]  # (app, group) by slot
    slot_of: Mapping[GroupId, int]
    # (slot, key) of the slots whose count matters: a candidate there has a max_unconfirmed.
    capacity: tuple[tuple[int, GroupId], ...]
    cursors: tuple[tuple[str, int], ...]  # (app, priority) by cursor
    app_index: Mapping[str, int]
    environment: Mapping[str, int]  # app -> its environment's index
    # The routes registered with the decider: by topic (a record for every app reading it), by only_app.
    by_topic: dict[str, int] = field(default_factory=dict)
    by_app: dict[str, int] = field(default_factory=dict)

    @staticmethod
    def build(
        plan: NativePlan,
        apps: Sequence[_App],
        environments: Sequence[_Environment],
        ids: Sequence[tuple[str, ...]],
        spans: Mapping[str, tuple[int, int]],
        filter_count: int,
        exact: Sequence[bool],
        objects: Sequence[tuple[Any, ...]],
        kinds: tuple[Any, ...],
    ) -> NativeDecisions:
        """``objects``: per app, (name, expired, pending, pending capacity, pending no-consumer, filtered)
        decisions; ``kinds``: (RouteResult, Decision, Action.ROUTE, Action.PENDING, CAPACITY, NO_CONSUMER).
        Raises ValueError if the native side refuses the description."""
        app_index = {app.name: i for i, app in enumerate(apps)}
        owner = [app_index[pid[1]] for pid in ids]  # ("filter" | "subscription" | "band", app, ...)
        slots: list[GroupId] = []
        slot_of: dict[GroupId, int] = {}
        capacity: dict[int, GroupId] = {}
        cursors: list[tuple[str, int]] = []
        filters: dict[str, list[int]] = {}
        for p in range(filter_count):
            filters.setdefault(ids[p][1], []).append(p)
        described = []
        for app, objs in zip(apps, objects, strict=True):
            start, end = spans[app.name]
            position = {ids[p]: p for p in range(start, end)}
            candidates = []
            for level in app.levels:
                for c in level:
                    key = (app.name, c.group)
                    if key not in slot_of:
                        slot_of[key] = len(slots)
                        slots.append(key)
                    if c.max_unconfirmed is not None:
                        capacity[slot_of[key]] = key
                    where = position[c.plan_id] if c.plan_id is not None else -1
                    candidates.append(
                        (c.priority, c.max_unconfirmed, slot_of[key], c.group, where, app.routed[c.order])
                    )
            config = app.config
            layout = (
                start,
                end,
                filters.get(app.name, []),
                [p for p in range(start, end) if ids[p][0] == "band"],  # k = 1..9, in order
                app.environment,
                len(cursors),
            )
            cursors.extend((app.name, level[0].priority) for level in app.levels)
            behaviour = (
                _FAIRNESS[config.fairness],
                config.spillover,
                config.presence == "required",
                config.group_by,
                (config.default_group or wire.DEFAULT_MESSAGE_GROUP).encode(),
                config.expiration_ms,
            )
            described.append((layout, behaviour, candidates, objs))
        types = [
            [(name, TYPE_CODES[env.types.get(name, "string")]) for name in env.decoders]
            for env in environments
        ]
        decider = _native.NativeDecider(
            plan.core, described, owner, list(exact), filter_count, types, wire.EXPIRATION, kinds
        )
        return NativeDecisions(
            decider,
            tuple(slots),
            slot_of,
            tuple(capacity.items()),
            tuple(cursors),
            app_index,
            {app.name: app.environment for app in apps},
        )

    def route_of(
        self,
        topic: str,
        only_app: str | None,
        groups_for: Callable[[str, str | None], Sequence[Sequence[str]]],
    ) -> int:
        """The native route of a record of ``topic`` (or for ``only_app``): ``groups_for`` gives its apps' names
        by environment (``RoutingTable.groups_for``)."""
        cache, key = (self.by_topic, topic) if only_app is None else (self.by_app, only_app)
        found = cache.get(key)
        if found is None:
            index = self.app_index
            groups = [
                (self.environment[apps[0]], [index[a] for a in apps]) for apps in groups_for(topic, only_app)
            ]
            found = cache[key] = self.decider.add_route(groups)
        return found

    def decide(
        self,
        messages: Sequence[_Message],
        only_apps: Sequence[str | None] | None,
        lag: Mapping[GroupId, int],
        now_ms: int,
        cursors: dict[tuple[str, int], int],
        groups_for: Callable[[str, str | None], Sequence[Sequence[str]]],
        route: Callable[[int], Result],
    ) -> list[Result]:
        """The result of each message in turn, natively, as ``Router.route`` makes it; a record whose errors the
        native plan cannot count exactly takes ``route(its index)``, and the native call resumes after it.
        ``cursors`` (the router's) and a ``Snapshot`` lag are moved as ``route`` moves them."""
        results: list[Result] = []
        snapshot = lag if isinstance(lag, Snapshot) else None
        # Snapshot.note_routed counts only for measured groups, and only when something was measured.
        measured = snapshot.measured if snapshot is not None and snapshot.measured else None
        cursor_keys = self.cursors
        by_topic, by_app = self.by_topic, self.by_app
        start = 0
        restarts = 0
        while start < len(messages):
            batch = messages[start:] if start else messages
            only = only_apps[start:] if only_apps is not None else None
            # Known routes by a lookup each (-1: not registered yet, done below once per topic or app).
            if only is None:
                routes = [by_topic.get(m.topic, -1) for m in batch]
            else:
                routes = [
                    by_topic.get(m.topic, -1) if o is None else by_app.get(o, -1)
                    for m, o in zip(batch, only, strict=True)
                ]
            if -1 in routes:
                for i, m in enumerate(batch):
                    if routes[i] < 0:
                        routes[i] = self.route_of(m.topic, only[i] if only is not None else None, groups_for)
            counts = [
                (slot, lag.get(key, 0), measured is not None and key in measured)
                for slot, key in self.capacity
            ]
            absent = []
            if snapshot is not None and snapshot.absent:
                absent = [s for k in snapshot.absent if (s := self.slot_of.get(k)) is not None]
            decided, made, moved, routed, held = self.decider.decide(
                [m.headers for m in batch],
                routes,
                [m.timestamp_ms for m in batch],
                now_ms,
                counts,
                [cursors.get(k, 0) for k in cursor_keys],
                absent,
                # message groups follow their holders only where decide_app sees them: with a snapshot
                holders=snapshot.holders.by_app if snapshot is not None else None,
            )
            for cursor, value in moved:
                cursors[cursor_keys[cursor]] = value
            if snapshot is not None and measured is not None:
                for slot, count in routed:
                    snapshot.note_routed(self.slots[slot], count)
            if held:
                hold = snapshot.holders.hold  # type: ignore[union-attr]  # held only with a snapshot
                for app, key, group in held:
                    hold(app, key, group)
            results.extend(made)
            start += decided
            if start < len(messages):  # an inexact entry failed: this record's errors need the Python plans
                restarts += 1
                rest = len(messages) if restarts >= MAX_RESTARTS else start + 1
                results.extend(route(i) for i in range(start, rest))
                start = rest
        return results
