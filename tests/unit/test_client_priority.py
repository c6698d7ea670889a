"""Priority bands (router/routing/priority.py, and their topics in router/wire.py) and the dead-letter formats (router/wire.py, router/admin/redrive.py)."""

from __future__ import annotations

import math
import re

import pytest

from subroute import wire
from subroute.admin.redrive import redrive_headers, redrive_target
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
    assert wire.band_topic("subroute", "orders", "risk", 0) == "subroute.orders.risk"
    assert wire.band_topic("subroute", "orders", "risk", 7) == "subroute.orders.risk.p7"
    assert len(wire.band_topics("subroute", "orders", "risk")) == 10
    for band, topic in enumerate(wire.band_topics("my.prefix", "orders", "risk")):
        assert wire.band_of_topic("my.prefix", "orders", "risk", topic) == band
    assert wire.band_of_topic("subroute", "orders", "risk", "subroute.orders.risk.p0") is None
    assert wire.band_of_topic("subroute", "orders", "risk", "subroute.orders.riskier") is None
    with pytest.raises(ValueError):
        wire.band_topic("subroute", "orders", "risk", 10)


def test_topic_regex_matches_exactly_the_bands() -> None:
    pattern = re.compile(wire.topic_regex("my.pre-fix", "orders", "risk"))
    for topic in wire.band_topics("my.pre-fix", "orders", "risk"):
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
    original = [(wire.SOURCE, b"Jobs/0/3"), (wire.GROUP, b"workers"), ("Customer", b"7")]
    cancelled = wire.dead_letter_headers(
        original, "max-cancels", wire.event("dead-letter", 5, reason="max-cancels")
    )
    assert cancelled[:3] == original
    assert wire.header_value(cancelled, wire.DLQ_REASON) == "max-cancels"
    assert wire.history_of(cancelled) == [{"event": "dead-letter", "at": 5, "reason": "max-cancels"}]


def test_redrive_resets_counts_and_marks_the_record() -> None:
    letter = [
        (wire.GROUP, b"workers"),
        (wire.DELIVERIES, b"3"),
        (wire.CANCELS, b"3"),
        (wire.DLQ_REASON, b"max-cancels"),
        (wire.HISTORY, b'[{"event":"cancel","at":1}]'),
    ]
    back = redrive_headers(letter, 9, "p.Jobs.workers")
    assert wire.header_value(back, wire.DELIVERIES) is None
    assert wire.header_value(back, wire.CANCELS) is None
    assert wire.header_value(back, wire.DLQ_REASON) is None
    assert wire.header_value(back, wire.REDRIVEN) == "dlq"
    assert [e["event"] for e in wire.history_of(back)] == ["cancel", "redrive"]


def test_redrive_target() -> None:
    in_band = [
        (wire.GROUP, b"workers"),
        (wire.HISTORY, b'[{"event":"cancel","topic":"p.Jobs.workers.p4"}]'),
    ]
    assert redrive_target("p", "Jobs", in_band, ["workers"]) == "p.Jobs.workers.p4"
    assert redrive_target("p", "Jobs", [(wire.GROUP, b"workers")], ["workers"]) == "p.Jobs.workers"
    assert redrive_target("p", "Jobs", [(wire.GROUP, b"gone")], ["workers"]) == "p.Jobs.pending"
    assert redrive_target("p", "Jobs", [], ["workers"]) == "p.Jobs.pending"
