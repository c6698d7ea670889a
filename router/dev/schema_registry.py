"""A local Schema Registry for tests and the demo: Apicurio Registry from Maven Central, in-memory storage.

Apicurio Registry speaks Confluent's Schema Registry API under ``/apis/ccompat/v7``, so confluent-kafka's
``SchemaRegistryClient``, ``AvroSerializer`` and ``AvroDeserializer`` talk to it as to Confluent's own. Its
runnable distribution (``jars/pom.xml``'s ``schema-registry`` profile: a zip of the Quarkus runner jar and its
libraries) is resolved and unpacked once (``dev/jars.py``), then run with ``java -jar`` on a free 127.0.0.1
port with its in-memory H2 storage: every start is an empty registry, nothing is kept on disk but the log.

Dev tooling only, like the local broker: the product talks to whatever registry its settings name. Needs
Java 17+ and Maven; a start takes 10-30 s (Quarkus boots and creates its tables), so tests share one per
session.
"""

from __future__ import annotations

import shutil
import tempfile
import urllib.error
import urllib.request
from pathlib import Path

from subroute.dev import jars as dev_jars
from subroute.dev.process import BrokerNotAvailable, LocalBroker, serve_until_stopped

PROFILE = "schema-registry"
# Apicurio's Confluent-compatible API: the URL Confluent clients are given
CONFLUENT_API = "/apis/ccompat/v7"

JVM_OPTIONS = [
    "-Xms64m",
    "-Xmx512m",
    "-XX:TieredStopAtLevel=1",  # a test registry serves a few requests: a fast start beats peak speed
    "-Djava.awt.headless=true",
]

# Quarkus reads these from the environment (its application.properties names them for the prod profile).
ENVIRONMENT = {
    "LOG_LEVEL": "WARN",
    "REGISTRY_LOG_LEVEL": "WARN",
}

# Settings that differ from Apicurio's defaults, as system properties (they outrank application.properties).
SYSTEM_PROPERTIES = {
    "quarkus.http.host": "127.0.0.1",
    # Apicurio's prod pool opens 20 connections at start; an in-memory database for tests needs a couple.
    "%prod.quarkus.datasource.jdbc.min-size": "1",
    "%prod.quarkus.datasource.jdbc.initial-size": "1",
    # No usage reports or update checks from a test process.
    "quarkus.analytics.disabled": "true",
}


def runner_jar() -> Path:
    """The Quarkus runner jar of the unpacked distribution (its ``lib/`` beside it)."""
    try:
        folder = dev_jars.unpacked(PROFILE)
    except dev_jars.JarsNotAvailable as exc:
        raise BrokerNotAvailable(str(exc)) from exc
    found = sorted(folder.glob("*-runner.jar"))
    if not found:
        raise BrokerNotAvailable(f"no *-runner.jar in Apicurio Registry's distribution at {folder}")
    return found[0]


class LocalSchemaRegistry(LocalBroker):
    """Apicurio Registry on a free 127.0.0.1 port; ``url`` is its Confluent-compatible API."""

    engine = "apicurio-registry"

    def __init__(self, port: int | None = None) -> None:
        super().__init__(port)
        self.directory: Path | None = None

    @property
    def url(self) -> str:
        """The base URL confluent-kafka's ``SchemaRegistryClient`` is given (``{"url": ...}``)."""
        return f"http://127.0.0.1:{self.port}{CONFLUENT_API}"

    @property
    def log_path(self) -> Path | None:
        return self.directory / "registry.log" if self.directory else None

    def _prepare(self) -> list[str]:
        java = shutil.which("java")
        if java is None:
            raise BrokerNotAvailable("the local Schema Registry (Apicurio Registry) needs Java 17+ on PATH")
        jar = runner_jar()
        self.directory = Path(tempfile.mkdtemp(prefix="subroute-registry-"))
        properties = {"quarkus.http.port": str(self.port), **SYSTEM_PROPERTIES}
        return [
            java,
            *JVM_OPTIONS,
            *(f"-D{key}={value}" for key, value in properties.items()),
            "-jar",
            str(jar),
        ]

    def _environment(self) -> dict[str, str]:
        return {**super()._environment(), **ENVIRONMENT, "HTTP_PORT": str(self.port)}

    def _answers(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/subjects", timeout=1.0) as response:
                return bool(response.status == 200)
        except (OSError, urllib.error.URLError):
            return False

    def _cleanup(self) -> None:
        directory, self.directory = self.directory, None
        if directory is not None:
            shutil.rmtree(directory, ignore_errors=True)


def run_foreground(port: int | None = None) -> int:
    """``subroute dev schema-registry``: the first stdout line is ``url http://127.0.0.1:PORT/apis/ccompat/v7``;
    runs until SIGINT/SIGTERM (``serve_until_stopped``)."""
    registry = LocalSchemaRegistry(port)
    return serve_until_stopped(
        registry, "schema registry", lambda: registry.start(timeout=180.0), lambda: f"url {registry.url}"
    )
