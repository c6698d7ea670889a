"""Settle entries: AMPS's ``sow_delete`` with a filter ("acknowledges all messages that match the filter,
regardless of whether the application that sends the command has a current lease"), on Kafka, which cannot
delete one record. Pure (no Kafka): the entry's format on the settle topic and the rule it makes.

``subroute queue ack APP GROUP --filter EXPR`` writes one entry to ``wire.settle_topic``: the filter and the
group's end offsets when it ran (per partition of the group topic and its band topics). It covers a record of
the group that lies below its partition's recorded end and matches the filter: a message that was in the queue
when the operator settled it. ``QueueConsumer`` settles a covered record instead of delivering it (as if it
were acknowledged), the Spark job lands none (``subroute.spark.settled``), ``queue browse`` lists none. Records written after it (new
messages, copies of messages given back later) lie past the ends and are not covered.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from subroute import expressions, wire
from subroute.config.model import PROPERTY_TYPES, AppConfig
from subroute.errors import SubrouteError
from subroute.routing.properties import decode_headers

TP = tuple[str, int]


class SettleEntryError(SubrouteError, ValueError):
    """A settle record that is not an entry (hand-written, or of a newer format): ignored, and logged."""


@dataclass(frozen=True)
class SettleEntry:
    """``ends``: the group's end offset of each partition of its group and band topics when the entry was
    made; ``dead_letter``: the matching records were dead-lettered (reason ``operator``) with the entry."""

    app: str
    group: str
    id: str
    filter: str
    ends: Mapping[TP, int]
    dead_letter: bool = False
    at_ms: int = 0
    count: int = 0  # how many records it settled when written (its command's count)

    @property
    def key(self) -> str:
        return wire.settle_key(self.app, self.group, self.id)

    def to_json(self) -> bytes:
        ends: dict[str, dict[str, int]] = {}
        for (topic, partition), end in sorted(self.ends.items()):
            ends.setdefault(topic, {})[str(partition)] = end
        document = {
            "version": 1,
            "app": self.app,
            "group": self.group,
            "id": self.id,
            "filter": self.filter,
            "ends": ends,
            "dead_letter": self.dead_letter,
            "at": self.at_ms,
            "count": self.count,
        }
        return json.dumps(document, separators=(",", ":"), sort_keys=True).encode()

    @classmethod
    def from_json(cls, raw: bytes) -> SettleEntry:
        try:
            document = json.loads(raw)
            if not isinstance(document, dict) or document.get("version") != 1:
                raise SettleEntryError("not a version-1 settle entry")
            ends = {
                (str(topic), int(partition)): int(end)
                for topic, partitions in document["ends"].items()
                for partition, end in partitions.items()
            }
            return cls(
                app=str(document["app"]),
                group=str(document["group"]),
                id=str(document["id"]),
                filter=str(document["filter"]),
                ends=ends,
                dead_letter=bool(document.get("dead_letter", False)),
                at_ms=int(document.get("at", 0)),
                count=int(document.get("count", 0)),
            )
        except SettleEntryError:
            raise
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise SettleEntryError(f"not a settle entry: {exc}") from exc

    def passed(self, committed: Mapping[TP, int]) -> bool:
        """Every recorded end is at or below the group's commit of its partition: the entry covers nothing a
        member could still deliver, and may be removed."""
        return all(committed.get(tp, -1) >= end for tp, end in self.ends.items() if end > 0)


def compile_filter(app: AppConfig, text: str) -> expressions.Expression:
    """The filter of ``queue ack`` and ``queue browse``, compiled as a subscription of the app is (its dialect,
    its declared properties; an undeclared one is a string). Raises ``expressions.ExpressionError`` (``str`` of
    it shows the caret)."""
    types = {
        name: kind
        for name, kind in app.properties.items()
        if kind in PROPERTY_TYPES and not (kind == "float" and app.dialect != "sql92")
    }
    return expressions.compile(text, dialect=app.dialect, types=types, declared=tuple(app.properties))


def matches(expression: expressions.Expression, app: AppConfig, headers: wire.HeadersIn | None) -> bool:
    """The record's headers, decoded as the router decodes them, match ``expression`` (an evaluation error is
    no match, as in routing)."""
    props, _ = decode_headers(headers, app.properties, only=expression.properties)
    return expression.matches(props)


@dataclass
class SettleRules:
    """The entries in force for one group, with their filters compiled; ``covers`` decides a record."""

    app: AppConfig
    group: str
    _entries: dict[str, SettleEntry] = field(default_factory=dict)
    _compiled: dict[str, expressions.Expression | None] = field(default_factory=dict)

    def take(self, key: str, value: bytes | None) -> None:
        """One record of the settle topic (another group's is ignored; a tombstone removes). Raises
        ``SettleEntryError`` for a value that is not an entry."""
        if value is None:
            self._entries.pop(key, None)
            return
        entry = SettleEntry.from_json(value)
        if entry.app != self.app.name or entry.group != self.group or entry.key != key:
            return
        self._entries[key] = entry
        if entry.filter not in self._compiled:
            try:
                self._compiled[entry.filter] = compile_filter(self.app, entry.filter)
            except (expressions.ExpressionError, ValueError):
                # Checked when written; under a later change of the app's properties it may no longer compile:
                # then it covers nothing (delivering is the safe side: a message is never lost by it).
                self._compiled[entry.filter] = None

    def take_all(self, records: Iterable[tuple[str, bytes | None]]) -> None:
        for key, value in records:
            self.take(key, value)

    @property
    def entries(self) -> list[SettleEntry]:
        return list(self._entries.values())

    def covers(self, topic: str, partition: int, offset: int, headers: wire.HeadersIn | None) -> bool:
        """The record at ``offset`` was in the queue when an entry whose filter it matches was written."""
        tp = (topic, partition)
        candidates = [e for e in self._entries.values() if offset < e.ends.get(tp, 0)]
        if not candidates:
            return False
        return any(
            (compiled := self._compiled.get(entry.filter)) is not None
            and matches(compiled, self.app, headers)
            for entry in candidates
        )

    def __len__(self) -> int:
        return len(self._entries)
