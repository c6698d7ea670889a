"""The operator's settle entries (``subroute queue ack``), honoured by the job: a record an entry covers is not
landed, as ``QueueConsumer`` never delivers it (the rule is ``subroute.client.settles``).

Decided on the driver, with the same rule and reader as the client: each micro-batch, the entries of the (app,
group) pairs it holds are read (``SettleFeed``, kept open across batches and followed), the batch's rows below
an entry's recorded ends are collected (only those: an entry covers what was queued when it was written) and
matched against its filter with the app's dialect and properties from the config topic, and the covered rows
are left out of the write by (topic, partition, offset). Where the entries cannot be read (no settle topic, the
app no longer configured), everything lands: a record is never lost by an entry. The batch's offsets are
confirmed as always, covered rows included: they are settled.
"""

from __future__ import annotations

import logging

from confluent_kafka.admin import AdminClient
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from subroute import wire
from subroute.client.settle_feed import SettleFeed
from subroute.client.settles import SettleRules
from subroute.config.store import read_config
from subroute.kafka.clients import existing_topics
from subroute.ops.settings import Settings

log = logging.getLogger(__name__)

Pair = tuple[str, str]  # (app, group)
Row = tuple[str, int, int]  # (topic, partition, offset)


class SettledRecords:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._feeds: dict[Pair, SettleFeed] = {}
        self.skipped = 0  # rows left out, over the job's life

    def _rules(self, pairs: set[Pair], admin: AdminClient) -> dict[Pair, SettleRules]:
        """The entries in force for each of ``pairs`` that has any."""
        if not self._feeds and wire.settle_topic(self.settings.topic_prefix) not in existing_topics(admin):
            return {}  # no operator ever settled by filter: the usual case, one metadata request
        config = None
        rules: dict[Pair, SettleRules] = {}
        for pair in sorted(pairs):
            feed = self._feeds.get(pair)
            if feed is None:
                config = config or read_config(self.settings)
                app = config.apps.get(pair[0])
                if app is None:
                    continue  # no longer configured: its filters cannot be read as it meant them
                feed = self._feeds[pair] = SettleFeed(self.settings, app, pair[1], create=False)
            else:
                feed.refresh()
            if len(feed.rules):
                rules[pair] = feed.rules
        return rules

    def covered(self, batch: DataFrame, pairs: set[Pair], admin: AdminClient) -> DataFrame | None:
        """The (topic, partition, offset) of the batch's rows that an entry covers; None when none can be."""
        rules = self._rules(pairs, admin)
        below = [
            (F.col("app") == app)
            & (F.col("group") == group)
            & (F.col("topic") == topic)
            & (F.col("partition") == partition)
            & (F.col("offset") < end)
            for (app, group), rule in rules.items()
            for entry in rule.entries
            for (topic, partition), end in entry.ends.items()
        ]
        if not below:
            return None
        condition = below[0]
        for more in below[1:]:
            condition = condition | more
        candidates = batch.filter(condition).select("app", "group", "topic", "partition", "offset", "headers")
        rows: list[Row] = []
        for row in candidates.toLocalIterator():
            # Spark hands binary values over as bytearray; the decoders take bytes, as a Kafka client gives them.
            headers = [
                (h["key"], None if h["value"] is None else bytes(h["value"])) for h in row["headers"] or ()
            ]
            rule = rules[(row["app"], row["group"])]
            if rule.covers(row["topic"], row["partition"], row["offset"], headers):
                rows.append((row["topic"], row["partition"], row["offset"]))
        if not rows:
            return None
        self.skipped += len(rows)
        log.info("settled records left out", extra={"fields": {"rows": len(rows)}})
        schema = "topic string, partition int, offset long"
        return batch.sparkSession.createDataFrame(rows, schema)

    def close(self) -> None:
        for feed in self._feeds.values():
            feed.close()
        self._feeds.clear()
