"""Parking: records that match nothing yet, or that match but have nowhere to go now (no consumer attached, every
candidate at capacity), wait on their app's pending topic, stamped with the config version they were parked under
and, for the latter, the reason (``subroute.pending-reason``). Pure.

A record that matched nothing is evaluated again only under a newer config version, or once it has expired (then
it goes to the dead-letter topic). A record that waits for a consumer or for room is evaluated again by every pass
over its partition (routing/passes.py): when a new config version is in force, when a group of its app attaches or
leaves, when a group's unconfirmed count falls. What can go then is routed, even past records that still wait;
what still waits stays where it is, never written again. Whatever waits, the expired records leave at the next
sweep (routing/sweep.py).
"""

from __future__ import annotations

from subroute import wire
from subroute.routing.decisions import RoutingTable
from subroute.routing.expiration import is_expired
from subroute.wire import WAITING_REASONS


def pending_topics(prefix: str, table: RoutingTable) -> dict[str, str]:
    """Pending topic -> its app, for every app of ``table``."""
    return {wire.pending_topic(prefix, app.name): app.name for app in table.apps}


def parked_version(headers: wire.HeadersIn) -> int | None:
    """The config version a pending record was parked under; None when it carries none that parses."""
    for key, value in headers:
        if key == wire.CONFIG_VERSION and value is not None and len(value) <= 20 and value.isdigit():
            return int(value)
    return None


def waiting_reason(headers: wire.HeadersIn) -> str | None:
    """Why a pending record waits although a subscription matched it (``capacity``, ``no-consumer``); None when
    it matched nothing."""
    for key, value in headers:
        if key == wire.PENDING_REASON and value is not None:
            reason = value.decode("utf-8", errors="replace")
            return reason if reason in WAITING_REASONS else None
    return None


def is_due(
    prefix: str,
    table: RoutingTable,
    topic: str,
    headers: wire.HeadersIn,
    timestamp_ms: int,
    now_ms: int,
) -> bool:
    """Whether a record of a pending topic is to be evaluated again now: parked under an older version (or under
    none that parses), waiting for a consumer or for room (the partition is read only when woken), or expired."""
    parked = parked_version(headers)
    if parked is None or parked < table.version or waiting_reason(headers) is not None:
        return True
    app = table.app(wire.app_of_pending(prefix, topic))
    if app is None:
        return False
    return is_expired(app.config, headers, timestamp_ms, now_ms)
