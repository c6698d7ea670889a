"""Properties read from Avro bodies in Confluent's wire format against the same properties as headers, on the
decision path, without Kafka: ``python tests/perf/bench_avro_body.py [--sizes 10,10000] [--messages N]
[--repeat R] [--plain]``.

Issue 25's target: µs per record of the native decision path when 3 of an Avro body's 30 fields are read at
most 1.5 x the same with those 3 values as headers. The workload of ``bench_body_properties.py`` (perfkit's
subscription configuration, the same orders and the same three properties: CustomerId ``/customer/id``, Amount
``/amount``, Region ``/shipping/region``), each order written as Avro (a writer schema shaped like the JSON
document: records, arrays, longs, doubles, strings, booleans), framed with schema id 1 as confluent-kafka's
AvroSerializer frames it (``--plain``: schemaless, with the schema as the apps' ``schema:``). Three runs per size:
headers and Avro bodies on the native decision path (``Router.route_batch``: the native decider reads the
bodies itself), and the Avro bodies on the Python path (``Router.route`` per record, the reference reader:
fastavro, routing/body_avro.py).

Per size, CPU µs per record of ``Router.route_batch``, the median of ``--repeat`` passes, the runs' passes
alternating. Before timing, each run's results on the first 300 records are checked against the header run's
(the same values, so the same decisions).
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import io
import json
import time
from collections.abc import Sequence
from typing import Any

import fastavro
import perfkit
from bench_body_properties import PATHS, records
from perfkit import median, verdict

from subroute.config.avro_schema import writer_schema
from subroute.config.model import Config
from subroute.routing import decisions
from subroute.routing.body import WriterOf
from subroute.routing.decisions import MessageView, Router, RoutingTable
from subroute.routing.native_routing import build_table

SCHEMA_ID = 1
TARGET = 1.5


def schema_of(value: Any, name: str) -> Any:
    """An Avro schema shaped like a JSON value (arrays typed by their first item)."""
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "long"
    if isinstance(value, float):
        return "double"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return {"type": "array", "items": schema_of(value[0], f"{name}_item")}
    fields = [{"name": key, "type": schema_of(item, f"{name}_{key}")} for key, item in value.items()]
    return {"type": "record", "name": name, "fields": fields}


def avro_views(in_body: Sequence[MessageView], plain: bool) -> tuple[list[MessageView], Any]:
    """The orders as Avro values (framed, unless ``plain``; same headers), and their writer schema."""
    schema = schema_of(json.loads(in_body[0].value or b"{}"), "Order")
    parsed = fastavro.parse_schema(schema)
    frame = b"" if plain else b"\x00" + SCHEMA_ID.to_bytes(4, "big")
    views = []
    for view in in_body:
        out = io.BytesIO()
        fastavro.schemaless_writer(out, parsed, json.loads(view.value or b"{}"))
        views.append(MessageView(view.topic, view.headers, view.timestamp_ms, frame + out.getvalue()))
    return views, schema


def avro_config(config: Config, schema: str | None) -> Config:
    apps = {
        n: dataclasses.replace(a, format="avro", paths=dict(PATHS), schema=schema)
        for n, a in config.apps.items()
    }
    return Config(config.version, apps, dict(config.groups))


def cpu_us_per_record(table: RoutingTable, views: Sequence[MessageView], writer_of: WriterOf) -> float:
    router = Router()
    router.writer_of = writer_of
    start = time.process_time()
    router.route_batch(table, views, {}, 0)
    return (time.process_time() - start) / len(views) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10,10000", help="subscriptions, comma-separated")
    parser.add_argument(
        "--messages", type=int, default=2_000, help="records per pass (2,000: a worker batch)"
    )
    parser.add_argument("--repeat", type=int, default=15, help="passes per figure, median reported (15)")
    parser.add_argument("--plain", action="store_true", help="schemaless Avro with the apps' schema:")
    args = parser.parse_args()
    as_headers, in_body = records(args.messages)
    avro, schema = avro_views(in_body, args.plain)
    writers = {SCHEMA_ID: writer_schema(schema)}
    app_schema = json.dumps(schema) if args.plain else None
    size = sum(len(v.value or b"") for v in avro) / len(avro)
    print(
        f"{args.messages:,} records per pass, {'plain' if args.plain else 'framed'} Avro values of {size:,.0f} "
        f"bytes, 3 of 30 fields read; CPU µs per record of route_batch, median of {args.repeat} alternating passes"
    )
    print(f"{'subscriptions':>13} {'headers':>9} {'avro':>9} {'avro/headers':>13} {'python path':>12}")
    worst = 0.0
    for count in (int(s) for s in args.sizes.split(",")):
        config = perfkit.subscription_config(count, "orders")
        body = avro_config(config, app_schema)
        native = build_table(body)
        if native.native is None or native.native.decisions is None:
            raise SystemExit(f"no native decider for the Avro run at {count} subscriptions")
        runs: list[tuple[RoutingTable, Sequence[MessageView]]] = [
            (build_table(config), as_headers),
            (native, avro),
            (decisions.build_table(body), avro),  # no native routing: Router.route per record
        ]
        decided = []
        for table, views in runs:
            router = Router()
            router.writer_of = writers.get
            decided.append(router.route_batch(table, views[:300], {}, 0))
        if not decided[0] == decided[1] == decided[2]:
            raise SystemExit(f"the Avro runs decide otherwise than the header run at {count} subscriptions")
        gc.freeze()  # as the worker does after each build
        # The runs' passes alternate, so that other work on the machine weighs on them alike.
        samples: list[list[float]] = [[] for _ in runs]
        for _ in range(args.repeat):
            for (table, views), found in zip(runs, samples, strict=True):
                found.append(cpu_us_per_record(table, views, writers.get))
        figures = [median(found) for found in samples]
        del runs, native
        gc.unfreeze()
        gc.collect()
        ratio = figures[1] / figures[0]
        worst = max(worst, ratio)
        print(
            f"{perfkit.expression_count(config):>13,} {figures[0]:>9.2f} {figures[1]:>9.2f} {ratio:>12.2f}x "
            f"{figures[2]:>12.2f}"
        )
    print(f"worst avro/headers: {worst:.2f}x (target <= {TARGET}x: {verdict(worst <= TARGET)})")


if __name__ == "__main__":
    main()
