"""One duration grammar for the config and the ``subroute.expiration`` header, linear and bounded."""

from __future__ import annotations

import time

import pytest

from subroute import wire
from subroute.durations import MAX_DURATION_TEXT, format_duration_ms, parse_duration_ms
from subroute.routing.expiration import message_expiration


@pytest.mark.parametrize(
    ("text", "ms"),
    [("250ms", 250), ("30s", 30_000), (" 5 m ", 300_000), ("1h", 3_600_000), ("2d", 172_800_000), ("42", 42)],
)
def test_durations(text: str, ms: int) -> None:
    assert parse_duration_ms(text) == ms
    assert parse_duration_ms(format_duration_ms(ms)) == ms


@pytest.mark.parametrize("text", ["", "s", "-5s", "5 x", "5sec", "1.5h", "٣s", "5" * (MAX_DURATION_TEXT + 1)])
def test_not_durations(text: str) -> None:
    assert parse_duration_ms(text) is None


def test_a_unit_can_be_required() -> None:
    assert parse_duration_ms("30", default_unit=None) is None
    assert parse_duration_ms("30s", default_unit=None) == 30_000


@pytest.mark.parametrize(
    "value",
    [
        b"1" + b" " * 40_000 + b"x",  # quadratic for the former regex: 7.7 s per record at 40 kB
        b"9" * 200_000,
        b"\xff" * 100_000,
        b"1" + b"\t" * 120_000,
    ],
)
def test_hostile_expiration_headers_are_ignored_in_bounded_time(value: bytes) -> None:
    headers = [(wire.EXPIRATION, value), (wire.EXPIRATION, b"30s")]
    began = time.perf_counter()
    for _ in range(100):
        assert message_expiration(headers) == 30_000  # the hostile one is skipped, the next one counts
    assert time.perf_counter() - began < 1.0  # 100 evaluations: a hostile-input bound, not a benchmark
