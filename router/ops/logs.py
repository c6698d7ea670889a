"""JSON-lines logging: one object per line on stderr, ready for any log shipper."""

from __future__ import annotations

import json
import logging
import sys
import time

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
