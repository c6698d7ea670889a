"""Priority bands (AMPS ``Priority``) on Kafka: which band a priority value falls in, and the band topics.

Kafka cannot reorder a partition, so priority is coarse: a group has ten bands, 0 (lowest) to 9 (highest), as
JMS's priorities. Band 0 is the plain group topic ``<prefix>.<app>.<group>``; band N >= 1 is the topic
``<prefix>.<app>.<group>.p<N>``. The router writes each message to the band of its priority value; the consumer
client reads every band and always delivers from the highest band that has a message waiting.
"""

from __future__ import annotations

import math
import re

from subroute import names

LOWEST_BAND = 0
HIGHEST_BAND = 9
BANDS = tuple(range(LOWEST_BAND, HIGHEST_BAND + 1))

_BAND_SUFFIX = re.compile(r"\.p([1-9])$")


def band_of(value: object) -> int:
    """The band of a priority expression's result, clamped to 0..9.

    An evaluation error, a missing or non-numeric value (``None``, a string, a boolean) is band 0: AMPS treats
    such values as NaN, "the lowest priority". Fractions are truncated toward zero.
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        return LOWEST_BAND
    if isinstance(value, float):
        if math.isnan(value):
            return LOWEST_BAND
        if math.isinf(value):
            return HIGHEST_BAND if value > 0 else LOWEST_BAND
        value = int(value)
    return max(LOWEST_BAND, min(HIGHEST_BAND, value))


def band_topic(prefix: str, app: str, group: str, band: int) -> str:
    if not LOWEST_BAND <= band <= HIGHEST_BAND:
        raise ValueError(f"priority band {band} is outside {LOWEST_BAND}..{HIGHEST_BAND}")
    base = names.group_topic(prefix, app, group)
    return base if band == LOWEST_BAND else f"{base}.p{band}"


def band_topics(prefix: str, app: str, group: str) -> list[str]:
    """Every band topic of a group, lowest band first."""
    return [band_topic(prefix, app, group, band) for band in BANDS]


def band_of_topic(prefix: str, app: str, group: str, topic: str) -> int | None:
    """The band a topic holds for this group, or None when it is not one of the group's band topics."""
    base = names.group_topic(prefix, app, group)
    if topic == base:
        return LOWEST_BAND
    if topic.startswith(base):
        match = _BAND_SUFFIX.fullmatch(topic[len(base) :])
        if match:
            return int(match.group(1))
    return None


def _escape(text: str) -> str:
    # Names hold letters, digits, '_', '-' and '.'; escape only what a regex engine treats specially, because
    # librdkafka's own regex engine rejects escapes of ordinary characters that Python's re.escape emits.
    return "".join(c if c.isalnum() or c in "_-" else "\\" + c for c in text)


def topic_regex(prefix: str, app: str, group: str) -> str:
    """A Kafka subscription pattern (librdkafka treats a leading '^' as a regex) for all bands of a group."""
    return "^" + _escape(names.group_topic(prefix, app, group)) + r"(\.p[1-9])?$"
