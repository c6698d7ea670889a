"""``subroute config``: apply, get, diff and delete the configuration on the config topic.

Exit codes: 0 done (``diff``: no differences), 1 ``diff`` found differences or a Kafka operation failed,
2 the input is invalid (nothing was written).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from router.config.codec import ConfigValue, Headers, app_key, encode, group_key, key_of
from router.config.diff import DELETED, Change, diff, kept, render
from router.config.model import AppConfig, Config
from router.config.store import config_topic_spec, read_config
from router.config.validation import ConfigError, check_limits, validate_state
from router.config.yaml import ParsedConfig, config_to_document, dump_yaml, load_yaml_file
from router.kafka import io as kafka_io
from router.kafka.topics import app_topics, largest_input
from router.ops.settings import Settings, SettingsError, add_common_arguments
from router.topic_patterns import input_matches

EXIT_OK = 0
EXIT_DIFFERENT = 1
EXIT_FAILED = 1
EXIT_INVALID = 2


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    config = subparsers.add_parser(
        "config",
        help="apply, get, diff or delete the routing configuration",
        description="The routing configuration lives on the compacted config topic; edit it as YAML.",
    )
    commands = config.add_subparsers(dest="config_command", required=True, metavar="COMMAND")

    apply = commands.add_parser("apply", help="validate a YAML file, show the diff, write what changed")
    apply.add_argument("-f", "--file", required=True, help="the subscriptions YAML file")
    apply.add_argument(
        "--prune", action="store_true", help="also delete apps and groups the file does not name"
    )
    apply.add_argument("--dry-run", action="store_true", help="validate and show the diff, write nothing")
    apply.set_defaults(func=apply_command)

    get = commands.add_parser("get", help="print the configuration in force")
    get.add_argument("-o", "--output", choices=("yaml", "json"), default="yaml")
    get.set_defaults(func=get_command)

    diff_parser = commands.add_parser(
        "diff", help="show what 'apply --prune -f FILE' would change (exit 1 when something would)"
    )
    diff_parser.add_argument("-f", "--file", required=True, help="the subscriptions YAML file")
    diff_parser.set_defaults(func=diff_command)

    delete = commands.add_parser("delete", help="delete an app (with its groups) or one group")
    targets = delete.add_subparsers(dest="delete_target", required=True, metavar="app|group")
    delete_app = targets.add_parser("app", help="delete an app and all its groups")
    delete_app.add_argument("app")
    delete_app.set_defaults(func=delete_app_command)
    delete_group = targets.add_parser("group", help="delete one group of an app")
    delete_group.add_argument("app")
    delete_group.add_argument("group")
    delete_group.set_defaults(func=delete_group_command)

    for parser in (apply, get, diff_parser, delete_app, delete_group):
        add_common_arguments(parser)


# --- commands -----------------------------------------------------------------------------------------------


def apply_command(args: argparse.Namespace) -> int:
    desired = _load_desired(args.file)
    if desired is None:
        return EXIT_INVALID
    return _guarded(lambda settings: _apply(settings, desired, prune=args.prune, dry_run=args.dry_run), args)


def diff_command(args: argparse.Namespace) -> int:
    desired = _load_desired(args.file)
    if desired is None:
        return EXIT_INVALID

    def run(settings: Settings) -> int:
        changes = diff(_values(read_config(settings)), desired, prune=True)
        if not changes:
            print("no differences")
            return EXIT_OK
        print(render(changes))
        return EXIT_DIFFERENT

    return _guarded(run, args)


def get_command(args: argparse.Namespace) -> int:
    def run(settings: Settings) -> int:
        config = read_config(settings)
        document = config_to_document(config)  # configuration only: never settings or client properties
        if args.output == "json":
            print(json.dumps(document, indent=2))
        else:
            print(f"# config version {config.version} from {settings.config_topic}")
            print(dump_yaml(document), end="")
        return EXIT_OK

    return _guarded(run, args)


def delete_app_command(args: argparse.Namespace) -> int:
    def run(settings: Settings) -> int:
        config = read_config(settings)
        keys = [group_key(app, group) for (app, group) in sorted(config.groups) if app == args.app]
        if args.app not in config.apps and not keys:
            print(f"error: there is no app {args.app!r} in {settings.config_topic}", file=sys.stderr)
            return EXIT_FAILED
        keys.append(app_key(args.app))  # groups first: a reader never sees groups without their app
        _write_tombstones(settings, keys)
        print(
            f"deleted app {args.app} and {len(keys) - 1} group(s); its topics are kept "
            "(delete them with your Kafka tools once consumers are done)"
        )
        return EXIT_OK

    return _guarded(run, args)


def delete_group_command(args: argparse.Namespace) -> int:
    def run(settings: Settings) -> int:
        config = read_config(settings)
        if (args.app, args.group) not in config.groups:
            print(f"error: app {args.app!r} has no group {args.group!r}", file=sys.stderr)
            return EXIT_FAILED
        _write_tombstones(settings, [group_key(args.app, args.group)])
        print(f"deleted group {args.group} of app {args.app}; its topic is kept")
        return EXIT_OK

    return _guarded(run, args)


# --- helpers ------------------------------------------------------------------------------------------------


def _guarded(run: Callable[[Settings], int], args: argparse.Namespace) -> int:
    """Settings from the flags, then ``run(settings)``; Kafka trouble becomes a message and exit 1."""
    try:
        settings = Settings.from_args(args)
    except SettingsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_INVALID
    try:
        return run(settings)
    except (kafka_io.KafkaException, TimeoutError, RuntimeError) as exc:
        print(f"error: Kafka at {settings.bootstrap_servers}: {exc}", file=sys.stderr)
        return EXIT_FAILED


def print_errors(errors: Iterable[ConfigError]) -> None:
    listed = list(errors)
    for error in listed:
        print(f"error: {error}", file=sys.stderr)
    print(f"{len(listed)} error(s): nothing was written; fix them and run again", file=sys.stderr)


def _load_desired(path: str) -> dict[str, ConfigValue] | None:
    """The file's desired state, or None after printing every shape and validation error."""
    parsed: ParsedConfig = load_yaml_file(path)
    errors = parsed.errors + validate_state(parsed.values.values())
    if errors:
        print_errors(errors)
        return None
    return parsed.values


