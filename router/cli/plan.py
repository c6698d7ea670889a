"""``subroute plan``: the command line of the backtest of a proposed configuration (the work is in
spark/plan.py, which imports pyspark only when Spark runs: the file is validated without it)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from subroute.cli import exits, output
from subroute.cli.registry_flags import add_schema_registry_arguments, schema_registry_settings
from subroute.config.validation import ConfigError
from subroute.ops.settings import Settings, SettingsError, add_common_arguments
from subroute.spark.plan import (
    DEFAULT_EXAMPLES,
    EVALUATE_AT,
    compute_plan,
    format_plan,
    load_proposed,
    parse_since,
    plan_document,
    proposed_config,
)

EXIT_OK, EXIT_INVALID, EXIT_FAILED = exits.OK, exits.INVALID, exits.KAFKA  # as every command (README)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    plan = subparsers.add_parser(
        "plan",
        help="backtest a proposed config over the input history: where each app's messages would go",
        description="Replay the input topics with Spark under the configuration in force and a proposed one, "
        "and print per app 'old destination -> new destination: count'. Nothing is written.",
    )
    add_arguments(plan)
    plan.set_defaults(func=plan_from_args)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_common_arguments(parser)
    parser.add_argument(
        "-f",
        "--file",
        required=True,
        metavar="FILE|DIR|-",
        help="the proposed subscriptions YAML: a file, a directory of YAML files, or - for stdin",
    )
    parser.add_argument(
        "--input",
        action="append",
        metavar="TOPIC",
        help="an input topic to replay, repeatable (default: every input topic of either configuration)",
    )
    parser.add_argument(
        "--since",
        metavar="TIMESTAMP",
        help="only records from then on: ISO 8601 (UTC by default) or epoch ms",
    )
    parser.add_argument(
        "--limit", type=int, metavar="N", help="only the N most recent records of each topic (after --since)"
    )
    parser.add_argument(
        "--prune",
        action="store_true",
        help="the file is the whole configuration (as 'config apply --prune'); default: unnamed records stay",
    )
    parser.add_argument(
        "--evaluate-at",
        choices=EVALUATE_AT,
        default="arrival",
        help="route each record as of its arrival (default) or as if it arrived now (expiration applies)",
    )
    parser.add_argument(
        "--examples",
        type=int,
        default=DEFAULT_EXAMPLES,
        metavar="N",
        help=f"unmatched records to show (default {DEFAULT_EXAMPLES})",
    )
    parser.add_argument("--source", choices=("auto", "kafka", "python"), default="auto", help="Kafka source")
    parser.add_argument("--master", default="local[*]", help="Spark master (default local[*])")
    add_schema_registry_arguments(parser)
    output.add_output_argument(parser)


def print_errors(errors: Sequence[ConfigError]) -> None:
    for error in errors:
        print(f"error: {error}", file=sys.stderr)
    print(f"{len(errors)} error(s) in the proposed configuration: nothing was planned", file=sys.stderr)


def plan_from_args(args: argparse.Namespace) -> int:
    """Validate the file, read the current config, plan, print. Exit 0, 2 (bad input) or 3 (Kafka failed).

    An active Spark session (spark-submit, a notebook, tests) is used and left running; otherwise a local one
    is started for the plan and stopped after it.
    """
    desired, errors = load_proposed(args.file)
    if errors:
        print_errors(errors)
        return EXIT_INVALID
    try:
        settings = Settings.from_args(args)
        since_ms = parse_since(args.since) if args.since else None
        if args.limit is not None and args.limit <= 0:
            raise SettingsError(f"--limit must be positive, got {args.limit}")
        registry = schema_registry_settings(args)
    except SettingsError as exc:
        print(f"subroute: {exc}", file=sys.stderr)
        return EXIT_INVALID
    import importlib.util

    if importlib.util.find_spec("pyspark") is None:
        print("subroute plan: needs the 'spark' extra: pip install 'subroute[spark]'", file=sys.stderr)
        return EXIT_INVALID
    from subroute.config.store import read_config
    from subroute.kafka.clients import KafkaException
    from subroute.kafka.schema_registry import RegistryUnavailable

    try:
        current = read_config(settings)
    except (KafkaException, TimeoutError) as exc:
        print(f"subroute: Kafka at {settings.bootstrap_servers}: {exc}", file=sys.stderr)
        return EXIT_FAILED
    proposed, dropped = proposed_config(current, desired, prune=args.prune)
    from pyspark.sql import SparkSession

    session = SparkSession.getActiveSession()
    owned = session is None
    if session is None:
        from subroute.spark.session import build_session

        session = build_session(master=args.master, app_name="subroute-plan")
    from subroute.spark.progress import SparkProgress

    try:
        with SparkProgress(session, "plan"):  # a bar on a terminal only
            result = compute_plan(
                session,
                settings,
                current,
                proposed,
                inputs=tuple(args.input or ()),
                since_ms=since_ms,
                limit=args.limit,
                evaluate_at=args.evaluate_at,
                examples=args.examples,
                source=args.source,
                schema_registry=registry,
            )
    except SettingsError as exc:  # an app reads Avro in Confluent's wire format and no registry was given
        print(f"subroute: {exc}", file=sys.stderr)
        return EXIT_INVALID
    except RegistryUnavailable as exc:  # as Kafka failing: nothing was planned; run it again
        print(f"subroute: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except (KafkaException, TimeoutError) as exc:
        print(f"subroute: Kafka at {settings.bootstrap_servers}: {exc}", file=sys.stderr)
        return EXIT_FAILED
    finally:
        if owned:
            session.stop()
    result.proposed = args.file
    result.prune = args.prune
    result.dropped_groups = dropped
    output.emit(args.output, plan_document(result), lambda: format_plan(result))
    return EXIT_OK
