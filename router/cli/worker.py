"""``subroute worker``: run a router worker until SIGTERM (or until idle, for scripts)."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
from types import FrameType

from subroute.cli import exits
from subroute.cli.registry_flags import add_schema_registry_arguments, schema_registry_settings
from subroute.ops.http import serve
from subroute.ops.metrics import RouterMetrics
from subroute.ops.settings import Settings, add_common_arguments, env_checked
from subroute.worker.loop import (
    AT_LEAST_ONCE,
    EXACTLY_ONCE,
    GUARANTEES,
    StartupTimeout,
    Worker,
    WorkerOptions,
)
from subroute.worker.options import DEFAULT_STARTUP_TIMEOUT
from subroute.worker.pending import DEFAULT_SWEEP_SECONDS
from subroute.worker.window import DEFAULT_COMMIT_MS, DEFAULT_COMMIT_RECORDS, CommitInterval

log = logging.getLogger(__name__)


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
        "--commit-interval-records",
        type=env_checked("SUBROUTE_COMMIT_INTERVAL_RECORDS", convert=int, minimum=1),
        default=os.environ.get("SUBROUTE_COMMIT_INTERVAL_RECORDS", str(DEFAULT_COMMIT_RECORDS)),
        metavar="N",
        help="commit the input offsets (exactly-once: the transaction) at least every N routed records, and "
        "whenever the input drains (env SUBROUTE_COMMIT_INTERVAL_RECORDS)",
    )
    worker.add_argument(
        "--commit-interval-ms",
        type=env_checked("SUBROUTE_COMMIT_INTERVAL_MS", convert=int, minimum=0),
        default=os.environ.get("SUBROUTE_COMMIT_INTERVAL_MS", str(DEFAULT_COMMIT_MS)),
        metavar="MS",
        help="... and at least every MS milliseconds (env SUBROUTE_COMMIT_INTERVAL_MS)",
    )
    worker.add_argument(
        "--producers",
        type=env_checked("SUBROUTE_PRODUCERS", convert=int, minimum=1),
        default=os.environ.get("SUBROUTE_PRODUCERS"),
        metavar="N",
        help="at-least-once: producers the destination topics are shared among, each topic through one (default "
        "1; more put more requests in flight where round trips to the brokers bind: librdkafka sends one "
        "partition per request, 5 in flight per connection); exactly-once takes 1 (env SUBROUTE_PRODUCERS)",
    )
    worker.add_argument(
        "--transactional-id",
        default=os.environ.get("SUBROUTE_TRANSACTIONAL_ID"),
        metavar="ID",
        help="exactly-once: a stable id per worker (e.g. the pod name) so a restarted worker aborts its "
        "predecessor's open transaction at once (env SUBROUTE_TRANSACTIONAL_ID; default: fresh per process)",
    )
    worker.add_argument(
        "--presence-refresh-seconds",
        type=env_checked("SUBROUTE_PRESENCE_REFRESH_SECONDS", convert=float, minimum=0),
        default=os.environ.get("SUBROUTE_PRESENCE_REFRESH_SECONDS", "2"),
        metavar="SECONDS",
        help="how often the consumer groups' membership is read for apps with presence: required; 0 counts "
        "every group as present (env SUBROUTE_PRESENCE_REFRESH_SECONDS)",
    )
    worker.add_argument(
        "--startup-timeout",
        type=env_checked("SUBROUTE_STARTUP_TIMEOUT", convert=float, minimum=0),
        default=os.environ.get("SUBROUTE_STARTUP_TIMEOUT", str(DEFAULT_STARTUP_TIMEOUT)),
        metavar="SECONDS",
        help="give up (exit 3) when the brokers cannot be reached, or refuse this client, and the config topic is "
        "not read within SECONDS of the start (default %(default)s; 0 waits for ever); once routing, an outage "
        "is ridden out (env SUBROUTE_STARTUP_TIMEOUT)",
    )
    worker.add_argument(
        "--pending-sweep-seconds",
        type=env_checked("SUBROUTE_PENDING_SWEEP_SECONDS", convert=float, minimum=1),
        default=os.environ.get("SUBROUTE_PENDING_SWEEP_SECONDS", str(DEFAULT_SWEEP_SECONDS)),
        metavar="SECONDS",
        help="how often each pending partition with waiting records is swept for expired ones, which leave (dead "
        "letter or drop) whatever waits in front of them (env SUBROUTE_PENDING_SWEEP_SECONDS)",
    )
    add_schema_registry_arguments(worker)
    worker.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    # logging (JSON lines, --log-level / SUBROUTE_LOG_LEVEL, default INFO) is set up by subroute.cli.main
    settings = Settings.from_args(args)
    if args.guarantee == EXACTLY_ONCE and args.producers not in (None, 1):
        print(
            "subroute worker: --producers must be 1 with --guarantee exactly-once (a transaction belongs to one producer)",
            file=sys.stderr,
        )
        return exits.INVALID
    options = WorkerOptions(
        guarantee=args.guarantee,
        batch_size=args.batch_size,
        commit_interval=CommitInterval(args.commit_interval_records, args.commit_interval_ms),
        exit_on_idle=args.exit_on_idle,
        transactional_id=args.transactional_id,
        producers=args.producers,
        presence_refresh_seconds=args.presence_refresh_seconds,
        startup_timeout=args.startup_timeout,
        pending_sweep_seconds=args.pending_sweep_seconds,
        schema_registry=schema_registry_settings(args),
    )
    metrics = RouterMetrics()
    worker = Worker(settings, options, metrics)
    if args.metrics_port >= 0:
        try:
            server = serve(args.metrics_port, metrics.registry, worker.healthy, worker.ready)
        except (
            OSError
        ) as exc:  # taken (a second worker on the host), or not ours to bind; nothing started yet
            print(
                f"subroute worker: cannot serve /metrics on port {args.metrics_port}: {exc.strerror or exc}; "
                "choose another with --metrics-port or SUBROUTE_METRICS_PORT (0 picks a free one, -1 serves none)",
                file=sys.stderr,
            )
            return exits.INVALID
        print(f"metrics on :{server.server_port}", flush=True)
    _stop_on_signals(worker)
    try:
        return worker.run()
    except StartupTimeout as exc:
        print(f"subroute worker: {exc}", file=sys.stderr)
        return exits.KAFKA


def _stop_on_signals(worker: Worker) -> None:
    """SIGTERM (Kubernetes) and SIGINT finish the batch, commit and leave the group."""

    def handler(signum: int, frame: FrameType | None) -> None:
        log.info("signal received, finishing the batch", extra={"fields": {"signal": signum}})
        worker.stop()

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)
