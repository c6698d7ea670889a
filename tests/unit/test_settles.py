"""Settle entries (``subroute queue ack``), pure: the JSON an entry travels as, and the rule it makes: a record
of its group, below its partition's recorded end, matching its filter, is covered; nothing else is."""

from __future__ import annotations

import pytest

from subroute import expressions
from subroute.client.settles import SettleEntry, SettleEntryError, SettleRules, compile_filter
from subroute.config.model import AppConfig

APP = AppConfig("Jobs", ("jobs",), properties={"Size": "int", "Kind": "string"})
ENTRY = SettleEntry(
    "Jobs", "workers", "e1", 'Kind == "bad"', {("p.Jobs.workers", 0): 10, ("p.Jobs.workers.p3", 1): 4}
)


def headers(kind: str, size: int = 0) -> list[tuple[str, bytes | None]]:
    return [("Kind", kind.encode()), ("Size", str(size).encode())]


def test_an_entry_round_trips_through_its_json() -> None:
    full = SettleEntry("Jobs", "workers", "e1", "Size > 3", ENTRY.ends, dead_letter=True, at_ms=5, count=7)
    assert SettleEntry.from_json(full.to_json()) == full
    assert full.key == "Jobs/workers/e1"


@pytest.mark.parametrize("raw", [b"{", b"[]", b'{"version": 2}', b'{"version": 1, "app": "a"}'])
def test_what_is_no_entry_is_refused(raw: bytes) -> None:
    with pytest.raises(SettleEntryError):
        SettleEntry.from_json(raw)


def test_covers_only_matching_records_below_the_recorded_end_of_their_partition() -> None:
    rules = SettleRules(APP, "workers")
    rules.take(ENTRY.key, ENTRY.to_json())
    assert rules.covers("p.Jobs.workers", 0, 9, headers("bad"))
    assert not rules.covers("p.Jobs.workers", 0, 10, headers("bad"))  # arrived after the entry
    assert not rules.covers("p.Jobs.workers", 0, 3, headers("good"))  # does not match
    assert not rules.covers("p.Jobs.workers", 1, 0, headers("bad"))  # a partition it recorded no end of
    assert rules.covers("p.Jobs.workers.p3", 1, 3, headers("bad"))  # band topics too
    rules.take(ENTRY.key, None)  # a tombstone removes it
    assert not rules.covers("p.Jobs.workers", 0, 9, headers("bad")) and len(rules) == 0


def test_another_groups_entry_is_ignored() -> None:
    rules = SettleRules(APP, "others")
    rules.take(ENTRY.key, ENTRY.to_json())
    assert len(rules) == 0 and not rules.covers("p.Jobs.workers", 0, 1, headers("bad"))


def test_a_filter_that_no_longer_compiles_covers_nothing() -> None:
    """Under a later change of the app's declared types: delivering is the safe side."""
    rules = SettleRules(AppConfig("Jobs", ("jobs",), properties={"Kind": "int"}), "workers")
    rules.take(ENTRY.key, ENTRY.to_json())
    assert len(rules) == 1 and not rules.covers("p.Jobs.workers", 0, 1, [("Kind", b"1")])


def test_passed_once_the_groups_commits_reach_every_end() -> None:
    assert not ENTRY.passed({("p.Jobs.workers", 0): 10})
    assert ENTRY.passed({("p.Jobs.workers", 0): 10, ("p.Jobs.workers.p3", 1): 4})


def test_the_filter_is_checked_as_a_subscription_of_the_app() -> None:
    assert compile_filter(APP, "Size > 3").matches({"Size": 4})
    with pytest.raises(expressions.ExpressionError):
        compile_filter(APP, 'Size == "x"')
    with pytest.raises(expressions.UndeclaredPropertyError):
        compile_filter(APP, "Other > 1")  # undeclared: a string, so never a number
