"""Config records on the wire: keys ``app/<app>`` and ``group/<app>/<group>``, Avro values, a schema header.

The header ``subroute.schema`` names the writer schema and its version (``subroute.AppConfig/1``), so a reader
picks the matching decoder and newer writers can add fields without breaking older records. A null value is a
tombstone: it deletes the key.
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fastavro import schemaless_reader, schemaless_writer

from subroute import wire
from subroute.config.model import (
    DEFAULT_ON_EXPIRE,
    DEFAULT_PRESENCE,
    AppConfig,
    GroupConfig,
    SubscriptionConfig,
)
from subroute.errors import SubrouteError
from subroute.schemas import load_schema

SCHEMA_HEADER = "subroute.schema"
# On the last record of one change (an apply, a delete): readers publish a version only there, or at the end of
# the topic, so no reader routes under half a change. Records without it (hand-written) end at the topic's end.
CHANGE_END_HEADER = "subroute.change-end"

APP_SCHEMA = "subroute.AppConfig"
GROUP_SCHEMA = "subroute.GroupConfig"
# (schema name, version) -> schema file in the schemas package. A new version adds a row; old rows stay so
# records written by older CLIs keep decoding.
_SCHEMA_FILES: dict[tuple[str, int], str] = {
    (APP_SCHEMA, 1): "app_config",
    (APP_SCHEMA, 2): "app_config_v2",  # adds presence, on_expire, default_group
    (APP_SCHEMA, 3): "app_config_v3",  # adds format, paths, schema
    (GROUP_SCHEMA, 1): "group_config",
    (GROUP_SCHEMA, 2): "group_config_v2",  # adds max_leased_per_member
}
# The newest versions this code writes. An app record is written with the oldest version that holds all of its
# values (version 1 unless presence, on_expire or default_group is not the default), so workers that predate a field keep reading every
# config that does not use it, and a rolling upgrade needs no order.
APP_SCHEMA_VERSION = 3
GROUP_SCHEMA_VERSION = 2
# The fields each app schema version adds, with the value a reader of an older record takes.
# on_expire and default_group joined version 2 before any release wrote version 2 (CHANGELOG: Unreleased), so no reader of a
# version-2 record without it exists; one version per release keeps the decoders few.
_APP_FIELDS_SINCE: dict[int, dict[str, object]] = {
    2: {"presence": DEFAULT_PRESENCE, "on_expire": DEFAULT_ON_EXPIRE, "default_group": None},
    3: {"format": "none", "paths": {}, "schema": None},
}
# The same for group records: a group written without a cap stays version 1, readable by older workers.
_GROUP_FIELDS_SINCE: dict[int, dict[str, object]] = {2: {"max_leased_per_member": None}}

ConfigValue = AppConfig | GroupConfig


class ConfigDecodeError(SubrouteError, ValueError):
    """A config record that cannot be read: bad key, unknown schema, or bytes that are not that schema."""


@dataclass(frozen=True)
class ConfigKey:
    """A parsed record key: ``app`` always, ``group`` for group records."""

    app: str
    group: str | None = None

    @property
    def is_app(self) -> bool:
        return self.group is None

    def __str__(self) -> str:
        return app_key(self.app) if self.group is None else group_key(self.app, self.group)


def app_key(app: str) -> str:
    return f"app/{app}"


def group_key(app: str, group: str) -> str:
    return f"group/{app}/{group}"


def key_of(value: ConfigValue) -> str:
    return app_key(value.name) if isinstance(value, AppConfig) else group_key(value.app, value.name)


def parse_key(key: str) -> ConfigKey:
    parts = key.split("/")
    if len(parts) == 2 and parts[0] == "app" and parts[1]:
        return ConfigKey(parts[1])
    if len(parts) == 3 and parts[0] == "group" and parts[1] and parts[2]:
        return ConfigKey(parts[1], parts[2])
    raise ConfigDecodeError(f"config key {key!r} is neither app/<app> nor group/<app>/<group>")


def schema_header(name: str, version: int) -> str:
    return f"{name}/{version}"


def parse_schema_header(value: str) -> tuple[str, int]:
    name, sep, version = value.rpartition("/")
    if not sep or not name or not version.isdigit():
        raise ConfigDecodeError(f"header {SCHEMA_HEADER}={value!r} is not <schema name>/<version>")
    return name, int(version)


def to_record(value: ConfigValue) -> dict[str, Any]:
    if isinstance(value, AppConfig):
        return {
            "name": value.name,
            "inputs": list(value.inputs),
            "dialect": value.dialect,
            "properties": dict(value.properties),
            "format": value.format,
            "paths": dict(value.paths),
            "schema": value.schema,
            "filter": list(value.filter),
            "group_by": value.group_by,
            "default_group": value.default_group,
            "fairness": value.fairness,
            "spillover": value.spillover,
            "presence": value.presence,
            "partitions": value.partitions,
            "expiration_ms": value.expiration_ms,
            "on_expire": value.on_expire,
            "priority": value.priority,
            "default_publish": value.default_publish,
            "max_cancels": value.max_cancels,
            "max_deliveries": value.max_deliveries,
        }
    return {
        "app": value.app,
        "name": value.name,
        "subscriptions": [
            {"expression": s.expression, "priority": s.priority, "max_unconfirmed": s.max_unconfirmed}
            for s in value.subscriptions
        ],
        "order": value.order,
        "max_leased_per_member": value.max_leased_per_member,
    }


def encode(value: ConfigValue) -> tuple[str, bytes, wire.Headers]:
    """``(key, Avro bytes, headers)`` of one config record."""
    record = to_record(value)
    if isinstance(value, AppConfig):
        name, since_fields = APP_SCHEMA, _APP_FIELDS_SINCE
    else:
        name, since_fields = GROUP_SCHEMA, _GROUP_FIELDS_SINCE
    version = _schema_version(record, since_fields)
    for since, fields in since_fields.items():
        if since > version:
            for field in fields:
                del record[field]
    buffer = io.BytesIO()
    schemaless_writer(buffer, load_schema(_SCHEMA_FILES[(name, version)]), record)
    return key_of(value), buffer.getvalue(), [(SCHEMA_HEADER, schema_header(name, version).encode())]


def app_schema_version(record: Mapping[str, object]) -> int:
    """The oldest app schema version that holds ``record``: fields added later that keep their default are left
    out, so older readers can read it."""
    return _schema_version(record, _APP_FIELDS_SINCE)


def _schema_version(record: Mapping[str, object], since_fields: Mapping[int, Mapping[str, object]]) -> int:
    version = 1
    for since, fields in since_fields.items():
        if any(record.get(f, default) != default for f, default in fields.items()):
            version = max(version, since)
    return version


def ends_change(headers: wire.HeadersIn | None) -> bool:
    return _header(headers, CHANGE_END_HEADER) is not None


def _header(headers: wire.HeadersIn | None, name: str) -> str | None:
    found = None
    for key, value in headers or ():
        if key == name and value is not None:  # the last one wins; one not UTF-8 is still there
            found = value.decode("utf-8", errors="replace")
    return found


def decode(
    key: str | bytes | None, value: str | bytes | None, headers: wire.HeadersIn | None
) -> tuple[ConfigKey, ConfigValue | None]:
    """Parse one record; ``None`` as the value is a tombstone. Raises ``ConfigDecodeError``."""
    if key is None:
        raise ConfigDecodeError("config record without a key")
    text_key = key.decode("utf-8", errors="replace") if isinstance(key, bytes) else key
    parsed = parse_key(text_key)
    if value is None:
        return parsed, None
    if isinstance(value, str):
        value = value.encode("utf-8")
    header = _header(headers, SCHEMA_HEADER)
    if header is None:
        raise ConfigDecodeError(f"{text_key}: no {SCHEMA_HEADER} header naming the Avro schema of the value")
    schema_name, version = parse_schema_header(header)
    expected = APP_SCHEMA if parsed.is_app else GROUP_SCHEMA
    if schema_name != expected:
        raise ConfigDecodeError(
            f"{text_key}: schema {schema_name!r} does not fit the key (expected {expected})"
        )
    schema_file = _SCHEMA_FILES.get((schema_name, version))
    if schema_file is None:
        known = max(v for (n, v) in _SCHEMA_FILES if n == schema_name)
        raise ConfigDecodeError(
            f"{text_key}: written with {header}, this reader knows versions up to {known}: upgrade subroute"
        )
    try:
        stream = io.BytesIO(value)
        record = schemaless_reader(stream, load_schema(schema_file), None)
        if stream.tell() != len(value):
            raise ConfigDecodeError(
                f"{text_key}: {len(value) - stream.tell()} bytes left after the {header} record"
            )
    except ConfigDecodeError:
        raise
    except Exception as exc:  # fastavro raises whatever the bytes provoke (EOFError, UnicodeDecodeError, ...)
        raise ConfigDecodeError(
            f"{text_key}: value is not a {header} record ({type(exc).__name__}: {exc})"
        ) from exc
    if not isinstance(record, dict):
        raise ConfigDecodeError(f"{text_key}: value is not a {header} record")
    result = _from_record(parsed, record)
    if key_of(result) != text_key:
        raise ConfigDecodeError(f"{text_key}: the value names {key_of(result)!r}, not its key")
    return parsed, result


def _from_record(key: ConfigKey, record: dict[str, Any]) -> ConfigValue:
    if key.is_app:
        return AppConfig(
            name=record["name"],
            inputs=tuple(record["inputs"]),
            dialect=record["dialect"],
            properties=dict(record["properties"]),
            format=record.get("format", "none"),
            paths=dict(record.get("paths") or {}),
            schema=record.get("schema"),
            filter=tuple(record["filter"]),
            group_by=record["group_by"],
            default_group=record.get("default_group"),
            fairness=record["fairness"],
            spillover=record["spillover"],
            presence=record.get("presence", DEFAULT_PRESENCE),
            partitions=record["partitions"],
            expiration_ms=record["expiration_ms"],
            on_expire=record.get("on_expire", DEFAULT_ON_EXPIRE),
            priority=record["priority"],
            default_publish=record["default_publish"],
            max_cancels=record["max_cancels"],
            max_deliveries=record["max_deliveries"],
        )
    return GroupConfig(
        app=record["app"],
        name=record["name"],
        subscriptions=tuple(
            SubscriptionConfig(s["expression"], s["priority"], s["max_unconfirmed"])
            for s in record["subscriptions"]
        ),
        order=record["order"],
        max_leased_per_member=record.get("max_leased_per_member"),
    )
