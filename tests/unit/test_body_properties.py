"""Properties read from a JSON record value (issue 25, docs: README "Properties from the message body"): the
Python reference (routing/body.py), the config that binds a property to a path, and routing on them."""

from __future__ import annotations

import json
import time

import pytest

from subroute.config.body_paths import PointerError, parse_pointer
from subroute.config.codec import decode, encode
from subroute.config.model import AppConfig, Config, GroupConfig
from subroute.config.validation import validate_state
from subroute.config.yaml import config_to_document, parse_document
from subroute.routing.body import MAX_BODY_BYTES, body_read, read_json
from subroute.routing.decisions import Action, MessageView, Router, build_table
from subroute.routing.explain import explain, render

# --- the reference reader ---------------------------------------------------------------------------------------


def read(doc: bytes | str | None, **reads: str) -> tuple[dict[str, object], dict[str, int]]:
    """``read_json`` of ``doc`` with each keyword a property ``name="type path"``."""
    value = doc.encode() if isinstance(doc, str) else doc
    specs = [body_read(name, *spec.split(" ", 1)[::-1]) for name, spec in reads.items()]
    return read_json(value, specs)


def test_nested_fields_and_array_elements_are_read_by_pointer() -> None:
    doc = '{"customer": {"id": 42, "name": "Ada"}, "items": [{"sku": "A-1"}, {"sku": "B-2"}], "a/b": {"~": true}}'
    props, failures = read(
        doc,
        Id="int /customer/id",
        Sku="string /items/1/sku",
        Odd="bool /a~1b/~0",
        Name="string /customer/name",
    )
    assert props == {"Id": 42, "Sku": "B-2", "Odd": True, "Name": "Ada"}
    assert failures == {}


def test_a_missing_path_or_a_null_leaf_is_missing_and_not_counted() -> None:
    doc = '{"a": null, "b": 5, "items": [1], "o": {"0": 7}}'
    props, failures = read(
        doc, A="int /a", C="int /c", Deep="int /b/x", Out="int /items/1", Lead="int /items/01", Key="int /o/0"
    )
    assert props == {"Key": 7}  # an object's member "0" is a key, not an index
    assert failures == {}


@pytest.mark.parametrize(
    ("doc", "spec"),
    [
        ('{"p": "5"}', "int /p"),
        ('{"p": 5.0}', "int /p"),
        ('{"p": 1e2}', "int /p"),
        ('{"p": true}', "int /p"),
        ('{"p": 9223372036854775808}', "int /p"),
        ('{"p": 1e400}', "float /p"),
        ('{"p": "x"}', "float /p"),
        ('{"p": 1}', "bool /p"),
        ('{"p": 1}', "string /p"),
        ('{"p": {"q": 1}}', "string /p"),
        ('{"p": [1]}', "int /p"),
        ('{"p": "\\ud800"}', "string /p"),
    ],
)
def test_a_leaf_of_the_wrong_type_is_missing_and_counted(doc: str, spec: str) -> None:
    assert read(doc, P=spec) == ({}, {"P": 1})


def test_type_mapping() -> None:
    doc = '{"i": -0, "big": 9223372036854775807, "f": 5, "g": -2.5e-3, "h": 1' + "0" * 300 + "}"
    props, failures = read(doc, I="int /i", Big="int /big", F="float /f", G="float /g", H="float /h")
    assert props == {"I": 0, "Big": 2**63 - 1, "F": 5.0, "G": -0.0025, "H": 1e300}
    assert type(props["F"]) is float and failures == {}
    long_int = '{"n": 1' + "0" * 5000 + "}"  # past Python's int digit limit: still a JSON number
    assert read(long_int, N="float /n") == ({}, {"N": 1})  # not finite as an f64
    assert read(long_int, N="int /n") == ({}, {"N": 1})
    assert read(long_int, S="string /s") == ({}, {})
    escaped = '{"s": "\\u00e9\\ud83d\\ude00\\n", "\\u0061": 1}'
    assert read(escaped, S="string /s", A="int /a") == ({"S": "é😀\n", "A": 1}, {})


def test_the_last_of_duplicate_keys_wins() -> None:
    assert read('{"p": 1, "p": 2}', P="int /p") == ({"P": 2}, {})
    assert read('{"a": {"b": 1}, "a": 3}', B="int /a/b") == ({}, {})


