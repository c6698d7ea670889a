"""``subroute spark run`` and ``subroute spark report`` (the work is in spark/). pyspark is imported only when a
command runs, so the rest of the CLI works without the ``spark`` extra."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from subroute.cli import output
from subroute.ops.settings import Settings, add_common_arguments
from subroute.spark.flags import add_job_arguments


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
    # --output is the Parquet root here (as for `spark run`): the format is -o / --format
    output.add_output_argument(report, flags=("-o", "--format"), dest="format")
    report.add_argument("--master", default="local[*]", help="Spark master (default local[*])")
    report.set_defaults(func=_report)


def _has_pyspark() -> bool:
    import importlib.util

    return importlib.util.find_spec("pyspark") is not None


def _job() -> Any:
    from subroute.spark import job

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
    from subroute.spark.session import build_session

    spark = build_session(master=args.master)
    try:
        print(job.describe(job.run(spark, config)), flush=True)
    finally:
        spark.stop()
    return 0


def _report(args: argparse.Namespace) -> int:
    if not _has_pyspark():
        return _missing_pyspark()
    from subroute.spark import report
    from subroute.spark.session import build_session

    settings = Settings.from_args(args)
    spark = build_session(master=args.master)
    try:
        result = report.build_report(spark, args.output.rstrip("/"), settings)
        output.emit(args.format, report.report_document(result), lambda: report.format_report(result))
    finally:
        spark.stop()
    return 0
