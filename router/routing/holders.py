"""Which consumer group holds each message group that has messages outstanding (README, Routing, step 5). Pure.

Seed 002 (Qpid): "the broker will not allow outstanding unacknowledged messages to more than one consumer for a
given group"; once they are all acknowledged, "the next messages may be delivered to a different consumer". So
while a message group has messages routed to a consumer group G and not yet confirmed by G (G's Kafka consumer
group has not committed past them), its next message follows G, whatever subscription it matches; capacity and
spillover do not move it (``decisions.decide_app``).

A message group is outstanding on G from the moment a record of it is routed there until both hold:
- every record routed so far has its delivery report: the commit window it was routed in (``window``) is
  settled (``settled``: its records delivered, or dead-lettered as stubs), so none is still on its way;
- G has committed past the newest of them: its offset (from the delivery report, ``delivered``) is below G's
  committed offset on that partition (``release``, from the capacity monitor's measurement). A group's records
  go to one partition of G's topic (they are keyed by the group id), so that one offset covers them all.

Holders are per worker: what it routed, and what it read back from the group topics' unconfirmed tails when it
started or was assigned partitions (``restore``; router/worker/holders.py). The worker owns the mutable state;
decisions read ``holder`` and record their placements with ``hold`` (the native decider returns its placements,
which are held the same way).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass

GroupId = tuple[str, str]  # (app, group)
Partition = tuple[str, int]  # (topic, partition)
# Per consumer group, its committed offset per partition of its group topic (-1 or missing: nothing committed).
Committed = Mapping[GroupId, Mapping[Partition, int]]


@dataclass(slots=True)
class Outstanding:
    """What keeps one message group on its holder."""

    group: str
    window: int  # the newest commit window a record of the group was routed in
    # The newest of its records delivered to the holder's group topic: (topic, partition, offset); None until
    # one is reported (a group whose records were all dead-lettered has none).
    position: tuple[str, int, int] | None = None


class Holders:
    """Per app, message-group key -> the consumer group holding it; and, per held group, what releases it."""

    __slots__ = ("_outstanding", "by_app", "settled", "topics", "window")

    def __init__(self) -> None:
        # What decisions read (the native decider too, by app name): app -> group key -> consumer group.
        self.by_app: dict[str, dict[bytes, str]] = {}
        self._outstanding: dict[tuple[str, bytes], Outstanding] = {}
        self.window = 0  # the commit window the records routed now go into (the worker sets it per batch)
        self.settled = -1  # every window up to this one has all its delivery reports (the worker sets it)
        # The group topics of apps with group_by: topic -> (app, group), to read delivery reports by.
        self.topics: dict[str, GroupId] = {}

    def __len__(self) -> int:
        return len(self._outstanding)

    def holder(self, app: str, key: bytes) -> str | None:
        """The consumer group holding message group ``key`` of ``app``; None when it has nothing outstanding."""
        held = self.by_app.get(app)
        return held.get(key) if held else None

    def hold(self, app: str, key: bytes, group: str) -> None:
        """A record of message group ``key`` was routed to ``group`` (in the current ``window``)."""
        held = self._outstanding.get((app, key))
        if held is not None and held.group == group:
            held.window = self.window
            return
        self._outstanding[(app, key)] = Outstanding(group, self.window)
        self.by_app.setdefault(app, {})[key] = group

    def delivered(self, app: str, key: bytes, group: str, topic: str, partition: int, offset: int) -> None:
        """A delivery report: a record of message group ``key`` is at ``offset`` of ``group``'s topic."""
        held = self._outstanding.get((app, key))
        if held is None or held.group != group:
            return  # released meanwhile, or moved: the report is of a group that holds it no longer
        if held.position is None or held.position[:2] != (topic, partition) or held.position[2] < offset:
            held.position = (topic, partition, offset)

    def reported(self, topic: str, partition: int, offset: int, key: bytes | None) -> None:
        """A delivery report of any routed record: counted when it is a message group's, on its group topic."""
        found = self.topics.get(topic)
        if found is not None and key is not None:
            self.delivered(found[0], key, found[1], topic, partition, offset)

    def restore(self, app: str, key: bytes, group: str, topic: str, partition: int, offset: int) -> bool:
        """A record of ``key`` found unconfirmed on ``group``'s topic at ``offset`` (a worker rebuilding what it
        holds): held unless this worker already holds the key (its own placement is newer). True if taken."""
        held = self._outstanding.get((app, key))
        if held is not None and held.group != group:
            return False
        if held is None:
            held = self._outstanding[(app, key)] = Outstanding(group, -1)  # on the log: nothing in flight
            self.by_app.setdefault(app, {})[key] = group
        if held.position is None or held.position[:2] != (topic, partition) or held.position[2] < offset:
            held.position = (topic, partition, offset)
        return True

    def release(self, committed: Committed) -> int:
        """Release the message groups whose records are all delivered and confirmed by their holder (committed
        past); returns how many were released."""
        gone = []
        for (app, key), held in self._outstanding.items():
            if held.window > self.settled:
                continue  # a record of it may still be on its way
            position = held.position
            if position is not None:
                offsets = committed.get((app, held.group))
                if offsets is None or offsets.get((position[0], position[1]), -1) <= position[2]:
                    continue
            gone.append((app, key))
        for app, key in gone:
            self._drop(app, key)
        return len(gone)

    def keep(self, groups: Collection[GroupId]) -> None:
        """Forget message groups held by a consumer group not in ``groups`` (removed, or its app no longer
        groups messages): nothing can confirm them any more, and decisions place them afresh anyway."""
        for app, key in [k for k, held in self._outstanding.items() if (k[0], held.group) not in groups]:
            self._drop(app, key)

    def held_per_app(self) -> dict[str, int]:
        return {app: len(keys) for app, keys in self.by_app.items() if keys}

    def _drop(self, app: str, key: bytes) -> None:
        del self._outstanding[(app, key)]
        keys = self.by_app[app]
        del keys[key]
        if not keys:
            del self.by_app[app]
