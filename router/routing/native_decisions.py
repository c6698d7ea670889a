"""The native decisions of a table (router/routing/native/src/decide.rs): what ``Router.route`` decides per record,
made for a whole batch in one native call with the GIL released.

``NativeDecisions.build`` describes every app to the native side once, with the table (in the config thread):
its plan positions, candidates, fairness, spillover, presence, group_by, expiration and priority bands, and each
environment's declared header types and body properties (``native_boundary.DeciderSpec``). Per batch, ``decide``
hands over the records' headers (and values, when some environment reads the body), their apps (a route index per topic), timestamps and the mutable state (round-robin cursors,
unconfirmed counts, absent groups, the consumer groups holding message groups: ``native_boundary.BatchState``),
and writes back what the batch moved: the cursors, what it routed to each measured group, and where it placed
each keyed record (``Snapshot``, ``Holders.hold``). When to call it, and what to do with a record it hands back,
is router/routing/native_routing.py's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import cast

from subroute import wire
from subroute.routing import native_avro
from subroute.routing import native_boundary as boundary
from subroute.routing.body import WriterOf, app_writer_schema
from subroute.routing.decisions import (
    Action,
    AppRoute,
    Decision,
    Environment,
    Lag,
    MessageView,
    PlanId,
    RouteResult,
    RoutingTable,
    expired_decision,
)
from subroute.routing.native_boundary import _native
from subroute.routing.native_plan import NativePlan
from subroute.routing.snapshot import GroupId, Snapshot
from subroute.wire import CAPACITY, NO_CONSUMER

_VOCABULARY: boundary.Vocabulary = {
    "result": RouteResult,
    "decision": Decision,
    "route": Action.ROUTE,
    "pending": Action.PENDING,
    "capacity": CAPACITY,
    "no_consumer": NO_CONSUMER,
}


def body_source(env: Environment) -> boundary.BodySource:
    """How ``env``'s record values are encoded, for the native decider."""
    if env.format == "json":
        return {"format": "json", "schema": None}
    if env.format != "avro":
        raise ValueError(f"body format {env.format!r}")
    schema = native_avro.lowered(app_writer_schema(env.schema)) if env.schema is not None else None
    return {"format": "avro", "schema": schema}


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
    reads_body: bool = False  # some environment reads properties from record values
    framed: bool = False  # some in Confluent's wire format (writer schemas by id: ``decide``'s writer_of)
    # The routes registered with the decider: by topic (a record for every app reading it), by only_app.
    by_topic: dict[str, int] = field(default_factory=dict)
    by_app: dict[str, int] = field(default_factory=dict)

    @staticmethod
    def build(
        plan: NativePlan,
        apps: Sequence[AppRoute],
        environments: Sequence[Environment],
        ids: Sequence[PlanId],
        spans: Mapping[str, tuple[int, int]],
        filter_count: int,
        exact: Sequence[bool],
    ) -> NativeDecisions:
        """The decider of ``apps`` on ``plan`` (whose positions are ``ids``: the ``filter_count`` app filters
        first, then each app's entries at ``spans[app]``; ``exact`` per position: see ``NativeRouting``). Raises
        ValueError if the native side refuses the description."""
        app_index = {app.name: i for i, app in enumerate(apps)}
        owner = [app_index[pid[1]] for pid in ids]  # ("filter" | "subscription" | "band", app, ...)
        slots: list[GroupId] = []
        slot_of: dict[GroupId, int] = {}
        capacity: dict[int, GroupId] = {}
        cursors: list[tuple[str, int]] = []
        filters: dict[str, list[int]] = {}
        for p in range(filter_count):
            filters.setdefault(ids[p][1], []).append(p)
        described: list[boundary.AppSpec] = []
        for app in apps:
            start, end = spans[app.name]
            position = {ids[p]: p for p in range(start, end)}
            candidates: list[boundary.CandidateSpec] = []
            for level in app.levels:
                for c in level:
                    key = (app.name, c.group)
                    if key not in slot_of:
                        slot_of[key] = len(slots)
                        slots.append(key)
                    if c.max_unconfirmed is not None:
                        capacity[slot_of[key]] = key
                    candidates.append(
                        {
                            "priority": c.priority,
                            "max_unconfirmed": c.max_unconfirmed,
                            "slot": slot_of[key],
                            "group": c.group,
                            "position": position[c.plan_id] if c.plan_id is not None else None,
                            "routed": app.routed[c.order],
                        }
                    )
            config = app.config
            assert app.pending is not None and app.filtered is not None  # build_table makes them
            described.append(
                {
                    "name": app.name,
                    "start": start,
                    "end": end,
                    "filters": filters.get(app.name, []),
                    "bands": [p for p in range(start, end) if ids[p][0] == "band"],  # k = 1..9, in order
                    "environment": app.environment,
                    "first_cursor": len(cursors),
                    "fairness": cast(boundary.Fairness, config.fairness),
                    "spillover": config.spillover,
                    "presence_required": config.presence == "required",
                    "group_by": config.group_by,
                    "default_group": (config.default_group or wire.DEFAULT_MESSAGE_GROUP).encode(),
                    "expiration_ms": config.expiration_ms,
                    "candidates": candidates,
                    # The decisions' immutable pieces, made once: most records' decisions are these very objects.
                    "decisions": {
                        "expired": expired_decision(config),
                        "pending": app.pending,
                        "waiting_capacity": Decision(app.name, Action.PENDING, reason=CAPACITY),
                        "waiting_no_consumer": Decision(app.name, Action.PENDING, reason=NO_CONSUMER),
                        "filtered": app.filtered,
                    },
                }
            )
            cursors.extend((app.name, level[0].priority) for level in app.levels)
        headers: list[list[boundary.TypedHeader]] = [
            [
                {"name": name, "declared": cast(boundary.PropertyType, env.types.get(name, "string"))}
                for name in env.decoders
            ]
            for env in environments
        ]
        # Each body property once (a property has one path, format and type across a valid config: validation's
        # check_body_sources; and one Avro schema setting: native_routing.one_source_each), with its source and
        # the plan slot it fills.
        sources: list[boundary.BodySource] = []
        source_index: dict[tuple[str, str | None], int] = {}
        body: list[boundary.BodyProperty] = []
        body_index: dict[tuple[str, str, str, int], int] = {}
        slot_sources: dict[int, tuple[str, int]] = {}
        bodies: list[list[int]] = []
        for env in environments:
            indexes = []
            encoding = (env.format, env.schema)
            if env.body and encoding not in source_index:
                source_index[encoding] = len(sources)
                sources.append(body_source(env))
            for read in env.body:
                at = source_index[encoding]
                source = (read.name, read.declared, read.path, at)
                if source not in body_index:
                    slot = plan.body_slot(read.name, read.declared)
                    if slot is not None and slot_sources.setdefault(slot, (read.path, at)) != (read.path, at):
                        raise ValueError(f"body property {read.name!r} is read from two sources")
                    body_index[source] = len(body)
                    tokens = [t.encode("utf-8", "surrogatepass") for t in read.tokens]
                    declared = cast(boundary.PropertyType, read.declared)
                    body.append(
                        {
                            "read": {
                                "name": read.name,
                                "tokens": tokens,
                                "declared": declared,
                            },
                            "source": at,
                            "slot": slot,
                        }
                    )
                indexes.append(body_index[source])
            bodies.append(indexes)
        spec: boundary.DeciderSpec = {
            "apps": described,
            "owner": owner,
            "exact": list(exact),
            "filter_count": filter_count,
            "environments": headers,
            "sources": sources,
            "body": body,
            "bodies": bodies,
            "expiration_header": wire.EXPIRATION,
            "vocabulary": _VOCABULARY,
        }
        return NativeDecisions(
            _native.NativeDecider(plan.core, spec),
            tuple(slots),
            slot_of,
            tuple(capacity.items()),
            tuple(cursors),
            app_index,
            {app.name: app.environment for app in apps},
            reads_body=bool(body),
            framed=any(s["format"] == "avro" and s["schema"] is None for s in sources),
        )

    def route_of(self, table: RoutingTable, topic: str, only_app: str | None) -> int:
        """The native route of a record of ``topic`` (or for ``only_app``): its apps by environment, as
        ``table.groups_for`` gives them, registered once."""
        cache, key = (self.by_topic, topic) if only_app is None else (self.by_app, only_app)
        found = cache.get(key)
        if found is None:
            index = self.app_index
            groups: list[boundary.RouteGroup] = [
                {
                    "environment": self.environment[group.apps[0].name],
                    "apps": [index[app.name] for app in group.apps],
                }
                for group in table.groups_for(topic, only_app)
            ]
            found = cache[key] = self.decider.add_route(groups)
        return found

    def decide(
        self,
        table: RoutingTable,
        messages: Sequence[MessageView],
        only_apps: Sequence[str | None] | None,
        lag: Lag,
        now_ms: int,
        cursors: dict[tuple[str, int], int],
        writer_of: WriterOf | None = None,
    ) -> tuple[int, list[RouteResult]]:
        """One native call: the results of the messages from the first on, as ``Router.route`` makes them, up
        to a record whose errors the native plan cannot count exactly (``(decided, results)``: that record is
        ``messages[decided]``, unless all were decided). ``cursors`` (the router's) and a ``Snapshot`` lag are
        moved as ``route`` moves them for the records decided. ``writer_of`` (the router's) gives the writer
        schemas of values in Confluent's wire format, as to ``route``: asked once per schema id the decider has
        not met, a schema kept (registry ids are immutable), None (not in the registry) asked again next call."""
        snapshot = lag if isinstance(lag, Snapshot) else None
        # Snapshot.note_routed counts only for measured groups, and only when something was measured.
        measured = snapshot.measured if snapshot is not None and snapshot.measured else None
        by_topic, by_app = self.by_topic, self.by_app
        # Known routes by a lookup each (-1: not registered yet, done below once per topic or app).
        if only_apps is None:
            routes = [by_topic.get(m.topic, -1) for m in messages]
        else:
            routes = [
                by_topic.get(m.topic, -1) if o is None else by_app.get(o, -1)
                for m, o in zip(messages, only_apps, strict=True)
            ]
        if -1 in routes:
            for i, m in enumerate(messages):
                if routes[i] < 0:
                    routes[i] = self.route_of(table, m.topic, only_apps[i] if only_apps is not None else None)
        cursor_keys = self.cursors
        state: boundary.BatchState = {
            "routes": routes,
            "timestamps": [m.timestamp_ms for m in messages],
            "now_ms": now_ms,
            "unconfirmed": {slot: lag.get(key, 0) for slot, key in self.capacity},
            "tracked": [slot for slot, key in self.capacity if key in measured] if measured else [],
            "cursors": [cursors.get(k, 0) for k in cursor_keys],
            "absent": (
                [s for k in snapshot.absent if (s := self.slot_of.get(k)) is not None]
                if snapshot is not None and snapshot.absent
                else []
            ),
            # message groups follow their holders only where decide_app sees them: with a snapshot
            "holders": snapshot.holders.by_app if snapshot is not None else None,
            "values": [m.value for m in messages] if self.reads_body else None,
            "schemas": native_avro.schemas_by_id(writer_of) if self.framed else None,
        }
        outcome = self.decider.decide([m.headers for m in messages], state)
        for cursor, value in outcome.moved.items():
            cursors[cursor_keys[cursor]] = value
        if snapshot is not None and measured is not None:
            for slot, count in outcome.routed.items():
                snapshot.note_routed(self.slots[slot], count)
        if outcome.held_apps:
            hold = snapshot.holders.hold  # type: ignore[union-attr]  # held only with a snapshot
            for app, key, group in zip(
                outcome.held_apps, outcome.held_keys, outcome.held_groups, strict=True
            ):
                hold(app, key, group)
        return outcome.decided, outcome.results
