"""Routing decisions without Kafka: the seeds' examples as pure functions of (properties, table, lag)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

from subroute.config.model import AppConfig, Config, GroupConfig, SubscriptionConfig
from subroute.routing.decisions import (
    Action,
    MessageView,
    Router,
    build_table,
    rendezvous,
)
from subroute.routing.passes import WOKEN_BY_PRESENCE, WOKEN_BY_ROOM, wakes
from subroute.routing.snapshot import OVERLAP_SECONDS, Snapshot
from subroute.wire import CAPACITY, NO_CONSUMER

TYPES = {"CustomerId": "int", "Amount": "int", "OrderType": "string"}


def config(*apps: AppConfig, groups: list[GroupConfig], version: int = 1) -> Config:
    return Config(
        version=version,
        apps={a.name: a for a in apps},
        groups={(g.app, g.name): g for g in groups},
    )


def group(app: str, name: str, *subs: SubscriptionConfig, order: int = 0) -> GroupConfig:
    return GroupConfig(app=app, name=name, subscriptions=tuple(subs), order=order)


def sub(expression: str | None, priority: int = 0, max_unconfirmed: int | None = None) -> SubscriptionConfig:
    return SubscriptionConfig(expression, priority, max_unconfirmed)


def headers(**props: object) -> list[tuple[str, bytes | None]]:
    return [
        (k, str(v).lower().encode() if isinstance(v, bool) else str(v).encode()) for k, v in props.items()
    ]


def route(
    cfg: Config,
    router: Router | None = None,
    lag: Mapping[tuple[str, str], int] | None = None,
    topic: str = "orders",
    timestamp_ms: int = 0,
    now_ms: int = 0,
    **props: object,
) -> list:
    table = build_table(cfg)
    result = (router or Router()).route(
        table, MessageView(topic, headers(**props), timestamp_ms), {} if lag is None else lag, now_ms
    )
    return result.decisions


BILLING = AppConfig(name="billing", inputs=("orders",), properties=TYPES)


def seed_priority_config() -> Config:
    # seed 000, "Order of Evaluation": CustomerId == 0 at priority 10 beats CustomerId >= 0 at priority 5.
    return config(
        BILLING,
        groups=[
            group("billing", "vip", sub("CustomerId == 0", 10), order=0),
            group("billing", "general", sub("CustomerId >= 0", 5), order=1),
        ],
    )


def test_higher_priority_subscription_wins_for_overlapping_expressions() -> None:
    (decision,) = route(seed_priority_config(), CustomerId=0)
    assert (decision.action, decision.group, decision.subscription) == (
        Action.ROUTE,
        "vip",
        "CustomerId == 0",
    )
    (decision,) = route(seed_priority_config(), CustomerId=7)
    assert (decision.action, decision.group) == (Action.ROUTE, "general")


def test_round_robin_among_equal_priority_groups() -> None:
    cfg = config(
        BILLING,
        groups=[
            group("billing", "a", sub("CustomerId > 0", 5)),
            group("billing", "b", sub("CustomerId > 0", 5), order=1),
        ],
    )
    router = Router()
    seen = [route(cfg, router, CustomerId=1)[0].group for _ in range(6)]
    assert seen == ["a", "b", "a", "b", "a", "b"]


def test_no_spillover_to_lower_priority_when_top_is_full() -> None:
    cfg = config(
        BILLING,
        groups=[
            group("billing", "top", sub("CustomerId >= 0", 10, max_unconfirmed=5)),
            group("billing", "low", sub("CustomerId >= 0", 1), order=1),
        ],
    )
    full = {("billing", "top"): 5}
    (decision,) = route(cfg, lag=full, CustomerId=1)
    # BlazingMQ: the message waits for room at the top (maxUnconfirmed holds), it neither overfills nor spills
    assert (decision.action, decision.reason, decision.group) == (Action.PENDING, CAPACITY, None)


def test_spillover_when_the_app_allows_it() -> None:
    app = AppConfig(name="billing", inputs=("orders",), properties=TYPES, spillover=True)
    cfg = config(
        app,
        groups=[
            group("billing", "top", sub("CustomerId >= 0", 10, max_unconfirmed=5)),
            group("billing", "low", sub("CustomerId >= 0", 1), order=1),
        ],
    )
    assert route(cfg, lag={("billing", "top"): 5}, CustomerId=1)[0].group == "low"
    assert route(cfg, lag={("billing", "top"): 4}, CustomerId=1)[0].group == "top"


def test_unmatched_message_is_pending() -> None:
    (decision,) = route(seed_priority_config(), CustomerId=-3)
    assert decision.action is Action.PENDING
    (decision,) = route(seed_priority_config(), Amount=5)  # CustomerId missing: evaluation error, no match
    assert decision.action is Action.PENDING


def test_app_without_groups_keeps_everything_pending() -> None:
    assert route(config(BILLING, groups=[]), CustomerId=1)[0].action is Action.PENDING


def test_app_filter_skips_for_one_app_and_not_another() -> None:
    express = AppConfig(
        name="express", inputs=("orders",), properties=TYPES, filter=('OrderType == "EXPRESS"',)
    )
    audit = AppConfig(name="audit", inputs=("orders",), properties=TYPES)
    cfg = config(express, audit, groups=[group("express", "all"), group("audit", "all")])
    decisions = {d.app: d.action for d in route(cfg, OrderType="BULK", CustomerId=1)}
    assert decisions == {"express": Action.FILTERED, "audit": Action.ROUTE}
    decisions = {d.app: d.action for d in route(cfg, OrderType="EXPRESS", CustomerId=1)}
    assert decisions == {"express": Action.ROUTE, "audit": Action.ROUTE}


def test_app_filters_are_ored() -> None:
    app = AppConfig(
        name="a", inputs=("orders",), properties=TYPES, filter=("CustomerId == 1", "Amount > 100")
    )
    cfg = config(app, groups=[group("a", "g")])
    assert route(cfg, CustomerId=1, Amount=0)[0].action is Action.ROUTE
    assert route(cfg, CustomerId=2, Amount=101)[0].action is Action.ROUTE
    assert route(cfg, CustomerId=2, Amount=100)[0].action is Action.FILTERED


def test_group_without_subscription_takes_any_message_at_priority_zero() -> None:
    cfg = config(
        BILLING,
        groups=[group("billing", "vip", sub("CustomerId == 0", 10)), group("billing", "audit", order=1)],
    )
    assert route(cfg, CustomerId=0)[0].group == "vip"
    assert route(cfg, CustomerId=9)[0].group == "audit"
    assert route(cfg)[0].group == "audit"


def test_apps_only_see_their_inputs_including_regex() -> None:
    a = AppConfig(name="a", inputs=("^ORDERS_.*$",))
    b = AppConfig(name="b", inputs=("ORDERS",))
    cfg = config(a, b, groups=[group("a", "g"), group("b", "g")])
    assert {d.app for d in route(cfg, topic="ORDERS_RISK")} == {"a"}
    assert {d.app for d in route(cfg, topic="ORDERS")} == {"b"}
    assert route(cfg, topic="OTHER") == []


def test_sql92_app() -> None:
    app = AppConfig(name="chat", inputs=("chat",), dialect="sql92")
    cfg = config(
        app,
        groups=[
            group(
                "chat",
                "phil",
                sub("((targetUser = 'all') OR (targetUser = 'phil')) AND (sender NOT IN ('dan', 'harry'))"),
            )
        ],
    )
    assert route(cfg, topic="chat", targetUser="all", sender="bob")[0].action is Action.ROUTE
    assert route(cfg, topic="chat", targetUser="all", sender="dan")[0].action is Action.PENDING


# --- message groups (seed 002) ----------------------------------------------------------------------------------

GROUPED = AppConfig(name="carts", inputs=("orders",), properties=TYPES, group_by="CustomerId")


def grouped_config(*names: str) -> Config:
    return config(
        GROUPED, groups=[group("carts", n, sub("Amount >= 0", 5), order=i) for i, n in enumerate(names)]
    )


def test_message_group_is_the_key_and_never_split_across_equal_groups() -> None:
    cfg = grouped_config("g1", "g2", "g3")
    router = Router()
    placement: dict[str, set[str]] = {}
    for i in range(300):
        customer = str(i % 30)
        (decision,) = route(cfg, router, CustomerId=customer, Amount=i)
        assert decision.key == customer.encode()
        placement.setdefault(customer, set()).add(decision.group)
    assert all(len(groups) == 1 for groups in placement.values())
    spread = Counter(next(iter(g)) for g in placement.values())
    assert len(spread) == 3  # 30 groups spread over all three consumer groups


def test_messages_without_the_group_header_get_the_default_group() -> None:
    (decision,) = route(grouped_config("g1", "g2"), Amount=1)
    assert decision.key == b"subroute.no-group"


def test_the_default_group_can_be_overridden_per_app() -> None:
    # seed 002 (Qpid): the default group "qpid.no-group" "can be overridden" (default-message-group).
    app = AppConfig(
        name="carts", inputs=("orders",), properties=TYPES, group_by="CustomerId", default_group="anonymous"
    )
    cfg = config(app, groups=[group("carts", "g1", sub("Amount >= 0"))])
    (without,) = route(cfg, Amount=1)
    (empty,) = route(cfg, Amount=1, CustomerId="")
    (with_id,) = route(cfg, Amount=1, CustomerId=7)
    assert (without.key, empty.key, with_id.key) == (b"anonymous", b"anonymous", b"7")


def test_rendezvous_moves_only_the_groups_of_a_removed_candidate() -> None:
    three = build_table(grouped_config("g1", "g2", "g3")).app("carts")
    two = build_table(grouped_config("g1", "g2")).app("carts")
    assert three is not None and two is not None
    for i in range(200):
        key = f"customer-{i}".encode()
        before = rendezvous(key, three.levels[0]).group
        after = rendezvous(key, two.levels[0]).group
        if before != "g3":
            assert after == before


# --- capacity-aware fairness (seed 001) ------------------------------------------------------------------------


def ghosts(fairness: str) -> Config:
    app = AppConfig(name="pac", inputs=("orders",), properties=TYPES, fairness=fairness)
    return config(
        app,
        groups=[
            group("pac", "Inky", sub("Amount >= 0", 1, max_unconfirmed=2), order=0),
            group("pac", "Blinky", sub("Amount >= 0", 1, max_unconfirmed=4), order=1),
            group("pac", "Clyde", sub("Amount >= 0", 1, max_unconfirmed=10), order=2),
        ],
    )


GHOST_LAG = {("pac", "Inky"): 1, ("pac", "Blinky"): 3, ("pac", "Clyde"): 4}


def test_proportional_picks_clyde() -> None:
    # seed 001: Inky 1/2, Blinky 3/4, Clyde 4/10 -> Clyde has filled only 40%.
    assert route(ghosts("proportional"), lag=GHOST_LAG, Amount=1)[0].group == "Clyde"


def test_fast_picks_the_first_with_room() -> None:
    assert route(ghosts("fast"), lag=GHOST_LAG, Amount=1)[0].group == "Inky"
    full_inky = {**GHOST_LAG, ("pac", "Inky"): 2}
    assert route(ghosts("fast"), lag=full_inky, Amount=1)[0].group == "Blinky"


def test_round_robin_skips_groups_at_capacity() -> None:
    full_inky = {**GHOST_LAG, ("pac", "Inky"): 2}
    router = Router()
    seen = [route(ghosts("round-robin"), router, lag=full_inky, Amount=1)[0].group for _ in range(4)]
    assert "Inky" not in seen and set(seen) == {"Blinky", "Clyde"}


# --- expiration -------------------------------------------------------------------------------------------------


def test_expired_message_is_dead_lettered() -> None:
    app = AppConfig(name="billing", inputs=("orders",), properties=TYPES, expiration_ms=30_000)
    cfg = config(app, groups=[group("billing", "all")])
    (fresh,) = route(cfg, timestamp_ms=100_000, now_ms=120_000, CustomerId=1)
    assert fresh.action is Action.ROUTE
    (old,) = route(cfg, timestamp_ms=100_000, now_ms=130_001, CustomerId=1)
    assert (old.action, old.reason) == (Action.DEAD_LETTER, "expired")


def test_expired_message_is_dropped_with_on_expire_drop() -> None:
    # AMPS's default: an expired message is removed, not an error. Only this app drops; the other dead-letters.
    drop = AppConfig(
        name="billing", inputs=("orders",), properties=TYPES, expiration_ms=30_000, on_expire="drop"
    )
    keep = AppConfig(name="audit", inputs=("orders",), expiration_ms=30_000)
    cfg = config(drop, keep, groups=[group("billing", "all"), group("audit", "all")])
    (fresh, _) = sorted(route(cfg, timestamp_ms=100_000, now_ms=120_000), key=lambda d: d.app != "billing")
    assert fresh.action is Action.ROUTE
    decisions = {d.app: d for d in route(cfg, timestamp_ms=100_000, now_ms=130_001)}
    assert (decisions["billing"].action, decisions["billing"].reason) == (Action.DROP, "expired")
    assert (decisions["audit"].action, decisions["audit"].reason) == (Action.DEAD_LETTER, "expired")


def test_message_expiration_header_overrides_the_app() -> None:
    cfg = config(BILLING, groups=[group("billing", "all")])
    decisions = route(cfg, timestamp_ms=1_000, now_ms=3_000, **{"subroute.expiration": "1s"})
    assert decisions[0].reason == "expired"


def test_undecodable_header_is_a_missing_property_and_counted() -> None:
    table = build_table(seed_priority_config())
    view = MessageView("orders", [("CustomerId", b"\xff\xfe")], 0)
    result = Router().route(table, view, {}, 0)
    assert result.decisions[0].action is Action.PENDING
    assert result.decode_errors == {"billing": {"CustomerId": 1}}


# --- priority (AMPS Priority) ----------------------------------------------------------------------------------


def test_priority_expression_picks_the_band_clamped_to_0_9() -> None:
    app = AppConfig(name="jobs", inputs=("orders",), properties=TYPES, priority="Amount / 100")
    cfg = config(app, groups=[group("jobs", "all")])
    assert route(cfg, Amount=0)[0].band == 0
    assert route(cfg, Amount=350)[0].band == 3
    assert route(cfg, Amount=5_000)[0].band == 9
    assert route(cfg, Amount=-700)[0].band == 0
    assert route(cfg, CustomerId=1)[0].band == 0  # missing property: NaN, the lowest priority
    assert route(config(BILLING, groups=[group("billing", "all")]), Amount=900)[0].band == 0


# --- presence (BlazingMQ: only attached consumers get messages) -------------------------------------------------


def tiers(**app_options: object) -> Config:
    app = AppConfig(name="billing", inputs=("orders",), properties=TYPES, **app_options)  # type: ignore[arg-type]
    return config(
        app,
        groups=[
            group("billing", "top", sub("CustomerId >= 0", 10), order=0),
            group("billing", "mid", sub("CustomerId >= 0", 5), order=1),
            group("billing", "low", sub("CustomerId >= 0", 1), order=2),
        ],
    )


def absent(*groups: str, app: str = "billing", lag: Mapping[tuple[str, str], int] | None = None) -> Snapshot:
    return Snapshot(dict(lag or {}), frozenset((app, g) for g in groups))


def test_absent_top_priority_is_skipped_without_spillover() -> None:
    assert route(tiers(), lag=absent(), CustomerId=1)[0].group == "top"
    assert route(tiers(), lag=absent("top"), CustomerId=1)[0].group == "mid"
    assert route(tiers(), lag=absent("top", "mid"), CustomerId=1)[0].group == "low"


def test_nobody_attached_anywhere_waits_with_reason_no_consumer() -> None:
    (decision,) = route(tiers(), lag=absent("top", "mid", "low"), CustomerId=1)
    assert (decision.action, decision.reason, decision.group) == (Action.PENDING, NO_CONSUMER, None)


def test_no_match_stays_plain_pending_whoever_is_attached() -> None:
    (decision,) = route(tiers(), lag=absent("top", "mid", "low"), CustomerId=-1)
    assert (decision.action, decision.reason) == (Action.PENDING, None)


def test_presence_ignored_routes_to_absent_groups() -> None:
    assert route(tiers(presence="ignored"), lag=absent("top"), CustomerId=1)[0].group == "top"


def test_another_apps_absent_groups_do_not_matter() -> None:
    assert route(tiers(), lag=absent("top", app="other"), CustomerId=1)[0].group == "top"


def test_round_robin_among_present_groups_only() -> None:
    cfg = config(
        BILLING,
        groups=[group("billing", g, sub("CustomerId > 0", 5), order=i) for i, g in enumerate("abc")],
    )
    router = Router()
    seen = [route(cfg, router, lag=absent("b"), CustomerId=1)[0].group for _ in range(6)]
    assert seen.count("a") == 3 and seen.count("c") == 3


def test_a_present_but_full_top_level_waits_rather_than_going_lower() -> None:
    cfg = config(
        BILLING,
        groups=[
            group("billing", "top", sub("CustomerId >= 0", 10, max_unconfirmed=2)),
            group("billing", "low", sub("CustomerId >= 0", 1), order=1),
        ],
    )
    (decision,) = route(cfg, lag=absent(lag={("billing", "top"): 2}), CustomerId=1)
    assert (decision.action, decision.reason) == (Action.PENDING, CAPACITY)


def test_spillover_skips_absent_and_full_levels() -> None:
    cfg = config(
        AppConfig(name="billing", inputs=("orders",), properties=TYPES, spillover=True),
        groups=[
            group("billing", "top", sub("CustomerId >= 0", 10, max_unconfirmed=2)),
            group("billing", "mid", sub("CustomerId >= 0", 5), order=1),
            group("billing", "low", sub("CustomerId >= 0", 1, max_unconfirmed=3), order=2),
        ],
    )
    full_top = {("billing", "top"): 2, ("billing", "low"): 0}
    assert route(cfg, lag=absent("mid", lag=full_top), CustomerId=1)[0].group == "low"
    everything_full = {("billing", "top"): 2, ("billing", "low"): 3}
    (decision,) = route(cfg, lag=absent("mid", lag=everything_full), CustomerId=1)
    assert (decision.action, decision.reason) == (Action.PENDING, CAPACITY)


def test_message_group_moves_only_when_its_group_leaves() -> None:
    app = AppConfig(name="billing", inputs=("orders",), properties=TYPES, group_by="CustomerId")
    cfg = config(
        app, groups=[group("billing", g, sub("CustomerId >= 0", 5), order=i) for i, g in enumerate("abc")]
    )
    placed = route(cfg, CustomerId=42)[0].group
    assert route(cfg, lag=absent(), CustomerId=42)[0].group == placed
    moved = route(cfg, lag=absent(placed), CustomerId=42)[0]
    assert moved.action is Action.ROUTE and moved.group != placed and moved.key == b"42"


def test_message_group_waits_for_room_on_its_own_group() -> None:
    app = AppConfig(name="billing", inputs=("orders",), properties=TYPES, group_by="CustomerId")
    cfg = config(
        app,
        groups=[
            group("billing", g, sub("CustomerId >= 0", 5, max_unconfirmed=1), order=i)
            for i, g in enumerate("ab")
        ],
    )
    placed = route(cfg, CustomerId=42)[0].group
    (decision,) = route(cfg, lag={("billing", placed): 1}, CustomerId=42)
    # not moved to the other group, which has room: Qpid keeps a group on one consumer
    assert (decision.action, decision.reason, decision.key) == (Action.PENDING, CAPACITY, b"42")


# --- capacity that holds (BlazingMQ maxUnconfirmed) -------------------------------------------------------------


def test_capacity_holds_between_measurements() -> None:
    cfg = config(BILLING, groups=[group("billing", "top", sub("CustomerId >= 0", 10, max_unconfirmed=5))])
    snapshot = Snapshot({("billing", "top"): 3})
    router = Router()
    decisions = [route(cfg, router, lag=snapshot, CustomerId=1)[0] for _ in range(4)]
    assert [d.action for d in decisions] == [Action.ROUTE, Action.ROUTE, Action.PENDING, Action.PENDING]
    assert decisions[-1].reason == CAPACITY
    assert snapshot[("billing", "top")] == 5


def test_a_new_measurement_keeps_what_was_routed_after_it_began() -> None:
    key = ("billing", "top")
    snapshot = Snapshot({key: 0}, started_at=100.0)
    snapshot.clock = 100.0
    snapshot.note_routed(key)
    snapshot.clock = 105.0
    snapshot.note_routed(key)
    snapshot.note_routed(key)
    assert snapshot[key] == 3
    # measured from 105 - OVERLAP_SECONDS / 2: the records of 105 may not be in it yet, those of 100 are
    newer = snapshot.renewed({key: 1}, frozenset(), 105.0 - OVERLAP_SECONDS / 2)
    assert newer[key] == 1 + 2
    # a count that fell below what was counted wakes records waiting for room; one that caught up does not
    assert wakes(snapshot, Snapshot({key: 2})) == {"billing": WOKEN_BY_ROOM}
    assert wakes(snapshot, Snapshot({key: 3})) == {}
    assert wakes(Snapshot(absent=frozenset({key})), Snapshot()) == {"billing": WOKEN_BY_PRESENCE}
    assert wakes(Snapshot(), newer) == {}


def test_groups_without_max_unconfirmed_are_not_counted() -> None:
    snapshot = Snapshot({("billing", "top"): 0})
    snapshot.note_routed(("billing", "other"))
    assert ("billing", "other") not in snapshot and len(snapshot) == 1


def test_proportional_spreads_evenly_without_max_unconfirmed() -> None:
    cfg = config(
        AppConfig(name="billing", inputs=("orders",), properties=TYPES, fairness="proportional"),
        groups=[group("billing", g, sub("CustomerId >= 0", 5), order=i) for i, g in enumerate("abc")],
    )
    router = Router()
    seen = Counter(route(cfg, router, CustomerId=1)[0].group for _ in range(30))
    assert seen == Counter({"a": 10, "b": 10, "c": 10})


def test_proportional_follows_the_routed_counts_between_measurements() -> None:
    cfg = config(
        AppConfig(name="billing", inputs=("orders",), properties=TYPES, fairness="proportional"),
        groups=[
            group("billing", g, sub("CustomerId >= 0", 5, max_unconfirmed=10), order=i)
            for i, g in enumerate("ab")
        ],
    )
    snapshot = Snapshot({("billing", "a"): 0, ("billing", "b"): 4})
    router = Router()
    seen = Counter(route(cfg, router, lag=snapshot, CustomerId=1)[0].group for _ in range(16))
    # a takes the first four (b had four already), then they alternate until both are full; nothing past 10
    assert (
        seen == Counter({"a": 10, "b": 6}) and snapshot[("billing", "a")] == snapshot[("billing", "b")] == 10
    )


def test_fast_waits_when_every_group_is_full() -> None:
    full = {("pac", "Inky"): 2, ("pac", "Blinky"): 4, ("pac", "Clyde"): 10}
    (decision,) = route(ghosts("fast"), lag=full, Amount=1)
    assert (decision.action, decision.reason) == (Action.PENDING, CAPACITY)


# --- one consumer group at a time holds a message group (seed 002; README, Routing, step 5) --------------------

SPLIT = AppConfig(name="billing", inputs=("orders",), properties=TYPES, group_by="CustomerId")


def split_config(app: AppConfig = SPLIT, *, vip_room: int | None = None) -> Config:
    """The issue's example: a message group whose messages match two groups' subscriptions."""
    return config(
        app,
        groups=[
            group("billing", "vip", sub("Amount > 1000", 10, max_unconfirmed=vip_room), order=0),
            group("billing", "general", sub("Amount == 10", 5), order=1),
        ],
    )


def test_a_message_group_stays_on_the_group_holding_its_outstanding_messages() -> None:
    # Issue 22, item 3: group 7's first message matches general's subscription, its second vip's. Qpid: "the
    # broker will not allow outstanding unacknowledged messages to more than one consumer for a given group".
    snapshot, router = Snapshot(), Router()
    first = route(split_config(), router, lag=snapshot, CustomerId=7, Amount=10)[0]
    second = route(split_config(), router, lag=snapshot, CustomerId=7, Amount=5000)[0]
    assert (first.group, second.group) == ("general", "general")
    assert (second.action, second.key) == (Action.ROUTE, b"7")
    # general's own subscription does not match it: the decision names the holder's first subscription
    assert second.subscription == "Amount == 10"
    # other message groups are not held: the same message of group 8 goes where its subscription says
    assert route(split_config(), router, lag=snapshot, CustomerId=8, Amount=5000)[0].group == "vip"


def test_a_held_message_group_still_needs_a_matching_subscription() -> None:
    snapshot = Snapshot()
    route(split_config(), lag=snapshot, CustomerId=7, Amount=10)
    (unmatched,) = route(split_config(), lag=snapshot, CustomerId=7, Amount=3)
    assert (unmatched.action, unmatched.reason, unmatched.key) == (Action.PENDING, None, b"7")


def test_a_held_message_group_waits_for_room_on_its_holder() -> None:
    cfg = config(
        SPLIT,
        groups=[
            group("billing", "vip", sub("Amount > 1000", 10), order=0),
            group("billing", "general", sub("Amount == 10", 5, max_unconfirmed=1), order=1),
        ],
    )
    snapshot = Snapshot({("billing", "general"): 0, ("billing", "vip"): 0})
    assert route(cfg, lag=snapshot, CustomerId=7, Amount=10)[0].group == "general"
    (waits,) = route(cfg, lag=snapshot, CustomerId=7, Amount=5000)
    assert (waits.action, waits.reason, waits.key) == (Action.PENDING, CAPACITY, b"7")


def test_spillover_never_moves_a_message_group_with_messages_outstanding() -> None:
    # Issue 22, item 2: the full top group keeps the message group; only a group with nothing outstanding spills.
    app = AppConfig(
        name="billing", inputs=("orders",), properties=TYPES, group_by="CustomerId", spillover=True
    )
    cfg = config(
        app,
        groups=[
            group("billing", "top", sub("Amount >= 0", 10, max_unconfirmed=1), order=0),
            group("billing", "low", sub("Amount >= 0", 1), order=1),
        ],
    )
    snapshot = Snapshot({("billing", "top"): 0, ("billing", "low"): 0})
    assert route(cfg, lag=snapshot, CustomerId=7, Amount=1)[0].group == "top"  # top is full from now on
    (held,) = route(cfg, lag=snapshot, CustomerId=7, Amount=2)
    assert (held.action, held.reason, held.group) == (Action.PENDING, CAPACITY, None)
    assert route(cfg, lag=snapshot, CustomerId=8, Amount=1)[0].group == "low"  # nothing outstanding: spills


def test_a_message_group_is_placed_afresh_once_its_messages_are_confirmed() -> None:
    snapshot = Snapshot()
    route(split_config(), lag=snapshot, CustomerId=7, Amount=10)
    holders = snapshot.holders
    holders.window, holders.settled = 0, 0  # the record's window is delivered...
    holders.delivered("billing", b"7", "general", "subroute.billing.general", 0, 41)
    assert holders.release({("billing", "general"): {("subroute.billing.general", 0): 41}}) == 0
    assert route(split_config(), lag=snapshot, CustomerId=7, Amount=5000)[0].group == "general"
    holders.settled = 1
    holders.delivered("billing", b"7", "general", "subroute.billing.general", 0, 42)
    # ...and general's consumer group committed past it: nothing outstanding, placed by its subscription
    assert holders.release({("billing", "general"): {("subroute.billing.general", 0): 43}}) == 1
    assert route(split_config(), lag=snapshot, CustomerId=7, Amount=5000)[0].group == "vip"


def test_a_message_group_whose_holder_left_is_placed_afresh() -> None:
    # Qpid frees a group when its consumer goes; presence: required sees the consumer group leave.
    app = AppConfig(name="billing", inputs=("orders",), properties=TYPES, group_by="CustomerId")
    snapshot = Snapshot()
    assert route(split_config(app), lag=snapshot, CustomerId=7, Amount=10)[0].group == "general"
    left = snapshot.renewed({}, frozenset({("billing", "general")}), 1.0)
    moved = route(split_config(app), lag=left, CustomerId=7, Amount=5000)[0]
    assert (moved.action, moved.group) == (Action.ROUTE, "vip")
    # and vip holds it now, though general is back
    back = left.renewed({}, frozenset(), 2.0)
    assert route(split_config(app), lag=back, CustomerId=7, Amount=10)[0].group == "vip"


def test_a_message_group_held_by_a_removed_group_is_placed_afresh() -> None:
    snapshot = Snapshot()
    route(split_config(), lag=snapshot, CustomerId=7, Amount=10)
    without_general = config(SPLIT, groups=[group("billing", "vip", sub("Amount > 1000", 10))], version=2)
    assert route(without_general, lag=snapshot, CustomerId=7, Amount=5000)[0].group == "vip"
