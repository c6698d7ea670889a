"""The ``subroute`` command: one argparse tree; each command module registers its own subcommands."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from router.settings import SettingsError


def build_parser() -> argparse.ArgumentParser:
    from router import dev_cli, expr_cli

    parser = argparse.ArgumentParser(prog="subroute", description="Content-based routing for Apache Kafka.")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    expr_cli.register(subparsers)
    dev_cli.register(subparsers)
    _register_optional(subparsers)
    return parser


def _register_optional(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Commands whose modules are wired here as they land."""
    import importlib

    for module_name in (
        "router.config_cli",
        "router.worker_cli",
        "router.explain_cli",
        "router.queue_cli",
        "spark.cli",
    ):
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name not in (module_name, "pyspark"):
                raise
            continue
        module.register(subparsers)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code: int = args.func(args)
    except SettingsError as exc:
        print(f"subroute: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return code


if __name__ == "__main__":
    sys.exit(main())
