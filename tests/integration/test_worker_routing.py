"""The worker on a real broker: the seeds' routing rules, message groups, pending and redrive, bad input."""

from __future__ import annotations

from collections import defaultdict

import pytest

from subroute import wire
from subroute.config.store import read_config
from subroute.routing.decisions import Action, MessageView, Router, build_table
from tests.integration.harness import apply, header, make_env, produce, produce_raw, read, run_worker

pytestmark = pytest.mark.kafka

SEED_CONFIG = """
apps:
  billing:
    inputs: [INPUT]
    properties: {CustomerId: int, Amount: int, OrderType: string}
    filter: ['OrderType == "EXPRESS" || Amount > 1000']
    groups:
      vip:
        subscriptions:
          - {expression: 'CustomerId == 0', priority: 10}
      general:
        subscriptions:
          - {expression: 'CustomerId >= 0', priority: 5, max_unconfirmed: 1000}
  audit:
    inputs: [INPUT]
    properties: {CustomerId: int, Amount: int, OrderType: string}
    groups:
      left:
        subscriptions: [{expression: 'Amount >= 0', priority: 1}]
      right:
        subscriptions: [{expression: 'Amount >= 0', priority: 1}]
"""


def test_seed_routing_rules_end_to_end(kafka, unique) -> None:
    env = make_env(kafka.bootstrap_servers, unique)
    assert apply(env, SEED_CONFIG) == 0
    messages = [
        {"CustomerId": 0, "Amount": 5000, "OrderType": "EXPRESS"},  # billing: vip (priority 10 beats 5)
        {"CustomerId": 7, "Amount": 5000, "OrderType": "STANDARD"},  # billing: general
        {"CustomerId": 7, "Amount": 10, "OrderType": "STANDARD"},  # billing: filtered out by the app filter
        {
            "CustomerId": -1,
            "Amount": 2000,
            "OrderType": "BULK",
        },  # billing: no subscription matches -> pending
    ]
    produce(env, messages)
    metrics = run_worker(env)

    vip = read(env, env.topic("billing", "vip"))
    general = read(env, env.topic("billing", "general"))
    pending = read(env, wire.pending_topic(env.prefix, "billing"))
    assert [m.value() for m in vip] == [b"m0"]
    assert [m.value() for m in general] == [b"m1"]
    assert [m.value() for m in pending] == [b"m3"]
    assert metrics.filtered.labels("billing")._value.get() == 1

    # audit has no filter: every message, round-robin between two equal-priority groups.
    left = read(env, env.topic("audit", "left"))
    right = read(env, env.topic("audit", "right"))
    assert sorted(m.value() for m in left + right) == [b"m0", b"m1", b"m2", b"m3"]
    assert len(left) == len(right) == 2

    # Routed records keep value, key and headers and add the routing headers.
    routed = vip[0]
    assert header(routed, "CustomerId") == "0" and header(routed, "OrderType") == "EXPRESS"
    assert header(routed, wire.APP) == "billing"
    assert header(routed, wire.GROUP) == "vip"
    assert header(routed, wire.SUBSCRIPTION) == "CustomerId == 0"
    assert header(routed, wire.SOURCE) == f"{env.input}/0/0"
    assert int(header(routed, wire.CONFIG_VERSION) or "0") == read_config(env.settings).version
    assert int(header(routed, wire.ROUTED_AT) or "0") > 0


def test_no_spillover_even_when_the_top_group_is_full(kafka, unique) -> None:
    env = make_env(kafka.bootstrap_servers, unique)
    assert (
        apply(
            env,
            """
apps:
  a:
    inputs: [INPUT]
    properties: {N: int}
    groups:
      top: {subscriptions: [{expression: 'N >= 0', priority: 10, max_unconfirmed: 2}]}
      low: {subscriptions: [{expression: 'N >= 0', priority: 1}]}
""",
        )
        == 0
    )
    produce(env, [{"N": i} for i in range(5)])  # nobody confirms: "top" takes 2, the rest wait for room
    run_worker(env)
    produce(env, [{"N": i} for i in range(5, 10)])
    run_worker(env)  # a new worker measures "top" full: nothing more goes there, nor lower (BlazingMQ)
    assert [m.value() for m in read(env, env.topic("a", "top"))] == [b"m0", b"m1"]
    assert read(env, env.topic("a", "low")) == []
    pending = read(env, wire.pending_topic(env.prefix, "a"))
    assert len(pending) == 8 and {header(m, wire.PENDING_REASON) for m in pending} == {"capacity"}


