"""Routing rules the seeds set where the code once deviated from them (issue 22: items 1, 5, 6 and 9), each checked
through both deciders: ``Router.route`` (the Python reference) and ``Router.route_batch`` (the native core), which
must agree record for record."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

import pytest

from subroute import wire
from subroute.admin.status import build as status_document
from subroute.config.model import AppConfig, Config, GroupConfig, SubscriptionConfig
from subroute.routing.capacity import group_limits
from subroute.routing.decisions import Action, MessageView, Router, RouteResult
from subroute.routing.native_routing import build_table
from subroute.routing.snapshot import Snapshot
from subroute.wire import CAPACITY, Headers

Lag = Mapping[tuple[str, str], int]


def config(*apps: AppConfig, groups: Sequence[GroupConfig]) -> Config:
    return Config(version=1, apps={a.name: a for a in apps}, groups={(g.app, g.name): g for g in groups})


def fresh(lag: Lag | None) -> Lag:
    """A snapshot of its own for each decider (routing notes what it routed in a snapshot)."""
    if isinstance(lag, Snapshot):
        return Snapshot(dict(lag.measured), lag.absent, lag.started_at)
    return lag or {}


def both(
    cfg: Config,
    messages: Sequence[MessageView],
    lag: Lag | None = None,
    now_ms: int = 0,
    only_app: str | None = None,
) -> list[RouteResult]:
    """Each message routed by ``route`` (one by one) and by ``route_batch`` (one call), from fresh routers: the
    results must be the same; returns them."""
    table = build_table(cfg)
    assert table.native is not None and table.native.decisions is not None
    router = Router()  # one router: its cursors carry from record to record
    own = fresh(lag)
    reference = [router.route(table, m, own, now_ms, only_app) for m in messages]
    native = Router().route_batch(table, messages, fresh(lag), now_ms, [only_app] * len(messages))
    for want, have in zip(reference, native, strict=True):
        assert (have.routed, list(have.filtered), have.evaluation_errors, have.decode_errors) == (
            want.routed,
            list(want.filtered),
            want.evaluation_errors,
            want.decode_errors,
        )
    return reference


# --- 1. the app filter comes before expiration ------------------------------------------------------------------

EXPRESS = AppConfig(
    name="express",
    inputs=("orders",),
    properties={"t": "string"},
    filter=('t == "EXPRESS"',),
    expiration_ms=1_000,
)
OTHERS = AppConfig(name="others", inputs=("orders",), properties={"t": "string"}, expiration_ms=1_000)
ROUTED_AT = 10_000  # 9 s after the records' timestamp: past the apps' 1 s expiration


def test_a_message_the_app_does_not_subscribe_to_is_filtered_whatever_its_age() -> None:
    """docs/design.md §2, step 1 (BlazingMQ auto-confirms what an app's subscription does not match; AMPS's queue holds
    only what matches its filter): an old BULK record is not the express app's, not even as a dead letter."""
    cfg = config(EXPRESS, OTHERS, groups=[GroupConfig("express", "g"), GroupConfig("others", "g")])
    bulk, express = (MessageView("orders", [("t", t)], 1_000) for t in (b"BULK", b"EXPRESS"))
    own = MessageView("orders", [("t", b"BULK"), (wire.EXPIRATION, b"1s")], 1_000)  # its own expiration
    results = both(cfg, [bulk, express, own], now_ms=ROUTED_AT)
    for result in (results[0], results[2]):
        decisions = {d.app: (d.action, d.reason) for d in result.decisions}
        assert decisions == {"express": (Action.FILTERED, None), "others": (Action.DEAD_LETTER, "expired")}
    decisions = {d.app: (d.action, d.reason) for d in results[1].decisions}
    assert decisions == {
        "express": (Action.DEAD_LETTER, "expired"),
        "others": (Action.DEAD_LETTER, "expired"),
    }


