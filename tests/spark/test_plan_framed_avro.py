"""``subroute plan`` backtests apps that read Avro in Confluent's wire format (issue 25): on Apache Kafka, with
values written by confluent-kafka's own AvroSerializer to a real Schema Registry (the session's Apicurio), the
plan fetches each writer schema by id through ``--schema-registry-url`` (env ``SUBROUTE_SCHEMA_REGISTRY_URL``)
and routes on the body fields as the worker does; without a registry it says which flag it needs instead of
routing every record as if its fields were absent."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from pyspark.sql import SparkSession

from subroute.cli import main as cli
from tests.integration.harness import apply, make_env, produce_raw

pytestmark = [pytest.mark.spark, pytest.mark.kafka]

ORDER: dict[str, Any] = {
    "type": "record",
    "name": "PlanOrder",
    "namespace": "subroute.test",
    "fields": [
        {"name": "customer", "type": {"type": "record", "name": "PlanCustomer", "fields": [{"name": "id", "type": "long"}]}},
        {"name": "price", "type": "long"},
        {"name": "qty", "type": "int"},
    ],
}  # fmt: skip

# In force: every order to `all`. Proposed: customer 7 to vip, orders worth 100 or more to big, the rest waits.
CURRENT = """
apps:
  orders:
    inputs: [INPUT]
    format: avro
    properties:
      CustomerId: {type: int, path: /customer/id}
    groups:
      all: {}
"""
PROPOSED = """
apps:
  orders:
    inputs: [INPUT]
    dialect: sql92
    format: avro
    properties:
      CustomerId: {type: int, path: /customer/id}
      Price: {type: int, path: /price}
      Qty: {type: int, path: /qty}
    groups:
      vip: {subscriptions: [{expression: 'CustomerId = 7', priority: 10}]}
      big: {subscriptions: [{expression: 'Price * Qty >= 100', priority: 5}]}
"""
ORDERS = [(7, 3, 2), (8, 50, 2), (9, 10, 1), (7, 100, 1), (10, 1, 99)]  # (customer, price, qty)


def test_plan_reads_confluent_framed_avro_through_the_schema_registry(
    spark_session: SparkSession,
    kafka: Any,
    unique: str,
    schema_registry: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    env = make_env(kafka.bootstrap_servers, unique, partitions=2)
    assert apply(env, CURRENT) == 0
    serialize = AvroSerializer(SchemaRegistryClient({"url": schema_registry}), json.dumps(ORDER))
    context = SerializationContext(env.input, MessageField.VALUE)
    values = [serialize({"customer": {"id": c}, "price": p, "qty": q}, context) for c, p, q in ORDERS]
    assert all(v is not None and v[0] == 0 for v in values)  # Confluent's wire format: magic byte 0
    produce_raw(env, [(f"k{i}".encode(), v, []) for i, v in enumerate(values)])
    proposed = tmp_path / "proposed.yaml"
    proposed.write_text(PROPOSED.replace("INPUT", env.input))
    plan = ["plan", "-f", str(proposed), "--prune", *env.common(), "-o", "json"]  # group all goes

    capsys.readouterr()
    assert cli([*plan, "--schema-registry-url", schema_registry]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["records"] == len(ORDERS)
    transitions = {(t["from"], t["to"]): t["records"] for t in document["apps"]["orders"]["transitions"]}
    # vip: customer 7's two orders; big: 50 * 2; nothing matches 10 * 1 and 1 * 99: they would wait
    assert transitions == {("all", "vip"): 2, ("all", "big"): 1, ("all", "(pending)"): 2}
    assert document["unmatched"] == 2

    # The registry from the environment, as the worker and the Spark job take it.
    monkeypatch.setenv("SUBROUTE_SCHEMA_REGISTRY_URL", schema_registry)
    assert cli(plan) == 0
    assert json.loads(capsys.readouterr().out)["apps"] == document["apps"]
    monkeypatch.delenv("SUBROUTE_SCHEMA_REGISTRY_URL")

    # Without one the plan refuses (exit 2) and names the flag: no record is routed as if its fields were absent.
    assert cli(plan) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "--schema-registry-url" in captured.err and "orders" in captured.err


def test_plan_says_when_the_schema_registry_cannot_be_read(
    spark_session: SparkSession,
    kafka: Any,
    unique: str,
    schema_registry: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A registry that does not answer fails the plan with exit 3 and the registry's URL, as Kafka failing does."""
    env = make_env(kafka.bootstrap_servers, unique)
    assert apply(env, CURRENT) == 0
    serialize = AvroSerializer(SchemaRegistryClient({"url": schema_registry}), json.dumps(ORDER))
    value = serialize(
        {"customer": {"id": 1}, "price": 1, "qty": 1}, SerializationContext(env.input, MessageField.VALUE)
    )
    produce_raw(env, [(b"k", value, [])])
    proposed = tmp_path / "proposed.yaml"
    proposed.write_text(PROPOSED.replace("INPUT", env.input))
    closed = "http://127.0.0.1:9"  # the discard port: nothing listens there
    capsys.readouterr()
    code = cli(
        ["plan", "-f", str(proposed), "--prune", *env.common(), "--schema-registry-url", closed,
         "--schema-registry-config", "max.retries=0"]
    )  # fmt: skip
    captured = capsys.readouterr()
    assert code == 3, captured.err
    assert f"the schema registry {closed} cannot be read" in captured.err


def test_the_executors_registry_failure_is_found_in_sparks_error_and_nothing_else_is() -> None:
    """Spark hands the driver the Python worker's traceback as text: the plan takes the RegistryUnavailable out
    of it (its words, the schema id), and leaves any other failure as it was."""
    from subroute.kafka.schema_registry import RegistrySettings, RegistryUnavailable
    from subroute.spark import plan

    registry = RegistrySettings.of("http://127.0.0.1:9")
    spark_error = RuntimeError(
        "An exception was thrown from the Python worker.\nTraceback (most recent call last):\n  ...\n"
        "subroute.kafka.schema_registry.RegistryUnavailable: schema id 3: the schema registry "
        "http://127.0.0.1:9 cannot be read (ConnectError: refused)\n\tat org.apache.spark..."
    )
    found = plan._registry_failure(spark_error, registry)
    assert isinstance(found, RegistryUnavailable) and found.schema_id == 3
    assert (
        str(found)
        == "schema id 3: the schema registry http://127.0.0.1:9 cannot be read (ConnectError: refused)"
    )
    assert plan._registry_failure(RuntimeError("Task failed: ValueError: something else"), registry) is None
    assert plan._registry_failure(spark_error, None) is None  # no registry given: not the registry's failure
