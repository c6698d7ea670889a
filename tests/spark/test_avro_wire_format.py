"""Payloads in Confluent's wire format (magic byte 0, 4-byte schema id, Avro body) decode through a Schema Registry
(here one on 127.0.0.1: tests/spark/registry_server.py), resolved into the app's schema; without a registry
they fail with a clear error instead of landing as null payloads; plain Avro decodes as before."""

from __future__ import annotations

import argparse
import io
from typing import Any

import fastavro
import pytest
from pyspark import cloudpickle
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from subroute.cli import spark as cli
from subroute.spark import avro
from subroute.spark.job import config_from_args
from tests.spark.registry_server import Registered, RegistryServer

ORDER = avro.load_schema("order")
# An older producer's Order: no `express` yet (the reader's has no default for it: unreadable), and a newer
# one's with a field the reader does not know (skipped).
ORDER_WITH_REGION = {
    **ORDER,
    "fields": [*ORDER["fields"], {"name": "region", "type": "string", "default": ""}],
}
ORDER_WITHOUT_EXPRESS = {**ORDER, "fields": [f for f in ORDER["fields"] if f["name"] != "express"]}
ITEM = {"type": "record", "name": "Item", "fields": [{"name": "qty", "type": "int"}]}
LINE_INLINE = {
    "type": "record",
    "name": "Line",
    "fields": [{"name": "sku", "type": "string"}, {"name": "item", "type": ITEM}],
}
LINE_BY_REFERENCE = {
    "type": "record",
    "name": "Line",
    "fields": [{"name": "sku", "type": "string"}, {"name": "item", "type": "Item"}],
}


def order(**changes: Any) -> dict[str, Any]:
    record = {
        "order_id": "o-1",
        "customer_id": 7,
        "amount": 1250,
        "order_type": "EXPRESS",
        "express": True,
        "created_at": 1_700_000_000_000,
    }
    return {**record, **changes}


def encode(schema: Any, record: dict[str, Any]) -> bytes:
    buffer = io.BytesIO()
    fastavro.schemaless_writer(buffer, fastavro.parse_schema(schema), record)
    return buffer.getvalue()


def registry() -> RegistryServer:
    return RegistryServer(
        {
            1: Registered(ORDER),
            2: Registered(ORDER_WITH_REGION),
            3: Registered(LINE_BY_REFERENCE, references=[{"name": "Item", "subject": "item", "version": 1}]),
            4: Registered('syntax = "proto3"; message Order { string id = 1; }', schema_type="PROTOBUF"),
            5: Registered(ORDER_WITHOUT_EXPRESS),
        },
        subjects={("item", 1): Registered(ITEM)},
    )


# --- the frame -------------------------------------------------------------------------------------------------


def test_the_frame_is_magic_byte_zero_then_a_big_endian_schema_id() -> None:
    framed = avro.frame(258, b"body")
    assert framed == b"\x00\x00\x00\x01\x02body"
    assert avro.wire_schema_id(framed) == 258
    assert avro.wire_schema_id(avro.frame(2**32 - 1, b"")) == 2**32 - 1  # a header alone is a frame
    assert avro.wire_schema_id(b"\x00\x00\x00\x01") is None  # shorter than the header
    assert avro.wire_schema_id(b"\x01\x00\x00\x00\x01body") is None  # another magic byte
    assert avro.wire_schema_id(encode(ORDER, order())) is None  # "o-1": the string's length comes first


# --- decoding without a registry -------------------------------------------------------------------------------


def test_plain_avro_decodes_as_before_even_when_it_starts_with_a_zero_byte() -> None:
    decode = avro.decoder(ORDER, app="orders")
    assert decode(encode(ORDER, order())) == order()
    empty_id = encode(ORDER, order(order_id=""))  # an empty string is the byte 0: it looks like a frame
    assert avro.wire_schema_id(empty_id) is not None
    assert decode(empty_id) == order(order_id="")
    assert decode(b"\x07garbage") is None  # malformed: a null payload, as before
    assert decode(None) is None


def test_a_framed_value_without_a_registry_fails_clearly() -> None:
    decode = avro.decoder(ORDER, app="orders")
    with pytest.raises(avro.WireFormatError, match=r"app orders: .*schema id 1\).*--schema-registry-url"):
        decode(avro.frame(1, encode(ORDER, order())))


# --- decoding through a registry -------------------------------------------------------------------------------


