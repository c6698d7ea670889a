"""The users' YAML format: shape errors with their location, defaults, durations, order, and the way back."""

from __future__ import annotations

import pytest

from subroute.config.codec import app_key, decode, encode, group_key
from subroute.config.model import AppConfig, Config, GroupConfig, SubscriptionConfig
from subroute.config.validation import validate_state
from subroute.config.yaml import (
    config_to_document,
    dump_yaml,
    format_duration_ms,
    parse_duration_ms,
    parse_yaml,
    to_document,
)

ISSUE_EXAMPLE = """
apps:
  billing:
    inputs: [orders]                  # topic names, or ^regex
    dialect: bmq                      # or sql92
    properties: {CustomerId: int, Amount: int, OrderType: string, Express: bool}
    filter: ['OrderType == "EXPRESS" || Amount > 1000']   # app subscription(s), OR'ed; omitted = every message
    group_by: CustomerId              # optional: message groups
    fairness: round-robin             # or proportional, fast
    groups:
      vip:
        subscriptions:
          - {expression: 'CustomerId == 0', priority: 10}
      general:
        subscriptions:
          - {expression: 'CustomerId >= 0', priority: 5, max_unconfirmed: 1000}
          - {expression: 'OrderType == "BULK"', priority: 1}
      audit: {}                       # no subscription: any message, priority 0
"""


def test_issue_example_parses_to_the_model() -> None:
    parsed = parse_yaml(ISSUE_EXAMPLE)
    assert parsed.errors == []
    assert list(parsed.values) == [
        app_key("billing"),
        group_key("billing", "vip"),
        group_key("billing", "general"),
        group_key("billing", "audit"),
    ]
    app = parsed.values[app_key("billing")]
    assert app == AppConfig(
        name="billing",
        inputs=("orders",),
        dialect="bmq",
        properties={"CustomerId": "int", "Amount": "int", "OrderType": "string", "Express": "bool"},
        filter=('OrderType == "EXPRESS" || Amount > 1000',),
        group_by="CustomerId",
        fairness="round-robin",
    )
    assert parsed.values[group_key("billing", "general")] == GroupConfig(
        app="billing",
        name="general",
        subscriptions=(
            SubscriptionConfig("CustomerId >= 0", 5, 1000),
            SubscriptionConfig('OrderType == "BULK"', 1),
        ),
        order=1,
    )
    audit = parsed.values[group_key("billing", "audit")]
    assert isinstance(audit, GroupConfig)
    assert audit.subscriptions == () and audit.order == 2


def test_queue_options_parse() -> None:
    parsed = parse_yaml(
        """
apps:
  q:
    inputs: ['^ORDERS$|^ORDERS_Q_DIRECT$']
    spillover: true
    partitions: 6
    expiration: 5m
    priority: 'Amount / 100'
    default_publish: ORDERS_Q_DIRECT
    max_cancels: 3
    max_deliveries: 10
    groups:
      a:
"""
    )
    assert parsed.errors == []
    app = parsed.values[app_key("q")]
    assert isinstance(app, AppConfig)
    assert (app.spillover, app.partitions, app.expiration_ms, app.priority) == (
        True,
        6,
        300_000,
        "Amount / 100",
    )
    assert (app.default_publish, app.max_cancels, app.max_deliveries) == ("ORDERS_Q_DIRECT", 3, 10)
    assert parsed.values[group_key("q", "a")] == GroupConfig("q", "a")


@pytest.mark.parametrize(
    ("text", "ms"),
    [("250ms", 250), ("30s", 30_000), ("5m", 300_000), ("1h", 3_600_000), ("2d", 172_800_000), (42, 42)],
)
def test_durations(text: object, ms: int) -> None:
    assert parse_duration_ms(text) == ms
    assert parse_duration_ms(format_duration_ms(ms)) == ms


@pytest.mark.parametrize("text", ["30", "1.5s", "s", "-1s", "10 minutes", True, None])
def test_bad_durations(text: object) -> None:
    with pytest.raises(ValueError, match="not a duration"):
        parse_duration_ms(text)


