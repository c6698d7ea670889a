"""Topic and header names: the contract between the router, consumers, the Spark job and operators."""

from __future__ import annotations

import re
from collections.abc import Sequence

DEFAULT_TOPIC_PREFIX = "subroute"

# Group names that would collide with an app's own topics.
RESERVED_GROUP_NAMES = frozenset({"pending", "dlq"})

# Apps and groups become parts of topic names: keep them to Kafka's legal characters, minus '.', which separates.
NAME_PATTERN = re.compile(r"^[A-Za-z0-9_-]{1,100}$")

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
# Set by a producer: a per-message expiration ("30s", "1h", or milliseconds).
EXPIRATION = "subroute.expiration"
# Every header of the router's starts so; on an input record only these are taken from the producer, the rest
# are dropped before routing (counted), so nobody can forge the router's bookkeeping.
HEADER_PREFIX = "subroute."
PRODUCER_HEADERS = frozenset({EXPIRATION})
# Why a record sits on the pending topic, and where it came from once redriven.
PENDING_REASON = "subroute.pending-reason"  # "capacity" or "no-consumer"; none: no subscription matched it
REDRIVEN = "subroute.redriven"

# Qpid's "qpid.no-group": the group of messages that lack the group_by property.
DEFAULT_MESSAGE_GROUP = "subroute.no-group"


def config_topic(prefix: str) -> str:
    return f"{prefix}.config"


def group_topic(prefix: str, app: str, group: str) -> str:
    return f"{prefix}.{app}.{group}"


def pending_topic(prefix: str, app: str) -> str:
    return f"{prefix}.{app}.pending"


def dlq_topic(prefix: str, app: str) -> str:
    return f"{prefix}.{app}.dlq"


def consumer_group_id(prefix: str, app: str, group: str) -> str:
    """The Kafka consumer group whose commits on the group topic are the group's confirms."""
    return f"{prefix}.{app}.{group}"


def worker_group_id(prefix: str) -> str:
    """The consumer group all router workers share on the input topics."""
    return f"{prefix}.router"


def source_of(topic: str, partition: int, offset: int) -> str:
    return f"{topic}/{partition}/{offset}"


def parse_source(value: str) -> tuple[str, int, int]:
    topic, partition, offset = value.rsplit("/", 2)
    return topic, int(partition), int(offset)


def app_of_pending(prefix: str, topic: str) -> str:
    """The app whose pending topic this is ("" if it is not one)."""
    head, tail = f"{prefix}.", ".pending"
    if topic.startswith(head) and topic.endswith(tail):
        return topic[len(head) : -len(tail)]
    return ""


# Offset commit metadata of a consumer group on its group topic: the offsets below the committed one that are not
# settled yet. At-most-once delivery commits past a message before handing it out, also past an earlier message
# whose dead letter or replace write is still failing; that one is listed here so that the next owner of the
# partition settles it (``subroute.client``), instead of losing it. Written as "subroute.unsettled=3,7-9".
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
