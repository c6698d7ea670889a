"""Input topics given as ``^regex``: matched in linear time by RE2, whatever the pattern.

Python's ``re`` backtracks: ``^(a+)+$`` against a 44-character topic name runs for hours, and ``config apply``
and every worker's config thread evaluate these patterns against every topic name. RE2 never backtracks. Its
syntax is Python's minus backreferences and lookaround (refused at apply with the reason). librdkafka matches
the same ``^`` subscriptions itself with its own engine; patterns in the common subset (literals, classes,
``.`` ``*`` ``+`` ``?`` ``|``, groups, anchors) mean the same to both. Search semantics, as librdkafka's: write
``$`` to anchor the end.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import re2

from subroute.errors import SubrouteError

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # errors are reported to the user, not logged to stderr by the library


class PatternError(SubrouteError, ValueError):
    """A ``^regex`` that RE2 does not accept."""


@lru_cache(maxsize=4096)
def compile_pattern(pattern: str) -> Any:
    try:
        return re2.compile(pattern, options=_OPTIONS)
    except re2.error as exc:
        reason = (
            exc.args[0].decode(errors="replace") if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        )
        raise PatternError(reason) from None


def input_matches(pattern: str, topic: str) -> bool:
    """Whether an ``inputs`` entry (a topic name, or a regex starting with ``^``) selects ``topic``."""
    if pattern.startswith("^"):
        return compile_pattern(pattern).search(topic) is not None
    return pattern == topic
