"""The JSON log formatter: every field a log call passes reaches the line."""

from __future__ import annotations

import json
import logging
import sys

from subroute.ops.logs import JsonFormatter


def _line(logger: logging.Logger, call: str, *args: object, **kwargs: object) -> dict[str, object]:
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    handler = Keep()
    logger.addHandler(handler)
    try:
        getattr(logger, call)(*args, **kwargs)
    finally:
        logger.removeHandler(handler)
    return dict(json.loads(JsonFormatter().format(records[0])))


def test_flat_and_grouped_fields_both_appear() -> None:
    log = logging.getLogger("test.logs")
    log.setLevel(logging.INFO)
    flat = _line(log, "warning", "refused", extra={"partition": 0, "offset": 41, "reason": "bad expression"})
    assert (flat["msg"], flat["partition"], flat["offset"], flat["reason"]) == (
        "refused",
        0,
        41,
        "bad expression",
    )
    grouped = _line(log, "info", "in force", extra={"fields": {"version": 7}})
    assert grouped["version"] == 7 and "fields" not in grouped
    assert (grouped["level"], grouped["logger"]) == ("info", "test.logs")


def test_fields_never_replace_the_fixed_keys_and_exceptions_are_kept() -> None:
    log = logging.getLogger("test.logs")
    try:
        raise ValueError("boom")
    except ValueError:
        line = _line(
            log, "exception", "failed %s", "x", extra={"fields": {"msg": "spoofed", "level": "debug"}}
        )
    assert (line["msg"], line["level"]) == ("failed x", "error")
    assert "ValueError: boom" in str(line["exc"])
    assert sys.exc_info() == (None, None, None)
