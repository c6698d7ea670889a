"""The wire format: every name and value subroute writes to Kafka or reads back from it, declared once.

Topic and consumer-group names (priority bands included), header names and the helpers that read and write them,
the reason values and history events records carry, and the offset-commit metadata of the router and of the
consumer client. Router, consumer client, Spark job and operator commands agree through this module; it imports
nothing of subroute, so every room may import it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

# A record's headers, as consumed and as produced.
Header = tuple[str, bytes | None]
Headers = list[Header]
# What a reader of headers accepts: any sequence of pairs (a list, a tuple); readers that take none say so.
HeadersIn = Sequence[tuple[str, bytes | None]]

# --- topics and consumer groups -----------------------------------------------------------------------------------

DEFAULT_TOPIC_PREFIX = "subroute"

# Group names that would collide with an app's own topics.
RESERVED_GROUP_NAMES = frozenset({"pending", "dlq"})

# Apps and groups become parts of topic names: keep them to Kafka's legal characters, minus '.', which separates.
NAME_PATTERN = re.compile(r"^[A-Za-z0-9_-]{1,100}$")


def config_topic(prefix: str) -> str:
    return f"{prefix}.config"


def group_topic(prefix: str, app: str, group: str) -> str:
    return f"{prefix}.{app}.{group}"


def pending_topic(prefix: str, app: str) -> str:
    return f"{prefix}.{app}.pending"


def dlq_topic(prefix: str, app: str) -> str:
    return f"{prefix}.{app}.dlq"


def settle_topic(prefix: str) -> str:
    """The operator's settle entries (``subroute queue ack``): one compacted partition, keyed by
    ``settle_key``, a JSON value each (``subroute.client.settles``), a tombstone removing one."""
    return f"{prefix}.settle"


def settle_key(app: str, group: str, entry: str) -> str:
    return f"{app}/{group}/{entry}"


def settle_transactional_id(prefix: str, app: str, group: str) -> str:
    """The transactional id of ``queue ack`` on one group: its dead letters and its entry are one transaction."""
    return f"{prefix}.{app}.{group}.settle"


def consumer_group_id(prefix: str, app: str, group: str) -> str:
    """The Kafka consumer group whose commits on the group topic are the group's confirms."""
    return f"{prefix}.{app}.{group}"


def worker_group_id(prefix: str) -> str:
    """The consumer group all router workers share on the input topics."""
    return f"{prefix}.router"


def redrive_group_id(prefix: str, app: str, reason: str | None = None) -> str:
    """The consumer group (and transactional id) of the app's dead-letter redrives: one for full redrives, one
    per reason for the redrives of one reason."""
    base = f"{prefix}.{app}.dlq-redrive"
    return base if reason is None else f"{base}.{reason}"


def app_of_pending(prefix: str, topic: str) -> str:
    """The app whose pending topic this is ("" if it is not one)."""
    head, tail = f"{prefix}.", ".pending"
    if topic.startswith(head) and topic.endswith(tail):
        return topic[len(head) : -len(tail)]
    return ""


# --- priority bands -----------------------------------------------------------------------------------------------
# A group has ten bands, 0 (lowest) to 9 (highest), as JMS's priorities. Band 0 is the plain group topic
# ``<prefix>.<app>.<group>``; band N >= 1 is the topic ``<prefix>.<app>.<group>.p<N>``.

LOWEST_BAND = 0
HIGHEST_BAND = 9
BANDS = tuple(range(LOWEST_BAND, HIGHEST_BAND + 1))

_BAND_SUFFIX = re.compile(r"\.p([1-9])$")


def band_topic(prefix: str, app: str, group: str, band: int) -> str:
    if not LOWEST_BAND <= band <= HIGHEST_BAND:
        raise ValueError(f"priority band {band} is outside {LOWEST_BAND}..{HIGHEST_BAND}")
    base = group_topic(prefix, app, group)
    return base if band == LOWEST_BAND else f"{base}.p{band}"


def band_topics(prefix: str, app: str, group: str) -> list[str]:
    """Every band topic of a group, lowest band first."""
    return [band_topic(prefix, app, group, band) for band in BANDS]


