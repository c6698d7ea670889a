"""What ``config apply`` would change: added, changed and (with --prune) deleted config records."""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import cast

from subroute.config.codec import ConfigValue, to_record
from subroute.config.model import AppConfig, GroupConfig
from subroute.config.yaml import dump_yaml, record_document

ADDED = "+"
CHANGED = "~"
DELETED = "-"


@dataclass(frozen=True)
class Change:
    kind: str  # ADDED, CHANGED or DELETED
    key: str
    old: ConfigValue | None
    new: ConfigValue | None

    def render(self) -> str:
        """``~ key`` and, for a change, the lines of the record's YAML that differ, in the file's own field names
        (``expiration: 1m``, not the record's ``expiration_ms``); ``+ key`` / ``- key`` alone."""
        if self.kind != CHANGED or self.old is None or self.new is None:
            return f"{self.kind} {self.key}"
        before, after = _yaml_lines(self.old), _yaml_lines(self.new)
        lines = [
            line
            for line in difflib.unified_diff(before, after, n=0, lineterm="")
            if not line.startswith(("---", "+++", "@@"))
        ]
        if not lines:  # equal as YAML: only the group's place among its app's groups (the file's order) moved
            lines = [f" (now group {cast(GroupConfig, self.new).order + 1} of its app in the file)"]
        return f"{self.kind} {self.key}\n" + "\n".join(f"   {line}" for line in lines)


def _yaml_lines(value: ConfigValue) -> list[str]:
    document = record_document(value)
    return dump_yaml(document).splitlines() if document else ["{}"]  # a group without subscriptions


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
            upserts.append(Change(CHANGED, key, old, new))
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
