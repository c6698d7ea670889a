"""``subroute worker``: run a router worker until SIGTERM (or until idle, for scripts)."""

from __future__ import annotations

import argparse
import os

from subroute.ops import logs
from subroute.ops.http import serve
from subroute.ops.metrics import RouterMetrics
from subroute.ops.settings import Settings, add_common_arguments, env_checked
from subroute.worker.loop import AT_LEAST_ONCE, GUARANTEES, Worker, WorkerOptions

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    worker = subparsers.add_parser("worker", help="route input topics to group topics (runs until SIGTERM)")
    add_common_arguments(worker)
    # Defaults from the environment are strings that argparse converts and checks like a flag's value (type and
    # choices below), so a bad SUBROUTE_* value is a usage error naming it, and only for this command.
    worker.add_argument(
        "--guarantee",
        type=env_checked("SUBROUTE_GUARANTEE", choices=GUARANTEES),
        default=os.environ.get("SUBROUTE_GUARANTEE", AT_LEAST_ONCE),
        help="at-least-once (default) or exactly-once (transactions; readers use read_committed)",
    )
    worker.add_argument(
        "--metrics-port",
        type=env_checked("SUBROUTE_METRICS_PORT", convert=int),
        default=os.environ.get("SUBROUTE_METRICS_PORT", "9464"),
        help="port of /metrics, /healthz and /readyz (0 picks a free one; -1 disables; env SUBROUTE_METRICS_PORT)",
    )
    worker.add_argument(
        "--exit-on-idle",
        type=float,
        metavar="SECONDS",
        default=None,
        help="exit 0 once caught up, committed and idle this long (scripts and tests)",
    )
    worker.add_argument(
        "--batch-size",
        type=env_checked("SUBROUTE_BATCH_SIZE", convert=int, minimum=1),
        default=os.environ.get("SUBROUTE_BATCH_SIZE", "2000"),
        help="records per poll (env SUBROUTE_BATCH_SIZE)",
    )
    worker.add_argument(
        "--transactional-id",
        default=os.environ.get("SUBROUTE_TRANSACTIONAL_ID"),
        metavar="ID",
        help="exactly-once: a stable id per worker (e.g. the pod name) so a restarted worker aborts its "
        "predecessor's open transaction at once (env SUBROUTE_TRANSACTIONAL_ID; default: fresh per process)",
    )
    worker.add_argument(
        "--log-level",
        type=env_checked("SUBROUTE_LOG_LEVEL", choices=LOG_LEVELS, convert=str.upper),
        default=os.environ.get("SUBROUTE_LOG_LEVEL", "INFO"),
        help=f"one of {', '.join(LOG_LEVELS)} (env SUBROUTE_LOG_LEVEL)",
    )
    worker.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    logs.configure(args.log_level)
    settings = Settings.from_args(args)
    options = WorkerOptions(
        guarantee=args.guarantee,
        batch_size=args.batch_size,
        exit_on_idle=args.exit_on_idle,
        transactional_id=args.transactional_id,
    )
    metrics = RouterMetrics()
    worker = Worker(settings, options, metrics)
    if args.metrics_port >= 0:
        server = serve(args.metrics_port, metrics.registry, worker.healthy, worker.ready)
        print(f"metrics on :{server.server_port}", flush=True)
    worker.install_signal_handlers()
    return worker.run()
