"""Which groups capacity, presence and message groups' holders are measured for, and each group's limit: pure
functions of a Config (the worker measures them over Kafka: worker/capacity.py).

A group's lag (its unconfirmed count) can change a decision only where some subscription of its app has a
``max_unconfirmed``; presence only for apps with ``presence: required``; committed offsets of message groups'
holders only for apps with ``group_by``.
"""

from __future__ import annotations

from subroute.config.model import Config

GroupId = tuple[str, str]


def groups_needing_capacity(config: Config) -> list[GroupId]:
    """Groups whose lag can change a decision: some subscription of the app has a max_unconfirmed."""
    wanted: list[GroupId] = []
    for app in config.apps.values():
        groups = config.groups_of(app.name)
        if any(s.max_unconfirmed is not None for g in groups for s in g.subscriptions):
            wanted.extend((app.name, g.name) for g in groups)
    return wanted


def group_limits(config: Config) -> dict[tuple[str, str], int]:
    """Each group's limit (``GroupConfig.max_unconfirmed``, the smallest its subscriptions declare; groups that
    declare none are left out): the lag at which routing stops giving it records, whatever subscription
    matched."""
    limits: dict[tuple[str, str], int] = {}
    for app in config.apps.values():
        for group in config.groups_of(app.name):
            limit = group.max_unconfirmed
            if limit is not None:
                limits[(app.name, group.name)] = limit
    return limits


def groups_holding(config: Config) -> list[GroupId]:
    """Groups that may hold message groups: those of apps with ``group_by``."""
    return [
        (app.name, g.name)
        for app in config.apps.values()
        if app.group_by is not None
        for g in config.groups_of(app.name)
    ]


def groups_needing_presence(config: Config) -> list[GroupId]:
    """Groups whose presence can change a decision: those of apps with ``presence: required``."""
    return [
        (app.name, g.name)
        for app in config.apps.values()
        if app.presence == "required"
        for g in config.groups_of(app.name)
    ]