@pytest.mark.parametrize(
    "value",
    [
        None,
        b"",
        b"not json",
        b'{"p": 1',
        b'{"p": 1} x',
        b'{"p": NaN}',
        b'{"p": Infinity}',
        b"\xef\xbb\xbf{}",  # a byte order mark
        b'{"p": "\xff"}',
        b'{"p": 01}',
        b'{"p": "a\tb"}',  # a raw control character in a string
        '{"p": 1}'.encode("utf-16"),
    ],
)
def test_an_undecodable_body_counts_every_property_once(value: bytes | None) -> None:
    assert read(value, P="int /p", Q="string /q") == ({}, {"P": 1, "Q": 1})


def test_surrounding_whitespace_is_allowed() -> None:
    assert read(' \n\t{"p": 1}\r\n ', P="int /p") == ({"P": 1}, {})


def test_depth_limit() -> None:
    at_limit = "[" * 63 + '{"p": 1}' + "]" * 63  # 64 levels
    assert read(at_limit, P="int /p") == ({}, {})
    over = "[" * 64 + '{"p": 1}' + "]" * 64
    assert read(over, P="int /p") == ({}, {"P": 1})
    in_strings = '{"s": "' + "[" * 100 + '", "p": 1}'  # brackets inside strings are not nesting
    assert read(in_strings, P="int /p") == ({"P": 1}, {})


def test_hostile_bodies_are_refused_fast() -> None:
    """A 1 MB document nested 100,000 deep, one byte over 1 MiB, and 1 MB of garbage: each refused in linear time
    without recursion (a budget far above what one evaluation takes, far below a quadratic or recursive one)."""
    deep = b"[" * 100_000 + b"1" + b"]" * 100_000
    deep = deep + b" " * (1_000_000 - len(deep))
    over = b'{"p": "' + b"x" * (MAX_BODY_BYTES - 8) + b'"}'
    assert len(over) == MAX_BODY_BYTES + 1
    garbage = bytes(range(256)) * 4000
    for value in (deep, over, garbage):
        started = time.perf_counter()
        assert read(value, P="int /p") == ({}, {"P": 1})
        assert time.perf_counter() - started < 1.0


def test_pointer_syntax() -> None:
    assert parse_pointer("/a~1b/~0/") == ("a/b", "~", "")
    with pytest.raises(PointerError, match="start with '/'"):
        parse_pointer("customer/id")
    with pytest.raises(PointerError, match=r"~0 is '~'[^\n]*\n  /ab/c~2\n       \^"):
        parse_pointer("/ab/c~2")
    with pytest.raises(PointerError, match="33 segments"):
        parse_pointer("/a" * 33)
    with pytest.raises(PointerError, match="257 bytes"):
        parse_pointer("/" + "a" * 256)


# --- the config -----------------------------------------------------------------------------------------------

YAML_DOC = {
    "apps": {
        "orders": {
            "inputs": ["orders"],
            "format": "json",
            "properties": {
                "Region": "string",
                "CustomerId": {"type": "int", "path": "/customer/id"},
                "Price": {"type": "int", "path": "/price"},
                "Qty": {"type": "int", "path": "/qty"},
            },
            "priority": "Price * Qty",
            "groups": {"east": {"subscriptions": ['Region == "east" && CustomerId > 100']}, "all": {}},
        }
    }
}


def parsed_app(document: dict[str, object]) -> tuple[list[AppConfig | GroupConfig], list[str]]:
    parsed = parse_document(document)
    values = list(parsed.values.values())
    errors = [f"{e.location}: {e.message}" for e in [*parsed.errors, *validate_state(values)]]
    return values, errors


def test_the_yaml_binds_properties_to_body_paths_and_round_trips() -> None:
    values, errors = parsed_app(YAML_DOC)
    assert errors == []
    (app,) = [v for v in values if isinstance(v, AppConfig)]
    assert app.format == "json"
    assert dict(app.paths) == {"CustomerId": "/customer/id", "Price": "/price", "Qty": "/qty"}
    assert dict(app.properties) == {"Region": "string", "CustomerId": "int", "Price": "int", "Qty": "int"}
    key, value, headers = encode(app)
    assert decode(key, value, headers)[1] == app
    config = Config(1, {app.name: app}, {(g.app, g.name): g for g in values if isinstance(g, GroupConfig)})
    assert parse_document(config_to_document(config)).values == parse_document(YAML_DOC).values


def test_an_app_without_body_properties_keeps_the_older_record_version() -> None:
    app = AppConfig(name="plain", inputs=("orders",), properties={"n": "int"})
    assert dict(encode(app)[2])["subroute.schema"] == b"subroute.AppConfig/1"


