"""Expiration (AMPS): a message older than its app's ``expiration``, or than its own ``subroute.expiration``
header, is not delivered. Pure, shared by the router and the consumer client, which dead-letter it or, for an app
with ``on_expire: drop``, drop it (``should_drop``)."""

from __future__ import annotations

from subroute import wire
from subroute.config.model import AppConfig
from subroute.durations import MAX_DURATION_TEXT, parse_duration_ms


def should_drop(app: AppConfig) -> bool:
    """Whether the app's expired messages are removed without a write (``on_expire: drop``, AMPS's default)."""
    return app.on_expire == "drop"


def message_expiration(headers: wire.HeadersIn | None) -> int | None:
    """The message's own ``subroute.expiration`` in ms (the first that parses), if any.

    A value that is not a duration (too long, not ASCII, no digits) is ignored, never an error: the header is
    set by whoever produced the input.
    """
    expiration = wire.EXPIRATION  # a local: this scans every header of every record
    for name, raw in headers or ():
        if name == expiration and raw and len(raw) <= MAX_DURATION_TEXT and raw.isascii():
            parsed = parse_duration_ms(raw.decode("ascii"))
            if parsed is not None:
                return parsed
    return None


def expiration_of(app: AppConfig, headers: wire.HeadersIn | None) -> int | None:
    """The message's own ``subroute.expiration`` wins over the app's."""
    own = message_expiration(headers)
    return own if own is not None else app.expiration_ms


def is_expired(app: AppConfig, headers: wire.HeadersIn | None, timestamp_ms: int, now_ms: int) -> bool:
    limit = expiration_of(app, headers)
    return limit is not None and timestamp_ms > 0 and now_ms - timestamp_ms > limit
