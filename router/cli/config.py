"""``subroute config``: apply, get, diff and delete the configuration on the config topic.

Exit codes (router/cli/exits.py): 0 done (``diff``: no differences), 1 ``diff`` found differences, 2 the input is
invalid (nothing was written), 3 Kafka failed.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from subroute import wire
from subroute.admin import drain, lint_sample
from subroute.cli import exits, output
from subroute.config import lint
from subroute.config.codec import ConfigValue, app_key, encode, group_key
from subroute.config.diff import DELETED, Change, diff, kept, render
from subroute.config.model import AppConfig, Config
from subroute.config.store import (
    ConfigState,
    ConfigVersionRefused,
    config_topic_spec,
    no_apps_warning,
    read_config,
    read_state,
)
from subroute.config.topics import TopicPolicy, app_topics, sized_by, topic_resources
from subroute.config.validation import (
    ConfigError,
    check_against_writer_schema,
    subscription_count,
    validate_state,
)
from subroute.config.writer import ConcurrentChange, ConfigRecord, ConfigWriter
from subroute.config.yaml import (
    STDIN,
    ParsedConfig,
    config_to_document,
    dump_yaml,
    dump_yaml_documents,
    load_yaml_source,
)
from subroute.kafka import clients
from subroute.ops.settings import Settings, SettingsError, add_common_arguments

EXIT_OK, EXIT_DIFFERENT, EXIT_INVALID, EXIT_FAILED = exits.OK, exits.DIFFERENT, exits.INVALID, exits.KAFKA
FILE_HELP = (
    "the subscriptions YAML: a file, a directory of YAML files (one configuration together, as if one file "
    "listed all their apps), or - for standard input"
)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    config = subparsers.add_parser(
        "config",
        help="apply, get, diff or delete the routing configuration",
        description="The routing configuration lives on the compacted config topic; edit it as YAML.",
    )
    commands = config.add_subparsers(dest="config_command", required=True, metavar="COMMAND")

    apply = commands.add_parser("apply", help="validate a YAML file, show the diff, write what changed")
    apply.add_argument(
        "-f",
        "--file",
        required=True,
        metavar="FILE|DIR|-",
        help=FILE_HELP,
    )
    apply.add_argument(
        "--prune", action="store_true", help="also delete apps and groups the file does not name"
    )
    apply.add_argument("--dry-run", action="store_true", help="validate and show the diff, write nothing")
    apply.set_defaults(func=apply_command)

    check = commands.add_parser(
        "validate",
        help="validate a YAML file alone, without Kafka (for pull-request CI)",
        description="Every check `config apply --prune -f FILE` makes on the file, with carets, and nothing "
        "that needs the broker: no connection is made. Without --prune, apply also checks the file together "
        "with the records it keeps, which only the config topic knows.",
    )
    check.add_argument(
        "-f",
        "--file",
        required=True,
        metavar="FILE|DIR|-",
        help=FILE_HELP,
    )
    check.add_argument(
        "--topic-prefix",
        default=None,
        help="the prefix the config will be applied under (env SUBROUTE_TOPIC_PREFIX; default subroute): "
        "inputs may not select its own topics",
    )
    check.add_argument(
        "--schema",
        action="append",
        metavar="[APP=]FILE",
        help="check APP's body paths and types against this Avro writer schema file (.avsc), as apply checks an "
        "app's own schema: (for apps in Confluent's wire format, whose schema is in the registry); without "
        "APP=, every such app; repeatable",
    )
    check.set_defaults(func=validate_command)

    lint_parser = commands.add_parser(
        "lint",
        help="find subscriptions that can never be chosen, overlap, never or always match, or leave messages "
        "waiting forever (offline)",
        description="Static analysis of the file's subscriptions, without Kafka: shadowed subscriptions, "
        "equal-priority overlaps between groups, never-true and always-true expressions, messages that pass an "
        "app's filter but match no subscription, group_by message groups split across groups. What it cannot "
        "decide (LIKE, arithmetic) it lists as unknown. Exit 0: no findings; 1: findings; 2: the file is "
        "refused. --sample-topic also counts them on records of a topic (that needs the broker).",
    )
    lint_parser.add_argument("-f", "--file", required=True, metavar="FILE|DIR|-", help=FILE_HELP)
    output.add_output_argument(lint_parser)
    lint_parser.add_argument(
        "--max-findings",
        type=int,
        default=lint.DEFAULT_MAX_FINDINGS,
        metavar="N",
        help="findings of one kind listed per app (default %(default)s)",
    )
    lint_parser.add_argument(
        "--sample-topic",
        metavar="TOPIC",
        help="also count the findings on records of TOPIC, read from its beginning",
    )
    lint_parser.add_argument(
        "--max-read",
        type=int,
        default=10_000,
        metavar="N",
        help="records read from --sample-topic at most (default %(default)s)",
    )
    add_common_arguments(lint_parser)
    lint_parser.set_defaults(func=lint_command)

    topics = commands.add_parser(
        "topics",
        help="list the topics a YAML file needs, without Kafka (for clusters where clients may not create them)",
        description="The config topic and every group, band, pending and dead-letter topic, as `config apply` "
        "and the workers would create them (--replication-factor, --parked-retention-ms and "
        "--group-retention-ms apply). An app without `partitions:` is sized like its largest input, which "
        "only the broker knows: give --input-partitions.",
    )
    topics.add_argument(
        "-f",
        "--file",
        required=True,
        metavar="FILE|DIR|-",
        help=FILE_HELP,
    )
    topics.add_argument(
        "--input-partitions",
        type=int,
        default=1,
        metavar="N",
        help="partitions of apps without `partitions:`",
    )
    output.add_output_argument(topics, formats=(*output.FORMATS, "strimzi"))
    topics.add_argument(
        "--strimzi-cluster",
        default="my-cluster",
        metavar="NAME",
        help="the strimzi.io/cluster label (-o strimzi)",
    )
    add_common_arguments(topics)
    topics.set_defaults(func=topics_command)

    get = commands.add_parser(
        "get",
        help="print the configuration in force",
        description="-o yaml (default) prints the file `config apply -f` takes back; -o json the version, the "
        "config topic and the same configuration; -o table one line per group.",
    )
    output.add_output_argument(get, default=output.YAML)
    get.set_defaults(func=get_command)

    diff_parser = commands.add_parser(
        "diff",
        help="show what 'apply -f FILE' (with the same flags) would change (exit 1 when something would)",
        description="Prints what `config apply` with the same file and flags would print, and writes nothing: "
        "each record added (+), changed (~, with the lines of its YAML that differ) or, with --prune, deleted (-). "
        "Exit 0: no differences; 1: apply would change something; 2: apply would refuse the file.",
    )
    diff_parser.add_argument(
        "-f",
        "--file",
        required=True,
        metavar="FILE|DIR|-",
        help=FILE_HELP,
    )
    diff_parser.add_argument(
        "--prune",
        action="store_true",
        help="as apply --prune: also the apps and groups the file does not name",
    )
    diff_parser.set_defaults(func=diff_command)

    delete = commands.add_parser("delete", help="delete an app (with its groups) or one group")
    targets = delete.add_subparsers(dest="delete_target", required=True, metavar="app|group")
    delete_app = targets.add_parser("app", help="delete an app and all its groups")
    delete_app.add_argument("app")
    delete_app.set_defaults(func=delete_app_command)
    delete_group = targets.add_parser(
        "group",
        help="delete one group of an app",
        description="Deletes the group from the configuration. With --drain, its unconsumed messages (group "
        "topic and band topics, from the group's committed offsets) then go back through the app's pending "
        "topic (subroute.pending-reason: replaced) for the router to route under the current configuration; "
        "the copies and the commit of the group's offsets are one Kafka transaction per pass. --drain needs "
        "the group's consumers stopped. Run it again on a deleted group to finish a drain that failed.",
    )
    delete_group.add_argument("app")
    delete_group.add_argument("group")
    delete_group.add_argument(
        "--drain",
        action="store_true",
        help="re-route the group's unconsumed messages through the app's pending topic (opt-in)",
    )
    delete_group.add_argument(
        "--drain-settle-seconds",
        type=float,
        default=3.0,
        metavar="S",
        help="time between drain passes; a drain ends with a pass that finds nothing (workers that had not "
        "read the deletion yet may route a few more records to the group meanwhile)",
    )
    delete_group.set_defaults(func=delete_group_command)
    for parser in (delete_app, delete_group):
        parser.add_argument(
            "--dry-run", action="store_true", help="show what would be deleted, write nothing"
        )

    for parser in (apply, get, diff_parser, delete_app, delete_group):
        add_common_arguments(parser)


# --- commands -----------------------------------------------------------------------------------------------


def apply_command(args: argparse.Namespace) -> int:
    desired = _load_desired(args.file)
    if desired is None:
        return EXIT_INVALID
    return _guarded(lambda settings: _apply(settings, desired, prune=args.prune, dry_run=args.dry_run), args)


def validate_command(args: argparse.Namespace) -> int:
    try:
        prefix = Settings.from_args(args).topic_prefix  # reads flags and environment only
    except SettingsError as exc:
        print(f"subroute: {exc}", file=sys.stderr)
        return EXIT_INVALID
    parsed: ParsedConfig = load_yaml_source(args.file)
    name = "<stdin>" if args.file == STDIN else args.file
    errors = parsed.errors or validate_state(parsed.values.values(), prefix=prefix)
    if not errors:
        errors = _against_schemas(parsed, args.schema or [])
    if errors:
        for error in errors:
            print(f"subroute: {error}", file=sys.stderr)
        print(f"subroute: {len(errors)} error(s) in {name}", file=sys.stderr)
        return EXIT_INVALID
    values = list(parsed.values.values())
    apps = sum(1 for v in values if isinstance(v, AppConfig))
    subscriptions = sum(subscription_count(values).values())
    print(f"{name}: valid ({apps} app(s), {len(values) - apps} group(s), {subscriptions} expression(s))")
    return EXIT_OK


def _against_schemas(parsed: ParsedConfig, given: list[str]) -> list[ConfigError]:
    """``--schema [APP=]FILE``: the named app (or every app in Confluent's wire format) against the file."""
    apps = {v.name: v for v in parsed.values.values() if isinstance(v, AppConfig)}
    errors: list[ConfigError] = []
    for item in given:
        name, _, file = item.rpartition("=")
        try:
            text = Path(file).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            errors.append(ConfigError(f"--schema {item}", f"cannot read the schema file: {exc}"))
            continue
        if name and name not in apps:
            errors.append(ConfigError(f"--schema {item}", f"no app {name!r} in the file"))
            continue
        targets = (
            [apps[name]] if name else [a for a in apps.values() if a.format == "avro" and a.schema is None]
        )
        for app in targets:
            errors.extend(check_against_writer_schema(app, text, file))
    return errors


def lint_command(args: argparse.Namespace) -> int:
    desired = _load_desired(args.file)
    if desired is None:
        return EXIT_INVALID
    if args.max_findings < 1 or args.max_read < 1:
        print("subroute: --max-findings and --max-read must be at least 1", file=sys.stderr)
        return EXIT_INVALID
    config = _config_of(desired)
    report = lint.lint(config, args.max_findings)
    counts: lint_sample.SampleCounts | None = None
    if args.sample_topic:
        try:
            settings = Settings.from_args(args)
            records = lint_sample.read_headers(settings, args.sample_topic, args.max_read)
            counts = lint_sample.count(config, report.findings, args.sample_topic, records)
        except SettingsError as exc:
            print(f"subroute: {exc}", file=sys.stderr)
            return EXIT_INVALID
        except (clients.KafkaException, TimeoutError) as exc:
            print(f"subroute: Kafka: {exc}", file=sys.stderr)
            return EXIT_FAILED
    findings = []
    for i, finding in enumerate(report.findings):
        doc = finding.document()
        if counts is not None and finding.kind != lint.GROUP_SPLIT:
            doc["records"] = counts.findings[i]
        findings.append(doc)
    document: dict[str, Any] = {
        "expressions": report.expressions,
        "findings": findings,
        "unknown": [u.document() for u in report.unknowns],
    }
    if counts is not None:
        document["sample"] = counts.document(config)

    def table() -> str:
        lines = []
        for doc in findings:
            counted = f" [{doc['records']} record(s) of the sample]" if "records" in doc else ""
            lines.append(f"{doc['kind']}: {doc['where']}: {doc['message']}{counted}")
            for sample in doc["samples"]:
                shown = ", ".join(
                    f"{k} absent" if v is None else f"{k}={output.to_json(v)}" for k, v in sample.items()
                )
                lines.append(f"  e.g. {shown or 'no headers'}")
        for u in report.unknowns:
            lines.append(f"unknown: {u.where}: {u.reason}")
        if counts is not None:
            sample = document["sample"]
            lines.append(f"sample: {sample['read']} record(s) of {sample['topic']}")
            for app, c in sample["apps"].items():
                never = ", ".join(c["never_matched"]) or "none"
                lines.append(
                    f"  {app}: {c['passed_filter']} passed the filter, {c['wait_forever']} would wait forever; "
                    f"never matched: {never}"
                )
        lines.append(
            f"{len(findings)} finding(s), {len(report.unknowns)} unknown, {report.expressions} expression(s)"
        )
        return "\n".join(lines)

    output.emit(args.output, document, table)
    return exits.DIFFERENT if findings else EXIT_OK


def topics_command(args: argparse.Namespace) -> int:
    desired = _load_desired(args.file)
    if desired is None:
        return EXIT_INVALID
    try:
        settings = Settings.from_args(args)  # flags and environment only: no connection is made
    except SettingsError as exc:
        print(f"subroute: {exc}", file=sys.stderr)
        return EXIT_INVALID
    if args.input_partitions < 1:
        print("subroute: --input-partitions must be at least 1", file=sys.stderr)
        return EXIT_INVALID
    config = _config_of(desired)
    policy = TopicPolicy.of(settings)
    specs = [
        config_topic_spec(settings),
        *app_topics(config, settings.topic_prefix, lambda _: args.input_partitions, policy),
    ]
    if args.output == "strimzi":
        print(dump_yaml_documents(topic_resources(specs, args.strimzi_cluster)), end="")
        return EXIT_OK
    rows = [
        {
            "name": s.name,
            "partitions": s.partitions,
            "replication_factor": s.replication_factor,
            "config": dict(s.config),
        }
        for s in specs
    ]

    def table() -> str:
        lines = []
        for spec in specs:
            settings_text = " ".join(f"{k}={v}" for k, v in sorted(spec.config.items()))
            lines.append(f"{spec.name} {spec.partitions} {settings_text}".rstrip())
        return "\n".join(lines)

    output.emit(args.output, rows, table)
    return EXIT_OK


def diff_command(args: argparse.Namespace) -> int:
    desired = _load_desired(args.file)
    if desired is None:
        return EXIT_INVALID

    def run(settings: Settings) -> int:
        plan = _plan(settings, read_state(settings), desired, prune=args.prune)
        if plan is None:
            return EXIT_INVALID
        return EXIT_DIFFERENT if plan.records else EXIT_OK

    return _guarded(run, args)


def get_command(args: argparse.Namespace) -> int:
    def run(settings: Settings) -> int:
        config = read_config(settings)
        document = config_to_document(config)  # configuration only: never settings or client properties
        if args.output == output.YAML:  # what `config apply -f` takes back
            print(f"# config version {config.version} from {settings.config_topic}")
            print(dump_yaml(document), end="")
        else:
            whole = {"version": config.version, "config_topic": settings.config_topic, "config": document}
            output.emit(args.output, whole, lambda: _config_table(config))
        # Nothing to get is not success: a script reading a mistyped prefix must not take it for a config.
        warning = no_apps_warning(settings, config)
        if warning is not None:
            print(f"subroute: {warning}", file=sys.stderr)
            return EXIT_INVALID
        return EXIT_OK

    return _guarded(run, args)


def delete_app_command(args: argparse.Namespace) -> int:
    def keys_of(settings: Settings, values: Mapping[str, ConfigValue]) -> list[str] | None:
        prefix = group_key(args.app, "")
        keys = sorted(k for k in values if k.startswith(prefix))
        if app_key(args.app) not in values and not keys:
            print(f"subroute: there is no app {args.app!r} in {settings.config_topic}", file=sys.stderr)
            return None
        return [*keys, app_key(args.app)]  # one change: readers see the app and its groups go together

    def run(settings: Settings) -> int:
        if args.dry_run:  # reads only: must not take the writer id (that would fence an apply running now)
            keys = keys_of(settings, read_state(settings).values())
            if keys is None:
                return EXIT_INVALID
            for key in keys:
                print(f"- {key}")
            print(f"dry run: would delete app {args.app} and {len(keys) - 1} group(s); nothing written")
            return EXIT_OK
        with ConfigWriter(settings) as writer:
            keys = keys_of(settings, writer.read().values())
            if keys is None:
                return EXIT_INVALID
            writer.write([(key, None, []) for key in keys])
        print(
            f"deleted app {args.app} and {len(keys) - 1} group(s); its topics are kept "
            "(delete them with your Kafka tools once consumers are done)"
        )
        return EXIT_OK

    return _guarded(run, args)


def delete_group_command(args: argparse.Namespace) -> int:
    key = group_key(args.app, args.group)

    def run(settings: Settings) -> int:
        if args.dry_run:
            values = read_state(settings).values()
            if key not in values and not args.drain:
                print(f"subroute: app {args.app!r} has no group {args.group!r}", file=sys.stderr)
                return EXIT_INVALID
            if args.drain:
                refused = _drain_refusal(settings, args.app, args.group, values)
                if refused is not None:
                    print(f"subroute: {refused}", file=sys.stderr)
                    return EXIT_INVALID
            if key in values:
                print(f"- {key}")
            drained = ""
            if args.drain:
                counts = drain.count_drainable(settings, args.app, args.group)
                for topic, count in sorted(counts.items()):
                    print(f"would drain {count} record(s) of {topic}")
                pending = wire.pending_topic(settings.topic_prefix, args.app)
                drained = f" and drain its {sum(counts.values())} unconsumed record(s) to {pending}"
            print(f"dry run: would delete group {args.group} of app {args.app}{drained}; nothing written")
            return EXIT_OK
        with ConfigWriter(settings) as writer:
            values = writer.read().values()
            present = key in values
            if not present and not args.drain:
                print(f"subroute: app {args.app!r} has no group {args.group!r}", file=sys.stderr)
                return EXIT_INVALID
            if args.drain:
                refused = _drain_refusal(settings, args.app, args.group, values)
                if refused is not None:
                    print(f"subroute: {refused}", file=sys.stderr)
                    return EXIT_INVALID
            if present:
                # First out of the configuration, so the router stops routing to the group, then drained.
                writer.write([(key, None, [])])
                print(f"deleted group {args.group} of app {args.app}; its topic is kept")
            else:
                print(f"group {args.group} of app {args.app} is already deleted; draining it")
        if not args.drain:
            return EXIT_OK
        result = drain.drain_group(settings, args.app, args.group, settle=args.drain_settle_seconds)
        for topic, count in sorted(result.republished.items()):
            print(f"drained {count} record(s) of {topic}")
        pending = wire.pending_topic(settings.topic_prefix, args.app)
        print(f"drained {result.total} record(s) to {pending} in {result.passes} pass(es)")
        return EXIT_OK

    return _guarded(run, args)


def _drain_refusal(settings: Settings, app: str, group: str, values: Mapping[str, ConfigValue]) -> str | None:
    """Why ``--drain`` cannot run now, before anything is written; None when it can."""
    if app_key(app) not in values:
        return f"there is no app {app!r}: nothing would route the drained messages"
    group_id = wire.consumer_group_id(settings.topic_prefix, app, group)
    members = drain.live_members(settings, group_id)
    if members is None or members:
        return drain.in_use_reason(group_id, members)
    return None


# --- helpers ------------------------------------------------------------------------------------------------


def _config_table(config: Config) -> str:
    rows: list[tuple[object, ...]] = []
    for app in sorted(config.apps):
        groups = config.groups_of(app)
        inputs = ",".join(config.apps[app].inputs)
        if not groups:
            rows.append((app, inputs, "-", None, None, None))
        for group in groups:
            for sub in group.effective_subscriptions:
                rows.append((app, inputs, group.name, sub.priority, sub.max_unconfirmed, sub.label))
    header = ("app", "inputs", "group", "priority", "max_unconfirmed", "expression")
    return f"config version {config.version}\n" + output.render_table(header, rows)


def _guarded(run: Callable[[Settings], int], args: argparse.Namespace) -> int:
    """Settings from the flags, then ``run(settings)``; Kafka trouble becomes a message and exit 3."""
    try:
        settings = Settings.from_args(args)
    except SettingsError as exc:
        print(f"subroute: {exc}", file=sys.stderr)
        return EXIT_INVALID
    try:
        return run(settings)
    except (ConcurrentChange, drain.GroupInUse) as exc:
        print(f"subroute: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except ConfigVersionRefused as exc:
        print(
            f"subroute: the configuration on {settings.config_topic} is not valid as a whole: {exc}",
            file=sys.stderr,
        )
        return EXIT_FAILED
    except (clients.KafkaException, TimeoutError, RuntimeError) as exc:
        print(f"subroute: Kafka at {settings.bootstrap_servers}: {exc}", file=sys.stderr)
        return EXIT_FAILED


def print_errors(errors: Iterable[ConfigError]) -> None:
    listed = list(errors)
    for error in listed:  # each starts a `subroute:` line; an expression's caret lines follow it
        print(f"subroute: {error}", file=sys.stderr)
    print(f"subroute: {len(listed)} error(s): nothing was written; fix them and run again", file=sys.stderr)


def _load_desired(path: str) -> dict[str, ConfigValue] | None:
    """The file's desired state, or None after printing every shape and validation error."""
    parsed: ParsedConfig = load_yaml_source(path)
    errors = parsed.errors + validate_state(parsed.values.values())
    if errors:
        print_errors(errors)
        return None
    return parsed.values


def _apply(settings: Settings, desired: Mapping[str, ConfigValue], *, prune: bool, dry_run: bool) -> int:
    if dry_run:  # reads only: must not take the writer id (that would fence an apply running now)
        return _apply_change(settings, read_state(settings), desired, prune=prune, writer=None)
    with ConfigWriter(settings) as writer:
        return _apply_change(settings, writer.read(), desired, prune=prune, writer=writer)


@dataclass(frozen=True)
class _Plan:
    """What an apply of a file would write: its changes, and the unreadable records --prune deletes."""

    changes: list[Change]
    tombstones: list[str]

    @property
    def records(self) -> list[ConfigRecord]:
        return [*_records(self.changes), *((key, None, []) for key in self.tombstones)]


def _plan(
    settings: Settings, state: ConfigState, desired: Mapping[str, ConfigValue], *, prune: bool
) -> _Plan | None:
    """Validate what ``desired`` would make of ``state`` and print the change, as both ``apply`` and ``diff``
    show it; None (the errors printed) when apply would refuse it."""
    current = state.values()
    # The file was validated alone; what will be in force is the file plus the records it keeps (without
    # --prune), and workers refuse a version that is not valid as a whole: check that whole.
    merged = desired if prune else {**current, **desired}
    errors = validate_state(merged.values(), prefix=settings.topic_prefix)
    unreadable = {key: reason for key, reason in state.undecodable().items() if key not in desired}
    if not prune:
        errors += [
            ConfigError(
                key,
                f"the record on the topic cannot be read ({reason}); name {key} in the file or "
                "use --prune to delete it",
            )
            for key, reason in sorted(unreadable.items())
        ]
    if errors:
        print_errors(errors)
        return None
    changes = diff(current, desired, prune=prune)
    tombstones = sorted(unreadable) if prune else []
    print(render(changes) if changes else "no changes")
    for key in tombstones:
        print(f"- {key} (unreadable record)")
    untouched = kept(current, desired)
    if untouched and not prune:
        print(f"kept {len(untouched)} record(s) the file does not name (use --prune to delete them)")
    return _Plan(changes, tombstones)


def _apply_change(
    settings: Settings,
    state: ConfigState,
    desired: Mapping[str, ConfigValue],
    *,
    prune: bool,
    writer: ConfigWriter | None,
) -> int:
    plan = _plan(settings, state, desired, prune=prune)
    if plan is None:
        return EXIT_INVALID
    if writer is None:
        print("dry run: nothing written")
        return EXIT_OK
    admin = clients.admin_client(settings)
    created = clients.ensure_topics(admin, _topics_for(settings, admin, desired))
    for topic in sorted(created):
        print(f"created topic {topic}")
    records = plan.records
    if records:
        writer.write(records)
        print(f"wrote {len(records)} record(s) to {settings.config_topic} as one change")
    return EXIT_OK


def _topics_for(
    settings: Settings, admin: Any, desired: Mapping[str, ConfigValue]
) -> list[clients.TopicSpec]:
    """The config topic and every topic the desired config needs (``config.topics.app_topics``, as the worker)."""
    sizes = sized_by(clients.existing_topics(admin))
    return [
        config_topic_spec(settings),
        *app_topics(_config_of(desired), settings.topic_prefix, sizes, TopicPolicy.of(settings)),
    ]


def _config_of(desired: Mapping[str, ConfigValue]) -> Config:
    apps = {v.name: v for v in desired.values() if isinstance(v, AppConfig)}
    groups = {(g.app, g.name): g for g in desired.values() if not isinstance(g, AppConfig)}
    return Config(apps=apps, groups=groups)


def _records(changes: list[Change]) -> list[ConfigRecord]:
    records: list[ConfigRecord] = []
    for change in changes:
        if change.kind == DELETED or change.new is None:
            records.append((change.key, None, []))
        else:
            records.append(encode(change.new))
    return records
