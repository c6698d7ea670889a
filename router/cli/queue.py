"""``subroute dlq list|show|redrive`` and ``subroute publish``: the dead-letter topic and DefaultPublishTarget.

A redrive commits a consumer group on the dead-letter topic, so a dead letter is redriven once: a full redrive
commits ``<prefix>.<app>.dlq-redrive``, a redrive with ``--reason R`` commits ``<prefix>.<app>.dlq-redrive.R``
(records of other reasons stay where they are). A record is redriven when its offset is below either position.
(Commit metadata would be one group, but some brokers, the embedded one among them, drop it.)
"""

from __future__ import annotations

import argparse
import base64
import json
import sys
import time
from dataclasses import dataclass, field
from typing import Any, cast

from confluent_kafka import OFFSET_BEGINNING, OFFSET_INVALID, Consumer, KafkaError, Message, TopicPartition

from router import names
from router.client import QueueError, publish
from router.client.dead_letters import REASON_PATTERN, history_of, reason_of, redrive_headers, redrive_target
from router.client.delivery import CANCELS, Headers, header_value, int_header
from router.config.model import Config
from router.config.store import read_config
from router.kafka import io as kafka_io
from router.ops.settings import Settings, add_common_arguments, parse_key_values

PROGRESS_EVERY = 1000


def redrive_group_id(prefix: str, app: str, reason: str | None = None) -> str:
    base = f"{prefix}.{app}.dlq-redrive"
    return base if reason is None else f"{base}.{reason}"


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    dlq = subparsers.add_parser("dlq", help="inspect an app's dead-letter topic and send messages back")
    actions = dlq.add_subparsers(dest="dlq_command", required=True, metavar="ACTION")

    listing = actions.add_parser("list", help="dead letters of APP counted by reason")
    listing.add_argument("app", metavar="APP")
    add_common_arguments(listing)
    listing.set_defaults(func=_list)

    show = actions.add_parser("show", help="dead letters of APP, one JSON object per line")
    show.add_argument("app", metavar="APP")
    show.add_argument(
        "--reason", help="only this reason (max-cancels, max-deliveries, expired, rejected, ...)"
    )
    show.add_argument("--limit", type=int, default=20, help="at most this many (default 20; 0: all)")
    add_common_arguments(show)
    show.set_defaults(func=_show)

    redrive = actions.add_parser(
        "redrive", help="send dead letters back to their group topic (delivery count reset), once each"
    )
    redrive.add_argument("app", metavar="APP")
    redrive.add_argument("--reason", help="only dead letters with this reason")
    add_common_arguments(redrive)
    redrive.set_defaults(func=_redrive)

    pub = subparsers.add_parser("publish", help="write a message to an app's default_publish topic")
    pub.add_argument("--app", required=True, metavar="APP")
    pub.add_argument("--header", action="append", metavar="K=V", help="message header, repeatable")
    pub.add_argument("--key", help="record key")
    pub.add_argument("value", metavar="VALUE", help="the message value (UTF-8 text)")
    add_common_arguments(pub)
    pub.set_defaults(func=_publish)


# --- reading the dead-letter topic --------------------------------------------------------------------------------


@dataclass
class DeadLetter:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: Headers
    timestamp: int

    @classmethod
    def of(cls, message: Message) -> DeadLetter:
        return cls(
            cast(int, message.partition()),
            cast(int, message.offset()),
            message.key(),
            message.value(),
            cast(Headers, message.headers() or []),
            message.timestamp()[1],
        )

    @property
    def reason(self) -> str:
        return reason_of(self.headers)


@dataclass
class RedriveState:
    """Per dead-letter partition: the position of the full redrives, and of the redrives of each reason."""

    positions: dict[int, int] = field(default_factory=dict)
    by_reason: dict[str, dict[int, int]] = field(default_factory=dict)

    def redriven(self, letter: DeadLetter) -> bool:
        reason = self.by_reason.get(letter.reason, {})
        return letter.offset < max(self.positions.get(letter.partition, 0), reason.get(letter.partition, 0))


def _partitions(consumer: Consumer, topic: str) -> list[int]:
    info = consumer.list_topics(topic, timeout=10).topics.get(topic)
    if info is None or info.error is not None:
        return []
    return sorted(info.partitions)


def _redrive_consumer(settings: Settings, app: str, reason: str | None = None) -> Consumer:
    return Consumer(
        settings.client_config(
            {
                "group.id": redrive_group_id(settings.topic_prefix, app, reason),
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
                "enable.partition.eof": True,
                "auto.offset.reset": "earliest",
            }
        )
    )


def _committed(consumer: Consumer, topic: str, partitions: list[int]) -> dict[int, int]:
    if not partitions:
        return {}
    found = consumer.committed([TopicPartition(topic, p) for p in partitions], timeout=10)
    return {tp.partition: tp.offset for tp in found if tp.offset >= 0 and tp.offset != OFFSET_INVALID}


def _add_reasons(
    settings: Settings, app: str, state: RedriveState, topic: str, partitions: list[int], reasons: set[str]
) -> None:
    """Read the positions of the per-reason redrive groups for the reasons not known yet."""
    for reason in sorted(reasons - set(state.by_reason)):
        if not REASON_PATTERN.match(reason):
            state.by_reason[reason] = {}
            continue
        consumer = _redrive_consumer(settings, app, reason)
        try:
            state.by_reason[reason] = _committed(consumer, topic, partitions)
        finally:
            consumer.close()


