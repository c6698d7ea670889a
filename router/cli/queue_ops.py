"""``subroute queue browse|ack``: see what a group has not confirmed, and settle it by filter (AMPS's queue view
and filtered ``sow_delete``; the work is in router/admin/browse.py and router/admin/settle.py)."""

from __future__ import annotations

import argparse
import base64
import sys
import time
from typing import Any

from subroute import expressions, wire
from subroute.admin.browse import Browse, Browsed, browse, unconfirmed_spans
from subroute.admin.settle import Settled, settle
from subroute.cli import exits, output
from subroute.client.settle_feed import SettleFeed
from subroute.client.settles import compile_filter
from subroute.config.model import AppConfig
from subroute.config.store import read_config
from subroute.ops.progress import Bar
from subroute.ops.settings import Settings, add_common_arguments


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    queue = subparsers.add_parser(
        "queue", help="a group's unconfirmed messages: browse them, settle them by filter"
    )
    actions = queue.add_subparsers(dest="queue_command", required=True, metavar="ACTION")

    view = actions.add_parser(
        "browse",
        help="what GROUP has not confirmed yet, oldest first, read without joining the group or moving an offset",
    )
    view.add_argument("app", metavar="APP")
    view.add_argument("group", metavar="GROUP")
    view.add_argument("--filter", metavar="EXPR", help="only messages matching EXPR (the app's dialect)")
    view.add_argument("--limit", type=int, default=20, help="list at most this many (default 20; 0: all)")
    output.add_output_argument(view)
    add_common_arguments(view)
    view.set_defaults(func=_browse)

    ack = actions.add_parser(
        "ack",
        help="settle GROUP's unconfirmed messages matching EXPR, so no member delivers them (AMPS sow_delete)",
    )
    ack.add_argument("app", metavar="APP")
    ack.add_argument("group", metavar="GROUP")
    what = ack.add_mutually_exclusive_group(required=True)
    what.add_argument("--filter", metavar="EXPR", help="the messages to settle (the app's dialect)")
    what.add_argument(
        "--clear", action="store_true", help="remove every settle entry of GROUP (settled messages come back)"
    )
    ack.add_argument(
        "--dead-letter",
        action="store_true",
        help="write each to the app's dead-letter topic (reason operator) before settling it",
    )
    ack.add_argument("--dry-run", action="store_true", help="count what would be settled, and write nothing")
    add_common_arguments(ack)
    ack.set_defaults(func=_ack)


def _target(settings: Settings, app: str, group: str) -> AppConfig | None:
    config = read_config(settings)
    found = config.apps.get(app)
    if found is None or (app, group) not in config.groups:
        what = f"app {app!r}" if found is None else f"group {group!r} of app {app!r}"
        print(f"subroute: {what} is not configured (topic prefix {settings.topic_prefix!r})", file=sys.stderr)
        return None
    return found


def _filter(app: AppConfig, text: str | None) -> expressions.Expression | None:
    """The compiled filter; raises ``expressions.ExpressionError`` (printed with its caret by the caller)."""
    return None if text is None else compile_filter(app, text)


def _refused(exc: expressions.ExpressionError, app: AppConfig) -> int:
    if isinstance(exc, expressions.UndeclaredPropertyError):
        exc = exc.with_fix(f"declare its type in app {app.name}'s properties ({exc.name}: {exc.wanted})")
    print(f"subroute: --filter: {exc}", file=sys.stderr)
    return exits.INVALID


# --- browse -------------------------------------------------------------------------------------------------------


def _browse(args: argparse.Namespace) -> int:
    settings = Settings.from_args(args)
    app = _target(settings, args.app, args.group)
    if app is None:
        return exits.INVALID
    try:
        where = _filter(app, args.filter)
    except expressions.ExpressionError as exc:
        return _refused(exc, app)
    feed = SettleFeed(settings, app, args.group, create=False)
    rules = feed.rules
    feed.close()
    spans = unconfirmed_spans(settings, args.app, args.group)
    total = sum(max(0, end - start) for start, end in spans.values())
    with Bar(f"browse {args.app}/{args.group}", unit="record", total=total) as bar:

        def progress(done: Browse) -> None:
            bar.update(done.read, matched=done.matched)

        found = browse(
            settings,
            app,
            args.group,
            spans=spans,
            where=where,
            limit=args.limit,
            rules=rules,
            progress=progress,
        )
    now = int(time.time() * 1000)
    shown = [_shown(record, now) for record in found.records]
    document = {
        "app": args.app,
        "group": args.group,
        "filter": args.filter,
        "unconfirmed": found.read - found.settled,
        "settled_by_operator": found.settled,
        "matched": found.matched,
        "listed": len(shown),
        "exact": found.complete,
        "records": shown,
    }

    def table() -> str:
        header = ("topic", "partition", "offset", "band", "age", "deliveries", "group", "headers", "value")
        rows = [
            (
                s["topic"],
                s["partition"],
                s["offset"],
                s["band"],
                _age(s["age_ms"]),
                s["deliveries"],
                s["message_group"] or "-",
                _brief(", ".join(f"{k}={v}" for k, v in _own_headers(s["headers"])), 40),
                _brief(_text_of(s["value"]), 30),
            )
            for s in shown
        ]
        floor = "" if found.complete else "≥"
        summary = (
            f"{args.app}/{args.group}: {floor}{document['unconfirmed']} unconfirmed"
            f"{f', {floor}{found.matched} matching' if args.filter else ''}, {len(shown)} listed (oldest first)"
            f"{f'; {found.settled} settled by an operator' if found.settled else ''}"
        )
        return f"{output.render_table(header, rows)}\n{summary}" if rows else summary

    output.emit(args.output, document, table)
    return exits.OK