def test_a_waiting_record_the_new_filter_refuses_is_filtered_not_expired() -> None:
    """A parked record re-evaluated for its app (``only_app``, the pending topic's sweep and redrive) under a
    filter it no longer passes is filtered, however old: expiry applies only to what the app subscribes to."""
    cfg = config(EXPRESS, groups=[GroupConfig("express", "g")])
    (result,) = both(
        cfg, [MessageView("orders", [("t", b"BULK")], 1_000)], now_ms=ROUTED_AT, only_app="express"
    )
    assert [(d.app, d.action) for d in result.decisions] == [("express", Action.FILTERED)]


def test_expiry_of_what_passes_the_filter_keeps_its_error_counts() -> None:
    """The filter's errors and the header's decode failure are counted for the expired app as for any other (its
    filter was evaluated); its consumer subscriptions are not evaluated, so they count nothing."""
    app = AppConfig(
        name="express",
        inputs=("orders",),
        properties={"t": "string", "n": "int"},
        filter=('t == "EXPRESS"', "n / 0 == 1"),
        expiration_ms=1_000,
    )
    cfg = config(app, groups=[GroupConfig("express", "g", (SubscriptionConfig("n / 0 == 2"),))])
    headers: Headers = [("t", b"EXPRESS"), ("n", b"1"), ("n", b"x")]
    (result,) = both(cfg, [MessageView("orders", headers, 1_000)], now_ms=ROUTED_AT)
    assert [(d.action, d.reason) for d in result.decisions] == [(Action.DEAD_LETTER, "expired")]
    assert result.evaluation_errors == {"express": 1}
    assert result.decode_errors == {"express": {"n": 1}}


# --- 5. round-robin rotates over groups (consumers), not subscriptions ------------------------------------------

TYPES = {"CustomerId": "int"}


def twice_and_once(fairness: str) -> Config:
    """Group ``a`` has two subscriptions a message matches at priority 5, group ``b`` one."""
    app = AppConfig(name="billing", inputs=("orders",), properties=TYPES, fairness=fairness)
    return config(
        app,
        groups=[
            GroupConfig(
                "billing",
                "a",
                (SubscriptionConfig("CustomerId > 0", 5), SubscriptionConfig("CustomerId >= 0", 5)),
                order=0,
            ),
            GroupConfig("billing", "b", (SubscriptionConfig("CustomerId > 0", 5),), order=1),
        ],
    )


def customers(count: int) -> list[MessageView]:
    return [MessageView("orders", [("CustomerId", b"1")], 0) for _ in range(count)]


@pytest.mark.parametrize("fairness", ["round-robin", "proportional"])
def test_turns_go_to_groups_however_many_of_their_subscriptions_match(fairness: str) -> None:
    """BlazingMQ round-robins across consumers: each matching group gets its turn once per round; the label
    stamped for a group with several matching subscriptions is its first in configuration order."""
    results = both(twice_and_once(fairness), customers(6))
    chosen = [(d.group, d.subscription) for r in results for d in r.routed]
    assert chosen == [("a", "CustomerId > 0"), ("b", "CustomerId > 0")] * 3
    assert Counter(group for group, _ in chosen) == {"a": 3, "b": 3}


def test_fast_takes_the_first_group_with_room_by_its_one_limit() -> None:
    """``fast`` takes the first group in configuration order with room, whatever subscription of it matched:
    group ``a`` is full at 1 (its smallest limit), although its other subscription declares 5."""
    lag = {("billing", "a"): 0, ("billing", "b"): 0}
    app = AppConfig(name="billing", inputs=("orders",), properties=TYPES, fairness="fast")
    cfg = config(
        app,
        groups=[
            GroupConfig(
                "billing",
                "a",
                (SubscriptionConfig("CustomerId > 0", 5, 1), SubscriptionConfig("CustomerId >= 0", 5, 5)),
                order=0,
            ),
            GroupConfig("billing", "b", (SubscriptionConfig("CustomerId > 0", 5, 1),), order=1),
        ],
    )
    results = both(cfg, customers(3), Snapshot(lag, frozenset(), 1.0))
    assert [(d.action, d.group, d.reason) for r in results for d in r.routed] == [
        (Action.ROUTE, "a", None),
        (Action.ROUTE, "b", None),
        (Action.PENDING, None, CAPACITY),
    ]


# --- 6. max_unconfirmed: one limit per group, the one status reports -------------------------------------------


