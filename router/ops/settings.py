"""Settings shared by every command: where Kafka is, the topic prefix, and librdkafka pass-through properties.

Every setting is a flag or an environment variable ``SUBROUTE_*``. Kafka client properties keep librdkafka's
own names: ``--kafka-config security.protocol=SASL_SSL`` or ``SUBROUTE_KAFKA_SECURITY_PROTOCOL=SASL_SSL``
(in the variable name ``_`` stands for ``.`` and ``__`` for a literal ``_``).
"""

from __future__ import annotations

import argparse
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from subroute import wire
from subroute.errors import SubrouteError

ENV_BOOTSTRAP = "SUBROUTE_BOOTSTRAP_SERVERS"
ENV_PREFIX = "SUBROUTE_TOPIC_PREFIX"
ENV_KAFKA = "SUBROUTE_KAFKA_"
ENV_PARKED_RETENTION = "SUBROUTE_PARKED_RETENTION_MS"
ENV_GROUP_RETENTION = "SUBROUTE_GROUP_RETENTION_MS"
ENV_REPLICATION = "SUBROUTE_TOPIC_REPLICATION_FACTOR"
DEFAULT_BOOTSTRAP = "localhost:9092"
# librdkafka's own log goes through Python logging under this name (confluent-kafka's ``logger`` key), never
# straight to stderr from its threads: the CLI keeps it quiet unless -v, the worker logs it as JSON.
LIBRDKAFKA_LOGGER = "subroute.librdkafka"

# Substrings of librdkafka property names whose values must never be printed, logged or exported.
_SECRET_MARKERS = ("password", "secret", "sasl.username", "key.pem", "keystore", "token", "private")
REDACTED = "[redacted]"


def is_secret(key: str) -> bool:
    lowered = key.lower()
    return any(marker in lowered for marker in _SECRET_MARKERS)


def redact(config: Mapping[str, object]) -> dict[str, object]:
    """A copy safe to print: secret values replaced."""
    return {key: (REDACTED if is_secret(key) else value) for key, value in config.items()}


def kafka_config_from_env(environ: Mapping[str, str]) -> dict[str, str]:
    config: dict[str, str] = {}
    for variable, value in environ.items():
        if variable.startswith(ENV_KAFKA) and len(variable) > len(ENV_KAFKA):
            raw = variable[len(ENV_KAFKA) :].lower()
            key = ".".join(part.replace("\0", "_") for part in raw.replace("__", "\0").split("_"))
            config[key] = value
    return config


def parse_key_values(items: list[str] | None, what: str) -> dict[str, str]:
    result: dict[str, str] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SettingsError(f"{what} wants KEY=VALUE, got {item!r}")
        result[key.strip()] = value
    return result


class SettingsError(SubrouteError, ValueError):
    """A flag or environment variable has a value that cannot be used."""