def _shown(record: Browsed, now_ms: int) -> dict[str, Any]:
    return {
        "topic": record.topic,
        "partition": record.partition,
        "offset": record.offset,
        "band": record.band,
        "timestamp": record.timestamp_ms,
        "age_ms": max(0, now_ms - record.timestamp_ms),
        "deliveries": record.deliveries,
        "cancels": record.cancels,
        "message_group": record.message_group,
        "key": _bytes(record.key),
        "value": _bytes(record.value),
        "headers": [[name, _header_text(value)] for name, value in record.headers],
    }


def _bytes(raw: bytes | None) -> dict[str, Any]:
    if raw is None:
        return {"text": None}
    try:
        return {"text": raw.decode()}
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(raw).decode()}


def _header_text(raw: bytes | None) -> str | None:
    if raw is None:
        return None
    try:
        return raw.decode()
    except UnicodeDecodeError:
        return "base64:" + base64.b64encode(raw).decode()


def _own_headers(headers: list[list[str | None]]) -> list[tuple[str, str | None]]:
    """The producer's headers (the router's own ``subroute.*`` bookkeeping is in the JSON and YAML output)."""
    return [(str(k), v) for k, v in headers if not str(k).startswith(wire.HEADER_PREFIX)]


def _text_of(value: dict[str, Any]) -> str:
    if value.get("text") is not None:
        return repr(value["text"])
    return f"base64:{value['base64']}" if "base64" in value else "-"


def _brief(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def _age(ms: int) -> str:
    seconds = ms // 1000
    for unit, size in (("d", 86_400), ("h", 3_600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


# --- ack ----------------------------------------------------------------------------------------------------------


def _ack(args: argparse.Namespace) -> int:
    settings = Settings.from_args(args)
    app = _target(settings, args.app, args.group)
    if app is None:
        return exits.INVALID
    if args.clear and args.dead_letter:
        print("subroute: --dead-letter goes with --filter, not --clear", file=sys.stderr)
        return exits.INVALID
    try:
        where = _filter(app, args.filter)
    except expressions.ExpressionError as exc:
        return _refused(exc, app)
    with Bar(f"ack {args.app}/{args.group}", unit="record") as bar:

        def progress(done: Settled) -> None:
            bar.update(done.read, matched=done.count)

        done = settle(
            settings,
            app,
            args.group,
            where,
            dead_letter=args.dead_letter,
            dry_run=args.dry_run,
            progress=progress,
        )
    target = f"{args.app}/{args.group}"
    floor = "" if done.complete else "at least "
    for topic in sorted(done.by_topic):
        print(f"  {done.by_topic[topic]:>8} {topic}")
    removed = f"; {len(done.removed)} settle entr{'y' if len(done.removed) == 1 else 'ies'}"
    if args.dry_run:
        if args.clear:
            print(f"dry run: would remove {len(done.removed)} settle entries of {target}; nothing written")
        else:
            what = "dead-letter (reason operator) and settle" if args.dead_letter else "settle"
            print(
                f"dry run: would {what} {floor}{done.count} unconfirmed message(s) of {target}"
                f"{removed} to remove; nothing written"
            )
        return exits.OK
    if args.clear:
        print(f"removed {len(done.removed)} settle entries of {target}")
        return exits.OK
    what = "dead-lettered (reason operator) and settled" if args.dead_letter else "settled"
    entry = f" (entry {done.entry.id} on {wire.settle_topic(settings.topic_prefix)})" if done.entry else ""
    print(f"{what} {floor}{done.count} unconfirmed message(s) of {target}{entry}{removed} removed")
    if done.already:
        print(f"  {done.already} were settled already by earlier entries")
    return exits.OK
