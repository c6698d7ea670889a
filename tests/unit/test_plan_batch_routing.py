"""``subroute plan``'s routing function without Spark: ``route_columns`` (``Router.route_batch``, one native plan
evaluation per Arrow batch and table) gives exactly the partition summary that routing each record alone with
``Router.route`` gives (transitions, counts, unmatched records and their examples), on arrival and with
``--evaluate-at now``, over random configurations and records (tests/unit/native/test_native_routing.py's, JSON
values included: apps that read body properties read them from the record's value as the worker does)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parent / "native"))
from test_native_routing import SETTINGS, configs, records

from subroute.config.model import Config
from subroute.routing.decisions import MessageView, Router
from subroute.routing.native_routing import build_table
from subroute.spark import plan


def per_record(current: Config, proposed: Config, columns: dict[str, list[Any]], at_ms: int | None) -> Any:
    """The summary as the plan made it before it routed by batch: ``Router.route`` per record."""
    old_table, new_table = build_table(current), build_table(proposed)
    old_router, new_router = Router(), Router()
    summary = plan.PartitionSummary(3)
    for topic, partition, offset, ts_ms, raw, value in zip(
        *(columns[c] for c in ("topic", "partition", "offset", "ts_ms", "headers", "value")), strict=True
    ):
        headers = tuple((h["key"], h["value"]) for h in raw or ())
        view = MessageView(topic, headers, ts_ms or 0, value)
        now_ms = at_ms if at_ms is not None else ts_ms or 0
        old = {d.app: d for d in old_router.route(old_table, view, plan.EMPTY_LAG, now_ms).decisions}
        new = {d.app: d for d in new_router.route(new_table, view, plan.EMPTY_LAG, now_ms).decisions}
        summary.add(topic, partition, offset, headers, old, new)
    return summary.rows()


def batched(current: Config, proposed: Config, batches: list[dict[str, list[Any]]], at_ms: int | None) -> Any:
    tables = (build_table(current), build_table(proposed))
    routers = (Router(), Router())
    summary = plan.PartitionSummary(3)
    for columns in batches:
        plan.route_columns(tables, routers, columns, at_ms, summary)
    return summary.rows()


@SETTINGS
@given(st.data())
def test_batch_routing_gives_the_per_record_summary(data: st.DataObject) -> None:
    current, proposed = data.draw(configs()), data.draw(configs())
    apps = sorted(current.apps.keys() | proposed.apps.keys())
    drawn = data.draw(st.lists(records(apps), min_size=1, max_size=16))
    columns: dict[str, list[Any]] = {
        "topic": [m.topic for m, _ in drawn],
        "partition": [0] * len(drawn),
        "offset": list(range(len(drawn))),
        # Kafka's "no timestamp" (-1) and a missing one too; the drawn ones are 0, 5,000 and 9,500.
        "ts_ms": [data.draw(st.sampled_from((m.timestamp_ms, m.timestamp_ms, -1, None))) for m, _ in drawn],
        "headers": [[{"key": k, "value": v} for k, v in m.headers or ()] or None for m, _ in drawn],
        "value": [m.value for m, _ in drawn],
    }
    at_ms = data.draw(st.sampled_from((None, 10_000, 6_000)))
    # Arrow hands the records over in batches: split them anywhere, the round-robin carries across.
    cut = data.draw(st.integers(0, len(drawn)))
    batches = [{c: v[:cut] for c, v in columns.items()}, {c: v[cut:] for c, v in columns.items()}]
    assert batched(current, proposed, batches, at_ms) == per_record(current, proposed, columns, at_ms)