def band_of_topic(prefix: str, app: str, group: str, topic: str) -> int | None:
    """The band a topic holds for this group, or None when it is not one of the group's band topics."""
    base = group_topic(prefix, app, group)
    if topic == base:
        return LOWEST_BAND
    if topic.startswith(base):
        match = _BAND_SUFFIX.fullmatch(topic[len(base) :])
        if match:
            return int(match.group(1))
    return None


def _escape(text: str) -> str:
    # Names hold letters, digits, '_', '-' and '.'; escape only what a regex engine treats specially, because
    # librdkafka's own regex engine rejects escapes of ordinary characters that Python's re.escape emits.
    return "".join(c if c.isalnum() or c in "_-" else "\\" + c for c in text)


def topic_regex(prefix: str, app: str, group: str) -> str:
    """A Kafka subscription pattern (librdkafka treats a leading '^' as a regex) for all bands of a group."""
    return "^" + _escape(group_topic(prefix, app, group)) + r"(\.p[1-9])?$"


# --- header names -------------------------------------------------------------------------------------------------

# Headers the router adds to every routed record.
APP = "subroute.app"
GROUP = "subroute.group"
SUBSCRIPTION = "subroute.subscription"
SOURCE = "subroute.source"  # "topic/partition/offset" of the input record
CONFIG_VERSION = "subroute.config-version"
ROUTED_AT = "subroute.routed-at"  # epoch milliseconds
# Dead letters and redelivery.
DELIVERIES = "subroute.deliveries"
DLQ_REASON = "subroute.dlq-reason"
HISTORY = "subroute.history"
# Cancels of this message so far (AMPS MaxCancels counts them apart from deliveries).
CANCELS = "subroute.cancels"
# On a grouped copy the consumer client wrote to another member's partition: "topic/partition/offset" of the
# message it copies. Such a copy stays where it is if it fails again (client/give_back.py).
MOVED_FROM = "subroute.moved-from"
# Set by a producer: a per-message expiration ("30s", "1h", or milliseconds).
EXPIRATION = "subroute.expiration"
# Every header of the router's starts so; on an input record only these are taken from the producer, the rest
# are dropped before routing (counted), so nobody can forge the router's bookkeeping.
HEADER_PREFIX = "subroute."
PRODUCER_HEADERS = frozenset({EXPIRATION})
# Why a record sits on the pending topic (a waiting reason, or REPLACED); none: no subscription matched it.
PENDING_REASON = "subroute.pending-reason"
# Where a re-sent record came back from: the pending topic (the router) or the dead-letter topic (a redrive).
REDRIVEN = "subroute.redriven"
REDRIVEN_FROM_PENDING = b"pending"
REDRIVEN_FROM_DLQ = b"dlq"

# Qpid's "qpid.no-group": the group of messages that lack the group_by property.
DEFAULT_MESSAGE_GROUP = "subroute.no-group"


def source_of(topic: str, partition: int, offset: int) -> str:
    return f"{topic}/{partition}/{offset}"


def parse_source(value: str) -> tuple[str, int, int]:
    topic, partition, offset = value.rsplit("/", 2)
    return topic, int(partition), int(offset)


def header_value(headers: HeadersIn | None, name: str) -> str | None:
    """The last value of a header as text (None when absent, null or not UTF-8)."""
    found: str | None = None
    for key, raw in headers or ():
        if key == name and raw is not None:
            try:
                found = raw.decode()
            except UnicodeDecodeError:
                found = None
    return found


def int_header(headers: HeadersIn | None, name: str) -> int:
    """A counter header; absent or malformed counts as 0."""
    text = header_value(headers, name)
    try:
        return max(0, int(text)) if text is not None else 0
    except ValueError:
        return 0


def replace_headers(headers: HeadersIn | None, updates: dict[str, bytes | None]) -> Headers:
    """Every header kept in order, except those named in ``updates``, which are replaced (a None value removes)."""
    kept: Headers = [(k, v) for k, v in headers or () if k not in updates]
    kept.extend((k, v) for k, v in updates.items() if v is not None)
    return kept


