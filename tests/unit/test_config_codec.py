"""Config records on the wire: keys, Avro values with a schema header, tombstones, and refusals."""

from __future__ import annotations

import io

import pytest
from fastavro import schemaless_reader, schemaless_writer
from hypothesis import given
from hypothesis import strategies as st

from subroute.config.codec import (
    SCHEMA_HEADER,
    ConfigDecodeError,
    ConfigKey,
    decode,
    encode,
    parse_key,
)
from subroute.config.model import AppConfig, GroupConfig, SubscriptionConfig
from subroute.schemas import load_schema

FULL_APP = AppConfig(
    name="billing",
    inputs=("orders", "^ORDERS_.*$"),
    dialect="sql92",
    properties={"Amount": "float", "Kind": "string"},
    filter=("Amount > 1.5", "Kind = 'X'"),
    group_by="Kind",
    fairness="proportional",
    spillover=True,
    partitions=4,
    expiration_ms=30_000,
    priority="Amount",
    default_publish="orders",
    max_cancels=3,
    max_deliveries=10,
)


def test_app_round_trip_and_header() -> None:
    key, value, headers = encode(FULL_APP)
    assert key == "app/billing"
    assert headers == [(SCHEMA_HEADER, b"subroute.AppConfig/1")]
    assert decode(key.encode(), value, headers) == (ConfigKey("billing"), FULL_APP)


def test_minimal_app_round_trip() -> None:
    app = AppConfig(name="a", inputs=("t",))
    key, value, headers = encode(app)
    assert decode(key, value, headers)[1] == app


names = st.from_regex(r"[A-Za-z0-9_-]{1,20}", fullmatch=True)
subscriptions = st.builds(
    SubscriptionConfig,
    expression=st.none() | st.text(max_size=50),
    priority=st.integers(-(2**31), 2**31 - 1),
    max_unconfirmed=st.none() | st.integers(1, 2**63 - 1),
)


@given(names, names, st.lists(subscriptions, max_size=4), st.integers(0, 1000))
def test_group_round_trip(app: str, group: str, subs: list[SubscriptionConfig], order: int) -> None:
    value = GroupConfig(app, group, tuple(subs), order)
    key, data, headers = encode(value)
    assert key == f"group/{app}/{group}"
    assert decode(key.encode(), data, headers) == (ConfigKey(app, group), value)


def test_null_value_is_a_tombstone() -> None:
    assert decode(b"group/a/g", None, None) == (ConfigKey("a", "g"), None)


def test_unknown_schema_version_is_refused_with_advice() -> None:
    """Schemaless Avro needs the writer schema: a version this reader does not know cannot be guessed."""
    key, value, _ = encode(FULL_APP)
    with pytest.raises(ConfigDecodeError, match="upgrade subroute"):
        decode(key, value, [(SCHEMA_HEADER, b"subroute.AppConfig/99")])


@pytest.mark.parametrize(
    ("key", "value", "headers", "fragment"),
    [
        (None, b"x", None, "without a key"),
        (b"apps/a", b"x", None, "neither app/<app>"),
        (b"group/a", b"x", None, "neither app/<app>"),
        (b"app/a", b"x", None, "no subroute.schema header"),
        (b"app/a", b"x", [(SCHEMA_HEADER, b"AppConfig")], "is not <schema name>/<version>"),
        (
            b"app/a",
            b"\x02",
            [(SCHEMA_HEADER, b"subroute.AppConfig/1")],
            "is not a subroute.AppConfig/1 record",
        ),
        (
            b"group/a/g",
            encode(FULL_APP)[1],
            [(SCHEMA_HEADER, b"subroute.AppConfig/1")],
            "does not fit the key",
        ),
        (b"app/other", encode(FULL_APP)[1], encode(FULL_APP)[2], "names 'app/billing', not its key"),
        (b"app/billing", encode(FULL_APP)[1] + b"\x00", encode(FULL_APP)[2], "bytes left"),
    ],
)
def test_undecodable_records_are_refused(
    key: bytes | None, value: bytes, headers: list[tuple[str, bytes]] | None, fragment: str
) -> None:
    with pytest.raises(ConfigDecodeError, match=fragment.replace("(", r"\(")):
        decode(key, value, headers)


