"""Global flags: the Kafka settings (``ops.settings.add_common_arguments``) and logging, accepted before or after
the subcommand. The top-level parser keeps its values under ``global_*``; ``merge_globals`` folds them in, a value
given after the subcommand winning (``--kafka-config`` lists add up)."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Iterator

from subroute.ops import logs
from subroute.ops.settings import COMMON_DESTS, LIBRDKAFKA_LOGGER, add_common_arguments, env_checked

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
ENV_LOG_LEVEL = "SUBROUTE_LOG_LEVEL"
GLOBAL = "global_"
_LOGGING_DESTS = ("verbose", "log_level")


def add_global_arguments(parser: argparse.ArgumentParser, *, top: bool = False) -> None:
    """The Kafka flags and the logging flags; a flag the parser has already is left to it."""
    prefix = GLOBAL if top else ""
    add_common_arguments(parser, dest_prefix=prefix)
    if "-v" not in parser._option_string_actions:
        parser.add_argument(
            "-v",
            "--verbose",
            dest=prefix + "verbose",
            action="count",
            help="more log on stderr: -v info and librdkafka's own log, -vv debug",
        )
    if "--log-level" not in parser._option_string_actions:
        parser.add_argument(
            "--log-level",
            dest=prefix + "log_level",
            metavar="LEVEL",
            type=env_checked(ENV_LOG_LEVEL, choices=LOG_LEVELS, convert=str.upper),
            help=f"one of {', '.join(LOG_LEVELS)} (env {ENV_LOG_LEVEL}; default: the worker INFO, other commands "
            "WARNING, and librdkafka's log only with -v or --log-level)",
        )


def leaf_parsers(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    """Every parser under ``parser`` that runs a command (has no subcommands of its own)."""
    nested = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not nested:
        yield parser
    for action in nested:
        for child in dict.fromkeys(action.choices.values()):  # aliases map to the same parser
            yield from leaf_parsers(child)


def merge_globals(args: argparse.Namespace) -> None:
    for dest in (*COMMON_DESTS, *_LOGGING_DESTS):
        before = getattr(args, GLOBAL + dest, None)
        after = getattr(args, dest, None)
        if dest == "kafka_config":
            merged = [*(before or []), *(after or [])] or None
        else:
            merged = after if after is not None else before
        setattr(args, dest, merged)
        if hasattr(args, GLOBAL + dest):
            delattr(args, GLOBAL + dest)


def log_level(args: argparse.Namespace, *, default: str) -> str:
    """--log-level, else SUBROUTE_LOG_LEVEL (checked: a bad value is a usage error), else -v's, else ``default``."""
    if args.log_level:
        return str(args.log_level)
    env = os.environ.get(ENV_LOG_LEVEL)
    if env is not None:
        return str(env_checked(ENV_LOG_LEVEL, choices=LOG_LEVELS, convert=str.upper)(env))
    verbose = args.verbose or 0
    return "DEBUG" if verbose >= 2 else "INFO" if verbose == 1 else default


def configure_logging(args: argparse.Namespace, *, json_lines: bool) -> None:
    """The worker logs JSON lines (librdkafka's included); other commands log plain lines, and librdkafka's own
    log only when asked for (-v or --log-level): a refused connection is one ``subroute:`` line, not hundreds."""
    explicit = bool(args.log_level or args.verbose or os.environ.get(ENV_LOG_LEVEL))
    level = log_level(args, default="INFO" if json_lines else "WARNING")
    if json_lines:
        logs.configure(level)
    elif explicit:  # asked for: plain lines at that level; otherwise Python's logging is left as it is
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("subroute: %(levelname)s %(name)s: %(message)s"))
        root = logging.getLogger()
        root.handlers[:] = [handler]
        root.setLevel(level)
    librdkafka = logging.getLogger(LIBRDKAFKA_LOGGER)
    librdkafka.setLevel(logging.NOTSET if json_lines or explicit else logging.CRITICAL + 1)
    librdkafka.filters[:] = [logs.RepeatFilter()]  # an outage is one line per kind of message, not hundreds
