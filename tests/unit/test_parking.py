"""Parked records: re-evaluated under a newer config version, or once expired; otherwise they wait."""

from __future__ import annotations

from subroute import wire
from subroute.config.model import AppConfig, Config
from subroute.routing.decisions import build_table
from subroute.routing.parking import is_due, parked_version, pending_topics, waiting_reason

TABLE = build_table(
    Config(version=5, apps={"billing": AppConfig(name="billing", inputs=("orders",), expiration_ms=60_000)})
)
PENDING = "p.billing.pending"


def test_pending_topics_name_their_app() -> None:
    assert pending_topics("p", TABLE) == {PENDING: "billing"}


def test_due_under_a_newer_version_or_once_expired() -> None:
    now = 100_000
    assert not is_due("p", TABLE, PENDING, [(wire.CONFIG_VERSION, b"5")], now - 1_000, now)
    assert is_due("p", TABLE, PENDING, [(wire.CONFIG_VERSION, b"4")], now - 1_000, now)
    assert is_due("p", TABLE, PENDING, [(wire.CONFIG_VERSION, b"5")], now - 61_000, now)  # expired


def test_a_record_without_a_readable_version_is_evaluated_rather_than_left_waiting() -> None:
    now = 100_000
    for headers in ([], [(wire.CONFIG_VERSION, b"x")], [(wire.CONFIG_VERSION, b"9" * 10_000)]):
        assert is_due("p", TABLE, PENDING, headers, now - 1_000, now)
    assert parked_version([(wire.CONFIG_VERSION, None), (wire.CONFIG_VERSION, b"12")]) == 12


def test_a_record_waiting_for_a_consumer_or_room_is_due_whenever_its_partition_is_read() -> None:
    now = 100_000
    for reason in (b"capacity", b"no-consumer"):
        headers = [(wire.CONFIG_VERSION, b"5"), (wire.PENDING_REASON, reason)]
        assert is_due("p", TABLE, PENDING, headers, now - 1_000, now)
        assert waiting_reason(headers) == reason.decode()
    # an unknown reason (hand-written) is no reason: the record waits for a newer version like any other
    unknown = [(wire.CONFIG_VERSION, b"5"), (wire.PENDING_REASON, b"bored")]
    assert not is_due("p", TABLE, PENDING, unknown, now - 1_000, now) and waiting_reason(unknown) is None
