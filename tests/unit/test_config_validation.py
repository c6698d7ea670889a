"""Validation of the model: every error collected, each with its location; expression errors keep their caret."""

from __future__ import annotations

import pytest

from subroute import expressions
from subroute.config.model import AppConfig, GroupConfig, SubscriptionConfig
from subroute.config.validation import (
    ConfigError,
    StateValidator,
    validate_app,
    validate_group,
    validate_state,
)
from subroute.config.yaml import parse_yaml
from subroute.topic_patterns import input_matches


def app(**fields: object) -> AppConfig:
    base: dict[str, object] = {"name": "billing", "inputs": ("orders",), "properties": {"CustomerId": "int"}}
    base.update(fields)
    return AppConfig(**base)  # type: ignore[arg-type]


def locations(errors: list[ConfigError]) -> list[str]:
    return [e.location for e in errors]


def assert_caret(
    error: ConfigError, text: str, dialect: str = "bmq", types: dict[str, str] | None = None
) -> None:
    """The error shows the expression and a caret exactly under the position the compiler reports."""
    with pytest.raises(expressions.ExpressionError) as raised:
        expressions.compile(text, dialect=dialect, types=types)
    lines = error.message.splitlines()
    text_line = next(i for i, line in enumerate(lines) if line.endswith(text))
    caret_line = lines[text_line + 1]
    assert caret_line.strip() == "^"
    assert caret_line.index("^") - lines[text_line].index(text) == raised.value.position


def test_valid_app_and_groups() -> None:
    billing = app(filter=("CustomerId > 0",), priority="CustomerId", expiration_ms=1000, max_cancels=3)
    group = GroupConfig("billing", "vip", (SubscriptionConfig("CustomerId == 0", 10, 5),))
    assert validate_state([billing, group]) == []


def test_expression_errors_keep_the_caret_and_name_their_place() -> None:
    billing = app(filter=("CustomerId >",), priority="CustomerId ==")
    group = GroupConfig(
        "billing", "vip", (SubscriptionConfig("CustomerId == 0"), SubscriptionConfig("(CustomerId"))
    )
    errors = validate_state([billing, group])
    assert locations(errors) == [
        "apps.billing.filter[0]",
        "apps.billing.priority",
        "apps.billing.groups.vip.subscriptions[1].expression",
    ]
    assert_caret(errors[0], "CustomerId >", types={"CustomerId": "int"})
    assert_caret(errors[2], "(CustomerId", types={"CustomerId": "int"})
    assert str(errors[2]).startswith("apps.billing.groups.vip.subscriptions[1].expression: ")


def test_expressions_compile_under_the_app_dialect() -> None:
    sql = "CustomerId BETWEEN 1 AND 5"
    assert validate_app(app(dialect="sql92", filter=(sql,))) == []
    assert locations(validate_app(app(dialect="bmq", filter=(sql,)))) == ["apps.billing.filter[0]"]


def test_expressions_are_type_checked_against_declared_properties() -> None:
    errors = validate_app(app(filter=('CustomerId == "seven"',)))
    assert locations(errors) == ["apps.billing.filter[0]"]
    assert "^" in errors[0].message


def test_every_app_error_is_collected() -> None:
    bad = AppConfig(
        name="bad.name",
        inputs=("ok", "ok", "not a topic", "^(unclosed"),
        dialect="cobol",
        properties={"1x": "int", "Price": "float", "Y": "decimal"},
        fairness="random",
        group_by="no such!",
        partitions=0,
        expiration_ms=-5,
        max_cancels=-1,
        max_deliveries=-1,
        default_publish="elsewhere",
    )
    assert sorted(locations(validate_app(bad))) == sorted(
        [
            "apps.bad.name",
            "apps.bad.name.dialect",
            "apps.bad.name.fairness",
            "apps.bad.name.properties.1x",
            "apps.bad.name.properties.Y",
            "apps.bad.name.inputs[1]",
            "apps.bad.name.inputs[2]",
            "apps.bad.name.inputs[3]",
            "apps.bad.name.group_by",
            "apps.bad.name.partitions",
            "apps.bad.name.expiration",
            "apps.bad.name.max_cancels",
            "apps.bad.name.max_deliveries",
            "apps.bad.name.default_publish",
        ]
    )


