"""JSON-lines logging: one object per line on stderr, ready for any log shipper."""

from __future__ import annotations

import json
import logging
import re
import sys
import time
from collections.abc import Callable

# What every LogRecord carries; anything else on a record came from the call's ``extra=``.
_STANDARD_ATTRIBUTES = frozenset(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {
    "message",
    "asctime",
}


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time, level, logger, message, then every field the call passed.

    Fields come either flat (``extra={"offset": 3}``) or grouped (``extra={"fields": {"offset": 3}}``); both end
    up as top-level keys, after the fixed ones, which they cannot replace.
    """

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        fields = getattr(record, "fields", None)
        extra = {k: v for k, v in record.__dict__.items() if k not in _STANDARD_ATTRIBUTES and k != "fields"}
        for key, value in [*extra.items(), *(fields.items() if isinstance(fields, dict) else ())]:
            entry.setdefault(str(key), value)
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


def configure(level: str = "INFO") -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())


class RepeatFilter(logging.Filter):
    """Lets the first of a run of equal messages through and holds back its repeats for ``window`` seconds.

    librdkafka logs a refused connection once per retry and per client (hundreds a minute for a worker whose broker
    is down); the operator needs it once. Messages are equal when they differ only in numbers and client names
    (``rdkafka#consumer-2``, ``after 0ms``), so one outage is one line per kind. The next line of a kind after
    its window carries ``repeated``: how many were held back in between. ``clock`` is injectable for tests.
    """

    _VARYING = re.compile(r"rdkafka#\w+-\d+|\d+")

    def __init__(self, window: float = 60.0, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self.window, self._clock = window, clock
        self._seen: dict[str, tuple[float, int]] = {}  # kind -> (when last let through, held back since)

    def filter(self, record: logging.LogRecord) -> bool:
        kind = f"{record.levelno}:{self._VARYING.sub('#', record.getMessage())}"
        now = self._clock()
        last = self._seen.get(kind)
        if last is not None and now - last[0] < self.window:
            self._seen[kind] = (last[0], last[1] + 1)
            return False
        if last is not None and last[1]:
            record.repeated = last[1]
        if len(self._seen) >= 1024:  # kinds that vary without bound: keep the memory bounded
            self._seen.clear()
        self._seen[kind] = (now, 0)
        return True
