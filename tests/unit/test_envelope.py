"""The routed record: value, key, timestamp and original headers kept; routing headers added in order."""

from __future__ import annotations

from subroute import wire
from subroute.config.model import AppConfig, Config, GroupConfig
from subroute.routing.decisions import Action, Decision, build_table
from subroute.routing.envelope import Envelopes, InputRecord, destination_topic, records_for

TABLE = build_table(
    Config(
        version=7,
        apps={"billing": AppConfig(name="billing", inputs=("orders",))},
        groups={("billing", "vip"): GroupConfig(app="billing", name="vip")},
    )
)


def _input(headers: list[tuple[str, bytes | None]]) -> InputRecord:
    return InputRecord("orders", headers, 1_000, partition=2, offset=41, key=b"k", value=b"\x00value")


def test_a_routed_record_keeps_the_input_and_adds_the_routing_headers_in_order() -> None:
    routed = Decision("billing", Action.ROUTE, group="vip", subscription="billing/vip/0")
    [(topic, value, key, headers, timestamp)] = records_for(
        _input([("Region", b"EU"), ("Empty", None)]), [routed], 5_000, False, Envelopes("p", TABLE)
    )
    assert (topic, value, key, timestamp) == ("p.billing.vip", b"\x00value", b"k", 1_000)
    assert headers == [
        ("Region", b"EU"),
        ("Empty", None),
        (wire.SOURCE, b"orders/2/41"),
        (wire.APP, b"billing"),
        (wire.GROUP, b"vip"),
        (wire.SUBSCRIPTION, b"billing/vip/0"),
        (wire.CONFIG_VERSION, b"7"),
        (wire.ROUTED_AT, b"5000"),
    ]


def test_filtered_decisions_write_nothing_and_message_groups_set_the_key() -> None:
    grouped = Decision("billing", Action.ROUTE, group="vip", key=b"customer-9")
    out = records_for(
        _input([]), [Decision("billing", Action.FILTERED), grouped], 5_000, False, Envelopes("p", TABLE)
    )
    assert [(r[0], r[2]) for r in out] == [("p.billing.vip", b"customer-9")]


def test_a_redriven_record_sheds_its_parking_headers_and_dead_letters_say_why() -> None:
    parked = [
        ("Region", b"EU"),
        (wire.APP, b"billing"),
        (wire.CONFIG_VERSION, b"3"),
        (wire.ROUTED_AT, b"1"),
    ]
    dead = Decision("billing", Action.DEAD_LETTER, reason="expired")
    [(topic, _, _, headers, _)] = records_for(_input(parked), [dead], 5_000, True, Envelopes("p", TABLE))
    assert topic == "p.billing.dlq"
    assert headers == [
        ("Region", b"EU"),
        (wire.REDRIVEN, b"pending"),
        (wire.APP, b"billing"),
        (wire.CONFIG_VERSION, b"7"),
        (wire.ROUTED_AT, b"5000"),
        (wire.DLQ_REASON, b"expired"),
    ]


def test_destinations() -> None:
    assert destination_topic(Decision("a", Action.ROUTE, group="g", band=3), "p") == "p.a.g.p3"
    assert destination_topic(Decision("a", Action.PENDING), "p") == "p.a.pending"
    assert destination_topic(Decision("a", Action.DEAD_LETTER, reason="x"), "p") == "p.a.dlq"


def test_forged_router_headers_are_dropped_and_counted() -> None:
    from subroute.routing.envelope import without_forged_headers

    headers = [
        ("Region", b"EU"),
        (wire.CONFIG_VERSION, b"999"),
        (wire.EXPIRATION, b"30s"),  # producers may set this one
        (wire.DELIVERIES, b"0"),
        ("subroutex", b"not ours"),
    ]
    kept, dropped = without_forged_headers(headers)
    assert kept == [("Region", b"EU"), (wire.EXPIRATION, b"30s"), ("subroutex", b"not ours")]
    assert dropped == 2


def test_a_waiting_record_says_why_and_loses_the_reason_when_redriven() -> None:
    waits = Decision("billing", Action.PENDING, reason="capacity")
    [(topic, _, _, headers, _)] = records_for(_input([]), [waits], 5_000, False, Envelopes("p", TABLE))
    assert topic == "p.billing.pending" and headers[-1] == (wire.PENDING_REASON, b"capacity")
    routed = Decision("billing", Action.ROUTE, group="vip")
    [(_, _, _, again, _)] = records_for(_input(headers), [routed], 6_000, True, Envelopes("p", TABLE))
    assert wire.PENDING_REASON not in dict(again) and (wire.REDRIVEN, b"pending") in again


def test_a_dropped_record_is_written_nowhere() -> None:
    dropped = Decision("billing", Action.DROP, reason="expired")
    assert records_for(_input([]), [dropped], 5_000, False, Envelopes("p", TABLE)) == []


def test_parked_records_of_a_message_group_are_keyed_by_the_group() -> None:
    """Issue 22, item 4: a waiting record of a message group is keyed by its group id (not the producer's key),
    so all of one group's waiting records share one pending partition and leave it in order; a routed dead
    letter keeps the producer's key."""
    from subroute.config.model import SubscriptionConfig
    from subroute.routing.decisions import MessageView, Router
    from subroute.routing.snapshot import Snapshot

    app = AppConfig(name="carts", inputs=("orders",), properties={"Cart": "string"}, group_by="Cart")
    table = build_table(
        Config(
            version=7,
            apps={"carts": app},
            groups={("carts", "g"): GroupConfig("carts", "g", (SubscriptionConfig('Cart != "none"'),))},
        )
    )
    nobody = Snapshot({}, frozenset({("carts", "g")}))
    envelopes = Envelopes("p", table)
    keys = []
    for i, (cart, input_key) in enumerate([("c1", b"a"), ("c1", b"b"), ("c1", None), ("none", b"c")]):
        message = InputRecord("orders", [("Cart", cart.encode())], 1_000, b"v", 0, i, input_key)
        decisions = Router().route(table, MessageView("orders", message.headers, 0), nobody, 5_000).routed
        [(topic, _, key, _, _)] = records_for(message, decisions, 5_000, False, envelopes)
        assert topic == "p.carts.pending"
        keys.append(key)
    # waiting for a consumer (the first three) or matching nothing (the last): keyed by the group either way
    assert keys == [b"c1", b"c1", b"c1", b"none"]
    dead = Decision("carts", Action.DEAD_LETTER, reason="expired")
    [(_, _, key, _, _)] = records_for(_input([]), [dead], 5_000, False, envelopes)
    assert key == b"k"
