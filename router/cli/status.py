"""``subroute status``: presence, lag against max_unconfirmed, pending and dead letters per app and group, and
the config version each router worker runs (the work is in router/admin/status.py)."""

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
from subroute.ops.settings import Settings, SettingsError, add_common_arguments


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "status",
        help="consumers, lag, pending and dead letters per app and group; config version per worker",
        description="Per app and group: live members of the group's consumer group <prefix>.<app>.<group>, "
        "its lag (unconfirmed records on the group topic and its bands .p1-.p9) against max_unconfirmed, and "
        "the records on the app's pending and dead-letter topics. Per router worker: the config version in "
        "its latest offset commits (the workers write it in the commit metadata).",
    )
    add_common_arguments(parser)
    parser.add_argument("--app", action="append", metavar="APP", help="only this app, repeatable")
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
        document = status.collect(settings, config, apps)
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
    rows = [
        (
            app["app"],
            group["group"],
            f"{group['members']} ({group['state']})",
            group["lag"],
            group["max_unconfirmed"],
            "FULL" if group["full"] else "",
            app["pending"],
            app["dead_letters"],
        )
        for app in document["apps"]
        for group in app["groups"]
        or [{"group": "-", "members": 0, "state": "-", "lag": None, "max_unconfirmed": None, "full": False}]
    ]
    header = ("app", "group", "members", "lag", "max_unconfirmed", "", "pending", "dead letters")
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
        output.render_table(header, rows).rstrip("\n"),
        "",
        f"router workers ({router['consumer_group']}, {router['state']}): {len(workers)}; input records not "
        f"routed yet: {sum(router['input_lag'].values())}",
    ]
    if workers:
        worker_header = ("client", "host", "partitions", "config_version", "", "backlog")
        lines.append(output.render_table(worker_header, workers, indent="  ").rstrip("\n"))
    advice = [app["advice"] for app in document["apps"] if app.get("advice")]
    if advice:
        lines += ["", *(f"warning: {text}" for text in advice)]
    return "\n".join(lines) + "\n"
