"""Properties read from Avro bodies in Confluent's wire format against the same properties as headers, on the
decision path, without Kafka: ``python tests/perf/bench_avro_body.py [--sizes 10,10000] [--messages N]
[--repeat R]``.

The workload of ``bench_body_properties.py`` (perfkit's subscription configuration, the same orders and the same
three properties: CustomerId ``/customer/id``, Amount ``/amount``, Region ``/shipping/region``), each order
written as Avro (a writer schema shaped like the JSON document: records, arrays, longs, doubles, strings,
booleans), framed with schema id 1, as confluent-kafka's AvroSerializer frames it. Three runs per size:
headers (the native decision path), Avro bodies read by the native reader (what the worker does: decisions on
the Python path, ``Router.read_body = native_avro.read_body``) and by the reference (fastavro, routing/body_avro.py).

Per size, CPU µs per record of ``Router.route_batch``, the median of ``--repeat`` passes. Before timing, each
run's results on the first 300 records are checked against the header run's (the same values, so the same
decisions).
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import io
import json
import time
from collections.abc import Callable, Sequence
from typing import Any

import fastavro
import perfkit
from bench_body_properties import PATHS, records
from perfkit import median

from subroute.config.avro_schema import writer_schema
from subroute.config.model import Config
from subroute.routing import native_avro
from subroute.routing.body import read_body
from subroute.routing.decisions import MessageView, Router, RoutingTable
from subroute.routing.native_routing import build_table

SCHEMA_ID = 1


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


def avro_views(in_body: Sequence[MessageView]) -> tuple[list[MessageView], Any]:
    """The orders as framed Avro values (same headers), and their writer schema."""
    schema = schema_of(json.loads(in_body[0].value or b"{}"), "Order")
    parsed = fastavro.parse_schema(schema)
    views = []
    for view in in_body:
        out = io.BytesIO()
        fastavro.schemaless_writer(out, parsed, json.loads(view.value or b"{}"))
        framed = b"\x00" + SCHEMA_ID.to_bytes(4, "big") + out.getvalue()
        views.append(MessageView(view.topic, view.headers, view.timestamp_ms, framed))
    return views, schema


def avro_config(config: Config) -> Config:
    apps = {n: dataclasses.replace(a, format="avro", paths=dict(PATHS)) for n, a in config.apps.items()}
    return Config(config.version, apps, dict(config.groups))


def timed(
    table: RoutingTable, views: Sequence[MessageView], make: Callable[[], Router], repeat: int
) -> tuple[float, list[object]]:
    decided = list(make().route_batch(table, views[:300], {}, 0))
    samples = []
    for _ in range(repeat):
        router = make()
        start = time.process_time()
        router.route_batch(table, views, {}, 0)
        samples.append((time.process_time() - start) / len(views) * 1e6)
    return median(samples), decided


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10,10000", help="subscriptions, comma-separated")
    parser.add_argument(
        "--messages", type=int, default=2_000, help="records per pass (2,000: a worker batch)"
    )
    parser.add_argument("--repeat", type=int, default=5, help="passes per figure, median reported (5)")
    args = parser.parse_args()
    as_headers, in_body = records(args.messages)
    framed, schema = avro_views(in_body)
    writers = {SCHEMA_ID: writer_schema(schema)}
    size = sum(len(v.value or b"") for v in framed) / len(framed)
    print(
        f"{args.messages:,} records per pass, framed Avro values of {size:,.0f} bytes, 3 of 30 fields read; "
        f"CPU µs per record of route_batch, median of {args.repeat} passes"
    )
    print(f"{'subscriptions':>13} {'headers':>9} {'avro':>9} {'avro/headers':>13} {'reference':>10}")

    def router(native: bool) -> Callable[[], Router]:
        def make() -> Router:
            made = Router()
            made.writer_of = writers.get
            made.read_body = native_avro.read_body if native else read_body
            return made

        return make

    for count in (int(s) for s in args.sizes.split(",")):
        config = perfkit.subscription_config(count, "orders")
        figures, results = [], []
        for cfg, views, make in (
            (config, as_headers, Router),
            (avro_config(config), framed, router(True)),
            (avro_config(config), framed, router(False)),
        ):
            table = build_table(cfg)
            gc.freeze()  # as the worker does after each build
            figure, decided = timed(table, views, make, args.repeat)
            figures.append(figure)
            results.append(decided)
            del table
            gc.unfreeze()
            gc.collect()
        if not results[0] == results[1] == results[2]:
            raise SystemExit(f"the Avro runs decide otherwise than the header run at {count} subscriptions")
        ratio = figures[1] / figures[0]
        print(
            f"{perfkit.expression_count(config):>13,} {figures[0]:>9.2f} {figures[1]:>9.2f} {ratio:>12.1f}x "
            f"{figures[2]:>10.2f}"
        )


if __name__ == "__main__":
    main()
