"""The envelope: what one input (or pending) record turns into once decided. Pure.

A routed record keeps the input's value, headers and timestamp byte for byte (the key too, unless the app
groups messages: then a routed or parked record is keyed by its message group) and adds the routing headers in a fixed order: source (or ``subroute.redriven`` for a record
that comes back from the pending topic), app, group, subscription, config version, routing time, dead-letter
reason. A parked record that is redriven loses the routing headers of its parking first.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from subroute import wire
from subroute.routing.decisions import Action, Decision, MessageView, RoutingTable
from subroute.wire import Headers

# (topic, value, key, headers, timestamp): a plain tuple, as one is made per routed record (a NamedTuple's
# constructor is a Python call, several times the cost).
OutRecord = tuple[str, bytes | None, bytes | None, Headers, int]

# Decisions that write nothing: a skipped app, and an expired record of an app with ``on_expire: drop``.
WRITES_NOTHING = (Action.FILTERED, Action.DROP)

# Headers the router stamps when it parks a record; stripped again when the record is redriven.
PARKING_HEADERS = frozenset(
    {
        wire.APP,
        wire.GROUP,
        wire.SUBSCRIPTION,
        wire.CONFIG_VERSION,
        wire.ROUTED_AT,
        wire.DLQ_REASON,
        wire.PENDING_REASON,
    }
)


class ConsumedRecord(Protocol):
    """What confluent-kafka's Message offers (kept structural: this module does not import the client)."""

    def error(self) -> Any: ...
    def topic(self) -> str | None: ...
    def headers(self) -> Any: ...
    def timestamp(self) -> tuple[int, int]: ...
    def partition(self) -> int | None: ...
    def offset(self) -> int | None: ...
    def key(self) -> Any: ...
    def value(self) -> Any: ...


@dataclass(slots=True)
class InputRecord(MessageView):
    """A consumed record with the types confluent-kafka leaves optional pinned down (it came without error).

    It is the router's ``MessageView`` itself (topic, headers, timestamp, value), so routing needs no second object.
    """

    partition: int = 0
    offset: int = 0
    key: bytes | None = None

    @property
    def headers_list(self) -> Headers:
        return self.headers  # type: ignore[return-value]  # always a list: see ``of``

    @classmethod
    def of(cls, message: ConsumedRecord) -> InputRecord:
        # Without typing.cast (a Python call each): a record consumed without error has its topic, partition
        # and offset, and its headers are a list of (str, bytes | None).
        return cls(
            message.topic(),  # type: ignore[arg-type]
            message.headers() or [],
            message.timestamp()[1],
            message.value(),
            message.partition(),  # type: ignore[arg-type]
            message.offset(),  # type: ignore[arg-type]
            message.key(),
        )


def without_forged_headers(headers: Headers) -> tuple[Headers, int]:
    """An input record's headers without the ``subroute.*`` ones producers may not set, and how many went."""
    prefix, allowed = wire.HEADER_PREFIX, wire.PRODUCER_HEADERS
    kept = [(k, v) for k, v in headers if not k.startswith(prefix) or k in allowed]
    return kept, len(headers) - len(kept)


def destination_topic(decision: Decision, prefix: str) -> str:
    """The topic a (non-filtered) decision writes to: a group's band topic, the pending or the dead-letter one."""
    if decision.action is Action.ROUTE:
        assert decision.group is not None
        return wire.band_topic(prefix, decision.app, decision.group, decision.band)
    if decision.action is Action.PENDING:
        return wire.pending_topic(prefix, decision.app)
    return wire.dlq_topic(prefix, decision.app)


# A decision's topic and its routing headers, before and after the per-batch stamp (version, routing time).
DecisionHeaders = tuple[Decision, str, Headers, Headers]


