"""What ``make demo`` must show, checked, so that the demo fails (exit 1) when its outcome does not hold.

Every check returns the problems it finds (none: it holds). Where the messages went is checked against the
Python reference router (``Router.route``, which reads the JSON and Avro bodies with the reference readers) run
over the records the demo produced, under the configuration in force: a record an app's filter skips, one that
waits on the pending topic, one routed to a group, each counted where the reference puts it, and every
produced record accounted for in every app. Groups an app chooses among
by turns (round-robin, proportional) share their records in an order the reference cannot know, so those are
compared as one total; a message group (``group_by``) or ``fast`` fairness is placed the same way by both.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import NamedTuple

from subroute import wire
from subroute.config.model import Config
from subroute.routing.decisions import Action, Decision, MessageView, Router, build_table

# Where a record of an app can be: a group (by its name), or one of these.
PENDING = "(pending, waiting)"
DEAD_LETTERS = "(dead letters)"
FILTERED = "(filtered)"
DROPPED = "(dropped)"
NOT_GROUPS = (PENDING, DEAD_LETTERS, FILTERED, DROPPED)

Destinations = Mapping[tuple[str, str], int]  # (app, destination) -> records


def _label(decision: Decision) -> str:
    if decision.action is Action.ROUTE:
        return decision.group or "?"
    return {
        Action.PENDING: PENDING,
        Action.DEAD_LETTER: DEAD_LETTERS,
        Action.FILTERED: FILTERED,
        Action.DROP: DROPPED,
    }[decision.action]


Produced = tuple[str, wire.HeadersIn, bytes | None]  # a record the demo produced: (topic, headers, value)


class Expected(NamedTuple):
    destinations: Counter[tuple[str, str]]  # (app, destination) -> records
    redriven: Counter[str]  # app -> waiting records a later version routed
    bands: Counter[
        tuple[str, int]
    ]  # (app, priority band) -> records routed to a group, for apps with priority


def expected_destinations(versions: Sequence[Config], records: Iterable[Produced], now_ms: int) -> Expected:
    """Where the reference puts each record, per app, after every version of ``versions`` in turn came into
    force: a record waiting on the pending topic is routed again under the next version (the demo produces
    every record before its first worker, so only the first version's apps see them). Also, per app, how many
    waiting records a later version routed (the worker's ``redriven``), and the priority band of each record
    routed by an app with ``priority``. The reference reads the bodies too."""
    tables = [build_table(config) for config in versions]
    routers = [Router() for _ in versions]
    found: Counter[tuple[str, str]] = Counter()
    redriven: Counter[str] = Counter()
    bands: Counter[tuple[str, int]] = Counter()
    prioritised = {app for config in versions for app, spec in config.apps.items() if spec.priority}
    for topic, headers, value in records:
        message = MessageView(topic, headers, now_ms, value)
        for first in routers[0].route(tables[0], message, {}, now_ms).decisions:
            final = first
            for table, router in zip(tables[1:], routers[1:], strict=True):
                if final.action is not Action.PENDING or table.app(final.app) is None:
                    break
                [final] = router.route(table, message, {}, now_ms, only_app=final.app).decisions
                if final.action is Action.ROUTE:
                    redriven[final.app] += 1
            found[(final.app, _label(final))] += 1
            if final.action is Action.ROUTE and final.app in prioritised:
                bands[(final.app, final.band)] += 1
    return Expected(found, redriven, bands)


def turn_taking(config: Config, app: str) -> list[frozenset[str]]:
    """The app's groups in sets whose records are shared by turns: groups with a subscription at the same
    priority (a group without subscriptions is priority 0), for apps that choose among equals by turns."""
    groups = config.groups_of(app)
    spec = config.apps[app]
    if spec.group_by is not None or spec.fairness == "fast":
        return [frozenset({g.name}) for g in groups]
    priorities = {g.name: {s.priority for s in g.effective_subscriptions} for g in groups}
    sets: list[set[str]] = []
    for priority in sorted(set().union(*priorities.values())):
        members = {name for name, mine in priorities.items() if priority in mine}
        joined = [s for s in sets if s & members]
        for s in joined:
            sets.remove(s)
            members |= s
        sets.append(members)
    return [frozenset(s) for s in sets]


def check_destinations(
    stage: str,
    config: Config,
    produced: int,
    expected: Destinations,
    found: Destinations,
    pending_counts_routed_past: bool = False,
) -> list[str]:
    """Every produced record accounted for in every app, and where the reference puts it (groups that share
    by turns as one total).

    ``pending_counts_routed_past``: the broker drops offset commit metadata (Tansu, docs/brokers.md), where the
    router keeps the pending records a pass routed past its position (routing/backlog.py): those are counted
    as still waiting. A pending count at or above the expected one is then taken as the expected one; below
    it is still a record missing."""
    if pending_counts_routed_past:
        found = {
            (app, label): expected.get((app, label), 0)
            if label == PENDING and n >= expected.get((app, label), 0)
            else n
            for (app, label), n in found.items()
        }
    problems: list[str] = []
    apps = sorted({app for app, _ in [*expected, *found]})
    for app in apps:
        total = sum(n for (a, _), n in found.items() if a == app)
        if total != produced:
            problems.append(f"{stage}: {app}: {total} records accounted for, {produced} produced")
        sets = turn_taking(config, app) if app in config.apps else []

        def merged(counts: Destinations, app: str = app, sets: list[frozenset[str]] = sets) -> Counter[str]:
            out: Counter[str] = Counter()
            for (a, label), n in counts.items():
                if a == app and n:
                    share = next((s for s in sets if label in s), None)
                    out[" | ".join(sorted(share)) if share else label] += n
            return out

        want, have = merged(expected), merged(found)
        for label in sorted(set(want) | set(have)):
            if want[label] != have[label]:
                problems.append(
                    f"{stage}: {app} {label}: {have[label]} read back, {want[label]} expected from the config"
                )
    return problems


def check_bands(expected: Counter[tuple[str, int]], found: Mapping[tuple[str, int], int]) -> list[str]:
    """The records of each app with a priority expression are in the band the reference computes from their
    properties (read back from the band topics ``.p1`` to ``.p9``), and some are above band 0."""
    problems = [
        f"{app} band {band}: {found.get((app, band), 0)} read back, {expected[(app, band)]} expected"
        for app, band in sorted(set(expected) | set(found))
        if found.get((app, band), 0) != expected[(app, band)]
    ]
    if not any(n for (_, band), n in expected.items() if band > 0):
        problems.append("no record expected above priority band 0: the priority no longer reads the bodies")
    return problems


def check_redriven(redriven: int, expected: int) -> list[str]:
    if redriven != expected:
        return [f"redriven from pending topics: {redriven}, {expected} expected from the new subscription"]
    if expected == 0:
        return ["the new subscription redrove nothing: the demo's change no longer matches waiting records"]
    return []


def check_refusal(exit_code: int, stderr: str, version_before: int, version_after: int) -> list[str]:
    """The bad config refused (exit 2), its error printed with the expression and a caret under the fault, and
    nothing written (the config version unchanged)."""
    problems: list[str] = []
    if exit_code != 2:
        problems.append(f"the bad subscription was not refused: exit code {exit_code}, not 2")
    lines = stderr.splitlines()
    carets = [
        i
        for i, line in enumerate(lines)
        if i >= 2
        and re.fullmatch(r" *\^+ *", line)
        and lines[i - 2].startswith("subroute: ")
        and len(lines[i - 1]) > line.index("^")
    ]
    if not carets:
        problems.append("the refusal does not show the expression with a caret under the fault")
    if version_after != version_before:
        problems.append(f"the refused config wrote something: version {version_before} -> {version_after}")
    return problems


def check_explanation(exit_code: int, stdout: str, apps: Iterable[str], version: int) -> list[str]:
    """``explain`` ran, at the version in force, and gave a decision for every app that reads the topic."""
    problems: list[str] = []
    if exit_code != 0:
        problems.append(f"explain failed: exit code {exit_code}")
    if not re.search(rf"^config version {version}$", stdout, flags=re.MULTILINE):
        problems.append(f"explain does not name the config version in force ({version})")
    blocks = {block.split("\n", 1)[0]: block for block in re.split(r"^(?=app )", stdout, flags=re.MULTILINE)}
    for app in apps:
        block = blocks.get(f"app {app}")
        if block is None or not re.search(r"^  decision: \S", block, flags=re.MULTILINE):
            problems.append(f"explain gives no decision for app {app}")
    return problems


def sources(config: Config, app: str) -> dict[str, str]:
    """Where each property of ``app`` comes from, as ``explain`` names it: ``body json /customer/id``,
    ``header Customer``."""
    spec = config.apps[app]
    return {
        name: f"body {spec.format} {spec.paths[name]}" if name in spec.paths else f"header {name}"
        for name in sorted(spec.properties)
    }


def check_sources(stdout: str, config: Config, apps: Iterable[str]) -> list[str]:
    """``explain`` shows, for every app, each property with its source (a header, or a path into the body) and
    its decoded value: no property undecodable, and at least one body property of each app that reads the body
    decoded (the message was routed on what its body says)."""
    problems: list[str] = []
    blocks = {block.split("\n", 1)[0]: block for block in re.split(r"^(?=app )", stdout, flags=re.MULTILINE)}
    for app in apps:
        block = blocks.get(f"app {app}", "")
        decoded = 0
        for name, source in sources(config, app).items():
            line = re.search(rf"^    {re.escape(name)} from {re.escape(source)}: (.*)$", block, re.MULTILINE)
            if line is None:
                problems.append(f"explain does not show {app}'s property {name} from {source}")
            elif line[1].endswith("(could not be decoded: counted)"):
                problems.append(f"explain: {app}'s property {name} from {source} could not be decoded")
            elif source.startswith("body ") and line[1] != "absent":
                decoded += 1
        if config.apps[app].paths and not decoded:
            problems.append(f"explain shows no property of {app} decoded from the body")
    return problems


def check_spark(landed: int, report: Destinations, found: Destinations) -> list[str]:
    """Spark landed every routed record once, and its report has a row for every group that got records,
    with the count read back from the group topic."""
    groups = {key: n for key, n in found.items() if key[1] not in NOT_GROUPS and n}
    problems: list[str] = []
    if not report:
        problems.append("Spark's report has no rows")
    if landed != sum(groups.values()):
        problems.append(f"Spark landed {landed} records, {sum(groups.values())} were routed to group topics")
    for app, group in sorted(set(groups) | set(report)):
        if report.get((app, group), 0) != groups.get((app, group), 0):
            problems.append(
                f"Spark's report: {app} {group}: {report.get((app, group), 0)} rows, "
                f"{groups.get((app, group), 0)} on the group topic"
            )
    return problems
