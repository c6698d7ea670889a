"""Configurable limits (router/config/limits.py): expression length and nesting, subscriptions per app and in total,
each with a clear error past it, enforced by ``subroute config apply`` and by the config store."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from subroute import expressions
from subroute.cli import main as cli
from subroute.config.codec import encode
from subroute.config.limits import Limits, LimitsError, current_limits
from subroute.config.model import AppConfig, GroupConfig, SubscriptionConfig
from subroute.config.store import ConfigState, ConfigVersionRefused
from subroute.config.validation import (
    check_limits,
    expression_depth,
    validate_app,
    validate_group,
    validate_state,
)
from subroute.expressions.parser import MAX_DEPTH


def sql_app(**fields: Any) -> AppConfig:
    base: dict[str, Any] = {
        "name": "billing",
        "inputs": ("orders",),
        "dialect": "sql92",
        "properties": {"N": "int", "S": "string"},
    }
    base.update(fields)
    return AppConfig(**base)


def group(n: int, app: str = "billing", name: str = "g") -> GroupConfig:
    return GroupConfig(app, name, tuple(SubscriptionConfig(f"N = {i}", 1, None) for i in range(n)))


def long_sql(length: int) -> str:
    text = "S IN (" + ", ".join(["'x'"] * (length // 5)) + ")"
    text = text[: text.rfind(",")] + ")" if len(text) > length else text
    return text + " " * (length - len(text))


class FakeMessage:
    def __init__(self, key: str, value: bytes | None, headers: list[tuple[str, Any]], offset: int) -> None:
        self._key, self._value, self._headers, self._offset = key, value, headers, offset

    def key(self) -> bytes:
        return self._key.encode()

    def value(self) -> bytes | None:
        return self._value

    def headers(self) -> list[tuple[str, Any]]:
        return self._headers

    def partition(self) -> int:
        return 0

    def offset(self) -> int:
        return self._offset


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("EXPRESSION_LENGTH", "NESTING_DEPTH", "SUBSCRIPTIONS_PER_APP", "SUBSCRIPTIONS_TOTAL"):
        monkeypatch.delenv(f"SUBROUTE_MAX_{name}", raising=False)


def test_defaults_and_environment_overrides(monkeypatch: pytest.MonkeyPatch) -> None:
    assert current_limits() == Limits(4096, MAX_DEPTH, 10_000, 100_000)
    monkeypatch.setenv("SUBROUTE_MAX_EXPRESSION_LENGTH", "100")
    monkeypatch.setenv("SUBROUTE_MAX_SUBSCRIPTIONS_TOTAL", "1_000")
    assert current_limits() == Limits(100, MAX_DEPTH, 10_000, 1000)


@pytest.mark.parametrize("raw", ["x", "0", "-5", "1.5"])
def test_a_bad_variable_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, raw: str) -> None:
    monkeypatch.setenv("SUBROUTE_MAX_SUBSCRIPTIONS_PER_APP", raw)
    with pytest.raises(LimitsError, match=r"SUBROUTE_MAX_SUBSCRIPTIONS_PER_APP.*positive integer"):
        current_limits()
    # validation falls back to the defaults rather than refusing every record
    assert validate_app(sql_app(filter=("N = 1",))) == []


def test_depth_limit_cannot_exceed_the_parser(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SUBROUTE_MAX_NESTING_DEPTH", str(MAX_DEPTH + 1))
    with pytest.raises(LimitsError, match=f"at most {MAX_DEPTH}"):
        current_limits()


def test_expression_length() -> None:
    ok, too_long = long_sql(4096), long_sql(4097)
    assert len(ok) == 4096 and len(too_long) == 4097
    assert validate_app(sql_app(filter=(ok,))) == []
    errors = validate_app(sql_app(filter=(too_long,)))
    assert [e.location for e in errors] == ["apps.billing.filter[0]"]
    assert (
        "4097 characters long; at most 4096 are allowed (limit SUBROUTE_MAX_EXPRESSION_LENGTH)"
        in errors[0].message
    )
    errors = validate_group(GroupConfig("billing", "g", (SubscriptionConfig(too_long),)), sql_app())
    assert errors[0].location == "apps.billing.groups.g.subscriptions[0].expression"


def test_expression_length_is_configurable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SUBROUTE_MAX_EXPRESSION_LENGTH", "10")
    errors = validate_app(sql_app(filter=("N BETWEEN 1 AND 2",)))
    assert "17 characters long; at most 10" in errors[0].message
    assert validate_app(sql_app(filter=("N = 1",)), Limits(max_expression_length=5)) == []


def test_bmq_keeps_its_own_128_character_bound() -> None:
    app = sql_app(dialect="bmq")
    errors = validate_app(AppConfig(**{**app.__dict__, "filter": ("N == 1 || " * 13 + "N == 2",)}))
    assert "at most 128" in errors[0].message


def test_nesting_depth(monkeypatch: pytest.MonkeyPatch) -> None:
    text = "NOT " * 6 + "N = 1"
    assert expression_depth(expressions.compile(text, dialect="sql92").ast) == 8
    assert validate_app(sql_app(filter=(text,))) == []
    monkeypatch.setenv("SUBROUTE_MAX_NESTING_DEPTH", "7")
    errors = validate_app(sql_app(filter=(text,)))
    assert (
        "nests 8 levels deep; at most 7 are allowed (limit SUBROUTE_MAX_NESTING_DEPTH)" in errors[0].message
    )
    deeper = "NOT " * (MAX_DEPTH + 5) + "N = 1"  # the parser's own bound, whatever the setting
    assert "nested too deeply" in validate_app(sql_app(filter=(deeper,)))[0].message


def test_subscriptions_per_app_across_groups_and_in_total() -> None:
    limits = Limits(max_subscriptions_per_app=10, max_subscriptions_total=25)
    app = sql_app(filter=("N > 0", "N < 0"))
    assert validate_state([app, group(4, name="a"), group(4, name="b")], limits) == []
    errors = validate_state([app, group(5, name="a"), group(4, name="b")], limits)
    assert [str(e) for e in errors] == [
        "apps.billing: app billing has 11 subscriptions; at most 10 are allowed (limit SUBROUTE_MAX_SUBSCRIPTIONS_PER_APP)"
    ]
    apps = [sql_app(name=f"a{i}") for i in range(3)]
    groups = [group(9, app=f"a{i}") for i in range(3)]
    errors = check_limits([*apps, *groups], limits)
    assert [str(e) for e in errors] == [
        "apps: the configuration has 27 subscriptions; at most 25 are allowed (limit SUBROUTE_MAX_SUBSCRIPTIONS_TOTAL)"
    ]


def test_one_group_over_the_per_app_limit_is_refused_record_by_record(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SUBROUTE_MAX_SUBSCRIPTIONS_PER_APP", "3")
    errors = validate_group(group(4), sql_app())
    assert [e.location for e in errors] == ["apps.billing.groups.g.subscriptions"]
    assert "group g has 4 subscriptions; at most 3" in errors[0].message


def test_the_config_store_refuses_versions_past_the_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SUBROUTE_MAX_SUBSCRIPTIONS_PER_APP", "3")
    monkeypatch.setenv("SUBROUTE_MAX_EXPRESSION_LENGTH", "20")
    state = ConfigState()
    records = [encode(sql_app()), encode(group(3, name="ok")), encode(group(4, name="big"))]
    records.append(encode(GroupConfig("billing", "long", (SubscriptionConfig("N BETWEEN 1 AND 1000000"),))))
    valid = []
    for i, (k, v, h) in enumerate(records):
        state.apply(FakeMessage(k, v, h, i))  # type: ignore[arg-type]
        valid.append(not state.problems())
    assert valid == [True, True, False, False]
    with pytest.raises(ConfigVersionRefused) as refused:
        state.config()
    assert any("group big has 4 subscriptions; at most 3" in p for p in refused.value.problems)
    assert any("at most 20" in p for p in refused.value.problems)
    for i, key in enumerate(("group/billing/big", "group/billing/long"), start=len(records)):
        state.apply(FakeMessage(key, None, [], i))  # type: ignore[arg-type]
    assert sorted(state.config().groups) == [("billing", "ok")]


def test_config_apply_refuses_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SUBROUTE_MAX_SUBSCRIPTIONS_PER_APP", "2")
    path = tmp_path / "subscriptions.yaml"
    path.write_text(
        """