def read_properties_file(path: str) -> dict[str, str]:
    """A Java-style properties file of librdkafka settings (as kcat -F reads): ``key=value`` (or ``key: value``)
    per line; blank lines and lines starting ``#`` or ``!`` are skipped; a later key wins."""
    try:
        with open(path, encoding="utf-8") as handle:
            lines = handle.read().splitlines()
    except OSError as exc:
        raise SettingsError(f"--kafka-config-file {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise SettingsError(f"--kafka-config-file {path}: not UTF-8 text") from None
    properties: dict[str, str] = {}
    for number, line in enumerate(lines, 1):
        text = line.strip()
        if not text or text[0] in "#!":
            continue
        cut = min((i for i in (text.find("="), text.find(":")) if i >= 0), default=-1)
        key = text[:cut].strip() if cut > 0 else ""
        if not key:
            raise SettingsError(f"--kafka-config-file {path}:{number}: wants KEY=VALUE, got {text[:60]!r}")
        properties[key] = text[cut + 1 :].strip()
    return properties


@dataclass(frozen=True)
class Settings:
    bootstrap_servers: str = DEFAULT_BOOTSTRAP
    topic_prefix: str = wire.DEFAULT_TOPIC_PREFIX
    kafka_config: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    # retention.ms of the pending and dead-letter topics subroute creates; -1 keeps parked records forever.
    parked_retention_ms: int = -1
    # retention.ms of the group and band topics subroute creates; None leaves the broker's default.
    group_retention_ms: int | None = None
    # replication factor of every topic subroute creates; -1 is the broker's default.replication.factor.
    replication_factor: int = -1
    # where librdkafka's log goes (confluent-kafka's ``logger``); None: librdkafka's default, stderr
    client_logger: logging.Logger | None = field(default=None, compare=False)

    def client_config(
        self,
        overrides: Mapping[str, object] | None = None,
        defaults: Mapping[str, object] | None = None,
    ) -> dict[str, Any]:
        """librdkafka configuration: ``defaults`` < pass-through properties < the caller's mandatory ``overrides``."""
        config: dict[str, Any] = {"bootstrap.servers": self.bootstrap_servers}
        config.update(defaults or {})
        config.update(self.kafka_config)
        config.update(overrides or {})
        if self.client_logger is not None:
            config["logger"] = self.client_logger
        return config

    def client_properties(self) -> dict[str, str]:
        """The librdkafka properties alone, as text (for Spark's Kafka source): no Python logger."""
        return {key: str(value) for key, value in self.client_config().items() if key != "logger"}

    @property
    def config_topic(self) -> str:
        return wire.config_topic(self.topic_prefix)

    def __repr__(self) -> str:  # never show secrets, even in tracebacks
        return (
            f"Settings(bootstrap_servers={self.bootstrap_servers!r}, topic_prefix={self.topic_prefix!r}, "
            f"kafka_config={redact(self.kafka_config)!r})"
        )

    @classmethod
    def from_args(cls, args: argparse.Namespace, environ: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if environ is None else environ
        kafka_config = kafka_config_from_env(env)
        # environment < --kafka-config-file < --kafka-config: what is spelled out on the command line wins
        properties_file = getattr(args, "kafka_config_file", None)
        if properties_file:
            kafka_config.update(read_properties_file(properties_file))
        kafka_config.update(parse_key_values(getattr(args, "kafka_config", None), "--kafka-config"))
        bootstrap = getattr(args, "bootstrap_servers", None) or env.get(ENV_BOOTSTRAP) or DEFAULT_BOOTSTRAP
        prefix = getattr(args, "topic_prefix", None) or env.get(ENV_PREFIX) or wire.DEFAULT_TOPIC_PREFIX
        if not wire.NAME_PATTERN.match(prefix.replace(".", "_")):
            raise SettingsError(f"--topic-prefix {prefix!r}: use letters, digits, '.', '_' and '-'")

        def number(flag: str, variable: str, minimum: int, meaning: str) -> int | None:
            given = getattr(args, flag.lstrip("-").replace("-", "_"), None)
            text = str(given) if given is not None else env.get(variable)
            if text is None:
                return None
            try:
                value = int(text)
            except ValueError:
                value = minimum - 1
            if value < minimum or (value == 0 and minimum < 0):
                raise SettingsError(f"{flag} / {variable} {text[:40]!r}: {meaning}")
            return value

        parked = number(
            "--parked-retention-ms", ENV_PARKED_RETENTION, -1, "milliseconds, or -1 for unlimited"
        )
        group = number("--group-retention-ms", ENV_GROUP_RETENTION, -1, "milliseconds, or -1 for unlimited")
        replication = number(
            "--replication-factor", ENV_REPLICATION, -1, "a count >= 1, or -1 for the broker's"
        )
        return cls(
            bootstrap,
            prefix,
            MappingProxyType(kafka_config),
            parked_retention_ms=-1 if parked is None else parked,
            group_retention_ms=group,
            replication_factor=-1 if replication is None else replication,
            client_logger=logging.getLogger(LIBRDKAFKA_LOGGER),
        )


def env_checked(
    variable: str,
    *,
    choices: Sequence[str] | None = None,
    convert: Callable[[str], Any] = str,
    minimum: int | None = None,
) -> Callable[[str], Any]:
    """An argparse ``type`` for a flag whose default comes from ``variable``: argparse converts a string default
    like a value given on the command line, and a bad one fails as a usage error that names both."""

    def parse(raw: str) -> Any:
        try:
            value = convert(raw.strip())
        except ValueError:
            value = None
        if (
            value is None
            or (choices is not None and value not in choices)
            or (minimum is not None and value < minimum)
        ):
            wanted = f"one of {', '.join(choices)}" if choices else convert.__name__
            if minimum is not None:
                wanted += f" >= {minimum}"
            raise argparse.ArgumentTypeError(f"{raw!r} (flag or env {variable}): expected {wanted}")
        return value

    return parse


COMMON_DESTS = (
    "bootstrap_servers",
    "topic_prefix",
    "parked_retention_ms",
    "group_retention_ms",
    "replication_factor",
    "kafka_config",
    "kafka_config_file",
)


def add_common_arguments(parser: argparse.ArgumentParser, *, dest_prefix: str = "") -> None:
    """Flags every command takes. A flag the parser already has (a command's own) is left to it; ``dest_prefix``
    keeps the values given before the subcommand apart from those after it (``subroute.cli.main`` merges them)."""

    def add(*flags: str, dest: str, **kwargs: Any) -> None:
        if not any(flag in parser._option_string_actions for flag in flags):
            parser.add_argument(*flags, dest=dest_prefix + dest, **kwargs)

    add(
        "-b",
        "--bootstrap-servers",
        "--bootstrap-server",
        dest="bootstrap_servers",
        metavar="HOSTS",
        help=f"Kafka bootstrap servers (env {ENV_BOOTSTRAP}, default {DEFAULT_BOOTSTRAP})",
    )
    add(
        "--topic-prefix",
        dest="topic_prefix",
        metavar="PREFIX",
        help=f"prefix of every subroute topic (env {ENV_PREFIX}, default {wire.DEFAULT_TOPIC_PREFIX})",
    )
    add(
        "--parked-retention-ms",
        dest="parked_retention_ms",
        metavar="MS",
        help=f"retention.ms of the pending and dead-letter topics subroute creates (env {ENV_PARKED_RETENTION}, "
        "default -1: unlimited; existing topics are left as they are)",
    )
    add(
        "--group-retention-ms",
        dest="group_retention_ms",
        metavar="MS",
        help=f"retention.ms of the group and band topics subroute creates (env {ENV_GROUP_RETENTION}, default: "
        "the broker's; -1: unlimited)",
    )
    add(
        "--replication-factor",
        dest="replication_factor",
        metavar="N",
        help=f"replication factor of the topics subroute creates (env {ENV_REPLICATION}, default -1: the broker's "
        "default.replication.factor)",
    )
    add(
        "--kafka-config",
        dest="kafka_config",
        action="append",
        metavar="KEY=VALUE",
        help="librdkafka property, repeatable; wins over --kafka-config-file and the environment "
        "(env SUBROUTE_KAFKA_<NAME>, e.g. SUBROUTE_KAFKA_SASL_MECHANISM)",
    )
    add(
        "--kafka-config-file",
        dest="kafka_config_file",
        metavar="FILE",
        help="a properties file of librdkafka settings, one KEY=VALUE a line, # comments (as kcat -F); "
        "wins over the environment",
    )
