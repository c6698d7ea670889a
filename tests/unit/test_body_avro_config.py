"""Avro bodies end to end on the Python path (issue 25, README "Properties from the message body"): the YAML's
``format: avro`` and ``schema:`` file, the apply-time check of paths against the schema, reading schemaless and
Confluent-framed values (routing/body.py), and routing on them."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import fastavro
import pytest
from hypothesis import given
from hypothesis import strategies as st

from subroute.cli.main import main
from subroute.config.avro_schema import WriterSchema, writer_schema
from subroute.config.codec import decode, encode
from subroute.config.model import AppConfig, Config, GroupConfig
from subroute.config.validation import validate_state
from subroute.config.yaml import config_to_document, parse_document, parse_yaml
from subroute.routing import native_avro, native_routing
from subroute.routing.body import NoWriterSchemas, body_read, read_body
from subroute.routing.decisions import Action, MessageView, Router, build_table
from subroute.routing.explain import explain

ORDER: dict[str, Any] = {
    "type": "record",
    "name": "Order",
    "fields": [
        {
            "name": "customer",
            "type": {
                "type": "record",
                "name": "Customer",
                "fields": [{"name": "id", "type": "long"}, {"name": "tier", "type": ["null", "string"]}],
            },
        },
        {"name": "price", "type": "long"},
        {"name": "qty", "type": "int"},
        {"name": "sku", "type": "string"},
        {"name": "blob", "type": "bytes"},
    ],
}

YAML = """
apps:
  orders:
    inputs: [orders]
    format: avro
    schema: order.avsc
    properties:
      CustomerId: {path: /customer/id}
      Tier: {type: string, path: /customer/tier}
      Price: {path: /price}
      Qty: {type: int, path: /qty}
    priority: Price * Qty
    groups:
      big: {subscriptions: ['CustomerId > 100']}
      rest: {}
