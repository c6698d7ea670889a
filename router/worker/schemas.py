"""The writer schemas a batch needs, fetched before it is decided: the worker's side of Avro in Confluent's wire
format (apps with ``format: avro`` and no ``schema:``).

Before a batch is routed, the schema id of every value such an app reads is looked up in the registry
(``WriterSchemas``: each id fetched once and kept). The decisions then read through those answers only
(``Router.writer_of``), so routing never talks to the registry. An id the registry does not have is an
undecodable body (counted); a registry that cannot be read raises ``RegistryUnavailable`` here, before anything
of the batch was routed or produced: the loop puts the batch back (seeks its partitions to its first offsets)
and reads it again after a backoff wait, reporting not ready meanwhile (worker/loop.py).
"""

from __future__ import annotations

from collections.abc import Iterable

from subroute import wire
from subroute.config.avro_schema import WriterSchema, needs_schema_registry, writer_schema_chain
from subroute.kafka.schema_registry import RegistrySettings, RegistryUnavailable, WriterSchemas
from subroute.routing.body import WriterOf
from subroute.routing.body_avro import schema_id
from subroute.routing.decisions import RoutingTable

NO_REGISTRY = "(no schema registry set)"


class BatchSchemas:
    """Writer schemas by id for the framed Avro values of a batch."""

    def __init__(self, settings: RegistrySettings | None, prefix: str = wire.DEFAULT_TOPIC_PREFIX) -> None:
        self.prefix = prefix
        self.registry = WriterSchemas(settings, writer_schema_chain) if settings is not None else None
        # every schema fetched so far (a registered id never changes): a record decided outside the batch it came
        # in (a pending pass) still finds its schema; an id the registry lacked is asked again (it may come)
        self._known: dict[int, WriterSchema] = {}
        self._table: RoutingTable | None = None
        self._framed_apps: frozenset[str] = frozenset()
        self._framed_topics: dict[str, bool] = {}
        self._framed_pending: frozenset[str] = frozenset()  # the pending topics of those apps

    def _follow(self, table: RoutingTable) -> None:
        if table is self._table:
            return
        self._table = table
        self._framed_apps = frozenset(app.name for app in table.apps if needs_schema_registry(app.config))
        self._framed_topics = {}
        self._framed_pending = frozenset(wire.pending_topic(self.prefix, name) for name in self._framed_apps)

    def _framed(self, table: RoutingTable, topic: str) -> bool:
        """Whether an app reading records of ``topic`` (an input, or an app's pending topic) reads framed Avro.
        (Inputs never select the router's own topics: validation refuses it.)"""
        found = self._framed_topics.get(topic)
        if found is None:
            found = topic in self._framed_pending or any(
                a.name in self._framed_apps for a in table.apps_for(topic)
            )
            self._framed_topics[topic] = found
        return found

    def prepare(
        self,
        table: RoutingTable,
        records: Iterable[tuple[str, bytes | None]],
    ) -> WriterOf:
        """The lookup the batch's decisions read through, given each record's ``(topic, value)``; raises
        RegistryUnavailable when a schema the batch needs cannot be fetched."""
        self._follow(table)
        found: dict[int, WriterSchema | None] = {}
        known = self._known

        def writer_of(sid: int) -> WriterSchema | None:
            return found[sid] if sid in found else known.get(sid)

        if not self._framed_apps:
            return writer_of
        for topic, value in records:
            if value is None or not self._framed(table, topic):
                continue
            sid = schema_id(value)
            if sid is None or sid in found:
                continue  # not a frame: undecodable, no lookup
            if self.registry is None:
                raise RegistryUnavailable(NO_REGISTRY, sid, "give --schema-registry-url")
            writer = found[sid] = self.registry.get(sid)
            if writer is not None:
                known[sid] = writer
        return writer_of