def is_resent(headers: HeadersIn | None) -> bool:
    """Re-sent on purpose (a cancel copy, or redriven from the pending or dead-letter topic): never a duplicate."""
    return int_header(headers, DELIVERIES) > 0 or any(k == REDRIVEN for k, _ in headers or ())


def source_position(headers: HeadersIn | None) -> tuple[str, int, int] | None:
    """(topic, partition, offset) of the input record a routed record came from (its ``subroute.source``)."""
    text = header_value(headers, SOURCE)
    if text is None:
        return None
    try:
        return parse_source(text)
    except ValueError:
        return None


# --- reasons ------------------------------------------------------------------------------------------------------

# Why a record waits on the pending topic although a subscription matches it (``subroute.pending-reason``).
CAPACITY = "capacity"  # every present candidate it may go to is at max_unconfirmed
NO_CONSUMER = "no-consumer"  # no candidate it may go to has a consumer attached
WAITING_REASONS = frozenset({CAPACITY, NO_CONSUMER})
# Sent back through the pending topic because its group's subscriptions changed (the consumer client's replace)
# or its group was deleted (a drain). Not a waiting reason: the router routes it again under any newer version.
REPLACED = "replaced"
GROUP_DELETED = "group-deleted"  # the reason of a drain's ``replaced`` event

# Dead-letter reasons (``subroute.dlq-reason``); a consumer's expire may give a reason of its own.
EXPIRED = "expired"  # older than its expiration (also the reason of a drop, with on_expire: drop)
REJECTED = "rejected"  # the consumer's expire, and input records the router cannot read
MAX_CANCELS = "max-cancels"
MAX_DELIVERIES = "max-deliveries"
UNDELIVERABLE = "undeliverable"  # the router's write to its destination failed for good
TOO_LARGE = "too-large"  # the broker refuses the record's size
OPERATOR = "operator"  # settled by an operator's ``queue ack --dead-letter``
REASON_PATTERN = re.compile(r"^[a-z0-9][a-z0-9-]{0,63}$")


def reason_of(headers: HeadersIn | None) -> str:
    """A dead letter's reason."""
    return header_value(headers, DLQ_REASON) or "unknown"


# --- history ------------------------------------------------------------------------------------------------------
# ``subroute.history``: a JSON list of events, each with its kind, the time in epoch milliseconds and where the
# message was. A dead letter keeps the original key, value and headers and adds its reason and a history.

CANCEL = "cancel"
LEASE_EXPIRED = "lease-expired"
DEAD_LETTER = "dead-letter"
REDRIVE = "redrive"
# also REPLACED, and EXPIRED (expired on delivery, under on_expire: drop)

Event = dict[str, object]


def event(kind: str, at_ms: int, **fields: object) -> Event:
    return {"event": kind, "at": at_ms, **{k: v for k, v in fields.items() if v is not None}}


def history_of(headers: HeadersIn | None) -> list[Event]:
    text = header_value(headers, HISTORY)
    if not text:
        return []
    try:
        parsed = json.loads(text)
    except ValueError:
        return []
    return [e for e in parsed if isinstance(e, dict)] if isinstance(parsed, list) else []


def with_event(
    headers: HeadersIn | None, new: Event, updates: dict[str, bytes | None] | None = None
) -> Headers:
    """The headers with ``new`` appended to the history (and ``updates`` applied)."""
    history = [*history_of(headers), new]
    changes: dict[str, bytes | None] = dict(updates or {})
    changes[HISTORY] = json.dumps(history, separators=(",", ":")).encode()
    return replace_headers(headers, changes)


def dead_letter_headers(headers: HeadersIn | None, reason: str, new: Event) -> Headers:
    return with_event(headers, new, {DLQ_REASON: reason.encode()})


# --- offset-commit metadata ---------------------------------------------------------------------------------------

