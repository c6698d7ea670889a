"""The registry edge (router/kafka/schema_registry.py) against a real Schema Registry (Apicurio Registry, Confluent's
API): writer schemas by id, once each, with their references; an unknown id is None (the body is undecodable);
a registry that cannot be read raises RegistryUnavailable (the records wait), never None."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pytest
from confluent_kafka.schema_registry import Schema, SchemaReference, SchemaRegistryClient

from subroute.dev.process import free_port
from subroute.kafka.schema_registry import RegistrySettings, RegistryUnavailable, WriterSchemas
from subroute.routing import body_avro


@dataclass(frozen=True)
class Read:
    name: str
    path: str
    declared: str | None = None

    @property
    def tokens(self) -> tuple[str, ...]:
        return tuple(self.path[1:].split("/"))


CUSTOMER = {
    "type": "record",
    "name": "Customer",
    "namespace": "shop",
    "fields": [{"name": "id", "type": "long"}],
}
ORDER = {
    "type": "record",
    "name": "Order",
    "namespace": "shop",
    "fields": [{"name": "customer", "type": "shop.Customer"}, {"name": "qty", "type": "int"}],
}


def test_writer_schemas_are_fetched_once_per_id_with_their_references(
    schema_registry: str, unique: str
) -> None:
    client = SchemaRegistryClient({"url": schema_registry})
    client.register_schema(f"{unique}-customer", Schema(json.dumps(CUSTOMER), "AVRO"))
    order_id = client.register_schema(
        f"{unique}-value",
        Schema(json.dumps(ORDER), "AVRO", [SchemaReference("shop.Customer", f"{unique}-customer", 1)]),
    )
    parsed: list[Sequence[Any]] = []

    def parse(chain: Sequence[Any]) -> body_avro.WriterSchema:
        parsed.append(chain)
        return body_avro.writer_schema_chain(chain)

    schemas = WriterSchemas(RegistrySettings.of(schema_registry), parse)
    writer = schemas.get(order_id)
    assert writer is not None
    assert schemas.get(order_id) is writer
    assert [[s["name"] for s in chain] for chain in parsed] == [["Customer", "Order"]]
    reads = [Read("Id", "/customer/id"), Read("Qty", "/qty")]
    assert body_avro.read_plain(b"\x54\x06", reads, writer) == ({"Id": 42, "Qty": 3}, {})


def test_an_unknown_id_is_none_and_not_asked_again_for_a_while(schema_registry: str) -> None:
    now = [0.0]
    schemas = WriterSchemas(
        RegistrySettings.of(schema_registry),
        body_avro.writer_schema_chain,
        unknown_ttl=60.0,
        clock=lambda: now[0],
    )
    asked: list[int] = []
    fetch = schemas.client.get_schema

    def counted(schema_id: int, *args: Any, **kwargs: Any) -> Schema:
        asked.append(schema_id)
        return fetch(schema_id, *args, **kwargs)

    schemas.client.get_schema = counted  # type: ignore[method-assign]  # counts the real client's requests
    unknown = 987_654
    assert schemas.get(unknown) is None
    now[0] = 59.0
    assert schemas.get(unknown) is None
    now[0] = 61.0
    assert schemas.get(unknown) is None
    assert asked == [unknown, unknown]


def test_a_schema_that_is_not_avro_is_unusable_not_unavailable(schema_registry: str, unique: str) -> None:
    client = SchemaRegistryClient({"url": schema_registry})
    json_id = client.register_schema(
        f"{unique}-json",
        Schema('{"$schema": "http://json-schema.org/draft-07/schema#", "type": "object"}', "JSON"),
    )
    schemas = WriterSchemas(RegistrySettings.of(schema_registry), body_avro.writer_schema_chain)
    assert schemas.get(json_id) is None
    assert schemas.why_unusable(json_id) == f"schema id {json_id} is JSON, not Avro"


@pytest.mark.parametrize("where", ["nothing listens", "not the registry's API"])
def test_a_registry_that_cannot_be_read_raises_unavailable(schema_registry: str, where: str) -> None:
    url = (
        f"http://127.0.0.1:{free_port()}"
        if where == "nothing listens"
        else schema_registry.rsplit("/apis", 1)[0]
    )
    settings = RegistrySettings.of(url, {"timeout": "2", "max.retries": "0"})
    schemas = WriterSchemas(settings, body_avro.writer_schema_chain)
    with pytest.raises(RegistryUnavailable, match=rf"schema id 1: the schema registry {url} cannot be read"):
        schemas.get(1)
