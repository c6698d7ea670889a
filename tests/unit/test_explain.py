"""``explain``: every app's filter and subscriptions evaluated one by one, the decision the router makes, and why;
as text and as data (``explain -o json``). Pure: no Kafka."""

from __future__ import annotations

import json

from subroute.config.model import AppConfig, Config, GroupConfig, SubscriptionConfig
from subroute.routing.decisions import MessageView, build_table
from subroute.routing.explain import explain, render, to_document
from subroute.routing.snapshot import Snapshot

TYPES = {"CustomerId": "int", "OrderType": "string"}


def _config() -> Config:
    # Seed 000's example: the more specific subscription has the higher priority and wins where both match.
    billing = AppConfig(name="billing", inputs=("orders",), properties=TYPES, filter=('OrderType != "TEST"',))
    groups = [
        GroupConfig("billing", "vip", (SubscriptionConfig("CustomerId == 0", 10),), order=0),
        GroupConfig("billing", "everyone", (SubscriptionConfig("CustomerId >= 0", 5),), order=1),
    ]
    return Config(7, {"billing": billing}, {(g.app, g.name): g for g in groups})


def _explained(**props: str) -> list:  # type: ignore[type-arg]
    message = MessageView("orders", [(k, v.encode()) for k, v in props.items()], 1)
    return explain(build_table(_config()), message, {}, 2)


def test_the_higher_priority_match_is_the_decision_and_every_evaluation_is_shown() -> None:
    [entry] = _explained(CustomerId="0", OrderType="EXPRESS")
    assert entry.action == "route" and entry.destination and entry.destination.endswith("vip")
    assert [(p, e.value) for p, e in entry.subscriptions] == [(10, True), (5, True)]
    assert [e.value for e in entry.filter] == [True]
    text = render([entry])
    assert "priority   10" in text and "-> match" in text and "decision: route" in text


def test_a_filtered_message_and_a_mistyped_property_are_explained() -> None:
    [filtered] = _explained(CustomerId="0", OrderType="TEST")
    assert filtered.action == "filtered"
    [mistyped] = _explained(CustomerId="zero", OrderType="EXPRESS")  # not an int: the property is missing
    assert mistyped.properties.get("CustomerId") is None
    assert all(not e.value for _, e in mistyped.subscriptions)


def test_the_json_document_carries_what_the_text_shows() -> None:
    report = _explained(CustomerId="3", OrderType="EXPRESS")
    document = json.loads(json.dumps(to_document(report, 7)))
    assert document["config_version"] == 7
    [app] = document["apps"]
    assert app["app"] == "billing" and app["action"] == "route" and app["destination"].endswith("everyone")
    assert [(s["priority"], s["match"]) for s in app["subscriptions"]] == [(10, False), (5, True)]
    assert app["filter"] == [
        {
            "label": app["filter"][0]["label"],
            "expression": 'OrderType != "TEST"',
            "match": True,
            "error": None,
        }
    ]
    assert app["why"] == report[0].why


def test_a_record_waiting_for_a_consumer_says_which_consumer_groups_to_start() -> None:
    """presence: required (the default) and nobody attached: explain names the Kafka consumer groups to start and
    the presence: ignored alternative, as the worker's warning does."""
    message = MessageView("orders", [("CustomerId", b"0"), ("OrderType", b"EXPRESS")], 1)
    nobody = Snapshot({}, frozenset({("billing", "vip"), ("billing", "everyone")}))
    [entry] = explain(build_table(_config()), message, nobody, 2, prefix="shop")
    assert (entry.action, entry.destination) == ("pending", None)
    assert entry.advice is not None
    assert "Kafka consumer group(s) shop.billing.everyone, shop.billing.vip" in entry.advice
    assert "`presence: ignored` on app billing" in entry.advice
    assert f"what to do: {entry.advice}" in render([entry])
    assert to_document([entry], 7)["apps"][0]["advice"] == entry.advice  # type: ignore[index]
    # attached: routed, no advice
    [routed] = explain(build_table(_config()), message, Snapshot({}, frozenset()), 2, prefix="shop")
    assert routed.action == "route" and routed.advice is None