# The router's commits on its inputs: the config version the committed records were routed under. A worker newly
# assigned the partition routes it only under that version or a later one, so a rebalance never moves a partition
# back to an older config (message groups would flip between consumer groups). A pending partition's commit also
# carries its sweep mark (routing/sweep.py: what has left from behind the position by expiry) and the offsets
# routed past its position (routing/routed_past.py), at most MAX_COMMIT_METADATA characters in all.
_VERSION_METADATA = "subroute.config-version="
_SWEEP_METADATA = ";subroute.sweep="
_PAST_METADATA = ";subroute.past="


def pending_metadata(sweep: str | None, past: str = "") -> str:
    """What a pending partition's commit says besides the version: its sweep mark's text and its routed-past
    offsets' text (``RoutedPast.text``), each when there is one."""
    text = "" if sweep is None else f"{_SWEEP_METADATA}{sweep}"
    return f"{text}{_PAST_METADATA}{past}" if past else text


def version_metadata(version: int, pending: str = "") -> str:
    """The metadata of a commit routed under ``version``, then ``pending_metadata`` for a pending partition."""
    return f"{_VERSION_METADATA}{version}{pending}"


def version_of(metadata: str | None) -> int | None:
    """The config version in a commit's metadata; None when there is none (another writer, an older worker,
    a broker that drops commit metadata)."""
    if not metadata or not metadata.startswith(_VERSION_METADATA):
        return None
    digits = metadata[len(_VERSION_METADATA) :].partition(";")[0]
    return int(digits) if digits.isdigit() and len(digits) < 20 else None


def _metadata_field(metadata: str | None, name: str) -> str | None:
    if not metadata or not metadata.startswith(_VERSION_METADATA):
        return None
    _, found, text = metadata.partition(name)
    return text.partition(";")[0] if found else None


def sweep_of(metadata: str | None) -> str | None:
    """The sweep mark's text in a commit's metadata; None when there is none."""
    return _metadata_field(metadata, _SWEEP_METADATA)


def past_text_of(metadata: str | None) -> str | None:
    """The routed-past offsets' text in a commit's metadata; None when there are none."""
    return _metadata_field(metadata, _PAST_METADATA)


# A consumer group's commits on its group topic: the offsets below the committed one that are not settled yet.
# At-most-once delivery commits past a message before handing it out, also past an earlier message whose dead
# letter or replace write is still failing; that one is listed here so that the next owner of the partition
# settles it (``subroute.client``), instead of losing it. Written as "subroute.unsettled=3,7-9".
UNSETTLED_METADATA = "subroute.unsettled="
# The broker refuses commit metadata over offset.metadata.max.bytes (default 4096): stay below it.
MAX_COMMIT_METADATA = 4000
# More unsettled offsets than any backlog holds: metadata naming more is not a client's, and is ignored.
MAX_UNSETTLED = 1_000_000


def unsettled_metadata(offsets: Sequence[int]) -> str | None:
    """The commit metadata naming ``offsets`` (ascending): "" for none; None when it would not fit."""
    if not offsets:
        return ""
    runs: list[str] = []
    start = previous = offsets[0]
    for offset in (*offsets[1:], None):
        if offset is not None and offset == previous + 1:
            previous = offset
            continue
        runs.append(str(start) if start == previous else f"{start}-{previous}")
        if offset is not None:
            start = previous = offset
    text = UNSETTLED_METADATA + ",".join(runs)
    return text if len(text) <= MAX_COMMIT_METADATA else None


def unsettled_of(metadata: str | None) -> tuple[int, ...]:
    """The offsets ``unsettled_metadata`` wrote (ascending); none for other or malformed metadata."""
    if not metadata or not metadata.startswith(UNSETTLED_METADATA) or len(metadata) > MAX_COMMIT_METADATA:
        return ()
    found: list[int] = []
    for run in metadata[len(UNSETTLED_METADATA) :].split(","):
        low, _, high = run.partition("-")
        if not low.isdigit() or not (high or low).isdigit() or int(high or low) < int(low):
            return ()
        span = range(int(low), int(high or low) + 1)
        if (
            len(found) + len(span) > MAX_UNSETTLED
        ):  # not written by a client: a client holds at most its backlog
            return ()
        found.extend(span)
    return tuple(sorted(set(found)))
