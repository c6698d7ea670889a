"""The configuration model: what users write in YAML and what the config topic stores, as frozen values.

One ``AppConfig`` per ``app/<app>`` record and one ``GroupConfig`` per ``group/<app>/<group>`` record.
``Config`` is the whole set at one version; it is a plain value, so routing decisions stay pure functions of it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

DIALECTS = ("bmq", "sql92")
FAIRNESS_MODELS = ("round-robin", "proportional", "fast")
PROPERTY_TYPES = ("int", "string", "bool", "float")
# ``required``: a message goes only to a group whose Kafka consumer group has live members (BlazingMQ routes to
# attached consumers only); ``ignored``: to any group, for readers that confirm without joining a group (Spark).
PRESENCE_MODES = ("required", "ignored")
DEFAULT_PRESENCE = "required"
# What happens to a message older than the app's expiration: ``dead-letter`` (subroute's behaviour since the
# start, so nothing expires unseen) or ``drop`` (AMPS's default: "expiration is considered to be a normal way
# for the message to leave the queue, and is not considered an error"). Counted either way.
ON_EXPIRE_ACTIONS = ("dead-letter", "drop")
DEFAULT_ON_EXPIRE = "dead-letter"


def _frozen(mapping: Mapping[str, str] | None) -> Mapping[str, str]:
    return MappingProxyType(dict(mapping or {}))


@dataclass(frozen=True)
class SubscriptionConfig:
    """One consumer subscription of a group: BlazingMQ's {expression, priority, maxUnconfirmed}."""

    expression: str | None = None  # None: any message
    priority: int = 0
    max_unconfirmed: int | None = None  # None: unbounded

    @property
    def label(self) -> str:
        return self.expression if self.expression is not None else "*"


@dataclass(frozen=True)
class GroupConfig:
    app: str
    name: str
    # Empty: the group takes any message of its app at priority 0 (a consumer without subscription).
    subscriptions: tuple[SubscriptionConfig, ...] = ()
    # Configuration order among the app's groups ("fast" fairness picks the first with room).
    order: int = 0
    # AMPS MaxPerSubscriptionBacklog: the most messages one member (a QueueConsumer) may hold leased at once,
    # whatever it asks for (the smaller of the two wins). None: the member's own max_backlog.
    max_leased_per_member: int | None = None

    @property
    def effective_subscriptions(self) -> tuple[SubscriptionConfig, ...]:
        return self.subscriptions or (SubscriptionConfig(),)

    @property
    def max_unconfirmed(self) -> int | None:
        """The group's one limit on unconfirmed messages: the smallest ``max_unconfirmed`` its subscriptions
        declare (None: unbounded). Routing holds it whichever subscription matched and ``status`` reports FULL at
        it: the count is the group's (its consumer group's lag), so the limit is too."""
        given = [s.max_unconfirmed for s in self.subscriptions if s.max_unconfirmed is not None]
        return min(given) if given else None


@dataclass(frozen=True)
class AppConfig:
    name: str
    inputs: tuple[str, ...]
    dialect: str = "bmq"
    properties: Mapping[str, str] = field(default_factory=lambda: _frozen(None))
    # Where the record's value is read from: "none" (headers only), "json" or "avro" (routing/body.py).
    format: str = "none"
    # The properties read from the body, by name: their JSON Pointer (the others are headers).
    paths: Mapping[str, str] = field(default_factory=lambda: _frozen(None))
    # format avro: a schemaless-Avro writer schema (the file's text, stored inline); None: Confluent wire format.
    schema: str | None = None
    # App subscriptions, OR'ed; empty means every message passes.
    filter: tuple[str, ...] = ()
    group_by: str | None = None
    # The message-group id of a record without the group_by property (Qpid's "default-message-group"); None:
    # wire.DEFAULT_MESSAGE_GROUP. Only meaningful with group_by.
    default_group: str | None = None
    fairness: str = "round-robin"
    spillover: bool = False
    presence: str = DEFAULT_PRESENCE
    partitions: int | None = None
    expiration_ms: int | None = None
    on_expire: str = DEFAULT_ON_EXPIRE
    # AMPS Priority: an integer expression over properties.
    priority: str | None = None
    default_publish: str | None = None
    max_cancels: int | None = None
    max_deliveries: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.properties, MappingProxyType):
            object.__setattr__(self, "properties", _frozen(self.properties))
        if not isinstance(self.paths, MappingProxyType):
            object.__setattr__(self, "paths", _frozen(self.paths))


@dataclass(frozen=True)
class Config:
    """Every app and group at one config version."""

    version: int = 0
    apps: Mapping[str, AppConfig] = field(default_factory=lambda: MappingProxyType({}))
    groups: Mapping[tuple[str, str], GroupConfig] = field(default_factory=lambda: MappingProxyType({}))

    def groups_of(self, app: str) -> tuple[GroupConfig, ...]:
        """The app's groups in configuration order."""
        mine = [g for (a, _), g in self.groups.items() if a == app]
        return tuple(sorted(mine, key=lambda g: (g.order, g.name)))
