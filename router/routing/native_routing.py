"""Routing on the native core (issue 13), and every choice between it and the Python reference.

``build_table`` is ``decisions.build_table`` plus the table's native routing (``NativeRouting``: one native plan
of every app filter and every app's plan entries, and the decider built on it), in the config thread. A
``NativeTable`` decides a batch (``Router.route_batch``) in one native call (``NativeDecisions.decide``, the GIL
released); the Python reference (``Router.route``) decides a record the native call hands back (its errors need
the Python plans), and every record of a table whose native routing the native side refused (a bug, logged).
``decisions.py`` stays the reference and imports nothing native.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import cast

from subroute.config.model import Config
from subroute.expressions.plan import PlanEntry
from subroute.routing import decisions
from subroute.routing.decisions import (
    AppRoute,
    Environment,
    Lag,
    MessageView,
    PlanId,
    Router,
    RouteResult,
    RoutingTable,
)
from subroute.routing.native_decisions import NativeDecisions
from subroute.routing.native_plan import NativePlan, NativePlanError

log = logging.getLogger(__name__)

# After this many records of one batch that need ``Router.route`` (each restarts the native call on the records
# after it), the rest of the batch takes ``Router.route`` too.
MAX_RESTARTS = 8


@dataclass(frozen=True)
class NativeRouting:
    """Every app filter and every app's plan entries (consumer subscriptions, priority bands) in one native plan
    (router/routing/native_plan.py), evaluated once per batch of records by ``Router.route_batch``.

    The filters come first (positions ``[0, filter_count)``); each app's plan entries follow at ``spans[app]``,
    in the order of ``AppRoute.plan``, requiring the app's filter to hold (docs/design.md §2, step 1), unless the app
    has no filter. Each entry is its Python plan's (``Plan.entries``), indexed by the gate that plan chose, so
    it is evaluated on at least the records the Python plan evaluates it on: a record the native plan reports
    no error for has none in the Python plans either.
    """

    plan: NativePlan
    ids: tuple[PlanId, ...]  # by position
    filter_count: int
    spans: Mapping[str, tuple[int, int]]  # app -> [start, end) of its plan entries
    # By position: indexed by the very gate its Python plan chose, so it reports exactly that plan's errors
    # (False: evaluated on more records than there, so it may report errors the Python plan does not).
    exact: tuple[bool, ...] = ()
    # The native decider built on ``plan`` (router/routing/native_decisions.py); None: refused (a bug, logged),
    # so ``route_batch`` is ``route`` per record.
    decisions: NativeDecisions | None = None

    def owner(self, position: int) -> str:
        return self.ids[position][1]


@dataclass
class NativeTable(RoutingTable):
    """A routing table with its native routing (None: every record takes the Python path, ``Router.route``)."""

    native: NativeRouting | None = None

    def decide_batch(
        self,
        router: Router,
        messages: Sequence[MessageView],
        lag: Lag,
        now_ms: int,
        only_apps: Sequence[str | None] | None,
    ) -> list[RouteResult]:
        """The results of ``Router.route`` for each message in turn, with one native call for the whole batch:
        the plan's evaluation and every decision, the round-robin cursors and a ``Snapshot``'s routed counts
        moved as ``route`` moves them.

        An entry indexed by its Python plan's own gate reports exactly that plan's errors (``NativeRouting``);
        a record with an error on another entry of its apps takes ``route`` itself (the Python plans may count
        fewer there), and a new native call takes the records after it.
        """
        native = self.native
        if native is None or native.decisions is None:
            return super().decide_batch(router, messages, lag, now_ms, only_apps)
        decide = native.decisions.decide
        results: list[RouteResult] = []
        start = 0
        restarts = 0
        while start < len(messages):
            rest = messages[start:] if start else messages
            only = only_apps[start:] if only_apps is not None and start else only_apps
            decided, made = decide(self, rest, only, lag, now_ms, router.cursors, router.writer_of)
            results.extend(made)
            start += decided
            if start < len(messages):  # an inexact entry failed: this record's errors need the Python plans
                restarts += 1
                until = len(messages) if restarts >= MAX_RESTARTS else start + 1
                results.extend(
                    router.route(
                        self, messages[i], lag, now_ms, only_apps[i] if only_apps is not None else None
                    )
                    for i in range(start, until)
                )
                start = until
        return results


def build_table(
    config: Config, previous: RoutingTable | None = None, pause: Callable[[], None] | None = None
) -> NativeTable:
    """``decisions.build_table`` (``previous`` and ``pause`` as there), with the table's native routing: its
    native plan extends that of ``previous``, lowering only the entries it lacks."""
    table = decisions.build_table(config, previous, pause)
    earlier = previous.native if isinstance(previous, NativeTable) else None
    native = build_native(table.apps, table.environments, earlier, pause)
    return NativeTable(table.version, table.apps, table.environments, native=native)


def one_source_each(environments: Sequence[Environment]) -> bool:
    """Whether every body property is read from one source: one format (validation sees to it), and for Avro one
    writer schema setting (the same ``schema:``, or Confluent's wire format). Two Avro apps reading a property
    under different settings would give it two values per record, and the native plan has one slot for it."""
    source: dict[str, tuple[str, str | None]] = {}
    for env in environments:
        for read in env.body:
            if source.setdefault(read.name, (env.format, env.schema)) != (env.format, env.schema):
                return False
    return True


def build_native(
    apps: Sequence[AppRoute],
    environments: Sequence[Environment],
    previous: NativeRouting | None,
    pause: Callable[[], None] | None,
) -> NativeRouting | None:
    """One native plan of every app's filters and plan entries (see ``NativeRouting``); None if the native
    side refuses it (a bug: the table then routes on the Python path alone, as before the native core)."""
    if not one_source_each(environments):
        return None  # a property with two sources has two values: the Python path decodes per environment
    entries: list[PlanEntry] = []
    opens: list[str | None] = []
    requires: list[str | None] = []
    # Per environment, the properties it reads from the body: slots of their own in the native plan.
    body_names = [frozenset(read.name for read in env.body) for env in environments]
    bodies: list[frozenset[str]] = []
    for env, names in zip(environments, body_names, strict=True):
        for entry in env.plan.entries:
            entries.append(entry)
            opens.append(cast(PlanId, entry.subscription.id)[1])  # filter ids are ("filter", app, i)
            requires.append(None)
            bodies.append(names)
    filter_count = len(entries)
    spans: dict[str, tuple[int, int]] = {}
    for app in apps:
        start = len(entries)
        label = app.name if app.filter_ids else None  # an app without a filter passes every record
        entries.extend(app.plan.entries)
        opens.extend([None] * len(app.plan))
        requires.extend([label] * len(app.plan))
        bodies.extend([body_names[app.environment]] * len(app.plan))
        spans[app.name] = (start, len(entries))
    try:
        # The Python plans' entries: the native plan parses nothing, chooses no gate, and lowers only the
        # entries its previous plan lacks.
        plan = NativePlan(
            entries,
            reuse=previous.plan if previous is not None else None,
            pause=pause,
            opens=opens,
            requires=requires,
            bodies=bodies,
        )
    except NativePlanError:
        log.exception("the native plan refused this config; routing on the Python path")
        return None
    ids = tuple(cast(PlanId, entry.subscription.id) for entry in entries)
    exact = tuple(
        gate == (entry.gate.kind if entry.gate is not None else None)
        for gate, entry in zip(plan.gates(), entries, strict=True)
    )
    decided: NativeDecisions | None = None
    try:
        decided = NativeDecisions.build(plan, apps, environments, ids, spans, filter_count, exact)
    except (ValueError, OverflowError):  # a bug, or a number past int64 (validation bounds them)
        log.exception("the native decider refused this config; routing on the Python path")
    return NativeRouting(plan, ids, filter_count, spans, exact, decided)
