"""``subroute explain``: why a message (given by headers, or stored at topic/partition/offset) goes where it goes."""

from __future__ import annotations

import argparse
import time
from typing import cast

from subroute import wire
from subroute.cli import output
from subroute.cli.registry_flags import add_schema_registry_arguments, schema_registry_settings
from subroute.config.avro_schema import writer_schema_chain
from subroute.config.store import read_config
from subroute.kafka import clients
from subroute.kafka.schema_registry import RegistryUnavailable, WriterSchemas
from subroute.ops.settings import Settings, SettingsError, add_common_arguments, parse_key_values
from subroute.routing.body import NoWriterSchemas
from subroute.routing.decisions import MessageView, build_table
from subroute.routing.explain import explain, render, to_document
from subroute.routing.snapshot import Snapshot
from subroute.worker.capacity import CapacityMonitor


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("explain", help="show how each app would route a message, and why")
    add_common_arguments(parser)
    parser.add_argument("--app", help="only this app (with --header: the app whose inputs to use)")
    parser.add_argument(
        "--header", action="append", metavar="K=V", help="a message header (property), repeatable"
    )
    parser.add_argument(
        "--value", metavar="TEXT", help="the message's value (body), e.g. a JSON document, with --header"
    )
    parser.add_argument("--topic", help="input topic of a stored message (or of the headers given)")
    parser.add_argument("--partition", type=int)
    parser.add_argument("--offset", type=int)
    add_schema_registry_arguments(parser)
    output.add_output_argument(parser)
    parser.set_defaults(func=_run)


def _stored_message(settings: Settings, topic: str, partition: int, offset: int) -> MessageView:
    message = clients.read_record(settings, topic, partition, offset)
    if message is None:
        raise SettingsError(f"no record at {topic}/{partition}/{offset}")
    headers = cast(wire.Headers, message.headers() or [])
    return MessageView(topic, headers, message.timestamp()[1], message.value())


def _run(args: argparse.Namespace) -> int:
    settings = Settings.from_args(args)
    config = read_config(settings)
    table = build_table(config)
    if args.offset is not None:
        if args.topic is None or args.partition is None:
            raise SettingsError("--offset needs --topic and --partition")
        message = _stored_message(settings, args.topic, args.partition, args.offset)
    else:
        headers = [(k, v.encode()) for k, v in parse_key_values(args.header, "--header").items()]
        topic = args.topic
        if topic is None:
            app = table.app(args.app) if args.app else None
            if app is None:
                raise SettingsError("give --app APP (an existing app) or --topic TOPIC")
            topic = next(iter(app.input_names), None) or "<input>"
        value = None if args.value is None else args.value.encode()
        message = MessageView(topic, headers, int(time.time() * 1000), value)
    monitor = CapacityMonitor(settings, interval=0)
    monitor.watch(config)
    lag = _measure(monitor, settings)
    only = args.app
    registry = schema_registry_settings(args)
    schemas = WriterSchemas(registry, writer_schema_chain) if registry is not None else None
    try:
        report = explain(
            table,
            message,
            lag,
            int(time.time() * 1000),
            app=only if only else None,
            prefix=settings.topic_prefix,
            writer_of=schemas.get if schemas is not None else None,
        )
    except (
        NoWriterSchemas,
        RegistryUnavailable,
    ) as exc:  # Avro in Confluent's wire format, no schema to read it
        raise SettingsError(f"{exc} (--schema-registry-url)") from None
    document = to_document(report, config.version)
    output.emit(args.output, document, lambda: f"config version {config.version}\n{render(report)}")
    return 0


def _measure(monitor: CapacityMonitor, settings: Settings) -> Snapshot:
    reader = clients.reader(settings, "subroute-explain")
    try:
        monitor.refresh(clients.admin_client(settings), reader)
    finally:
        reader.close()
    measured = monitor.measurement()
    return Snapshot(dict(measured.lag), measured.absent)  # the groups absent now count as in the worker
