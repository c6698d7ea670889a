"""schemas/subscriptions.schema.json, the JSON Schema of the subscriptions YAML for editors: a valid schema, in
step with the parser's keys, accepting every example config in the repository and refusing a bad key."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from jsonschema import Draft202012Validator

from subroute.config.body_paths import FORMATS, MAX_PATH_BYTES
from subroute.config.model import DIALECTS, FAIRNESS_MODELS, ON_EXPIRE_ACTIONS, PRESENCE_MODES, PROPERTY_TYPES
from subroute.config.yaml import APP_KEYS, GROUP_KEYS, PROPERTY_KEYS, SUBSCRIPTION_KEYS, load_yaml_file

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = ROOT / "schemas" / "subscriptions.schema.json"
EXAMPLES = sorted(
    [*(ROOT / "examples").rglob("*.yaml"), *(ROOT / "deploy").rglob("subscriptions.yaml")], key=str
)


@pytest.fixture(scope="module")
def validator() -> Draft202012Validator:
    schema = json.loads(SCHEMA.read_text())
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


def errors(validator: Draft202012Validator, document: Any) -> list[str]:
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(document)]


def test_the_schema_names_exactly_the_keys_and_choices_the_parser_takes() -> None:
    defs = json.loads(SCHEMA.read_text())["$defs"]
    assert set(defs["app"]["properties"]) == set(APP_KEYS)
    app = defs["app"]["properties"]
    assert (app["dialect"]["enum"], app["fairness"]["enum"]) == (list(DIALECTS), list(FAIRNESS_MODELS))
    assert app["presence"]["enum"] == list(PRESENCE_MODES)
    assert app["on_expire"]["enum"] == list(ON_EXPIRE_ACTIONS)
    assert defs["propertyType"]["enum"] == list(PROPERTY_TYPES)
    assert app["format"]["enum"] == list(FORMATS)
    long_form = app["properties"]["additionalProperties"]["oneOf"][1]["properties"]
    assert set(long_form) == set(PROPERTY_KEYS)
    assert long_form["path"]["maxLength"] == MAX_PATH_BYTES
    assert set(defs["group"]["properties"]) == set(GROUP_KEYS)
    assert set(defs["subscription"]["properties"]) == set(SUBSCRIPTION_KEYS)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_example_config_validates(path: Path, validator: Draft202012Validator) -> None:
    assert not load_yaml_file(path).errors  # an example the parser takes ...
    assert errors(validator, yaml.safe_load(path.read_text())) == []  # ... the schema takes too


def test_there_are_examples() -> None:
    assert any(p.parent.name == "examples" for p in EXAMPLES)


@pytest.mark.parametrize(
    ("document", "where"),
    [
        ({"apps": {"a": {"inputs": ["t"], "filtre": "x"}}}, "apps/a"),  # a misspelt app key
        ({"apps": {"a": {"inputs": ["t"], "groups": {"g": {"subscription": []}}}}}, "apps/a/groups/g"),
        (
            {"apps": {"a": {"inputs": ["t"], "groups": {"g": {"subscriptions": [{"max_unconfirmd": 5}]}}}}},
            "apps/a/groups/g/subscriptions/0",
        ),
        ({"apps": {"a": {"inputs": ["t"]}}, "version": 3}, ""),  # an unknown top-level key
        ({"apps": {"a": {"filter": "x"}}}, "apps/a"),  # inputs missing
        ({"apps": {"a": {"inputs": "t", "dialect": "sql"}}}, "apps/a/dialect"),
        ({"apps": {"a.b": {"inputs": "t"}}}, "apps"),  # a name that cannot be part of a topic name
        ({"apps": {"a": {"inputs": "t", "groups": {"dlq": {}}}}}, "apps/a/groups"),  # a reserved group name
        ({"apps": {"a": {"inputs": "t", "default_group": "x"}}}, "apps/a"),  # default_group needs group_by
        ({"apps": {"a": {"inputs": "t", "on_expire": "remove"}}}, "apps/a/on_expire"),
        ({"apps": {"a": {"inputs": "t", "max_cancels": -1}}}, "apps/a/max_cancels"),
        ({"apps": {"a": {"inputs": "t", "max_deliveries": -1}}}, "apps/a/max_deliveries"),
        ({"apps": {"a": {"inputs": "t", "partitions": 0}}}, "apps/a/partitions"),
    ],
)
def test_a_bad_document_is_refused(document: Any, where: str, validator: Draft202012Validator) -> None:
    found = errors(validator, document)
    assert found and any(e.startswith(f"{where}:") for e in found), found


def test_max_cancels_and_max_deliveries_0_mean_no_maximum(validator: Draft202012Validator) -> None:
    # AMPS (seed 001): "Default: no maximum (0)" for both.
    document = {"apps": {"a": {"inputs": "t", "max_cancels": 0, "max_deliveries": 0}}}
    assert errors(validator, document) == []


def test_a_body_property_may_leave_its_type_to_the_avro_schema(validator: Draft202012Validator) -> None:
    app = {"inputs": "t", "format": "avro", "schema": "order.avsc"}
    document = {
        "apps": {"a": {**app, "properties": {"P": {"path": "/price"}, "Q": {"type": "int", "path": "/q"}}}}
    }
    assert errors(validator, document) == []
    assert errors(validator, {"apps": {"a": {**app, "properties": {"P": {}}}}}) != []  # neither type nor path
