"""Dead-letter records and their redrive, as pure functions of headers (shared by the client and ``subroute dlq``).

A dead-letter record keeps the original key, value and headers, and adds ``subroute.dlq-reason`` and
``subroute.history``: a JSON list of events (``cancel``, ``lease-expired``, ``dead-letter``, ``redrive``), each
with the time in epoch milliseconds and where the message was.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence

from subroute import names
from subroute.client.delivery import CANCELS, MOVED_FROM, Headers, header_value, replace_headers
from subroute.routing import priority

REASON_PATTERN = re.compile(r"^[a-z0-9][a-z0-9-]{0,63}$")
DLQ_REDRIVE_MARK = b"dlq"

Event = dict[str, object]


def event(kind: str, at_ms: int, **fields: object) -> Event:
    return {"event": kind, "at": at_ms, **{k: v for k, v in fields.items() if v is not None}}


def history_of(headers: Sequence[tuple[str, bytes | None]] | None) -> list[Event]:
    text = header_value(headers, names.HISTORY)
    if not text:
        return []
    try:
        parsed = json.loads(text)
    except ValueError:
        return []
    return [e for e in parsed if isinstance(e, dict)] if isinstance(parsed, list) else []


def with_event(
    headers: Sequence[tuple[str, bytes | None]] | None,
    new: Event,
    updates: dict[str, bytes | None] | None = None,
) -> Headers:
    """The headers with ``new`` appended to the history (and ``updates`` applied)."""
    history = [*history_of(headers), new]
    changes: dict[str, bytes | None] = dict(updates or {})
    changes[names.HISTORY] = json.dumps(history, separators=(",", ":")).encode()
    return replace_headers(headers, changes)


def dead_letter_headers(
    headers: Sequence[tuple[str, bytes | None]] | None, reason: str, new: Event
) -> Headers:
    return with_event(headers, new, {names.DLQ_REASON: reason.encode()})


def redrive_headers(headers: Sequence[tuple[str, bytes | None]] | None, at_ms: int, topic: str) -> Headers:
    """Back to a group: delivery and cancel counts reset, reason and move mark dropped, marked
    ``subroute.redriven: dlq``."""
    reason = header_value(headers, names.DLQ_REASON)
    return with_event(
        headers,
        event("redrive", at_ms, to=topic, reason=reason),
        {
            names.DLQ_REASON: None,
            names.DELIVERIES: None,
            CANCELS: None,
            MOVED_FROM: None,
            names.REDRIVEN: DLQ_REDRIVE_MARK,
        },
    )


def redrive_target(
    prefix: str, app: str, headers: Sequence[tuple[str, bytes | None]] | None, groups: Iterable[str]
) -> str:
    """Where a dead letter goes back to: the band topic it was last delivered from when that is a band of the
    group named in ``subroute.group``, else that group's topic; the app's pending topic when the group is
    unknown (the router routed it nowhere, or the group was deleted) so that the router decides again."""
    group = header_value(headers, names.GROUP)
    if group is None or group not in set(groups):
        return names.pending_topic(prefix, app)
    for past in reversed(history_of(headers)):
        topic = past.get("topic")
        if isinstance(topic, str) and priority.band_of_topic(prefix, app, group, topic) is not None:
            return topic
    return names.group_topic(prefix, app, group)


def reason_of(headers: Sequence[tuple[str, bytes | None]] | None) -> str:
    return header_value(headers, names.DLQ_REASON) or "unknown"
