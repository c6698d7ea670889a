"""Topic and header names: the contract between the router, consumers, the Spark job and operators."""

from __future__ import annotations

import re

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
