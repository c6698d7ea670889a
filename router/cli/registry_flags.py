"""The Schema Registry flags of the commands that read Avro values in Confluent's wire format (``worker``,
``explain``), as the Spark job's: a URL (env SUBROUTE_SCHEMA_REGISTRY_URL) and SchemaRegistryClient properties."""

from __future__ import annotations

import argparse
import os

from subroute.kafka.schema_registry import ENV_URL, RegistrySettings
from subroute.ops.settings import parse_key_values


def add_schema_registry_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--schema-registry-url",
        default=os.environ.get(ENV_URL),
        metavar="URL",
        help="Confluent Schema Registry of the apps with format: avro and no schema: (values in Confluent's wire "
        "format): writer schemas are fetched from it by id (env SUBROUTE_SCHEMA_REGISTRY_URL)",
    )
    parser.add_argument(
        "--schema-registry-config",
        action="append",
        metavar="KEY=VALUE",
        help="a SchemaRegistryClient property, repeatable (basic.auth.user.info, ssl.ca.location, ...)",
    )


def schema_registry_settings(args: argparse.Namespace) -> RegistrySettings | None:
    """The registry the flags name; None without a URL. A bad KEY=VALUE raises SettingsError."""
    if not args.schema_registry_url:
        return None
    config = parse_key_values(args.schema_registry_config, "--schema-registry-config")
    return RegistrySettings.of(args.schema_registry_url, config)
