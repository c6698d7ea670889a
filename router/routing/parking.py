"""Parking: records that match nothing yet wait on their app's pending topic, stamped with the config version
they were parked under. Pure.

A parked record is re-evaluated only under a newer config version, or once it has expired (then it goes to the
dead-letter topic); until then the worker leaves its partition paused, so nothing spins.
"""

from __future__ import annotations

from collections.abc import Sequence

from subroute import names
from subroute.routing.decisions import RoutingTable
from subroute.routing.expiration import is_expired


def pending_topics(prefix: str, table: RoutingTable) -> dict[str, str]:
    """Pending topic -> its app, for every app of ``table``."""
    return {names.pending_topic(prefix, app.name): app.name for app in table.apps}


def parked_version(headers: Sequence[tuple[str, bytes | None]]) -> int | None:
    """The config version a pending record was parked under; None when it carries none that parses."""
    for key, value in headers:
        if key == names.CONFIG_VERSION and value is not None and len(value) <= 20 and value.isdigit():
            return int(value)
    return None


def is_due(
    prefix: str,
    table: RoutingTable,
    topic: str,
    headers: Sequence[tuple[str, bytes | None]],
    timestamp_ms: int,
    now_ms: int,
) -> bool:
    """Whether a record of a pending topic is to be evaluated again now: parked under an older version (or under
    none that parses), or expired."""
    parked = parked_version(headers)
    if parked is None or parked < table.version:
        return True
    app = table.app(names.app_of_pending(prefix, topic))
    if app is None:
        return False
    return is_expired(app.config, headers, timestamp_ms, now_ms)