def _values(config: Config) -> dict[str, ConfigValue]:
    values: dict[str, ConfigValue] = {key_of(a): a for a in config.apps.values()}
    values.update({key_of(g): g for g in config.groups.values()})
    return values


def _apply(settings: Settings, desired: Mapping[str, ConfigValue], *, prune: bool, dry_run: bool) -> int:
    current = _values(read_config(settings))
    # The file was validated alone; what stays in force is the file plus the records it keeps (without --prune).
    merged = desired if prune else {**current, **desired}
    limit_errors = check_limits(merged.values())
    if limit_errors:
        for error in limit_errors:
            print(f"error: {error}", file=sys.stderr)
        print(f"{len(limit_errors)} error(s): nothing was written", file=sys.stderr)
        return EXIT_INVALID
    changes = diff(current, desired, prune=prune)
    print(render(changes) if changes else "no changes")
    untouched = kept(current, desired)
    if untouched and not prune:
        print(f"kept {len(untouched)} record(s) the file does not name (use --prune to delete them)")
    if dry_run:
        print("dry run: nothing written")
        return EXIT_OK
    admin = kafka_io.admin_client(settings)
    created = kafka_io.ensure_topics(admin, _topics_for(settings, admin, desired))
    for topic in sorted(created):
        print(f"created topic {topic}")
    if changes:
        _write(settings, changes)
        print(f"wrote {len(changes)} record(s) to {settings.config_topic}")
    return EXIT_OK


def _topics_for(
    settings: Settings, admin: Any, desired: Mapping[str, ConfigValue]
) -> list[kafka_io.TopicSpec]:
    """The config topic and every topic the desired config needs (``kafka.topics.app_topics``, as the worker)."""
    existing = kafka_io.existing_topics(admin)
    apps = {v.name: v for v in desired.values() if isinstance(v, AppConfig)}
    groups = {(g.app, g.name): g for g in desired.values() if not isinstance(g, AppConfig)}
    config = Config(apps=apps, groups=groups)

    def partitions_of(inputs: Sequence[str]) -> int:
        return largest_input(inputs, existing, input_matches)

    return [
        config_topic_spec(settings),
        *app_topics(config, settings.topic_prefix, partitions_of, settings.parked_retention_ms),
    ]


def _write(settings: Settings, changes: list[Change]) -> None:
    records: list[tuple[str, bytes | None, Headers]] = []
    for change in changes:
        if change.kind == DELETED or change.new is None:
            records.append((change.key, None, []))
        else:
            records.append(encode(change.new))
    _produce(settings, records)


def _write_tombstones(settings: Settings, keys: list[str]) -> None:
    _produce(settings, [(key, None, []) for key in keys])


def _produce(settings: Settings, records: list[tuple[str, bytes | None, Headers]]) -> None:
    """Write in order with an idempotent producer and wait for every acknowledgement."""
    kafka_io.ensure_topics(kafka_io.admin_client(settings), [config_topic_spec(settings)])
    failures: list[str] = []

    def delivered(error: Any, message: Any) -> None:
        if error is not None:
            failures.append(f"{message.key().decode()}: {error}")

    producer = kafka_io.producer(settings, **{"linger.ms": 0})
    for key, value, headers in records:
        producer.produce(
            settings.config_topic, key=key.encode(), value=value, headers=headers, on_delivery=delivered
        )
    remaining = producer.flush(30)
    if remaining:
        raise TimeoutError(
            f"{remaining} config record(s) not acknowledged within 30 s; run the command again"
        )
    if failures:
        raise RuntimeError("config records not written: " + "; ".join(failures))
