"""What ``config apply`` would change: added, changed and (with --prune) deleted config records."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from subroute.config.codec import ConfigValue, to_record
from subroute.config.model import AppConfig

ADDED = "+"
CHANGED = "~"
DELETED = "-"


@dataclass(frozen=True)
class Change:
    kind: str  # ADDED, CHANGED or DELETED
    key: str
    old: ConfigValue | None
    new: ConfigValue | None
    fields: tuple[str, ...] = ()  # for CHANGED: "field: old -> new"

    def render(self) -> str:
        if self.kind == CHANGED:
            return f"{self.kind} {self.key}\n" + "".join(f"    {f}\n" for f in self.fields).rstrip("\n")
        return f"{self.kind} {self.key}"


def _field_changes(old: ConfigValue, new: ConfigValue) -> tuple[str, ...]:
    before, after = to_record(old), to_record(new)
    return tuple(
        f"{name}: {_show(before.get(name))} -> {_show(after.get(name))}"
        for name in after
        if before.get(name) != after.get(name)
    )


def _show(value: object) -> str:
    return "(none)" if value is None else repr(value)


def diff(
    current: Mapping[str, ConfigValue], desired: Mapping[str, ConfigValue], *, prune: bool = False
) -> list[Change]:
    """Changes that turn ``current`` into ``desired``, in the order they must be written.

    Apps are written before their groups and deleted after them, so a reader never sees a group whose app
    is missing. Without ``prune`` keys absent from ``desired`` are kept.
    """
    upserts: list[Change] = []
    for key, new in desired.items():
        old = current.get(key)
        if old is None:
            upserts.append(Change(ADDED, key, None, new))
        elif to_record(old) != to_record(new):
            upserts.append(Change(CHANGED, key, old, new, _field_changes(old, new)))
    deletes = [
        Change(DELETED, key, old, None) for key, old in current.items() if prune and key not in desired
    ]
    upserts.sort(key=lambda c: not isinstance(c.new, AppConfig))
    deletes.sort(key=lambda c: isinstance(c.old, AppConfig))
    return upserts + deletes


def kept(current: Mapping[str, ConfigValue], desired: Mapping[str, ConfigValue]) -> list[str]:
    """Keys on the topic that the desired state does not mention (what --prune would delete)."""
    return [key for key in current if key not in desired]


def render(changes: list[Change]) -> str:
    return "\n".join(change.render() for change in changes)
