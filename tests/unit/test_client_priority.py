"""Priority bands (router.routing.priority) and dead-letter formats (router.client.dead_letters)."""

from __future__ import annotations

import math
import re

import pytest

from subroute import names
from subroute.client.dead_letters import (
    dead_letter_headers,
    event,
    history_of,
    redrive_headers,
    redrive_target,
)
from subroute.client.delivery import CANCELS, header_value
from subroute.routing import priority


@pytest.mark.parametrize(
    ("value", "band"),
    [
        (0, 0),
        (4, 4),
        (9, 9),
        (10, 9),  # clamped to JMS's 0..9
        (2**63, 9),
        (-3, 0),
        (7.9, 7),
        (math.nan, 0),  # AMPS: "Non-numeric values or NULL are treated as NaN, and have the lowest priority"
        (math.inf, 9),
        (None, 0),
        ("8", 0),
        (True, 0),
    ],
)
def test_band_of(value: object, band: int) -> None:
    assert priority.band_of(value) == band


def test_band_topics_and_back() -> None:
    assert priority.band_topic("subroute", "orders", "risk", 0) == "subroute.orders.risk"
    assert priority.band_topic("subroute", "orders", "risk", 7) == "subroute.orders.risk.p7"
    assert len(priority.band_topics("subroute", "orders", "risk")) == 10
    for band, topic in enumerate(priority.band_topics("my.prefix", "orders", "risk")):
        assert priority.band_of_topic("my.prefix", "orders", "risk", topic) == band
    assert priority.band_of_topic("subroute", "orders", "risk", "subroute.orders.risk.p0") is None
    assert priority.band_of_topic("subroute", "orders", "risk", "subroute.orders.riskier") is None
    with pytest.raises(ValueError):
        priority.band_topic("subroute", "orders", "risk", 10)


def test_topic_regex_matches_exactly_the_bands() -> None:
    pattern = re.compile(priority.topic_regex("my.pre-fix", "orders", "risk"))
    for topic in priority.band_topics("my.pre-fix", "orders", "risk"):
        assert pattern.match(topic), topic
    for other in [
        "my.pre-fix.orders.risk.p0",
        "my.pre-fix.orders.risk.p10",
        "my.pre-fix.orders.riskier",
        "myXpre-fix.orders.risk",  # the dots are literal
        "my.pre-fix.orders.dlq",
        "x.my.pre-fix.orders.risk",
    ]:
        assert not pattern.match(other), other


def test_dead_letter_keeps_headers_and_adds_reason_and_history() -> None:
    original = [(names.SOURCE, b"Jobs/0/3"), (names.GROUP, b"workers"), ("Customer", b"7")]
    cancelled = dead_letter_headers(original, "max-cancels", event("dead-letter", 5, reason="max-cancels"))
    assert cancelled[:3] == original
    assert header_value(cancelled, names.DLQ_REASON) == "max-cancels"
    assert history_of(cancelled) == [{"event": "dead-letter", "at": 5, "reason": "max-cancels"}]


def test_redrive_resets_counts_and_marks_the_record() -> None:
    letter = [
        (names.GROUP, b"workers"),
        (names.DELIVERIES, b"3"),
        (CANCELS, b"3"),
        (names.DLQ_REASON, b"max-cancels"),
        (names.HISTORY, b'[{"event":"cancel","at":1}]'),
    ]
    back = redrive_headers(letter, 9, "p.Jobs.workers")
    assert header_value(back, names.DELIVERIES) is None
    assert header_value(back, CANCELS) is None
    assert header_value(back, names.DLQ_REASON) is None
    assert header_value(back, names.REDRIVEN) == "dlq"
    assert [e["event"] for e in history_of(back)] == ["cancel", "redrive"]


def test_redrive_target() -> None:
    in_band = [
        (names.GROUP, b"workers"),
        (names.HISTORY, b'[{"event":"cancel","topic":"p.Jobs.workers.p4"}]'),
    ]
    assert redrive_target("p", "Jobs", in_band, ["workers"]) == "p.Jobs.workers.p4"
    assert redrive_target("p", "Jobs", [(names.GROUP, b"workers")], ["workers"]) == "p.Jobs.workers"
    assert redrive_target("p", "Jobs", [(names.GROUP, b"gone")], ["workers"]) == "p.Jobs.pending"
    assert redrive_target("p", "Jobs", [], ["workers"]) == "p.Jobs.pending"
