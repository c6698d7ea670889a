"""The workload subroute's worker and its Kafka Streams peer route alike (``bench_streams_peer.py``).

10 apps with disjoint filters on a region (app k takes regions ``r{2k}`` and ``r{2k+1}``, two OR'ed filter
expressions), each with ``subscriptions / 10`` consumer subscriptions that combine a customer range with
order-type and amount conditions, spread over up to 10 groups. Records carry four headers (Region, CustomerId,
Amount, OrderType) drawn so that every record passes exactly one app's filter.

An app's subscriptions partition its records: every record matches exactly one of them, so the group it goes to
does not depend on the worker's fairness (round-robin among matching groups) and a router that tries the
subscriptions in order and takes the first that holds puts every record where subroute does. Each customer
range holds up to four subscriptions: one takes it whole, two split it on ``OrderType == "EXPRESS"``, three split
the non-express part again on an amount threshold, four split both parts.

One description, two renderings: the subscription expressions of a subroute ``Config`` (the ``bmq`` dialect, the
``sql92`` one for the apps perfkit makes sql92), and the tab-separated file the Java router reads
(tests/perf/streams_peer/peer/Workload.java says its format).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import perfkit

from subroute import wire
from subroute.config.model import AppConfig, Config, GroupConfig, SubscriptionConfig

PROPERTIES = {"Region": "string", "CustomerId": "int", "Amount": "int", "OrderType": "string"}
REGIONS_PER_APP = 2
GROUPS_PER_APP = 10
CELLS_PER_RANGE = 4
EXPRESS = "EXPRESS"

_BMQ = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
_SQL92 = {**_BMQ, "eq": "=", "ne": "<>"}


@dataclass(frozen=True)
class Test:
    """``name op value``: op is eq, ne, lt, le, gt or ge; value an int or a string as the property's type."""

    name: str
    op: str
    value: int | str


Conjunction = tuple[Test, ...]


@dataclass(frozen=True)
class Route:
    group: str
    when: Conjunction


@dataclass(frozen=True)
class App:
    name: str
    dialect: str
    filter: tuple[Conjunction, ...]  # OR'ed
    routes: tuple[Route, ...]  # in configuration order

    def groups(self) -> list[str]:
        return sorted({route.group for route in self.routes}, key=lambda g: int(g[1:]))


def region(k: int, j: int) -> str:
    return f"r{k * REGIONS_PER_APP + j}"


def _cells(count: int, threshold: int) -> list[Conjunction]:
    """``count`` (1 to 4) conjunctions on OrderType and Amount that partition every record."""
    express, other = Test("OrderType", "eq", EXPRESS), Test("OrderType", "ne", EXPRESS)
    low, high = Test("Amount", "lt", threshold), Test("Amount", "ge", threshold)
    cells: dict[int, list[Conjunction]] = {
        1: [()],
        2: [(express,), (other,)],
        3: [(express,), (other, low), (other, high)],
        4: [(express, low), (express, high), (other, low), (other, high)],
    }
    return cells[count]


def apps(subscriptions: int) -> list[App]:
    """``subscriptions`` in all (at least one per app)."""
    per_app = max(1, subscriptions // perfkit.APPS)
    ranges = -(-per_app // CELLS_PER_RANGE)
    out = []
    for k in range(perfkit.APPS):
        routes: list[Route] = []
        for r in range(ranges):
            lo, hi = r * perfkit.CUSTOMERS // ranges, (r + 1) * perfkit.CUSTOMERS // ranges
            customers = (Test("CustomerId", "ge", lo), Test("CustomerId", "lt", hi))
            threshold = perfkit.AMOUNTS * (1 + r % 9) // 10
            for cell in _cells(min(CELLS_PER_RANGE, per_app - r * CELLS_PER_RANGE), threshold):
                routes.append(Route(f"g{len(routes) % GROUPS_PER_APP}", customers + cell))
        out.append(
            App(
                name=perfkit.app_name(k),
                dialect="sql92" if k in perfkit.SQL92_APPS else "bmq",
                filter=tuple((Test("Region", "eq", region(k, j)),) for j in range(REGIONS_PER_APP)),
                routes=tuple(routes),
            )
        )
    return out


def render(when: Conjunction, dialect: str) -> str:
    """The expression text of a conjunction in ``dialect``."""
    sql = dialect == "sql92"
    ops, conjunction, quote = (_SQL92, " AND ", "'") if sql else (_BMQ, " && ", '"')
    parts = []
    for test in when:
        value = str(test.value) if isinstance(test.value, int) else f"{quote}{test.value}{quote}"
        parts.append(f"{test.name} {ops[test.op]} {value}")
    return conjunction.join(parts)


def config(workload: Sequence[App], topic: str, partitions: int, version: int = 1) -> Config:
    """The subroute configuration of ``workload`` on input ``topic``, group topics of ``partitions``."""
    app_configs: dict[str, AppConfig] = {}
    groups: dict[tuple[str, str], GroupConfig] = {}
    for app in workload:
        app_configs[app.name] = AppConfig(
            name=app.name,
            inputs=(topic,),
            dialect=app.dialect,
            properties=PROPERTIES,
            filter=tuple(render(alternative, app.dialect) for alternative in app.filter),
            partitions=partitions,
            presence="ignored",  # the benchmark routes with no consumer attached
        )
        for group in app.groups():
            subs = tuple(
                SubscriptionConfig(render(route.when, app.dialect))
                for route in app.routes
                if route.group == group
            )
            groups[(app.name, group)] = GroupConfig(app.name, group, subs, order=int(group[1:]))
    return Config(version, app_configs, groups)


def streams_description(workload: Sequence[App], prefix: str, version: int = 1) -> str:
    """The Java router's description of ``workload``, its topics under ``prefix`` (router/wire.py)."""

    def tests(when: Conjunction) -> list[str]:
        return [str(field) for test in when for field in (test.name, test.op, test.value)]

    lines = [f"version\t{version}"]
    lines += [f"property\t{name}\t{kind}" for name, kind in PROPERTIES.items()]
    for app in workload:
        lines.append(f"app\t{app.name}\t{wire.pending_topic(prefix, app.name)}")
        lines += ["\t".join(["filter", *tests(alternative)]) for alternative in app.filter]
        for route in app.routes:
            topic = wire.group_topic(prefix, app.name, route.group)
            text = render(route.when, app.dialect)  # the subscription header subroute stamps
            lines.append("\t".join(["route", route.group, topic, text, *tests(route.when)]))
    return "\n".join(lines) + "\n"


def write_streams_description(path: Path, workload: Sequence[App], prefix: str, version: int = 1) -> Path:
    path.write_text(streams_description(workload, prefix, version), encoding="utf-8")
    return path


def message_headers(count: int, seed: int = 11) -> list[perfkit.Headers]:
    """Headers of ``count`` orders (UTF-8 text): each passes exactly one app's filter."""
    rng = random.Random(seed)
    regions = perfkit.APPS * REGIONS_PER_APP
    return [
        [
            ("Region", f"r{rng.randrange(regions)}".encode()),
            ("CustomerId", str(rng.randrange(perfkit.CUSTOMERS)).encode()),
            ("Amount", str(rng.randrange(perfkit.AMOUNTS)).encode()),
            ("OrderType", rng.choice(perfkit.ORDER_TYPES).encode()),
        ]
        for _ in range(count)
    ]