"""


def written(value: dict[str, Any], schema: dict[str, Any] = ORDER) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), value)
    return out.getvalue()


def order(customer: int, price: int = 25, qty: int = 4, tier: str | None = None) -> dict[str, Any]:
    return {"customer": {"id": customer, "tier": tier}, "price": price, "qty": qty, "sku": "A-1", "blob": b""}


def parsed(tmp_path: Path, text: str = YAML, schema: Any = ORDER) -> tuple[list[Any], list[str]]:
    (tmp_path / "order.avsc").write_text(json.dumps(schema))
    result = parse_yaml(text, str(tmp_path / "apps.yaml"))
    values = list(result.values.values())
    errors = [f"{e.location}: {e.message}" for e in [*result.errors, *validate_state(values)]]
    return values, errors


def the_app(values: list[Any]) -> AppConfig:
    (app,) = [v for v in values if isinstance(v, AppConfig)]
    return app


# --- the config -------------------------------------------------------------------------------------------------


def test_the_schema_file_is_read_next_to_the_yaml_kept_inline_and_gives_the_omitted_types(
    tmp_path: Path,
) -> None:
    values, errors = parsed(tmp_path)
    assert errors == []
    app = the_app(values)
    assert app.format == "avro"
    assert json.loads(app.schema or "") == ORDER
    assert dict(app.properties) == {"CustomerId": "int", "Tier": "string", "Price": "int", "Qty": "int"}
    key, value, headers = encode(app)
    assert decode(key, value, headers)[1] == app
    # config get writes the schema inline; applying that again gives the same app (no file needed)
    config = Config(1, {app.name: app}, {(g.app, g.name): g for g in values if isinstance(g, GroupConfig)})
    again = parse_document(json.loads(json.dumps(config_to_document(config))))
    assert again.errors == []
    assert again.values == {k: v for k, v in parse_yaml(YAML, str(tmp_path / "apps.yaml")).values.items()}


@pytest.mark.parametrize(
    ("properties", "wanted"),
    [
        (
            "P: {type: string, path: /qty}",
            "apps.orders.properties.P.path: path /qty: declared string, but the schema says int",
        ),
        (
            "P: {type: string, path: /blob}",
            "apps.orders.properties.P.path: path /blob: the schema says bytes",
        ),
        ("P: {path: /blob}", "apps.orders.properties.P.path: path /blob: the schema says bytes"),
        (
            "P: {type: int, path: /customer/nope}",
            "apps.orders.properties.P.path: path /customer/nope: /customer",
        ),
        ("P: {path: /nope}", "apps.orders.properties.P.path: path /nope: the record has no field"),
    ],
)
def test_paths_the_schema_contradicts_are_refused_with_path_and_types(
    tmp_path: Path, properties: str, wanted: str
) -> None:
    text = YAML.replace(
        "      CustomerId: {path: /customer/id}",
        "      CustomerId: {path: /customer/id}\n      " + properties,
    )
    _, errors = parsed(tmp_path, text)
    assert any(e.startswith(wanted) for e in errors), errors


def test_a_missing_or_bad_schema_file_is_a_located_error(tmp_path: Path) -> None:
    _, errors = parsed(tmp_path, YAML.replace("order.avsc", "nowhere.avsc"))
    assert any(e.startswith("apps.orders.schema: cannot read the schema file") for e in errors), errors
    assert not any("type: missing" in e for e in errors), errors  # the schema's error says it once
    _, errors = parsed(tmp_path, YAML, schema={"type": "nonsense"})
    assert any(e.startswith("apps.orders.schema: not an Avro schema") for e in errors), errors


def test_without_a_schema_avro_is_confluent_framed_and_types_must_be_given(tmp_path: Path) -> None:
    framed = YAML.replace("    schema: order.avsc\n", "")
    _, errors = parsed(tmp_path, framed)
    assert any(e.startswith("apps.orders.properties.CustomerId.type: missing") for e in errors), errors
    typed = framed.replace("{path: /customer/id}", "{type: int, path: /customer/id}").replace(
        "{path: /price}", "{type: int, path: /price}"
    )
    values, errors = parsed(tmp_path, typed)
    assert errors == []
    assert the_app(values).schema is None


def test_a_schema_only_goes_with_format_avro(tmp_path: Path) -> None:
    _, errors = parsed(tmp_path, YAML.replace("format: avro", "format: json"))
    assert any(e.startswith("apps.orders.schema: only meaningful with format: avro") for e in errors), errors


# --- reading and routing ----------------------------------------------------------------------------------------

READS = (body_read("CustomerId", "/customer/id", "int"), body_read("Price", "/price", "float"))


def test_read_body_reads_schemaless_avro_with_the_app_schema() -> None:
    schema = json.dumps(ORDER)
    assert read_body(written(order(7, 15)), "avro", READS, schema) == ({"CustomerId": 7, "Price": 15.0}, {})
    assert read_body(b"\x02", "avro", READS, schema) == ({}, {"CustomerId": 1, "Price": 1})
    assert read_body(None, "avro", READS, schema) == ({}, {"CustomerId": 1, "Price": 1})


def framed(schema_id: int, body: bytes) -> bytes:
    return b"\x00" + schema_id.to_bytes(4, "big") + body


def test_read_body_reads_framed_avro_through_the_writer_schema_of_its_id() -> None:
    writers: dict[int, WriterSchema] = {5: writer_schema(ORDER)}
    value = framed(5, written(order(9, 30)))
    assert read_body(value, "avro", READS, None, writers.get) == ({"CustomerId": 9, "Price": 30.0}, {})
    # an id the registry does not have, a bad magic byte: undecodable, each property counted once
    assert read_body(framed(6, b""), "avro", READS, None, writers.get) == ({}, {"CustomerId": 1, "Price": 1})
    assert read_body(b"\x01" + value[1:], "avro", READS, None, writers.get)[1] == {
        "CustomerId": 1,
        "Price": 1,
    }
    with pytest.raises(NoWriterSchemas):  # no registry: not read as if the fields were absent
        read_body(value, "avro", READS, None, None)


def avro_table(tmp_path: Path, text: str = YAML) -> Any:
    values, errors = parsed(tmp_path, text)
    assert errors == []
    apps = {v.name: v for v in values if isinstance(v, AppConfig)}
    groups = {(v.app, v.name): v for v in values if isinstance(v, GroupConfig)}
    return build_table(Config(1, apps, groups))


def counted(decode_errors: dict[str, Any]) -> int:
    """The decode errors of app orders (a count, or counts by property where they are kept by property)."""
    found = decode_errors.get("orders", 0)
    return found if isinstance(found, int) else sum(found.values())


def message(value: bytes | None) -> MessageView:
    return MessageView("orders", [("CustomerId", b"1000")], 1, value=value)


def test_the_router_routes_on_avro_body_fields_and_priority_from_two_of_them(tmp_path: Path) -> None:
    table = avro_table(tmp_path)
    router = Router()
    big = router.route(table, message(written(order(500, 25, 4))), None, 0)
    (decision,) = big.decisions
    assert (decision.action, decision.group) == (Action.ROUTE, "big")
    small = router.route(table, message(written(order(5))), None, 0)
    assert [d.group for d in small.decisions] == ["rest"]  # the header of the same name is not read
    bad = router.route(table, message(b"\xff\xff"), None, 0)
    assert [d.group for d in bad.decisions] == ["rest"]
    assert counted(bad.decode_errors) == 4  # every body property of the app, once


def test_the_router_reads_framed_values_through_its_writer_of(tmp_path: Path) -> None:
    text = YAML.replace("    schema: order.avsc\n", "").replace(
        "{path: /customer/id}", "{type: int, path: /customer/id}"
    )
    table = avro_table(tmp_path, text.replace("{path: /price}", "{type: int, path: /price}"))
    router = Router()
    router.writer_of = {3: writer_schema(ORDER)}.get
    routed = router.route(table, message(framed(3, written(order(500)))), None, 0)
    assert [d.group for d in routed.decisions] == ["big"]
    unknown = router.route(table, message(framed(4, written(order(500)))), None, 0)
    assert ([d.group for d in unknown.decisions], counted(unknown.decode_errors)) == (["rest"], 4)


# --- config validate --schema -----------------------------------------------------------------------------------

FRAMED = (
    YAML.replace("    schema: order.avsc\n", "")
    .replace("{path: /customer/id}", "{type: int, path: /customer/id}")
    .replace("{path: /price}", "{type: int, path: /price}")
)


def test_config_validate_checks_framed_apps_against_a_schema_file_offline(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SUBROUTE_BOOTSTRAP_SERVERS", "127.0.0.1:1")  # no broker is needed
    (tmp_path / "apps.yaml").write_text(
        FRAMED.replace("{type: string, path: /customer/tier}", "{type: int, path: /customer/tier}")
    )
    (tmp_path / "order.avsc").write_text(json.dumps(ORDER))
    yaml_file, schema_file = str(tmp_path / "apps.yaml"), str(tmp_path / "order.avsc")
    assert (
        main(["config", "validate", "-f", yaml_file]) == 0
    )  # without the schema, nothing to check it against
    capsys.readouterr()
    assert main(["config", "validate", "-f", yaml_file, "--schema", f"orders={schema_file}"]) == 2
    err = capsys.readouterr().err
    assert (
        "apps.orders.properties.Tier.path: path /customer/tier: declared int, but the schema says string"
        in err
    )
    assert main(["config", "validate", "-f", yaml_file, "--schema", schema_file]) == 2
    assert main(["config", "validate", "-f", yaml_file, "--schema", f"nobody={schema_file}"]) == 2
    assert "no app 'nobody' in the file" in capsys.readouterr().err
    (tmp_path / "apps.yaml").write_text(FRAMED)
    assert main(["config", "validate", "-f", yaml_file, "--schema", f"orders={schema_file}"]) == 0


def test_explain_reads_framed_values_through_the_writer_schemas_it_is_given(tmp_path: Path) -> None:
    table = avro_table(tmp_path, FRAMED)
    value = message(framed(3, written(order(500, 25, 4, tier="gold"))))
    (report,) = explain(table, value, None, 0, writer_of={3: writer_schema(ORDER)}.get)
    assert report.properties == {"CustomerId": 500, "Tier": "gold", "Price": 25, "Qty": 4}
    assert report.sources["CustomerId"] == "body avro /customer/id"
    assert (report.action, report.undecodable) == ("route", [])
    with pytest.raises(NoWriterSchemas):  # the CLI turns it into one line naming --schema-registry-url
        explain(table, value, None, 0)


def test_a_table_with_avro_apps_routes_batches_on_the_native_decider(tmp_path: Path) -> None:
    values, errors = parsed(tmp_path, FRAMED)
    assert errors == []
    apps = {v.name: v for v in values if isinstance(v, AppConfig)}
    groups = {(v.app, v.name): v for v in values if isinstance(v, GroupConfig)}
    table = native_routing.build_table(Config(1, apps, groups))
    assert table.native is not None and table.native.decisions is not None  # it reads Avro bodies itself
    router = Router()
    router.writer_of = {3: writer_schema(ORDER)}.get
    batch = [message(framed(3, written(order(500)))), message(framed(3, written(order(5)))), message(b"")]
    results = router.route_batch(table, batch, None, 0)
    assert [[d.group for d in r.decisions] for r in results] == [["big"], ["rest"], ["rest"]]


def test_the_native_avro_read_body_the_worker_uses_reads_as_the_reference() -> None:
    schema = json.dumps(ORDER)
    writers: dict[int, WriterSchema] = {5: writer_schema(ORDER)}
    good = written(order(9, 30, 2, tier="gold"))
    values: list[bytes | None] = [good, good[:-1], good + b"\x00", b"", b"\xff" * 12, None]
    for value in values:
        assert native_avro.read_body(value, "avro", READS, schema) == read_body(value, "avro", READS, schema)
    framed_values = [
        *(framed(5, v) for v in values if v is not None),
        framed(6, good),
        b"\x01" + framed(5, good)[1:],
    ]
    for value in [*framed_values, b"\x00\x00", None]:
        native = native_avro.read_body(value, "avro", READS, None, writers.get)
        assert native == read_body(value, "avro", READS, None, writers.get), value
    with pytest.raises(NoWriterSchemas):
        native_avro.read_body(framed(5, good), "avro", READS)
    json_reads = (body_read("CustomerId", "/customer/id", "int"),)
    assert native_avro.read_body(b'{"customer": {"id": 4}}', "json", json_reads) == ({"CustomerId": 4}, {})


def test_a_router_reading_bodies_natively_decides_as_the_reference(tmp_path: Path) -> None:
    table = avro_table(tmp_path, FRAMED)
    batch = [message(framed(3, written(order(c, c % 7, c % 3)))) for c in range(0, 400, 7)] + [
        message(b"\x00")
    ]
    reference, fast = Router(), Router()
    for router in (reference, fast):
        router.writer_of = {3: writer_schema(ORDER)}.get
    fast.read_body = native_avro.read_body
    assert fast.route_batch(table, batch, None, 0) == reference.route_batch(table, batch, None, 0)


@given(
    schema_id=st.integers(0, 3),
    body=st.one_of(
        st.binary(max_size=24), st.builds(lambda c: written(order(c)), st.integers(-(2**40), 2**40))
    ),
    cut=st.integers(0, 30),
    frame=st.sampled_from([b"\x00", b"\x01", b""]),
)
def test_the_native_framing_agrees_with_the_reference_on_any_bytes(
    schema_id: int, body: bytes, cut: int, frame: bytes
) -> None:
    writers: dict[int, WriterSchema] = {1: writer_schema(ORDER), 2: writer_schema({"type": "string"})}
    value = (frame + schema_id.to_bytes(4, "big") + body)[: len(frame) + 4 + len(body) - cut % 3]
    native = native_avro.read_body(value, "avro", READS, None, writers.get)
    assert native == read_body(value, "avro", READS, None, writers.get)
