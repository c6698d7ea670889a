"""``subroute dlq list|show|redrive`` and ``subroute publish``: the dead-letter topic and DefaultPublishTarget
(the work is in router/admin/redrive.py and router/client/publisher.py)."""

from __future__ import annotations

import argparse
import base64
import sys
from typing import Any

from subroute import wire
from subroute.admin.redrive import DeadLetter, DeadLetterTopic, RedriveProgress, redrive
from subroute.cli import exits, output
from subroute.client import QueueError, publish
from subroute.config.model import Config
from subroute.config.store import read_config
from subroute.ops.progress import Bar
from subroute.ops.settings import Settings, add_common_arguments, parse_key_values


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    dlq = subparsers.add_parser("dlq", help="inspect an app's dead-letter topic and send messages back")
    actions = dlq.add_subparsers(dest="dlq_command", required=True, metavar="ACTION")

    listing = actions.add_parser("list", help="dead letters of APP counted by reason")
    listing.add_argument("app", metavar="APP")
    output.add_output_argument(listing)
    add_common_arguments(listing)
    listing.set_defaults(func=_list)

    show = actions.add_parser(
        "show",
        help="dead letters of APP: a table, or every field (key, value, headers' history) with -o json|yaml",
    )
    show.add_argument("app", metavar="APP")
    show.add_argument(
        "--reason", help="only this reason (max-cancels, max-deliveries, expired, rejected, ...)"
    )
    show.add_argument("--limit", type=int, default=20, help="at most this many (default 20; 0: all)")
    output.add_output_argument(show)
    add_common_arguments(show)
    show.set_defaults(func=_show)

    redrive = actions.add_parser(
        "redrive", help="send dead letters back to their group topic (delivery count reset), once each"
    )
    redrive.add_argument("app", metavar="APP")
    redrive.add_argument("--reason", help="only dead letters with this reason")
    redrive.add_argument(
        "--dry-run", action="store_true", help="count what would be sent where, and write nothing"
    )
    add_common_arguments(redrive)
    redrive.set_defaults(func=_redrive)

    pub = subparsers.add_parser("publish", help="write a message to an app's default_publish topic")
    pub.add_argument("--app", required=True, metavar="APP")
    pub.add_argument("--header", action="append", metavar="K=V", help="message header, repeatable")
    pub.add_argument("--key", help="record key")
    pub.add_argument("value", metavar="VALUE", help="the message value (UTF-8 text)")
    add_common_arguments(pub)
    pub.set_defaults(func=_publish)


def _configured(settings: Settings, app: str) -> Config | None:
    config = read_config(settings)
    if app not in config.apps:
        print(
            f"subroute: app {app!r} is not configured (topic prefix {settings.topic_prefix!r})",
            file=sys.stderr,
        )
        return None
    return config


# --- commands -----------------------------------------------------------------------------------------------------


def _list(args: argparse.Namespace) -> int:
    settings = Settings.from_args(args)
    if _configured(settings, args.app) is None:
        return exits.INVALID
    by_reason: dict[str, list[int]] = {}
    with DeadLetterTopic(settings, args.app) as dead_letters:
        for letter in dead_letters.letters(from_start=True):
            counts = by_reason.setdefault(letter.reason, [0, 0])
            counts[0] += 1
            counts[1] += dead_letters.state.redriven(letter)
    total = sum(c[0] for c in by_reason.values())
    redriven_total = sum(c[1] for c in by_reason.values())
    reasons = {
        r: {"dead_letters": t, "redriven": d, "waiting": t - d} for r, (t, d) in sorted(by_reason.items())
    }
    total_counts = {"dead_letters": total, "redriven": redriven_total, "waiting": total - redriven_total}
    document = {"app": args.app, "reasons": reasons, "total": total_counts}

    def table() -> str:
        rows = [(r, c["dead_letters"], c["redriven"], c["waiting"]) for r, c in [*reasons.items()]]
        rows.append(("total", total, redriven_total, total - redriven_total))
        return output.render_table(("reason", "dead letters", "redriven", "waiting"), rows)

    output.emit(args.output, document, table)
    return exits.OK