def test_every_shape_error_is_reported_with_its_location() -> None:
    parsed = parse_yaml(
        """
apps:
  billing:
    inputs: 3
    dialekt: bmq
    spillover: 'yes please'
    expiration: 3x
    groups:
      vip:
        subscriptions:
          - {expression: 'CustomerId == 0', priority: high}
          - 5
          - {expresion: 'x'}
  other:
    inputs: [a, 7]
    properties: {A: [int]}
"""
    )
    found = {(e.location, e.message.split(" (")[0].split(":")[0]) for e in parsed.errors}
    assert found == {
        ("apps.billing.inputs", "expected a list of text, got an integer"),
        ("apps.billing.dialekt", "unknown key 'dialekt'"),
        ("apps.billing.spillover", "expected true or false, got text 'yes please'"),
        ("apps.billing.expiration", "'3x' is not a duration"),
        ("apps.billing.groups.vip.subscriptions[0].priority", "expected an integer, got text 'high'"),
        ("apps.billing.groups.vip.subscriptions[1]", "expected a mapping, got an integer"),
        ("apps.billing.groups.vip.subscriptions[2].expresion", "unknown key 'expresion'"),
        ("apps.other.inputs[1]", "expected text, got an integer 7"),
        ("apps.other.properties.A", "expected text, got a list ['int']"),
    }
    assert "did you mean 'dialect'?" in next(
        e.message for e in parsed.errors if e.location.endswith("dialekt")
    )
    assert parsed.values == {}  # nothing half-parsed is ever written


def test_a_good_app_survives_a_bad_neighbour() -> None:
    parsed = parse_yaml("apps:\n  good: {inputs: [a]}\n  bad: {inputs: [b], fairnes: fast}\n")
    assert [e.location for e in parsed.errors] == ["apps.bad.fairnes"]
    assert list(parsed.values) == [app_key("good")]


@pytest.mark.parametrize(
    ("text", "location", "fragment"),
    [
        ("", "<yaml>", "empty"),
        ("apps: [a]", "apps", "expected a mapping"),
        ("groups: {}", "<yaml>.groups", "unknown key"),
        ("{}", "<yaml>", "no 'apps' key"),
        ("apps:\n  a: {inputs: [x]}\n  a: {inputs: [y]}\n", "<yaml>", "duplicate key 'a'"),
        ("apps: {a: [", "<yaml>", "not valid YAML"),
        ("apps:\n  a: {groups: {}}\n", "apps.a.inputs", "missing"),
    ],
)
def test_document_level_errors(text: str, location: str, fragment: str) -> None:
    parsed = parse_yaml(text)
    assert any(e.location == location and fragment in e.message for e in parsed.errors), parsed.errors


def test_yaml_error_points_at_the_line() -> None:
    parsed = parse_yaml("apps:\n  a:\n    inputs: [x\n    dialect: bmq\n")
    assert "line" in parsed.errors[0].message


def test_bare_strings_are_accepted_for_single_filter_input_and_subscription() -> None:
    parsed = parse_yaml(
        "apps:\n  a:\n    inputs: orders\n    filter: 'X > 1'\n    groups:\n      g: {subscriptions: ['X > 2']}\n"
    )
    assert parsed.errors == []
    app = parsed.values[app_key("a")]
    assert isinstance(app, AppConfig) and app.inputs == ("orders",) and app.filter == ("X > 1",)
    assert parsed.values[group_key("a", "g")] == GroupConfig("a", "g", (SubscriptionConfig("X > 2"),))


def test_model_to_yaml_and_back_is_the_same_state() -> None:
    parsed = parse_yaml(ISSUE_EXAMPLE)
    again = parse_yaml(dump_yaml(to_document(parsed.values.values())))
    assert again.errors == []
    assert again.values == parsed.values


def test_config_document_lists_groups_in_order_and_leaves_defaults_out() -> None:
    app = AppConfig(name="a", inputs=("t",), expiration_ms=90_000)
    late = GroupConfig("a", "late", order=5)
    early = GroupConfig("a", "early", (SubscriptionConfig("X > 1", 3),), order=1)
    document = config_to_document(Config(7, {"a": app}, {("a", "late"): late, ("a", "early"): early}))
    assert document == {
        "apps": {
            "a": {
                "inputs": ["t"],
                "dialect": "bmq",
                "expiration": "90s",
                "groups": {"early": {"subscriptions": [{"expression": "X > 1", "priority": 3}]}, "late": {}},
            }
        }
    }


def test_aliases_are_refused_before_they_expand() -> None:
    """389 bytes of nested aliases once made a 34 MB error message; nine levels would be gigabytes."""
    levels = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for n in range(1, 9):
        previous = chr(ord("a") + n - 1)
        levels.append(
            f"{chr(ord('a') + n)}: &{chr(ord('a') + n)} [*{previous},*{previous},*{previous},*{previous}]"
        )
    parsed = parse_yaml("\n".join(levels))
    assert len(parsed.errors) == 1
    message = str(parsed.errors[0])
    assert "aliases (*a) are not accepted" in message and len(message) < 1_000


