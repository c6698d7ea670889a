"""The JSON log formatter: every field a log call passes reaches the line."""

from __future__ import annotations

import json
import logging
import sys

from subroute.ops.logs import JsonFormatter, RepeatFilter


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


def test_repeats_of_one_kind_are_let_through_once_a_window_with_their_count() -> None:
    """librdkafka's refused connections differ only in numbers and client names: one line a window."""
    now = [0.0]
    repeats = RepeatFilter(window=60, clock=lambda: now[0])

    def record(message: str, level: int = logging.ERROR) -> logging.LogRecord:
        return logging.LogRecord("subroute.librdkafka", level, __file__, 0, message, (), None)

    refused = "FAIL [rdkafka#consumer-{n}] 127.0.0.1:1/bootstrap: Connection refused (after {ms}ms in state CONNECT)"
    first = record(refused.format(n=2, ms=0))
    assert repeats.filter(first) and not hasattr(first, "repeated")
    assert not any(repeats.filter(record(refused.format(n=n, ms=n))) for n in range(3, 40))
    # another kind, or the same text at another level, is not a repeat
    assert repeats.filter(record("FAIL [rdkafka#producer-1] SASL handshake failed"))
    assert repeats.filter(record(refused.format(n=2, ms=0), logging.WARNING))
    now[0] = 61.0
    after = record(refused.format(n=7, ms=3))
    assert repeats.filter(after) and after.repeated == 37  # type: ignore[attr-defined]
    assert not repeats.filter(record(refused.format(n=2, ms=0)))
