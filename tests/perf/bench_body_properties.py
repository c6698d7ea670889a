"""Properties read from JSON bodies against the same properties as headers, on the decision path, without Kafka:
``python tests/perf/bench_body_properties.py [--sizes 10,10000] [--messages N] [--repeat R]``.

Issue 25's target: µs per record of the native decision path when 3 of a 1 KB JSON body's 30 fields are
read (``format: json``, ``path:``) at most 1.5 x the same with those 3 values as headers. Workload: perfkit's
subscription configuration at each size (10 apps, bmq and sql92); CustomerId (``/customer/id``), Amount
(``/amount``) and Region (``/shipping/region``) are read from the body in the body run and from headers in the
header run; App and OrderType are headers in both. Every record carries the same 1 KB value in both runs (the
header run never reads it), so the runs differ only in where the three properties come from.

Per size, CPU µs per record (this process's CPU time), the median of ``--repeat`` passes over the same
``--messages`` records, of ``Router.route_batch`` (the native plan and decisions, from raw records to
``RouteResult``s), both runs measured in this process one after the other. Before timing, each run's
``route_batch`` is checked against ``route`` (the Python reference) on the first 300 records, and the body
run's results against the header run's (the same values, so the same decisions).
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import json
import random
import time
from collections.abc import Sequence

import perfkit
from perfkit import median, verdict

from subroute.config.model import Config
from subroute.routing.decisions import MessageView, Router, RoutingTable
from subroute.routing.native_routing import build_table

PATHS = {"CustomerId": "/customer/id", "Amount": "/amount", "Region": "/shipping/region"}
TARGET = 1.5


def body_config(config: Config) -> Config:
    """``config`` with every app reading the three properties from the body."""
    apps = {
        name: dataclasses.replace(app, format="json", paths=dict(PATHS)) for name, app in config.apps.items()
    }
    return Config(config.version, apps, dict(config.groups))


def order_value(rng: random.Random, customer: int, amount: int, region: str) -> bytes:
    """A JSON order of about 1 KB with 30 fields (leaves), the three read ones among them, spread out."""
    doc = {
        "order_id": f"ord-{rng.randrange(10**9):09d}",
        "created_at": "2026-11-26T05:00:00.000Z",
        "currency": "EUR",
        "channel": rng.choice(("web", "app", "store")),
        "customer": {
            "id": customer,
            "name": "Customer " + "x" * rng.randrange(10, 30),
            "email": f"c{customer}@example.com",
            "tier": rng.choice(("gold", "silver", "bronze")),
            "since": 2015 + rng.randrange(10),
        },
        "items": [
            {
                "sku": f"SKU-{rng.randrange(10**6):06d}",
                "qty": rng.randrange(1, 9),
                "price": rng.randrange(100) / 4,
            }
            for _ in range(3)
        ],
        "notes": "",
        "discount": {"code": "WINTER", "percent": 10, "applied": True},
        "payment": {"method": "card", "last4": f"{rng.randrange(10**4):04d}", "authorized": True},
        "tags": ["priority", "gift", "fragile"],
        "amount": amount,
        "shipping": {
            "method": rng.choice(("express", "standard")),
            "street": "Long Street " + str(rng.randrange(1000)),
            "city": "Springfield",
            "postcode": f"{rng.randrange(10**5):05d}",
            "region": region,
        },
    }
    # As most producers write it (json.dumps' separators), the notes filling it up to 1 KB.
    doc["notes"] = "Leave at the door, ring twice. " * 16
    text = json.dumps(doc)
    doc["notes"] = doc["notes"][: max(0, len(doc["notes"]) - (len(text) - 1024))]
    return json.dumps(doc).encode()


def records(count: int, seed: int = 5) -> tuple[list[MessageView], list[MessageView]]:
    """The same ``count`` orders twice: with all five properties as headers, and with three in the body only;
    both carry the JSON value."""
    rng = random.Random(seed)
    as_headers, in_body = [], []
    for headers in perfkit.message_headers(count, seed=seed):
        values = dict(headers)
        value = order_value(rng, int(values["CustomerId"]), int(values["Amount"]), values["Region"].decode())
        as_headers.append(MessageView("orders", headers, 0, value))
        kept = [(k, v) for k, v in headers if k not in PATHS]
        in_body.append(MessageView("orders", kept, 0, value))
    return as_headers, in_body


def cpu_us_per_record(table: RoutingTable, views: Sequence[MessageView], repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        router = Router()
        start = time.process_time()
        router.route_batch(table, views, {}, 0)
        samples.append((time.process_time() - start) / len(views) * 1e6)
    return median(samples)


def checked(table: RoutingTable, views: Sequence[MessageView], what: str) -> list[object]:
    reference = Router()
    expected = [reference.route(table, v, {}, 0) for v in views[:300]]
    got = Router().route_batch(table, views[:300], {}, 0)
    if got != expected:
        raise SystemExit(f"route_batch and route disagree ({what})")
    return list(got)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10,10000", help="subscriptions, comma-separated")
    parser.add_argument(
        "--messages", type=int, default=2_000, help="records per pass (2,000: a worker batch)"
    )
    parser.add_argument("--repeat", type=int, default=7, help="passes per figure, median reported (7)")
    args = parser.parse_args()
    as_headers, in_body = records(args.messages)
    size = sum(len(v.value or b"") for v in in_body) / len(in_body)
    print(
        f"{args.messages:,} records per pass, values of {size:,.0f} bytes, 3 of 30 fields read; "
        f"CPU µs per record of route_batch, median of {args.repeat} passes"
    )
    print(f"{'subscriptions':>13} {'headers':>9} {'body':>9} {'body/headers':>13}")
    worst = 0.0
    for count in (int(s) for s in args.sizes.split(",")):
        config = perfkit.subscription_config(count, "orders")
        figures = []
        results = []
        for cfg, views, what in ((config, as_headers, "headers"), (body_config(config), in_body, "body")):
            table = build_table(cfg)
            gc.freeze()  # as the worker does after each build
            if table.native is None or table.native.decisions is None:
                raise SystemExit(f"no native decider for the {what} run at {count} subscriptions")
            results.append(checked(table, views, what))
            figures.append(cpu_us_per_record(table, views, args.repeat))
            del table
            gc.unfreeze()
            gc.collect()
        if results[0] != results[1]:
            raise SystemExit(f"the body run decides otherwise than the header run at {count} subscriptions")
        ratio = figures[1] / figures[0]
        worst = max(worst, ratio)
        print(
            f"{perfkit.expression_count(config):>13,} {figures[0]:>9.2f} {figures[1]:>9.2f} {ratio:>12.2f}x"
        )
    print(f"worst body/headers: {worst:.2f}x (target <= {TARGET}x: {verdict(worst <= TARGET)})")


if __name__ == "__main__":
    main()
