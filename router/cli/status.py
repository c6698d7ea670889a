"""``subroute status``: per group its presence and lag against max_unconfirmed; per app the messages waiting on
its pending topic by reason and its dead letters not redriven; the config version each router worker runs (the
work is in router/admin/status.py)."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from typing import Any

from subroute.admin import status
from subroute.cli import exits, output
from subroute.config.store import no_apps_warning, read_config
from subroute.durations import format_duration_ms, parse_duration_ms
from subroute.ops.settings import Settings, SettingsError, add_common_arguments
from subroute.routing.backlog import DEFAULT_SOON_MS, EXPIRING, REASONS


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "status",
        help="per app the messages waiting by reason and the dead letters; per group consumers and lag",
        description="Per app: the messages waiting on its pending topic (read from the router's position to "
        "the end, committed records only, those already gone skipped), each in one reason: no-consumer, "
        "capacity, no-match, reroute (matched nothing under an older config version: evaluated again), "
        "expiring (expires within --expiring-within; it wins over the others); and its dead letters not "
        "redriven (dlq list's waiting). Per group: live members of its consumer group <prefix>.<app>.<group>, "
        "its lag (unconfirmed records on the group topic and its bands .p1-.p9) against max_unconfirmed. Per "
        "router worker: the config version in its latest offset commits (the workers write it in the commit "
        "metadata).",
    )
    add_common_arguments(parser)
    parser.add_argument("--app", action="append", metavar="APP", help="only this app, repeatable")
    parser.add_argument(
        "--expiring-within",
        default=format_duration_ms(DEFAULT_SOON_MS),
        metavar="DURATION",
        help="count a waiting message as expiring when it expires within this (30s, 5m, 1h; default "
        "%(default)s)",
    )
    parser.add_argument(
        "--max-read",
        type=int,
        default=status.DEFAULT_MAX_READ,
        metavar="N",
        help="read at most N records of each pending and dead-letter topic; past them a count is a floor, "
        "shown >=N (default %(default)s; 0: read everything)",
    )
    output.add_output_argument(parser)
    parser.add_argument(
        "--watch",
        type=float,
        metavar="SECONDS",
        help="print again every SECONDS until Ctrl-C (-o json|yaml: one document per refresh)",
    )
    parser.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    if args.watch is not None and args.watch <= 0:
        raise SettingsError(f"--watch wants a number of seconds > 0, got {args.watch:g}")
    soon_ms = parse_duration_ms(args.expiring_within, default_unit=None)
    if soon_ms is None:
        raise SettingsError(f"--expiring-within wants a duration (30s, 5m, 1h), got {args.expiring_within!r}")
    if args.max_read < 0:
        raise SettingsError(f"--max-read wants a count >= 0 (0: read everything), got {args.max_read}")
    max_read = args.max_read or None
    settings = Settings.from_args(args)
    interrupted = threading.Event()
    if args.watch is not None:
        # Ctrl-C ends the watch between refreshes: a KeyboardInterrupt raised while a Kafka client runs a Python
        # callback can be lost there (the full test suite saw the watch outlive SIGINT by 30 s); a flag cannot.
        signal.signal(signal.SIGINT, lambda *_: interrupted.set())
    while not interrupted.is_set():
        config = read_config(settings)
        apps = sorted(config.apps) if not args.app else list(dict.fromkeys(args.app))
        unknown = [app for app in apps if app not in config.apps]
        if unknown:
            print(
                f"subroute: no app {', '.join(map(repr, unknown))} in {settings.config_topic}",
                file=sys.stderr,
            )
            return exits.INVALID
        warning = no_apps_warning(settings, config)
        if warning is not None:
            print(f"subroute: warning: {warning}", file=sys.stderr)
        document = status.collect(settings, config, apps, soon_ms=soon_ms, max_read=max_read)
        if args.watch is None:
            output.emit(args.output, document, lambda: _table(document))  # noqa: B023 (called at once)
            return exits.OK
        _refresh(args.output, document)
        interrupted.wait(args.watch)
    return exits.INTERRUPTED


def _refresh(fmt: str, document: dict[str, Any]) -> None:
    if fmt == output.JSON:  # one document a line: `subroute status -o json --watch 5 | jq` reads them all
        print(json.dumps(output.plain(document)), flush=True)
    elif fmt == output.YAML:
        sys.stdout.write("---\n" + output.to_yaml(document))
        sys.stdout.flush()
    else:
        if sys.stdout.isatty():
            sys.stdout.write("\x1b[H\x1b[2J")  # redraw in place
        else:
            sys.stdout.write("\n")
        sys.stdout.write(_table(document))
        sys.stdout.flush()


def _table(document: dict[str, Any]) -> str:
    """Two tables: what waits per app (split by reason: each message in one), then each group's own figures."""
    soon = format_duration_ms(document["expiring_within_ms"])
    app_header = (
        "app",
        "waiting",
        *(f"{r} (<{soon})" if r == EXPIRING else r for r in REASONS),
        "dead letters",
    )
    app_rows = [
        (
            app["app"],
            _figure(app["waiting"], app["waiting_exact"]),
            *(_figure(app["waiting_by_reason"][r], app["waiting_exact"]) for r in REASONS),
            _figure(app["dead_letters"], app["dead_letters_exact"]),
        )
        for app in document["apps"]
    ]
    group_rows = [
        (
            app["app"],
            group["group"],
            f"{group['members']} ({group['state']})",
            group["lag"],
            group["max_unconfirmed"],
            "FULL" if group["full"] else "",
        )
        for app in document["apps"]
        for group in app["groups"]
    ]
    group_header = ("app", "group", "members", "lag", "max_unconfirmed", "")
    router = document["router"]
    workers = [
        (
            w["client_id"],
            w["host"],
            w["partitions"],
            w["config_version"],
            "" if w["current"] else "BEHIND",
            w["backlog"],
        )
        for w in router["workers"]
    ]
    lines = [
        f"{document['time']}  config version {document['config_version']} ({document['config_topic']})",
        "",
        output.render_table(app_header, app_rows).rstrip("\n"),
    ]
    if group_rows:
        lines += ["", output.render_table(group_header, group_rows).rstrip("\n")]
    lines += [
        "",
        f"router workers ({router['consumer_group']}, {router['state']}): {len(workers)}; input records not "
        f"routed yet: {sum(router['input_lag'].values())}",
    ]
    if workers:
        worker_header = ("client", "host", "partitions", "config_version", "", "backlog")
        lines.append(output.render_table(worker_header, workers, indent="  ").rstrip("\n"))
    if not all(app["waiting_exact"] and app["dead_letters_exact"] for app in document["apps"]):
        lines += ["", "≥N: the read stopped at --max-read records of the topic; at least N"]
    advice = [app["advice"] for app in document["apps"] if app.get("advice")]
    if advice:
        lines += ["", *(f"warning: {text}" for text in advice)]
    framed = [app["app"] for app in document["apps"] if app.get("needs_schema_registry")]
    if framed:
        lines += [
            "",
            f"note: {', '.join(framed)} read Avro in Confluent's wire format: while a worker cannot read the schema "
            "registry their input records wait (counted above as not routed yet), the worker is not ready and "
            "subroute_schema_registry_unavailable is 1 (docs/runbook.md#subrouteschemaregistryunavailable)",
        ]
    return "\n".join(lines) + "\n"


def _figure(count: int, exact: bool) -> int | str:
    return count if exact else f"≥{count}"
