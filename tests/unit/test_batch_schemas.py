"""The writer schemas a batch needs, fetched before it is decided (worker/schemas.py): which records need the
registry, and that a registry that cannot be read raises before anything is decided."""

from __future__ import annotations

from typing import Any

import pytest

from subroute.config.avro_schema import WriterSchema, writer_schema
from subroute.config.model import AppConfig, Config
from subroute.kafka.schema_registry import RegistryUnavailable
from subroute.routing.decisions import build_table
from subroute.worker.schemas import BatchSchemas

ORDER: dict[str, Any] = {"type": "record", "name": "O", "fields": [{"name": "p", "type": "long"}]}
FRAMED = AppConfig("framed", ("framed-in",), properties={"P": "int"}, format="avro", paths={"P": "/p"})
PLAIN = AppConfig(
    "plain",
    ("plain-in",),
    properties={"P": "int"},
    format="avro",
    paths={"P": "/p"},
    schema='{"type": "long"}',
)
TABLE = build_table(Config(1, {"framed": FRAMED, "plain": PLAIN}, {}))


def frame(schema_id: int) -> bytes:
    return b"\x00" + schema_id.to_bytes(4, "big") + b"\x02"


class Registry:
    """What BatchSchemas asks of WriterSchemas: ``get`` by id (None: the registry does not have it)."""

    def __init__(self, schemas: dict[int, WriterSchema], down: bool = False) -> None:
        self.schemas, self.down, self.asked = schemas, down, []

    def get(self, schema_id: int) -> WriterSchema | None:
        self.asked.append(schema_id)
        if self.down:
            raise RegistryUnavailable("http://r", schema_id, "refused")
        return self.schemas.get(schema_id)


def schemas_with(registry: Registry) -> BatchSchemas:
    schemas = BatchSchemas(None, "p")
    schemas.registry = registry  # type: ignore[assignment]
    return schemas


def test_only_framed_values_of_apps_reading_framed_avro_are_looked_up_once_per_id() -> None:
    order = writer_schema(ORDER)
    registry = Registry({5: order})
    schemas = schemas_with(registry)
    records = [
        ("framed-in", frame(5)),
        ("framed-in", frame(5)),
        ("framed-in", frame(6)),  # an id the registry does not have
        ("framed-in", b"\x01junk"),  # not a frame: undecodable, nothing to ask
        ("framed-in", None),
        ("plain-in", frame(7)),  # read with the app's own schema
        ("p.framed.pending", frame(8)),  # the framed app's pending topic
    ]
    writer_of = schemas.prepare(TABLE, records)
    assert registry.asked == [5, 6, 8]
    assert (writer_of(5), writer_of(6), writer_of(8)) == (order, None, None)
    # a later batch still finds what was fetched (a pending pass may decide a record of an earlier batch)
    assert schemas.prepare(TABLE, [])(5) is order


def test_a_registry_that_cannot_be_read_raises_before_the_batch_is_decided() -> None:
    with pytest.raises(RegistryUnavailable, match="refused"):
        schemas_with(Registry({}, down=True)).prepare(TABLE, [("framed-in", frame(5))])
    with pytest.raises(RegistryUnavailable, match="no schema registry set"):  # no URL: they wait too
        BatchSchemas(None).prepare(TABLE, [("framed-in", frame(5))])
    # nothing framed in the batch: the registry is not needed
    BatchSchemas(None, "p").prepare(
        TABLE, [("plain-in", frame(5)), ("framed-in", b"{}"), ("p.plain.pending", frame(5))]
    )


def test_the_worker_and_explain_take_the_registry_like_the_spark_job(monkeypatch: pytest.MonkeyPatch) -> None:
    from subroute.cli.main import build_parser
    from subroute.cli.registry_flags import schema_registry_settings
    from subroute.kafka.schema_registry import RegistrySettings

    monkeypatch.delenv("SUBROUTE_SCHEMA_REGISTRY_URL", raising=False)
    assert schema_registry_settings(build_parser().parse_args(["worker"])) is None
    given = ["--schema-registry-url", "http://r:8081", "--schema-registry-config", "basic.auth.user.info=a:b"]
    for command in ("worker", "explain"):
        settings = schema_registry_settings(build_parser().parse_args([command, *given]))
        assert settings == RegistrySettings.of("http://r:8081", {"basic.auth.user.info": "a:b"})
    monkeypatch.setenv("SUBROUTE_SCHEMA_REGISTRY_URL", "http://env:8081")
    settings = schema_registry_settings(build_parser().parse_args(["worker"]))
    assert settings is not None and settings.url == "http://env:8081"
