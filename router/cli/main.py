"""The ``subroute`` command: one argparse tree; each command module registers its own subcommands."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from importlib import metadata

from subroute.cli import exits
from subroute.cli.options import add_global_arguments, configure_logging, leaf_parsers, merge_globals
from subroute.kafka.clients import KafkaException
from subroute.ops.settings import SettingsError


def build_parser() -> argparse.ArgumentParser:
    # Imported here so `subroute --help` stays quick and each command module owns its own flags.
    from subroute.cli import completion as completion_cli
    from subroute.cli import config as config_cli
    from subroute.cli import dev as dev_cli
    from subroute.cli import explain as explain_cli
    from subroute.cli import expr as expr_cli
    from subroute.cli import plan as plan_cli  # pyspark-free at import: Spark is loaded when a plan runs
    from subroute.cli import queue as queue_cli
    from subroute.cli import queue_ops as queue_ops_cli
    from subroute.cli import spark as spark_cli  # imports pyspark only when a spark command runs
    from subroute.cli import status as status_cli
    from subroute.cli import worker as worker_cli

    parser = argparse.ArgumentParser(
        prog="subroute",
        description="Content-based routing for Apache Kafka. The Kafka and logging flags (-b, --topic-prefix, "
        "--kafka-config, --kafka-config-file, -v, --log-level ...) go before or after the command.",
    )
    parser.add_argument("--version", action="version", version=f"subroute {metadata.version('subroute')}")
    add_global_arguments(parser, top=True)
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in (
        config_cli,
        worker_cli,
        status_cli,
        explain_cli,
        expr_cli,
        queue_cli,
        queue_ops_cli,
        spark_cli,
        plan_cli,
        dev_cli,
        completion_cli,
    ):
        module.register(subparsers)
    for leaf in leaf_parsers(parser):
        add_global_arguments(leaf)
    return parser


def parse(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    """The arguments, global flags merged, logging configured; a bad SUBROUTE_LOG_LEVEL is a usage error."""
    args = parser.parse_args(argv)
    merge_globals(args)
    try:
        configure_logging(args, json_lines=args.command == "worker")
    except argparse.ArgumentTypeError as exc:
        parser.error(f"argument --log-level: {exc}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    if argv is None:  # a shell asking for completions (subroute completion SHELL) is answered here
        from subroute.cli.completion import complete

        complete(parser)
    args = parse(parser, argv)
    try:
        code: int = args.func(args)
    except SettingsError as exc:
        print(f"subroute: {exc}", file=sys.stderr)
        return exits.INVALID
    except (KafkaException, TimeoutError) as exc:
        # what a command did not handle itself: one line naming the broker, never a traceback
        bootstrap = getattr(args, "bootstrap_servers", None) or "the configured bootstrap servers"
        print(f"subroute: Kafka at {bootstrap}: {exc}", file=sys.stderr)
        return exits.KAFKA
    except KeyboardInterrupt:
        return exits.INTERRUPTED
    return code


if __name__ == "__main__":
    sys.exit(main())