apps:
  billing:
    inputs: [orders]
    properties: {N: int}
    groups:
      a: {subscriptions: [{expression: 'N == 1'}, {expression: 'N == 2'}]}
      b: {subscriptions: [{expression: 'N == 3'}]}
"""
    )
    # validation happens before any Kafka call: an unreachable broker proves nothing was attempted
    code = cli(["config", "apply", "-f", str(path), "--bootstrap-servers", "127.0.0.1:9"])
    assert code == 2
    err = capsys.readouterr().err
    assert (
        "app billing has 3 subscriptions; at most 2 are allowed (limit SUBROUTE_MAX_SUBSCRIPTIONS_PER_APP)"
        in err
    )
    assert "nothing was written" in err


def test_the_config_store_refuses_a_version_that_takes_an_app_past_the_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Each group is within the limit alone; the second takes app billing to 4 subscriptions over two groups.
    monkeypatch.setenv("SUBROUTE_MAX_SUBSCRIPTIONS_PER_APP", "3")
    state = ConfigState()
    records = [encode(sql_app()), encode(group(2, name="first")), encode(group(2, name="second"))]
    records.append(encode(group(1, name="first")))  # shrinking a group makes it 1 + 2 = 3: valid again
    valid = []
    for i, (k, v, h) in enumerate(records):
        state.apply(FakeMessage(k, v, h, i))  # type: ignore[arg-type]
        valid.append(not state.problems())
    assert valid == [True, True, False, True]
    assert sorted(state.config().groups) == [("billing", "first"), ("billing", "second")]