def with_app(**changes: object) -> dict[str, object]:
    document = json.loads(json.dumps(YAML_DOC))
    document["apps"]["orders"].update(changes)
    if "group_by" in changes:
        del document["apps"]["orders"]["priority"]  # message groups and priority are not combined
    return document


@pytest.mark.parametrize(
    ("document", "wanted"),
    [
        (
            with_app(format="none"),
            "apps.orders.properties.CustomerId.path: a property read from the body needs the app's format",
        ),
        (with_app(format="xml"), "apps.orders.format: unknown format 'xml'"),
        (
            with_app(properties={"P": {"type": "int", "path": "p"}}),
            "apps.orders.properties.P.path: 'p' does not start with '/'",
        ),
        (
            with_app(properties={"P": {"type": "int", "path": "/a~x"}}),
            "apps.orders.properties.P.path: '~' must be followed by 0 or 1 (~0 is '~', ~1 is '/')\n  /a~x\n    ^",
        ),
        (
            with_app(properties={"P": {"type": "int", "path": "/" + "a/" * 40}}),
            "apps.orders.properties.P.path: path has 41 segments; at most 32 are allowed",
        ),
        (with_app(properties={"P": {"path": "/p"}}), "apps.orders.properties.P.type: missing"),
        (with_app(properties={"P": {"type": "int", "where": "/p"}}), "apps.orders.properties.P"),
        (
            with_app(group_by="CustomerId"),
            "apps.orders.group_by: 'CustomerId' is read from the body",
        ),
    ],
)
def test_bad_body_properties_are_refused_with_their_location(
    document: dict[str, object], wanted: str
) -> None:
    _, errors = parsed_app(document)
    assert any(e.startswith(wanted) for e in errors), errors


def test_a_name_has_one_source_across_apps() -> None:
    document = json.loads(json.dumps(YAML_DOC))
    document["apps"]["audit"] = {"inputs": ["orders"], "properties": {"Price": "int"}}
    document["apps"]["other"] = {
        "inputs": ["orders"],
        "format": "json",
        "properties": {"Qty": {"type": "int", "path": "/quantity"}},
    }
    _, errors = parsed_app(document)
    assert any("a body property and a header may not share a name" in e for e in errors), errors
    assert any("'Qty' is read as int from /quantity (json) here and as int from /qty" in e for e in errors), (
        errors
    )


# --- routing --------------------------------------------------------------------------------------------------


def body_config() -> Config:
    values, errors = parsed_app(YAML_DOC)
    assert errors == []
    apps = {v.name: v for v in values if isinstance(v, AppConfig)}
    groups = {(g.app, g.name): g for g in values if isinstance(g, GroupConfig)}
    return Config(1, apps, groups)


def route(headers: list[tuple[str, bytes | None]], value: bytes | None) -> tuple[str | None, int, int]:
    table = build_table(body_config())
    result = Router().route(table, MessageView("orders", headers, 0, value), {}, 0)
    (decision,) = result.routed
    assert decision.action is Action.ROUTE
    return decision.group, decision.band, result.decode_errors.get("orders", 0)


def test_routing_on_a_nested_body_field_and_priority_from_two_fields() -> None:
    body = json.dumps({"customer": {"id": 500}, "price": 3, "qty": 2}).encode()
    assert route([("Region", b"east")], body) == ("east", 6, 0)
    small = json.dumps({"customer": {"id": 5}, "price": 30, "qty": 2}).encode()
    assert route([("Region", b"east")], small) == ("all", 9, 0)  # the band is clamped to 9


def test_a_header_named_like_a_body_property_is_not_read() -> None:
    body = json.dumps({"customer": {"id": 5}}).encode()
    assert route([("Region", b"east"), ("CustomerId", b"500")], body) == ("all", 0, 0)


def test_a_bad_body_is_counted_per_body_property_and_routes_as_absent() -> None:
    assert route([("Region", b"east")], b"not json") == ("all", 0, 3)
    assert route([("Region", b"east")], b'{"price": "3", "qty": 2}') == ("all", 0, 1)


def test_explain_shows_each_property_with_its_source() -> None:
    table = build_table(body_config())
    body = b'{"customer": {"id": 500}, "price": "3", "qty": 2}'
    (entry,) = explain(table, MessageView("orders", [("Region", b"east")], 0, body), {}, 0)
    assert entry.sources == {
        "CustomerId": "body json /customer/id",
        "Price": "body json /price",
        "Qty": "body json /qty",
        "Region": "header Region",
    }
    text = render([entry])
    assert "CustomerId from body json /customer/id: 500" in text
    assert "Price from body json /price: absent (could not be decoded: counted)" in text
    assert "Region from header Region: 'east'" in text
