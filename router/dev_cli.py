"""``subroute dev``: local tooling (the embedded broker)."""

from __future__ import annotations

import argparse

from router import dev_broker


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    dev = subparsers.add_parser("dev", help="local development tooling")
    dev_commands = dev.add_subparsers(dest="dev_command", required=True, metavar="DEV_COMMAND")
    broker = dev_commands.add_parser(
        "broker", help="run the embedded Kafka-protocol broker in the foreground"
    )
    broker.add_argument("--port", type=int, default=9092, help="port on 127.0.0.1 (default 9092)")
    broker.set_defaults(func=_run_broker)


def _run_broker(args: argparse.Namespace) -> int:
    return dev_broker.run_foreground(args.port)