def limited() -> Config:
    """Group ``g`` declares 2 on one subscription, 10 on another and nothing on a third: its limit is 2."""
    app = AppConfig(name="billing", inputs=("orders",), properties=TYPES)
    subs = (
        SubscriptionConfig("CustomerId == 1", 5, 2),
        SubscriptionConfig("CustomerId == 2", 5, 10),
        SubscriptionConfig("CustomerId == 3", 5),
    )
    return config(app, groups=[GroupConfig("billing", "g", subs)])


@pytest.mark.parametrize("customer", [1, 2, 3])
@pytest.mark.parametrize("unconfirmed", [0, 1, 2, 3, 9])
def test_a_group_takes_records_exactly_while_status_says_it_is_not_full(
    customer: int, unconfirmed: int
) -> None:
    cfg = limited()
    assert group_limits(cfg) == {("billing", "g"): 2}
    topic = "subroute.billing.g"
    offsets = {(topic, 0): (0, unconfirmed)}
    document = status_document(cfg, "subroute", ["billing"], {}, {}, offsets)
    [row] = document["apps"][0]["groups"]
    assert (row["lag"], row["max_unconfirmed"]) == (unconfirmed, 2)
    message = MessageView("orders", [("CustomerId", str(customer).encode())], 0)
    (result,) = both(cfg, [message], {("billing", "g"): unconfirmed})
    (decision,) = result.routed
    if row["full"]:
        assert (decision.action, decision.reason) == (Action.PENDING, CAPACITY)
    else:
        assert (decision.action, decision.group) == (Action.ROUTE, "g")


def test_the_group_limit_holds_between_measurements_whatever_subscription_matched() -> None:
    """What a batch routes counts against the group's one limit: two records by the subscription that declares 2,
    then the others wait, although their subscriptions declare 10 or nothing."""
    cfg = limited()
    messages = [MessageView("orders", [("CustomerId", str(c).encode())], 0) for c in (1, 2, 3, 2)]
    results = both(cfg, messages, Snapshot({("billing", "g"): 0}, frozenset(), 1.0))
    assert [(d.action, d.reason) for r in results for d in r.routed] == [
        (Action.ROUTE, None),
        (Action.ROUTE, None),
        (Action.PENDING, CAPACITY),
        (Action.PENDING, CAPACITY),
    ]


# --- 9. a failing priority expression is one error per message --------------------------------------------------


@pytest.mark.parametrize("dialect", ["bmq", "sql92"])
def test_a_failing_priority_expression_is_counted_once(dialect: str) -> None:
    """AMPS: a priority that cannot be computed is NaN, the lowest priority. It is one expression that failed,
    counted once per message, whatever the ten bands it is decided by."""
    app = AppConfig(
        name="jobs",
        inputs=("orders",),
        dialect=dialect,
        properties={"a": "int", "b": "int"},
        priority="a / b",
    )
    big = GroupConfig("jobs", "big", (SubscriptionConfig("a / b > 100", 1),))
    cfg = config(app, groups=[GroupConfig("jobs", "all"), big])
    zero = MessageView(
        "orders", [("a", b"700"), ("b", b"0")], 0
    )  # division by zero: priority and subscription
    fine = MessageView("orders", [("a", b"700"), ("b", b"1")], 0)
    results = both(cfg, [zero, fine, zero])
    assert [r.evaluation_errors for r in results] == [{"jobs": 2}, {}, {"jobs": 2}]
    assert [(d.group, d.band) for r in results for d in r.routed] == [("all", 0), ("big", 9), ("all", 0)]


def test_a_priority_over_a_missing_property_is_one_error() -> None:
    app = AppConfig(name="jobs", inputs=("orders",), properties={"a": "int"}, priority="a * 3")
    cfg = config(app, groups=[GroupConfig("jobs", "all")])
    results = both(cfg, [MessageView("orders", [("b", b"1")], 0), MessageView("orders", [("a", b"2")], 0)])
    assert [r.evaluation_errors for r in results] == [{"jobs": 1}, {}]
    assert [d.band for r in results for d in r.routed] == [0, 6]
