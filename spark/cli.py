"""``subroute spark run``, ``subroute spark report`` and ``subroute plan``. pyspark is imported only when a
command runs, so the rest of the CLI works without the ``spark`` extra."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from router.ops.settings import Settings, add_common_arguments


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "spark", help="land routed topics in Parquet with Spark, and report on them"
    )
    commands = parser.add_subparsers(dest="spark_command", required=True, metavar="COMMAND")

    run = commands.add_parser(
        "run", help="run the Spark job in local mode (spark-submit spark/job.py for clusters)"
    )
    add_common_arguments(run)
    add_job_arguments(run)
    run.add_argument("--master", default="local[*]", help="Spark master (default local[*])")
    run.set_defaults(func=_run)

    report = commands.add_parser(
        "report", help="messages per app and group, latency, pending and dead letters"
    )
    add_common_arguments(report)
    report.add_argument("--output", required=True, metavar="DIR", help="the job's Parquet root")
    report.add_argument("--master", default="local[*]", help="Spark master (default local[*])")
    report.set_defaults(func=_report)

    from spark import plan as plan_module  # pyspark-free at import: Spark is loaded when a plan runs

    plan = subparsers.add_parser(
        "plan",
        help="backtest a proposed config over the input history: where each app's messages would go",
        description="Replay the input topics with Spark under the configuration in force and a proposed one, "
        "and print per app 'old destination -> new destination: count'. Nothing is written.",
    )
    plan_module.add_arguments(plan)
    plan.set_defaults(func=_plan)


def add_job_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--output", required=True, metavar="DIR", help="Parquet root (any Hadoop path)")
    parser.add_argument("--checkpoint", metavar="DIR", help="Spark checkpoint (default OUTPUT/_checkpoint)")
    parser.add_argument("--topic", action="append", metavar="TOPIC", help="a topic to read, repeatable")
    parser.add_argument("--pattern", metavar="REGEX", help="topics to read (whole-name match)")
    parser.add_argument(
        "--app",
        action="append",
        metavar="APP",
        help="read every group topic of APP, repeatable (default: all apps)",
    )
    parser.add_argument(
        "--starting-offsets",
        default="earliest",
        metavar="SPEC",
        help="earliest (default), latest or Spark's JSON",
    )
    parser.add_argument("--max-offsets-per-trigger", type=int, metavar="N")
    parser.add_argument(
        "--trigger",
        default="available-now",
        metavar="WHEN",
        help="available-now (default: land what is there, then stop) or an interval such as '30 seconds'",
    )
    parser.add_argument(
        "--avro-schema",
        action="append",
        metavar="APP=SCHEMA",
        help="decode APP's payloads: an .avsc path or a name from schemas/ (e.g. orders=order), repeatable",
    )
    parser.add_argument(
        "--group-id",
        metavar="ID",
        help="commit every offset to this consumer group (default: each group topic to its group's own)",
    )
    parser.add_argument("--no-commit", action="store_true", help="do not commit offsets to Kafka")
    parser.add_argument("--source", choices=("auto", "kafka", "python"), default="auto", help="Kafka source")


def _has_pyspark() -> bool:
    import importlib.util

    return importlib.util.find_spec("pyspark") is not None


def _job() -> Any:
    from spark import job

    return job


def _missing_pyspark() -> int:
    print("subroute spark: needs the 'spark' extra: pip install 'subroute[spark]'", file=sys.stderr)
    return 2


def _run(args: argparse.Namespace) -> int:
    if not _has_pyspark():
        return _missing_pyspark()
    job = _job()
    try:
        config = job.config_from_args(args)
    except ValueError as exc:
        print(f"subroute spark run: {exc}", file=sys.stderr)
        return 2
    spark = job.build_session(master=args.master)
    try:
        print(job.describe(job.run(spark, config)), flush=True)
    finally:
        spark.stop()
    return 0


def _plan(args: argparse.Namespace) -> int:
    from spark import plan

    return plan.plan_from_args(args)


def _report(args: argparse.Namespace) -> int:
    if not _has_pyspark():
        return _missing_pyspark()
    from spark import report
    from spark.job import build_session

    settings = Settings.from_args(args)
    spark = build_session(master=args.master)
    try:
        print(report.format_report(report.build_report(spark, args.output.rstrip("/"), settings)), flush=True)
    finally:
        spark.stop()
    return 0