def _text(raw: bytes | None) -> dict[str, Any]:
    if raw is None:
        return {"text": None}
    try:
        return {"text": raw.decode()}
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(raw).decode()}


def _show(args: argparse.Namespace) -> int:
    settings = Settings.from_args(args)
    if _configured(settings, args.app) is None:
        return exits.INVALID
    shown: list[dict[str, Any]] = []
    with DeadLetterTopic(settings, args.app) as dead_letters:
        for letter in dead_letters.letters(from_start=True):
            if args.reason and letter.reason != args.reason:
                continue
            if args.limit and len(shown) >= args.limit:
                break
            shown.append(_shown(letter, dead_letters.state.redriven(letter)))

    def table() -> str:
        header = ("partition", "offset", "reason", "group", "deliveries", "redriven", "value")
        rows = [
            (
                s["partition"],
                s["offset"],
                s["reason"],
                s["group"],
                s["deliveries"],
                s["redriven"],
                _brief(s["value"]),
            )
            for s in shown
        ]
        return output.render_table(header, rows)

    output.emit(args.output, {"app": args.app, "dead_letters": shown}, table)
    return exits.OK


def _brief(value: dict[str, Any], width: int = 40) -> str:
    text = value.get("text")
    shown = f"base64:{value['base64']}" if text is None and "base64" in value else repr(text) if text else "-"
    return shown if len(shown) <= width else shown[: width - 3] + "..."


def _shown(letter: DeadLetter, redriven: bool) -> dict[str, Any]:
    return {
        "partition": letter.partition,
        "offset": letter.offset,
        "reason": letter.reason,
        "group": wire.header_value(letter.headers, wire.GROUP),
        "source": wire.header_value(letter.headers, wire.SOURCE),
        "deliveries": wire.int_header(letter.headers, wire.DELIVERIES),
        "cancels": wire.int_header(letter.headers, wire.CANCELS),
        "timestamp": letter.timestamp,
        "redriven": redriven,
        "key": _text(letter.key),
        "value": _text(letter.value),
        "history": wire.history_of(letter.headers),
    }


def _redrive(args: argparse.Namespace) -> int:
    settings = Settings.from_args(args)
    config = _configured(settings, args.app)
    if config is None:
        return exits.INVALID
    groups = [g.name for g in config.groups_of(args.app)]
    last = RedriveProgress()
    bar = Bar(f"redrive {args.app}", unit="letter")  # a terminal gets a bar, a pipe a line per batch

    def progress(done: RedriveProgress) -> None:
        nonlocal last
        last = done
        if bar.enabled:
            bar.update(done.read, redriven=done.redriven, skipped=done.skipped)
        else:
            print(f"redrive {args.app}: {done}", file=sys.stderr, flush=True)

    try:
        with bar:
            sent = redrive(settings, args.app, groups, args.reason, progress=progress, dry_run=args.dry_run)
    except QueueError as exc:  # Kafka refused a batch: the batches before it are done, run it again
        print(f"subroute: {exc}", file=sys.stderr)
        return exits.KAFKA
    print(f"redrive {args.app}: done: {last}", file=sys.stderr, flush=True)
    for target in sorted(sent):
        print(f"  {sent[target]:>8} -> {target}")
    what = f" with reason {args.reason}" if args.reason else ""
    if args.dry_run:
        print(
            f"dry run: would redrive {sum(sent.values())} dead letter(s){what} of {args.app}; nothing written"
        )
    else:
        print(f"redriven {sum(sent.values())} dead letter(s){what} of {args.app}")
    return exits.OK


def _publish(args: argparse.Namespace) -> int:
    settings = Settings.from_args(args)
    headers = parse_key_values(args.header, "--header")
    config = _configured(settings, args.app)
    if config is None:
        return exits.INVALID
    try:
        topic, partition, offset = publish(
            settings,
            args.app,
            args.value.encode(),
            headers,
            None if args.key is None else args.key.encode(),
            app_config=config.apps[args.app],
        )
    except QueueError as exc:
        print(f"subroute: {exc}", file=sys.stderr)
        return exits.INVALID
    print(f"published to {topic} partition {partition} offset {offset}")
    return exits.OK