class Envelopes:
    """The topic and the routing headers of each decision, made once per decision object and config version.

    The source (topic/partition/offset) varies per record and the routing time per batch; the rest depends on
    the decision only, and most decisions are made once per table, so their headers are made once too.
    """

    def __init__(self, prefix: str, table: RoutingTable) -> None:
        self.prefix = prefix
        self.table = table
        self._version = (wire.CONFIG_VERSION, str(table.version).encode())
        self._stamp = (-1, self._version, (wire.ROUTED_AT, b""))
        # id(decision) -> its DecisionHeaders. The entry keeps the decision alive, so no other object can take
        # its id while it is cached.
        self.made: dict[int, DecisionHeaders] = {}

    def stamp(self, now_ms: int) -> tuple[int, tuple[str, bytes], tuple[str, bytes]]:
        """``(now_ms, config version header, routing time header)``."""
        if self._stamp[0] != now_ms:
            self._stamp = (now_ms, self._version, (wire.ROUTED_AT, str(now_ms).encode()))
        return self._stamp

    def headers_of(self, decision: Decision) -> DecisionHeaders:
        """Make (and cache) a decision's headers on its first use: ``made.get(id(d)) or headers_of(d)``."""
        before: Headers = [(wire.APP, decision.app.encode())]
        if decision.group is not None:
            before.append((wire.GROUP, decision.group.encode()))
        if decision.subscription is not None:
            before.append((wire.SUBSCRIPTION, decision.subscription.encode()))
        after: Headers = []
        if decision.reason is not None:
            # a dead letter's reason, or why a pending record waits (capacity, no-consumer)
            reason = wire.PENDING_REASON if decision.action is Action.PENDING else wire.DLQ_REASON
            after.append((reason, decision.reason.encode()))
        if len(self.made) >= 100_000:  # decisions made per message (message groups, bands) come and go
            self.made.clear()
        made = self.made[id(decision)] = (decision, destination_topic(decision, self.prefix), before, after)
        return made


def records_for(
    message: InputRecord,
    decisions: Sequence[Decision],
    now_ms: int,
    redriven: bool,
    envelopes: Envelopes,
) -> list[OutRecord]:
    """The records one input (or pending) record turns into. Value and original headers are kept byte for byte."""
    made = envelopes.made
    _, version, routed_at = envelopes.stamp(now_ms)
    original = message.headers_list
    if redriven:
        original = [(k, v) for k, v in original if k not in PARKING_HEADERS]
        source = (wire.REDRIVEN, wire.REDRIVEN_FROM_PENDING)
    else:
        source = (wire.SOURCE, wire.source_of(message.topic, message.partition, message.offset).encode())
    timestamp = message.timestamp_ms if message.timestamp_ms > 0 else now_ms
    out: list[OutRecord] = []
    for decision in decisions:
        action = decision.action
        if action in WRITES_NOTHING:
            continue
        _, topic, before, after = made.get(id(decision)) or envelopes.headers_of(decision)
        # A message group's routed and parked records are keyed by the group id: one partition holds the group,
        # in order, on its group topic and while it waits on the pending topic alike.
        key = message.key if decision.key is None else decision.key
        headers = [*original, source, *before, version, routed_at, *after]
        out.append((topic, message.value, key, headers, timestamp))
    return out


def app_of(record: OutRecord) -> str:
    """The app a routed record belongs to (its ``subroute.app`` header; empty when it has none)."""
    return next((v.decode(errors="replace") for k, v in record[3] if k == wire.APP and v is not None), "")


def dead_letter_stub(prefix: str, record: OutRecord, reason: str) -> OutRecord:
    """What goes to the app's dead-letter topic in place of a record that cannot be delivered where it was
    routed: its key, headers (source, app, group...) and timestamp, the reason, and no value, so the stub is
    small enough to go wherever the record could not."""
    _topic, _value, key, headers, timestamp = record
    kept = [(k, v) for k, v in headers if k != wire.DLQ_REASON]
    return (
        wire.dlq_topic(prefix, app_of(record)),
        None,
        key,
        [*kept, (wire.DLQ_REASON, reason.encode())],
        timestamp,
    )