def _read_letters(consumer: Consumer, topic: str, starts: dict[int, int]) -> list[DeadLetter]:
    """Every record from ``starts`` to the end each partition's fetches report."""
    if not starts:
        return []
    consumer.assign([TopicPartition(topic, p, o) for p, o in starts.items()])
    remaining = set(starts)
    letters: list[DeadLetter] = []
    idle_since = time.monotonic()
    while remaining and time.monotonic() - idle_since < 5.0:
        for message in consumer.consume(1000, timeout=0.5):
            idle_since = time.monotonic()
            error = message.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    remaining.discard(cast(int, message.partition()))
                continue
            letters.append(DeadLetter.of(message))
    return letters


def _load(
    settings: Settings, app: str, *, from_start: bool
) -> tuple[list[DeadLetter], RedriveState, list[int]]:
    """The dead letters (all of them, or from the full-redrive position) and what has been redriven."""
    topic = names.dlq_topic(settings.topic_prefix, app)
    consumer = _redrive_consumer(settings, app)
    try:
        partitions = _partitions(consumer, topic)
        state = RedriveState(_committed(consumer, topic, partitions))
        starts = {
            p: OFFSET_BEGINNING if from_start else state.positions.get(p, OFFSET_BEGINNING)
            for p in partitions
        }
        letters = _read_letters(consumer, topic, starts)
    finally:
        consumer.close()
    _add_reasons(settings, app, state, topic, partitions, {letter.reason for letter in letters})
    return letters, state, partitions


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
        return 2
    letters, state, _ = _load(settings, args.app, from_start=True)
    by_reason: dict[str, list[int]] = {}
    for letter in letters:
        counts = by_reason.setdefault(letter.reason, [0, 0])
        counts[0] += 1
        counts[1] += state.redriven(letter)
    print(f"{'reason':<20} {'dead letters':>12} {'redriven':>9} {'waiting':>8}")
    for reason in sorted(by_reason):
        total, redriven = by_reason[reason]
        print(f"{reason:<20} {total:>12} {redriven:>9} {total - redriven:>8}")
    total = sum(c[0] for c in by_reason.values())
    redriven_total = sum(c[1] for c in by_reason.values())
    print(f"{'total':<20} {total:>12} {redriven_total:>9} {total - redriven_total:>8}")
    return 0


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
        return 2
    letters, state, _ = _load(settings, args.app, from_start=True)
    shown = 0
    for letter in letters:
        if args.reason and letter.reason != args.reason:
            continue
        if args.limit and shown >= args.limit:
            break
        shown += 1
        record = {
            "partition": letter.partition,
            "offset": letter.offset,
            "reason": letter.reason,
            "group": header_value(letter.headers, names.GROUP),
            "source": header_value(letter.headers, names.SOURCE),
            "deliveries": int_header(letter.headers, names.DELIVERIES),
            "cancels": int_header(letter.headers, CANCELS),
            "timestamp": letter.timestamp,
            "redriven": state.redriven(letter),
            "key": _text(letter.key),
            "value": _text(letter.value),
            "history": history_of(letter.headers),
        }
        print(json.dumps(record, separators=(",", ":")))
    return 0


def _redrive(args: argparse.Namespace) -> int:
    settings = Settings.from_args(args)
    config = _configured(settings, args.app)
    if config is None:
        return 2
    prefix, app = settings.topic_prefix, args.app
    topic = names.dlq_topic(prefix, app)
    groups = [g.name for g in config.groups_of(app)]
    letters, state, partitions = _load(settings, app, from_start=False)
    if args.reason:
        _add_reasons(settings, app, state, topic, partitions, {args.reason})
    producer = kafka_io.producer(settings)
    failures: list[str] = []

    def on_delivery(error: KafkaError | None, _message: Message) -> None:
        if error is not None:
            failures.append(str(error))

    ends = dict(state.positions)
    for partition, position in state.by_reason.get(args.reason, {}).items() if args.reason else ():
        ends[partition] = max(ends.get(partition, 0), position)
    sent: dict[str, int] = {}
    now_ms = int(time.time() * 1000)
    for letter in letters:
        ends[letter.partition] = max(ends.get(letter.partition, 0), letter.offset + 1)
        if state.redriven(letter) or (args.reason and letter.reason != args.reason):
            continue
        target = redrive_target(prefix, app, letter.headers, groups)
        # A new timestamp: the message re-enters the queue now (an expired one would expire again at once).
        producer.produce(
            target,
            value=letter.value,
            key=letter.key,
            headers=cast(
                list[tuple[str, str | bytes | None]], redrive_headers(letter.headers, now_ms, target)
            ),
            on_delivery=on_delivery,
        )
        sent[target] = sent.get(target, 0) + 1
        count = sum(sent.values())
        if count % PROGRESS_EVERY == 0:
            producer.flush(30)
            print(f"redriven {count} ...", flush=True)
    if producer.flush(30) > 0 or failures:
        print(f"subroute: redrive failed, nothing committed: {failures[:1] or 'timed out'}", file=sys.stderr)
        return 1
    if ends:
        consumer = _redrive_consumer(settings, app, args.reason)
        try:
            offsets = [TopicPartition(topic, p, o) for p, o in sorted(ends.items())]
            consumer.commit(offsets=offsets, asynchronous=False)
        finally:
            consumer.close()
    for target in sorted(sent):
        print(f"  {sent[target]:>8} -> {target}")
    what = f" with reason {args.reason}" if args.reason else ""
    print(f"redriven {sum(sent.values())} dead letter(s){what} of {app}")
    return 0


def _publish(args: argparse.Namespace) -> int:
    settings = Settings.from_args(args)
    headers = parse_key_values(args.header, "--header")
    try:
        topic, partition, offset = publish(
            settings,
            args.app,
            args.value.encode(),
            headers,
            None if args.key is None else args.key.encode(),
        )
    except QueueError as exc:
        print(f"subroute: {exc}", file=sys.stderr)
        return 2
    print(f"published to {topic} partition {partition} offset {offset}")
    return 0
