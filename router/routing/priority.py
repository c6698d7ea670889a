"""Priority bands (AMPS ``Priority``) on Kafka: which band a priority value falls in.

Kafka cannot reorder a partition, so priority is coarse: a group has ten bands, 0 (lowest) to 9 (highest), as
JMS's priorities, each a topic of its own (``wire.band_topic``). The router writes each message to the band of its
priority value; the consumer client reads every band and always delivers from the highest band that has a
message waiting.
"""

from __future__ import annotations

import math

from subroute.wire import HIGHEST_BAND, LOWEST_BAND


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
