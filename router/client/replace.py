"""AMPS's replace, for the consumer client: "The queue consumer is guaranteed that, after the replace occurs,
only messages that match the new subscription will be delivered." Pure (no Kafka).

The router routes each message entirely under one configuration version, stamped on the routed record
(``subroute.config-version``) with the subscription that matched (``subroute.subscription``). Records already in a
group topic when the group's subscriptions change were chosen under the old ones; the client checks each one
against the configuration in force before it delivers it:

* routed under the version in force (or a newer one, or carrying no version: not routed by the router): delivered;
* the group's subscription that routed it is still one of the group's subscriptions, unchanged: delivered;
* otherwise it is delivered only if it passes the app's filter and matches one of the group's current
  subscriptions; if not, it is *replaced*: sent back through the app's pending topic, so the router routes it
  under the current configuration (to another group, or it waits there).

AMPS's own rule 1 of replace ("AMPS does not break message leases ... even if the messages no longer match")
holds too: only messages not delivered yet are checked, never those the application already holds.
"""

from __future__ import annotations

from subroute import expressions, wire
from subroute.config.model import AppConfig, Config, GroupConfig
from subroute.routing.properties import PropertyValue, decode_headers


def routed_version(headers: wire.HeadersIn | None) -> int | None:
    """The config version a record was routed under (None: none, or not a number)."""
    text = wire.header_value(headers, wire.CONFIG_VERSION)
    if text is None or len(text) > 20 or not text.isdigit():
        return None
    return int(text)


class Resubscription:
    """Decides, for one group, whether a routed record still matches the group's subscriptions in force.

    Expressions are compiled once per configuration version (and only when a record needs them)."""

    def __init__(self, app: str, group: str) -> None:
        self.app = app
        self.group = group
        self._version: int | None = None
        self._compiled: dict[str, expressions.Expression | None] = {}

    def matches(self, config: Config, headers: wire.HeadersIn | None) -> bool:
        """True: deliver the record; False: it was routed under an older subscription and does not match the
        group's subscriptions of ``config`` (the group deleted included)."""
        version = routed_version(headers)
        if version is None or version >= config.version:
            return True
        app = config.apps.get(self.app)
        group = config.groups.get((self.app, self.group))
        if app is None or group is None:
            return False
        subscriptions = group.effective_subscriptions
        label = wire.header_value(headers, wire.SUBSCRIPTION)
        if label is not None and any(s.label == label for s in subscriptions):
            return True  # the subscription it was routed by was not replaced
        return self._evaluate(config.version, app, group, headers)

    def _evaluate(
        self,
        version: int,
        app: AppConfig,
        group: GroupConfig,
        headers: wire.HeadersIn | None,
    ) -> bool:
        if version != self._version:
            self._version, self._compiled = version, {}
        props, _ = decode_headers(headers, app.properties)
        if app.filter and not any(self._matches(app, text, props) for text in app.filter):
            return False
        return any(
            s.expression is None or self._matches(app, s.expression, props)
            for s in group.effective_subscriptions
        )

    def _matches(self, app: AppConfig, text: str, props: dict[str, PropertyValue]) -> bool:
        if text not in self._compiled:
            try:
                self._compiled[text] = expressions.compile(text, dialect=app.dialect, types=app.properties)
            except (expressions.ExpressionError, ValueError):
                # Not expected (the configuration in force was validated as a whole); the router decides then.
                self._compiled[text] = None
        compiled = self._compiled[text]
        return compiled is not None and compiled.matches(props)
