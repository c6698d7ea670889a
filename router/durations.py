"""Durations as people write them: ``250ms``, ``30s``, ``5m``, ``1h``, ``2d``; one grammar for the YAML config
and the ``subroute.expiration`` header.

Header values come from any producer, so parsing is linear and bounded: text longer than
``MAX_DURATION_TEXT`` characters is not a duration, whatever it holds.
"""

from __future__ import annotations

UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
MAX_DURATION_TEXT = 32


def parse_duration_ms(text: str, *, default_unit: str | None = "ms") -> int | None:
    """``[spaces] digits [spaces] [unit] [spaces]`` in milliseconds, or None when ``text`` is not that.

    ``default_unit`` applies to bare digits; None makes the unit mandatory.
    """
    if len(text) > MAX_DURATION_TEXT:
        return None
    body = text.strip()
    digits = 0
    while digits < len(body) and "0" <= body[digits] <= "9":
        digits += 1
    if digits == 0:
        return None
    unit = body[digits:].lstrip() or default_unit
    if unit not in UNIT_MS:
        return None
    return int(body[:digits]) * UNIT_MS[unit]


def format_duration_ms(ms: int) -> str:
    """The shortest exact form: ``90000`` -> ``90s``, ``5400000`` -> ``90m``."""
    for unit in ("d", "h", "m", "s"):
        if ms and ms % UNIT_MS[unit] == 0:
            return f"{ms // UNIT_MS[unit]}{unit}"
    return f"{ms}ms"
