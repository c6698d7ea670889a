"""Shared by the lint tests: route an assignment through the reference Router, to confirm what lint says."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from subroute.config.model import AppConfig, Config, GroupConfig
from subroute.routing.decisions import Decision, MessageView, Router, RoutingTable, build_table
from subroute.routing.snapshot import Snapshot

_TABLES: dict[int, tuple[Config, RoutingTable]] = {}  # the config is kept, so its id is not reused


def headers_of(sample: Mapping[str, Any]) -> list[tuple[str, bytes | None]]:
    """A sample as the headers a producer would send (None: the header is absent)."""
    out: list[tuple[str, bytes | None]] = []
    for name, value in sample.items():
        if value is None:
            continue
        text = ("true" if value else "false") if isinstance(value, bool) else str(value)
        out.append((name, text.encode()))
    return out


def decide(
    config: Config,
    app: str,
    sample: Mapping[str, Any],
    *,
    absent: frozenset[str] = frozenset(),
    lag: Mapping[str, int] | None = None,
    router: Router | None = None,
) -> Decision:
    """The reference decision for one message of ``sample``'s headers (groups in ``absent`` not attached;
    ``lag``: unconfirmed counts per group)."""
    cached = _TABLES.get(id(config))
    if cached is None or cached[0] is not config:
        cached = _TABLES[id(config)] = (config, build_table(config))
    table = cached[1]
    snapshot = Snapshot({(app, g): n for g, n in (lag or {}).items()}, frozenset((app, g) for g in absent))
    result = (router or Router()).route(table, MessageView("orders", headers_of(sample)), snapshot, 0, app)
    (decision,) = [d for d in result.decisions if d.app == app]
    return decision


def config_of(app: AppConfig, groups: list[GroupConfig]) -> Config:
    return Config(1, {app.name: app}, {(g.app, g.name): g for g in groups})