def test_deep_nesting_is_refused_not_a_recursion_error() -> None:
    """Found by tests/reliability/test_long_input_fuzz.py: PyYAML composes nested collections by recursion, so
    400 bytes of ``[`` raised RecursionError out of parse_yaml (and ``config apply`` died with a traceback)."""
    for text in (
        "apps: " + "[" * 5_000 + "x" + "]" * 5_000,
        "apps: " + "{a: " * 5_000 + "b" + "}" * 5_000,
        "[" * 400,
        "apps:\n" + "".join(" " * i + f"k{i}:\n" for i in range(1, 300)),
    ):
        parsed = parse_yaml(text)
        assert len(parsed.errors) == 1, text[:40]
        message = str(parsed.errors[0])
        assert "nested deeper than 64 levels" in message and len(message) < 1_000, message
    # Within the limit, nesting is a shape question as before.
    parsed = parse_yaml("apps: " + "[" * 60 + "x" + "]" * 60)
    assert [str(e) for e in parsed.errors] == ["apps: expected a mapping, got a list"]


def test_deep_flow_nesting_is_refused_where_it_is_not_after_scanning_ahead() -> None:
    """PyYAML's scanner reads up to 1,024 characters ahead of a ``[`` or ``{`` (it may start a key), keeping
    each open one as a possible key and going over all of them at every token: a few hundred levels of ``[``
    took over a second (the long-input fuzz test's budget), though the composer refuses them at level 65.
    The scanner itself refuses the 65th open collection, so the first error in the text is the one reported:
    here the nesting, not the character after it that cannot start a token."""
    for opening in ("[", "{"):
        parsed = parse_yaml("apps: " + opening * 100 + "@")
        assert len(parsed.errors) == 1
        message = str(parsed.errors[0])
        assert "nested deeper than 64 levels" in message and "column 70" in message, message


def test_presence_parses_and_is_written_back_only_when_not_the_default() -> None:
    parsed = parse_yaml("apps:\n  q:\n    inputs: [t]\n    presence: ignored\n    groups: {a: {}}\n")
    assert parsed.errors == []
    app = parsed.values[app_key("q")]
    assert isinstance(app, AppConfig) and app.presence == "ignored"
    assert to_document(parsed.values.values())["apps"]["q"]["presence"] == "ignored"
    default = AppConfig("q", ("t",))
    assert "presence" not in to_document([default])["apps"]["q"]


def test_on_expire_parses_and_is_written_back_only_when_not_the_default() -> None:
    parsed = parse_yaml("apps:\n  q:\n    inputs: [t]\n    expiration: 5s\n    on_expire: drop\n")
    assert parsed.errors == []
    app = parsed.values[app_key("q")]
    assert isinstance(app, AppConfig) and app.on_expire == "drop"
    assert to_document(parsed.values.values())["apps"]["q"]["on_expire"] == "drop"
    assert "on_expire" not in to_document([AppConfig("q", ("t",))])["apps"]["q"]


def test_default_group_parses_and_is_written_back_only_when_set() -> None:
    text = "apps:\n  q:\n    inputs: [t]\n    group_by: Cart\n    default_group: anonymous\n"
    parsed = parse_yaml(text)
    assert parsed.errors == []
    app = parsed.values[app_key("q")]
    assert isinstance(app, AppConfig) and app.default_group == "anonymous"
    assert to_document(parsed.values.values())["apps"]["q"]["default_group"] == "anonymous"
    assert "default_group" not in to_document([AppConfig("q", ("t",), group_by="Cart")])["apps"]["q"]


def test_max_cancels_and_max_deliveries_0_mean_no_maximum_end_to_end() -> None:
    # AMPS (seed 001): MaxCancels and MaxDeliveries "Default: no maximum (0)". 0 is taken, validated, stored
    # and shown back as written, never turned into "absent" or refused.
    parsed = parse_yaml("apps:\n  q:\n    inputs: [t]\n    max_cancels: 0\n    max_deliveries: 0\n")
    assert parsed.errors == []
    app = parsed.values[app_key("q")]
    assert isinstance(app, AppConfig) and (app.max_cancels, app.max_deliveries) == (0, 0)
    assert validate_state(parsed.values.values()) == []
    key, value, headers = encode(app)
    assert decode(key, value, headers)[1] == app
    shown = to_document([app])["apps"]["q"]
    assert (shown["max_cancels"], shown["max_deliveries"]) == (0, 0)
