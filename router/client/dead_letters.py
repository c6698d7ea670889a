"""Redriving dead letters, as pure functions of headers (``subroute dlq redrive``): the headers a redriven record
carries, and the topic it goes back to. The dead-letter format itself is ``wire``'s."""

from __future__ import annotations

from collections.abc import Iterable

from subroute import wire


def redrive_headers(headers: wire.HeadersIn | None, at_ms: int, topic: str) -> wire.Headers:
    """Back to a group: delivery and cancel counts reset, reason and move mark dropped, marked
    ``subroute.redriven: dlq``."""
    reason = wire.header_value(headers, wire.DLQ_REASON)
    return wire.with_event(
        headers,
        wire.event(wire.REDRIVE, at_ms, to=topic, reason=reason),
        {
            wire.DLQ_REASON: None,
            wire.DELIVERIES: None,
            wire.CANCELS: None,
            wire.MOVED_FROM: None,
            wire.REDRIVEN: wire.REDRIVEN_FROM_DLQ,
        },
    )


def redrive_target(prefix: str, app: str, headers: wire.HeadersIn | None, groups: Iterable[str]) -> str:
    """Where a dead letter goes back to: the band topic it was last delivered from when that is a band of the
    group named in ``subroute.group``, else that group's topic; the app's pending topic when the group is
    unknown (the router routed it nowhere, or the group was deleted) so that the router decides again."""
    group = wire.header_value(headers, wire.GROUP)
    if group is None or group not in set(groups):
        return wire.pending_topic(prefix, app)
    for past in reversed(wire.history_of(headers)):
        topic = past.get("topic")
        if isinstance(topic, str) and wire.band_of_topic(prefix, app, group, topic) is not None:
            return topic
    return wire.group_topic(prefix, app, group)