def test_spillover_app_spills_when_the_top_group_is_full(kafka, unique) -> None:
    env = make_env(kafka.bootstrap_servers, unique)
    assert (
        apply(
            env,
            """
apps:
  a:
    inputs: [INPUT]
    properties: {N: int}
    spillover: true
    groups:
      top: {subscriptions: [{expression: 'N >= 0', priority: 10, max_unconfirmed: 2}]}
      low: {subscriptions: [{expression: 'N >= 0', priority: 1}]}
""",
        )
        == 0
    )
    produce(env, [{"N": i} for i in range(5)])
    run_worker(env)
    produce(env, [{"N": i} for i in range(5)])
    run_worker(env)
    assert len(read(env, env.topic("a", "top"))) == 2  # never past its max_unconfirmed
    assert len(read(env, env.topic("a", "low"))) == 8


def test_pending_message_is_routed_once_a_matching_subscription_is_applied(kafka, unique) -> None:
    env = make_env(kafka.bootstrap_servers, unique)
    first = """
apps:
  a:
    inputs: [INPUT]
    properties: {Kind: string}
    groups:
      books: {subscriptions: [{expression: 'Kind == "book"'}]}
"""
    assert apply(env, first) == 0
    produce(env, [{"Kind": "book"}, {"Kind": "toy"}, {"Kind": "game"}, {"Kind": "toy"}])
    run_worker(env)
    assert [m.value() for m in read(env, env.topic("a", "books"))] == [b"m0"]
    assert [m.value() for m in read(env, wire.pending_topic(env.prefix, "a"))] == [b"m1", b"m2", b"m3"]

    second = first + """      toys: {subscriptions: [{expression: 'Kind == "toy"'}]}\n"""
    assert apply(env, second) == 0
    metrics = run_worker(env)
    toys = read(env, env.topic("a", "toys"))
    assert [m.value() for m in toys] == [b"m1", b"m3"]  # in arrival order
    assert [header(m, wire.SOURCE) for m in toys] == [f"{env.input}/0/1", f"{env.input}/0/3"]
    assert all(header(m, wire.REDRIVEN) == "pending" for m in toys)
    assert metrics.redriven.labels("a")._value.get() == 2
    # The game stays pending where it was, nothing copied: the toy behind it was routed past it.
    assert [m.value() for m in read(env, wire.pending_topic(env.prefix, "a"))] == [b"m1", b"m2", b"m3"]


def test_message_groups_stay_on_one_group_and_partition_in_order(kafka, unique) -> None:
    env = make_env(kafka.bootstrap_servers, unique, partitions=3)
    assert (
        apply(
            env,
            """
apps:
  carts:
    inputs: [INPUT]
    properties: {Cart: string, Seq: int}
    group_by: Cart
    groups:
      g1: {}
      g2: {}
      g3: {}
""",
        )
        == 0
    )
    messages = [{"Cart": f"cart-{i % 12}", "Seq": i} for i in range(240)]
    messages += [{"Seq": 1000 + i} for i in range(5)]  # no group header: the default group
    # Producers key by cart, so each cart's input is ordered in one input partition (as any Kafka user would).
    produce(env, messages, key_by="Cart", key=b"guest")
    # The group topics shared among three producers (--producers 3): each topic through one, order kept.
    run_worker(env, producers=3)

    where: dict[str, set[tuple[str, int]]] = defaultdict(set)
    sequence: dict[str, list[int]] = defaultdict(list)
    for group in ("g1", "g2", "g3"):
        for m in read(env, env.topic("carts", group)):
            cart = m.key().decode()
            where[cart].add((group, m.partition()))
            sequence[cart].append(int(header(m, "Seq") or -1))
    assert set(where) == {f"cart-{i}" for i in range(12)} | {wire.DEFAULT_MESSAGE_GROUP}
    assert all(len(places) == 1 for places in where.values()), where
    assert len({g for places in where.values() for g, _ in places}) > 1  # groups are spread, not piled up
    for cart, seqs in sequence.items():
        assert seqs == sorted(seqs), cart
    assert sequence[wire.DEFAULT_MESSAGE_GROUP] == [1000, 1001, 1002, 1003, 1004]