@pytest.mark.parametrize(
    ("dialect", "text", "column", "fix"),
    [
        # RocketMQ's own sample (seed 003): on header a=2 it never matched, and nothing said why.
        ("sql92", "a BETWEEN 0 AND 3", 0, "properties: {a: int}"),
        ("sql92", "CustomerId > 0 AND Price > 9.5", 19, "properties: {Price: float}"),
        ("bmq", "CustomerId > 0 && a >= 3", 18, "properties: {a: int}"),
        ("bmq", "Express && CustomerId > 0", 0, "properties: {Express: bool}"),
    ],
)
def test_an_undeclared_property_used_as_a_number_is_refused_with_the_fix(
    dialect: str, text: str, column: int, fix: str
) -> None:
    # Headers are text: an undeclared property is a string, so as a number (or a condition) it could never
    # match. Refused at validation, with the expression, a caret under the property and the fix.
    billing = app(dialect=dialect, filter=(text,))
    group = GroupConfig("billing", "vip", (SubscriptionConfig(text),))
    errors = validate_state([billing, group])
    assert locations(errors) == [
        "apps.billing.filter[0]",
        "apps.billing.groups.vip.subscriptions[0].expression",
    ]
    for error in errors:
        first, *shown = error.message.splitlines()
        assert "is not declared, so it is a string" in first
        assert first.endswith(f"declare its type in the app's properties ({fix}) (at position {column})")
        assert shown == [f"  {text}", "  " + " " * column + "^"]
    name, kind = fix.removeprefix("properties: {").removesuffix("}").split(": ")
    declared = dict(billing.properties, **{name: kind})
    assert validate_state([app(dialect=dialect, properties=declared, filter=(text,)), group]) == []


def test_an_undeclared_property_used_as_a_string_is_accepted() -> None:
    assert validate_app(app(dialect="sql92", filter=("a = 'x' OR a IN ('y') OR a IS NULL",))) == []
    assert validate_app(app(filter=('a == "x" || a < "m"',))) == []


def test_a_property_declared_with_a_bad_type_is_not_reported_again_as_undeclared() -> None:
    errors = validate_app(app(properties={"Price": "float"}, filter=("Price > 3",)))  # float needs sql92
    assert locations(errors) == ["apps.billing.properties.Price"]


def test_max_cancels_and_max_deliveries_0_mean_no_maximum() -> None:
    # AMPS (seed 001): MaxCancels and MaxDeliveries "Default: no maximum (0)".
    assert validate_app(app(max_cancels=0, max_deliveries=0)) == []
    assert validate_app(app(max_cancels=2**31 - 1, max_deliveries=2**31 - 1)) == []
    assert locations(validate_app(app(max_cancels=-1, max_deliveries=2**31))) == [
        "apps.billing.max_cancels",
        "apps.billing.max_deliveries",
    ]


@pytest.mark.parametrize("dialect", ["bmq", "sql92"])
def test_priority_is_an_integer_expression(dialect: str) -> None:
    props = {"Amount": "int", "Region": "string"}
    assert validate_app(app(dialect=dialect, properties=props, priority="Amount / 100")) == []
    (undeclared,) = validate_app(app(dialect=dialect, properties=props, priority="Undeclared * 2"))
    assert undeclared.location == "apps.billing.priority"
    assert "properties: {Undeclared: int}" in undeclared.message
    assert undeclared.message.splitlines()[1:] == ["  Undeclared * 2", "  ^"]  # on the text as written
    (not_int,) = validate_app(app(dialect=dialect, properties=props, priority="Amount > 100"))
    assert not_int.location == "apps.billing.priority"
    assert "priority must be an integer expression, not a boolean" in not_int.message
    (bad_type,) = validate_app(app(dialect=dialect, properties=props, priority="Amount + Region"))
    assert_caret(bad_type, "Amount + Region", dialect, props)  # the caret is on the text as written
    (bad_syntax,) = validate_app(app(dialect=dialect, properties=props, priority="(Amount"))
    assert_caret(bad_syntax, "(Amount", dialect, props)


def test_float_needs_sql92() -> None:
    assert locations(validate_app(app(properties={"Price": "float"}))) == ["apps.billing.properties.Price"]
    assert validate_app(app(dialect="sql92", properties={"Price": "float"})) == []


def test_regex_error_has_a_caret() -> None:
    (error,) = validate_app(app(inputs=("^ORDERS_(.*",)))
    assert error.location == "apps.billing.inputs[0]"
    assert "invalid regex" in error.message and error.message.splitlines()[-1].strip() == "^"


def test_inputs_must_not_be_empty() -> None:
    (error,) = validate_app(app(inputs=()))
    assert error.location == "apps.billing.inputs" and "no input topics" in error.message


def test_default_publish_must_reach_the_app() -> None:
    inputs = ("^ORDERS$|^ORDERS_RISK_DIRECT$",)
    assert validate_app(app(inputs=inputs, default_publish="ORDERS_RISK_DIRECT")) == []
    assert locations(validate_app(app(inputs=inputs, default_publish="ORDERS_OTHER"))) == [
        "apps.billing.default_publish"
    ]


@pytest.mark.parametrize("name", ["pending", "dlq"])
def test_reserved_group_names(name: str) -> None:
    (error,) = validate_group(GroupConfig("billing", name), app())
    assert error.location == f"apps.billing.groups.{name}" and "reserved" in error.message


