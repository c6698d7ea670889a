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


def test_a_change_shows_the_yaml_lines_that_differ_in_the_files_own_names() -> None:
    changed = GroupConfig("a", "g", (SubscriptionConfig("X > 2", 5),))
    (change,) = diff(state(A, G), state(A, changed))
    assert change.kind == CHANGED and change.key == "group/a/g"
    assert render([change]).splitlines() == [
        "~ group/a/g",
        "   -- expression: X > 1",
        "   +- expression: X > 2",
    ]
    # an app's field as the file writes it (expiration: 1m), never the record's (expiration_ms: 60000)
    sooner = AppConfig(name="a", inputs=("t",), expiration_ms=60_000)
    (change,) = diff(state(A), state(sooner))
    assert render([change]).splitlines() == ["~ app/a", "   +expiration: 1m"]
    # equal as YAML: the group moved among its app's groups (the order fast fairness follows)
    (change,) = diff(state(A, G), state(A, GroupConfig("a", "g", G.subscriptions, order=1)))
    assert render([change]).splitlines() == ["~ group/a/g", "    (now group 2 of its app in the file)"]


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