def test_schema_defaults_let_fields_be_added() -> None:
    """Every field after the identity ones has a default: a reader schema may add fields, and v1 may drop none."""
    for name in ("app_config", "group_config"):
        schema = load_schema(name)
        for field in schema["fields"]:
            assert field["name"] in ("name", "app") or "default" in field, (name, field["name"])


def test_schema_evolution_reads_old_records_with_defaults() -> None:
    """What a v2 reader would do with a v1 record: fastavro resolves the v1 writer schema to the reader's."""
    from fastavro import parse_schema, schemaless_reader

    writer = load_schema("group_config")
    reader = parse_schema(
        {
            "type": "record",
            "name": "GroupConfig",
            "namespace": "subroute",
            "fields": [*writer["fields"], {"name": "lease_ms", "type": ["null", "long"], "default": None}],
        }
    )
    buffer = io.BytesIO()
    schemaless_writer(buffer, writer, {"app": "a", "name": "g", "subscriptions": [], "order": 2})
    buffer.seek(0)
    record = schemaless_reader(buffer, writer, reader)
    assert isinstance(record, dict) and record["lease_ms"] is None and record["order"] == 2


def test_parse_key() -> None:
    assert parse_key("app/a") == ConfigKey("a")
    assert str(parse_key("group/a/g")) == "group/a/g"


def test_presence_ignored_is_written_with_version_2_and_read_back() -> None:
    app = AppConfig(name="a", inputs=("t",), presence="ignored")
    key, value, headers = encode(app)
    assert headers == [(SCHEMA_HEADER, b"subroute.AppConfig/2")]
    assert decode(key, value, headers)[1] == app


def test_default_presence_stays_version_1_for_older_readers() -> None:
    # A worker that predates presence reads version 1 only: a config that does not use it must stay readable.
    _key, value, headers = encode(AppConfig(name="a", inputs=("t",)))
    assert headers == [(SCHEMA_HEADER, b"subroute.AppConfig/1")]
    record = io.BytesIO(value)
    assert schemaless_reader(record, load_schema("app_config"), None)["name"] == "a"
    assert record.tell() == len(value)


def test_version_1_record_reads_as_presence_required() -> None:
    buffer = io.BytesIO()
    old = {
        "name": "a", "inputs": ["t"], "dialect": "bmq", "properties": {}, "filter": [], "group_by": None,
        "fairness": "round-robin", "spillover": False, "partitions": None, "expiration_ms": None,
        "priority": None, "default_publish": None, "max_cancels": None, "max_deliveries": None,
    }  # fmt: skip
    schemaless_writer(buffer, load_schema("app_config"), old)
    _, app = decode("app/a", buffer.getvalue(), [(SCHEMA_HEADER, b"subroute.AppConfig/1")])
    assert isinstance(app, AppConfig) and app.presence == "required"


def test_on_expire_drop_is_written_with_version_2_and_read_back() -> None:
    app = AppConfig(name="a", inputs=("t",), expiration_ms=1_000, on_expire="drop")
    key, value, headers = encode(app)
    assert headers == [(SCHEMA_HEADER, b"subroute.AppConfig/2")]
    assert decode(key, value, headers)[1] == app


def test_version_1_record_reads_as_on_expire_dead_letter() -> None:
    _key, value, headers = encode(AppConfig(name="a", inputs=("t",), expiration_ms=1_000))
    assert headers == [
        (SCHEMA_HEADER, b"subroute.AppConfig/1")
    ]  # the default stays readable by older workers
    _, app = decode("app/a", value, headers)
    assert isinstance(app, AppConfig) and app.on_expire == "dead-letter"


def test_default_group_is_written_with_version_2_and_read_back() -> None:
    app = AppConfig(name="a", inputs=("t",), group_by="Cart", default_group="anonymous")
    key, value, headers = encode(app)
    assert headers == [(SCHEMA_HEADER, b"subroute.AppConfig/2")]
    assert decode(key, value, headers)[1] == app
    # without it, a grouped app stays version 1
    assert encode(AppConfig(name="a", inputs=("t",), group_by="Cart"))[2] == [
        (SCHEMA_HEADER, b"subroute.AppConfig/1")
    ]