def test_group_numbers() -> None:
    group = GroupConfig(
        "billing",
        "g",
        (
            SubscriptionConfig(None, 2**31),
            SubscriptionConfig(None, 0, 0),
            SubscriptionConfig(None, True),
        ),  # a bool is not a priority
    )
    assert locations(validate_group(group, app())) == [
        "apps.billing.groups.g.subscriptions[0].priority",
        "apps.billing.groups.g.subscriptions[1].max_unconfirmed",
        "apps.billing.groups.g.subscriptions[2].priority",
    ]


def test_group_without_its_app() -> None:
    errors = validate_state([GroupConfig("ghost", "g", (SubscriptionConfig("X =="),))])
    assert locations(errors) == ["apps.ghost.groups.g"]


def test_input_matching() -> None:
    assert input_matches("orders", "orders") and not input_matches("orders", "orders2")
    assert input_matches("^ORDERS_.*$", "ORDERS_RISK") and not input_matches("^ORDERS_.*$", "X_ORDERS_RISK")


def test_yaml_to_errors_end_to_end() -> None:
    parsed = parse_yaml(
        """
apps:
  billing:
    inputs: [orders]
    properties: {CustomerId: int}
    groups:
      vip:
        subscriptions:
          - {expression: 'CustomerId == 0', priority: 10}
          - {expression: 'CustomerId = 0', priority: 5}
      pending: {}
"""
    )
    errors = parsed.errors + validate_state(parsed.values.values())
    assert locations(errors) == [
        "apps.billing.groups.vip.subscriptions[1].expression",
        "apps.billing.groups.pending",
    ]


def test_input_regexes_match_in_linear_time_and_re2_syntax_is_checked() -> None:
    import time

    began = time.perf_counter()
    assert not input_matches("^(a+)+$", "a" * 44 + "b")  # Python's re backtracks for hours on this
    assert not input_matches("^(a|aa)+$", "a" * 10_000 + "b")
    assert time.perf_counter() - began < 1.0  # a hostile-input bound, not a benchmark
    errors = validate_app(AppConfig(name="x", inputs=("^(?<=a)b",)))
    assert any("invalid regex (RE2 syntax)" in str(e) for e in errors), errors


def test_message_groups_and_priority_bands_are_refused_together() -> None:
    """Seed 002 (Qpid): "Message grouping is not supported on LVQ or Priority queues"; here a group would be
    spread over the band topics and lose its order."""
    assert validate_app(app(group_by="CustomerId")) == []
    assert validate_app(app(priority="CustomerId % 10")) == []
    errors = validate_app(app(group_by="CustomerId", priority="CustomerId % 10"))
    assert locations(errors) == ["apps.billing.group_by"]
    assert "priority" in errors[0].message


def test_presence_is_required_or_ignored() -> None:
    assert validate_app(AppConfig("a", ("t",), presence="ignored")) == []
    [error] = validate_app(AppConfig("a", ("t",), presence="sometimes"))
    assert error.location == "apps.a.presence" and "required" in error.message


def test_on_expire_is_dead_letter_or_drop() -> None:
    assert validate_app(AppConfig("a", ("t",), on_expire="drop")) == []
    [error] = validate_app(AppConfig("a", ("t",), on_expire="remove"))
    assert error.location == "apps.a.on_expire" and "dead-letter" in error.message


def test_default_group_needs_group_by() -> None:
    assert validate_app(AppConfig("a", ("t",), group_by="Cart", default_group="anonymous")) == []
    [error] = validate_app(AppConfig("a", ("t",), default_group="anonymous"))
    assert error.location == "apps.a.default_group" and "only meaningful with group_by" in error.message
    [error] = validate_app(AppConfig("a", ("t",), group_by="Cart", default_group=""))
    assert error.location == "apps.a.default_group" and "1 to 249 characters" in error.message


def test_default_group_without_group_by_is_refused_from_yaml_with_its_location() -> None:
    parsed = parse_yaml("apps:\n  a:\n    inputs: [t]\n    default_group: anonymous\n")
    assert parsed.errors == []
    errors = validate_state(parsed.values.values())
    assert [str(e) for e in errors] == [
        "apps.a.default_group: only meaningful with group_by: set group_by, or remove default_group"
    ]


def test_readers_of_the_config_topic_leave_the_undeclared_property_rule_to_the_cli() -> None:
    """The CLI refuses an undeclared property used as a number; a reader of the config topic (a worker after an
    upgrade) keeps the version that was in force, and keeps what the rule found for its warning."""
    app = AppConfig(name="a", inputs=("t",), dialect="sql92")
    group = GroupConfig("a", "g", (SubscriptionConfig("n BETWEEN 0 AND 3", 1),))
    assert [e.newer_rule for e in validate_state([app, group])] == [True]
    reader = StateValidator(newer_rules=False)
    assert reader.validate([app, group]) == []
    [found] = reader.newer_rule_errors
    assert "declare its type" in found.message
    bad = GroupConfig("a", "g", (SubscriptionConfig("n BETWEEN", 1),))
    assert reader.validate([app, bad]) != []  # every other rule holds for readers too