def test_framed_values_decode_through_the_registry_fetching_each_schema_once() -> None:
    with registry() as server:
        decode = avro.decoder(ORDER, avro.Registry.of(server.url), "orders")
        for i in range(50):
            assert decode(avro.frame(1, encode(ORDER, order(amount=i)))) == order(amount=i)
        # a newer producer's schema: resolved into the app's, its extra field left out
        newer = encode(ORDER_WITH_REGION, {**order(), "region": "EU"})
        assert decode(avro.frame(2, newer)) == order()
        assert decode(encode(ORDER, order())) == order()  # plain values still decode
        assert server.requests["/schemas/ids/1"] == 1
        assert server.requests["/schemas/ids/2"] == 1


def test_a_schema_with_references_is_resolved() -> None:
    with registry() as server:
        decode = avro.decoder(LINE_INLINE, avro.Registry.of(server.url), "lines")
        value = avro.frame(3, encode(LINE_INLINE, {"sku": "A-1", "item": {"qty": 3}}))
        assert decode(value) == {"sku": "A-1", "item": {"qty": 3}}
        assert server.requests["/subjects/item/versions/1"] == 1


def test_an_id_the_registry_does_not_know_is_a_plain_value() -> None:
    with registry() as server:
        decode = avro.decoder(ORDER, avro.Registry.of(server.url), "orders")
        plain = encode(ORDER, order(order_id="", customer_id=99))
        unknown = avro.wire_schema_id(plain)
        assert unknown is not None and unknown not in server.by_id
        assert decode(plain) == order(order_id="", customer_id=99)


def test_schemas_that_cannot_give_the_payload_fail_clearly() -> None:
    with registry() as server:
        decode = avro.decoder(ORDER, avro.Registry.of(server.url), "orders")
        with pytest.raises(avro.WireFormatError, match=r"schema id 4 .* is PROTOBUF, not Avro"):
            decode(avro.frame(4, b"\x0a\x01x"))
        old = encode(ORDER_WITHOUT_EXPRESS, {k: v for k, v in order().items() if k != "express"})
        with pytest.raises(avro.WireFormatError, match="schema id 5 does not resolve into the app's"):
            decode(avro.frame(5, old))
        assert decode(avro.frame(1, b"\x07")) is None  # a malformed body: a null payload


def test_a_registry_that_fails_fails_the_decode() -> None:
    with registry() as server:
        url = server.url
    # nothing listens there any more; one try, no backoff (the client's properties, as the flag gives them)
    decode = avro.decoder(ORDER, avro.Registry.of(url, {"max.retries": "0"}), "orders")
    with pytest.raises(avro.WireFormatError, match=rf"schema id 1: the schema registry {url} cannot be read"):
        decode(avro.frame(1, encode(ORDER, order())))


def test_the_decoder_travels_to_executors() -> None:
    with registry() as server:
        decode = cloudpickle.loads(cloudpickle.dumps(avro.decoder(ORDER, avro.Registry.of(server.url), "o")))
        assert decode(avro.frame(1, encode(ORDER, order()))) == order()


def test_the_job_takes_the_registry_from_its_flags_or_the_environment() -> None:
    parser = argparse.ArgumentParser()
    cli.register(parser.add_subparsers(dest="command"))
    base = ["spark", "run", "--output", "/o", "--avro-schema", "orders=order"]
    flagged = parser.parse_args(
        [
            *base,
            "--schema-registry-url",
            "https://registry:8081",
            "--schema-registry-config",
            "basic.auth.user.info=u:p",
        ]
    )
    assert config_from_args(flagged, environ={}).schema_registry == avro.Registry(
        "https://registry:8081", (("basic.auth.user.info", "u:p"),)
    )
    plain = parser.parse_args(base)
    assert config_from_args(plain, environ={}).schema_registry is None
    from_env = config_from_args(plain, environ={"SUBROUTE_SCHEMA_REGISTRY_URL": "http://r:8081"})
    assert from_env.schema_registry == avro.Registry("http://r:8081")
    with pytest.raises(ValueError, match="needs --schema-registry-url"):
        config_from_args(parser.parse_args([*base, "--schema-registry-config", "a=b"]), environ={})


# --- in Spark --------------------------------------------------------------------------------------------------


def test_spark_lands_framed_and_plain_payloads_and_fails_framed_ones_without_a_registry(
    spark_session: SparkSession,
) -> None:
    values = [(avro.frame(1, encode(ORDER, order(amount=5))),), (encode(ORDER, order(amount=6)),)]
    frame = spark_session.createDataFrame(values, "value binary")
    with registry() as server:
        column = avro.payload_column(F.col("value"), ORDER, avro.Registry.of(server.url), "orders")
        rows = frame.select(column.alias("payload")).collect()
    assert sorted(row["payload"]["amount"] for row in rows) == [5, 6]
    assert rows[0]["payload"]["order_id"] == "o-1"
    with pytest.raises(Exception, match="no schema registry is configured"):
        frame.select(avro.payload_column(F.col("value"), ORDER, None, "orders")).collect()
