"""What apply writes: only changes, apps before their groups, deletions only with --prune, groups before apps."""

from __future__ import annotations

from subroute.config.codec import ConfigValue, key_of
from subroute.config.diff import ADDED, CHANGED, DELETED, diff, render
from subroute.config.model import AppConfig, GroupConfig, SubscriptionConfig


def state(*values: ConfigValue) -> dict[str, ConfigValue]:
    return {key_of(v): v for v in values}


A = AppConfig(name="a", inputs=("t",))
G = GroupConfig("a", "g", (SubscriptionConfig("X > 1", 5),))


def test_identical_states_have_no_changes() -> None:
    assert diff(state(A, G), state(AppConfig(name="a", inputs=("t",)), G)) == []


def test_new_group_is_written_after_its_new_app() -> None:
    changes = diff({}, state(G, A))
    assert [(c.kind, c.key) for c in changes] == [(ADDED, "app/a"), (ADDED, "group/a/g")]


def test_changed_fields_are_listed() -> None:
    changed = GroupConfig("a", "g", (SubscriptionConfig("X > 2", 5),), order=1)
    (change,) = diff(state(A, G), state(A, changed))
    assert change.kind == CHANGED and change.key == "group/a/g"
    assert change.fields == (
        "subscriptions: [{'expression': 'X > 1', 'priority': 5, 'max_unconfirmed': None}] -> "
        "[{'expression': 'X > 2', 'priority': 5, 'max_unconfirmed': None}]",
        "order: 0 -> 1",
    )
    assert render([change]).startswith("~ group/a/g\n    subscriptions: ")


def test_deletions_only_with_prune_and_groups_first() -> None:
    other = GroupConfig("a", "h")
    assert diff(state(A, G, other), {}) == []
    changes = diff(state(A, G, other), {}, prune=True)
    assert [(c.kind, c.key) for c in changes] == [
        (DELETED, "group/a/g"),
        (DELETED, "group/a/h"),
        (DELETED, "app/a"),
    ]
    assert render(changes).splitlines() == ["- group/a/g", "- group/a/h", "- app/a"]
