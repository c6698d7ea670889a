"""An app's inputs may not select subroute's own topics; partitions and derived topic names are bounded."""

from __future__ import annotations

import pytest

from subroute.config.model import AppConfig, GroupConfig
from subroute.config.validation import check_topics, validate_app, validate_state

PREFIX = "acme"
SHOP = AppConfig(name="shop", inputs=("orders",))
VIP = GroupConfig("shop", "vip")


def errors_for(*inputs: str, priority: str | None = None) -> list[str]:
    thief = AppConfig(name="thief", inputs=inputs, priority=priority)
    return [str(e) for e in check_topics([SHOP, VIP, thief], PREFIX)]


@pytest.mark.parametrize(
    ("topic", "owned"),
    [
        ("acme.config", "acme.config"),
        ("acme.shop.vip", "acme.shop.vip"),
        ("acme.shop.pending", "acme.shop.pending"),
        ("acme.shop.dlq", "acme.shop.dlq"),
        ("acme.settle", "acme.settle"),  # the operator's settle entries (queue ack)
        ("^acme\\.se", "acme.settle"),
        ("acme.thief.pending", "acme.thief.pending"),  # its own pending topic: a loop
        ("^.*", "acme.config"),
        ("^acme\\.", "acme.config"),
        ("dlq$|^x", None),  # a name, not a pattern (no ^): refused only if it is one of the topics
        ("^.*\\.dlq$", "acme.shop.dlq"),
        ("^acme\\.[a-z]+-[a-z]+\\.", "acme.any-app.any-group"),  # apps and groups configured later
    ],
)
def test_an_input_that_selects_a_project_topic_is_refused_with_a_caret(topic: str, owned: str | None) -> None:
    errors = errors_for(topic)
    if owned is None:
        assert errors == []
        return
    [error] = errors
    assert error.startswith("apps.thief.inputs[0]: selects subroute's own topic")
    assert repr(owned) in error
    assert error.endswith(f"\n  {topic}\n  ^")


def test_ordinary_inputs_pass() -> None:
    assert errors_for("orders", "^orders-.*", "payments.eu") == []


def test_band_topics_are_protected_too() -> None:
    ranked = AppConfig(name="shop", inputs=("orders",), priority="1")
    thief = AppConfig(name="thief", inputs=("acme.shop.vip.p3",))
    [error] = [str(e) for e in check_topics([ranked, VIP, thief], PREFIX)]
    assert "'acme.shop.vip.p3'" in error


def test_topic_names_stay_within_kafkas_length() -> None:
    ranked = AppConfig(name="a" * 100, inputs=("orders",), priority="1")
    group = GroupConfig("a" * 100, "g" * 100)
    long_prefix = "p" * 45  # 45 + 1 + 100 + 1 + 100 + 3 (.p9) = 250
    [error] = [str(e) for e in check_topics([ranked, group], long_prefix)]
    assert error.startswith(f"apps.{'a' * 100}.groups.{'g' * 100}: topic ")
    assert "would be 250 characters; Kafka allows 249" in error
    lines = error.splitlines()
    assert lines[-1].strip() == "^" * 100 and lines[-1].index("^") == lines[-2].index("g" * 100)
    assert check_topics([ranked, group], "p" * 44) == []


def test_partitions_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    big = AppConfig(name="shop", inputs=("orders",), partitions=100_000)
    [error] = [str(e) for e in validate_app(big)]
    assert error == (
        "apps.shop.partitions: 100000 partitions; at most 1000 are allowed (limit SUBROUTE_MAX_PARTITIONS)"
    )
    monkeypatch.setenv("SUBROUTE_MAX_PARTITIONS", "200000")
    assert validate_app(big) == []


def test_validate_state_checks_topics_only_with_a_prefix() -> None:
    thief = AppConfig(name="thief", inputs=("^.*",))
    assert validate_state([thief]) == []
    assert [e.location for e in validate_state([thief], prefix=PREFIX)] == ["apps.thief.inputs[0]"]


def test_a_pattern_aimed_at_an_app_not_yet_configured_is_refused_when_that_app_comes() -> None:
    """Validity is decided on the whole state of each version: the apply that adds the app is refused, so the
    pattern never reads its topics."""
    thief = AppConfig(name="thief", inputs=("^acme\\.victim\\.",))
    assert check_topics([SHOP, VIP, thief], PREFIX) == []
    victim = AppConfig(name="victim", inputs=("orders",))
    [error] = check_topics([SHOP, VIP, thief, victim], PREFIX)
    assert error.location == "apps.thief.inputs[0]" and "'acme.victim.pending'" in error.message
