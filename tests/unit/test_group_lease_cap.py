"""A group's ``max_leased_per_member`` (AMPS MaxPerSubscriptionBacklog): parsed, validated, stored, shown back,
in the JSON Schema, and the smaller of it and the member's own ``max_backlog`` is the member's backlog."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

from subroute.client.delivery import backlog_limit
from subroute.config.codec import SCHEMA_HEADER, decode, encode, group_key
from subroute.config.model import AppConfig, GroupConfig, SubscriptionConfig
from subroute.config.validation import validate_group
from subroute.config.yaml import parse_yaml, to_document

SCHEMA = Path(__file__).resolve().parents[2] / "schemas" / "subscriptions.schema.json"


def test_parsed_and_written_back_only_when_set() -> None:
    text = "apps:\n  q:\n    inputs: [t]\n    groups:\n      w: {max_leased_per_member: 5}\n      v: {}\n"
    parsed = parse_yaml(text)
    assert parsed.errors == []
    group = parsed.values[group_key("q", "w")]
    assert isinstance(group, GroupConfig) and group.max_leased_per_member == 5
    document = to_document(parsed.values.values())["apps"]["q"]["groups"]
    assert document == {"w": {"max_leased_per_member": 5}, "v": {}}


def test_shape_errors_name_the_key() -> None:
    parsed = parse_yaml("apps:\n  q:\n    inputs: [t]\n    groups:\n      w: {max_leased_per_member: many}\n")
    assert [e.location for e in parsed.errors] == ["apps.q.groups.w.max_leased_per_member"]


@pytest.mark.parametrize("value", [0, -1, True, 2**31])
def test_out_of_range_is_refused(value: int) -> None:
    app = AppConfig("q", ("t",))
    (error,) = validate_group(GroupConfig("q", "w", max_leased_per_member=value), app)
    assert error.location == "apps.q.groups.w.max_leased_per_member"


def test_written_with_group_schema_version_2_only_when_set() -> None:
    capped = GroupConfig("q", "w", (SubscriptionConfig("a == 1", 3, 10),), 1, max_leased_per_member=7)
    key, value, headers = encode(capped)
    assert headers == [(SCHEMA_HEADER, b"subroute.GroupConfig/2")]
    assert decode(key, value, headers)[1] == capped
    plain = GroupConfig("q", "w")
    key, value, headers = encode(plain)
    assert headers == [(SCHEMA_HEADER, b"subroute.GroupConfig/1")]  # older readers keep reading it
    assert decode(key, value, headers)[1] == plain


def test_json_schema_takes_it_and_refuses_zero() -> None:
    validator = Draft202012Validator(json.loads(SCHEMA.read_text()))
    good = {"apps": {"q": {"inputs": ["t"], "groups": {"w": {"max_leased_per_member": 3}}}}}
    bad = {"apps": {"q": {"inputs": ["t"], "groups": {"w": {"max_leased_per_member": 0}}}}}
    assert list(validator.iter_errors(good)) == []
    assert list(validator.iter_errors(bad))


@pytest.mark.parametrize(
    ("asked", "cap", "limit"),
    [(10, None, 10), (10, 3, 3), (2, 5, 2), (1, 1, 1)],
)
def test_the_smaller_of_the_members_and_the_groups_wins(asked: int, cap: int | None, limit: int) -> None:
    assert backlog_limit(asked, cap) == limit