def test_an_apps_default_group_keys_messages_without_the_group_header(kafka, unique) -> None:
    # seed 002 (Qpid): the default group's name "can be overridden" (default-message-group).
    env = make_env(kafka.bootstrap_servers, unique)
    assert (
        apply(
            env,
            """
apps:
  carts:
    inputs: [INPUT]
    properties: {Cart: string, Seq: int}
    group_by: Cart
    default_group: anonymous
    groups:
      g1: {}
""",
        )
        == 0
    )
    produce(env, [{"Cart": "c1", "Seq": 0}, {"Seq": 1}, {"Seq": 2}], key=b"input-key")
    run_worker(env)
    routed = read(env, env.topic("carts", "g1"))
    assert [(m.key(), header(m, "Seq")) for m in routed] == [
        (b"c1", "0"),
        (b"anonymous", "1"),
        (b"anonymous", "2"),
    ]


def test_malformed_headers_are_missing_properties_and_the_worker_keeps_going(kafka, unique) -> None:
    env = make_env(kafka.bootstrap_servers, unique)
    assert (
        apply(
            env,
            """
apps:
  a:
    inputs: [INPUT]
    properties: {N: int, Flag: bool}
    groups:
      small: {subscriptions: [{expression: 'N < 10'}]}
      flagged: {subscriptions: [{expression: 'Flag'}]}
""",
        )
        == 0
    )
    produce_raw(
        env,
        [
            (None, b"bad-utf8", [("N", b"\xff\xfe")]),
            (None, b"not-int", [("N", b"12x")]),
            (None, None, [("N", b"3")]),  # null value
            (b"", b"", [("N", b"99999999999999999999")]),  # outside int64
            (None, b"huge", [("N", b"1" * 100_000)]),
            (None, b"dup", [("N", b"50"), ("N", b"5")]),  # repeated header: the last wins
            (None, b"no-headers", []),
            (None, b"bool", [("Flag", b"TRUE"), ("N", b"4")]),
            (None, b"fine", [("N", b"1"), ("Flag", b"true")]),
        ],
    )
    metrics = run_worker(env)
    assert [m.value() for m in read(env, env.topic("a", "small"))] == [None, b"dup", b"bool", b"fine"]
    assert [m.value() for m in read(env, wire.pending_topic(env.prefix, "a"))] == [
        b"bad-utf8",
        b"not-int",
        b"",
        b"huge",
        b"no-headers",
    ]
    counted = {
        s.labels["property"]: s.value
        for s in metrics.property_decode_errors.collect()[0].samples
        if s.name.endswith("_total") and s.labels["app"] == "a"
    }
    assert sum(counted.values()) == 5
    assert metrics.messages_in._value.get() == 9


def test_config_changed_while_routing_every_message_matches_its_stamped_version(kafka, unique) -> None:
    from subroute.config.store import history
    from tests.integration.harness import BackgroundWorker

    env = make_env(kafka.bootstrap_servers, unique)
    template = """
apps:
  a:
    inputs: [INPUT]
    properties: {N: int}
    groups:
      low: {subscriptions: [{expression: 'N < LIMIT'}]}
      high: {subscriptions: [{expression: 'N >= LIMIT'}]}
"""
    assert apply(env, template.replace("LIMIT", "50")) == 0
    with BackgroundWorker(env):
        for limit in (20, 80, 35, 60, 10):
            produce(env, [{"N": (i * 7) % 100} for i in range(300)])
            assert apply(env, template.replace("LIMIT", str(limit))) == 0
        produce(env, [{"N": (i * 7) % 100} for i in range(300)])
        import time

        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            routed = read(env, env.topic("a", "low")) + read(env, env.topic("a", "high"))
            if len(routed) >= 1800:
                break
            time.sleep(0.5)
    assert len(routed) == 1800
    versions = history(env.settings)
    seen_versions = set()
    for m in routed:
        version = int(header(m, wire.CONFIG_VERSION) or -1)
        seen_versions.add(version)
        table = build_table(versions[version])
        view = MessageView(env.input, m.headers(), 0)
        (decision,) = Router().route(table, view, {}, 0).decisions
        assert decision.action is Action.ROUTE and decision.group == header(m, wire.GROUP)
    assert len(seen_versions) >= 2
