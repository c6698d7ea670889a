"""The native plan against the Python plan, per record: ``python tests/perf/bench_native_plan.py
[--sizes 10,1000,10000,100000] [--messages N] [--repeat R]``.

Workload: perfkit's subscription configuration (10 apps, seven bmq and three sql92; equality, range windows,
IN, string comparisons, mixed) at each size, every app filter and consumer subscription in one plan, and
perfkit's order headers (five per record). Both paths start from the raw headers:

* Python: ``decode_headers`` with the declared types (only the names the plan reads), then ``Plan.match``;
* native: ``NativePlan.match_indexes`` on the whole batch (decoding, indexes and evaluation in Rust, the GIL
  released): per record the positions of the matched subscriptions, which is what a caller that keeps its
  candidates in a list needs;
* native + ids: ``NativePlan.match_batch``, the same with the ids mapped back into a frozenset per record, the
  Python plan's own output (hashing the tuple ids is most of what it adds);
* native, filters first: ``match_indexes`` of a plan where each app's filter opens the app's group and its
  consumer subscriptions require it (docs/design.md §2, step 1: subscriptions of apps whose filter fails are not
  evaluated); its matches are the flat plan's minus those of filtered apps.

Both must give the same matches (checked on every record); the median of ``--repeat`` runs is printed as µs per
record, with the ratio measured in the same run.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Hashable

import perfkit
from perfkit import median

from subroute.expressions import Subscription, compile_plan
from subroute.routing.native_plan import NativePlan
from subroute.routing.properties import decode_headers


def subscriptions(total: int) -> list[Subscription]:
    config = perfkit.subscription_config(total)
    subs: list[Subscription] = []
    for app in config.apps.values():
        for i, text in enumerate(app.filter):
            subs.append(Subscription(("filter", app.name, i), text, app.dialect, app.properties))
    for (app_name, group_name), group in config.groups.items():
        app = config.apps[app_name]
        for i, sub in enumerate(group.subscriptions):
            sid = ("subscription", app_name, group_name, i)
            subs.append(Subscription(sid, sub.expression, app.dialect, app.properties))
    return subs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10,1000,10000,100000")
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    headers = perfkit.message_headers(args.messages)
    print(f"{args.messages} records, five headers each; µs per record, median of {args.repeat}")
    print(
        f"{'subscriptions':>13} {'python plan':>12} {'native':>9} {'ratio':>7} {'native+ids':>11} {'ratio':>7}"
        f" {'filters first':>14}"
        f" {'matches/rec':>12}  build s (py, native)"
    )
    for size in (int(s) for s in args.sizes.split(",")):
        subs = subscriptions(size)
        t0 = time.perf_counter()
        plan = compile_plan(subs)
        t1 = time.perf_counter()
        native = NativePlan(subs)
        t2 = time.perf_counter()
        apps = [str(sub.id[1]) for sub in subs]  # type: ignore[index]
        is_filter = [sub.id[0] == "filter" for sub in subs]  # type: ignore[index]
        gated = NativePlan(
            subs,
            reuse=native,
            opens=[a if f else None for a, f in zip(apps, is_filter, strict=True)],
            requires=[None if f else a for a, f in zip(apps, is_filter, strict=True)],
        )
        types = perfkit.TYPES
        reads = plan.properties
        py_times: list[float] = []
        native_times: list[float] = []
        ids_times: list[float] = []
        gated_times: list[float] = []
        expected: list[frozenset[Hashable]] = []
        for _ in range(args.repeat):
            start = time.perf_counter()
            expected = [plan.match(decode_headers(h, types, only=reads)[0]) for h in headers]
            py_times.append(time.perf_counter() - start)
            start = time.perf_counter()
            indexes = native.match_indexes(headers)
            native_times.append(time.perf_counter() - start)
            start = time.perf_counter()
            got = native.match_batch(headers)
            ids_times.append(time.perf_counter() - start)
            start = time.perf_counter()
            behind_filters = gated.match_indexes(headers)
            gated_times.append(time.perf_counter() - start)
            if any(not set(g) <= set(f) for g, f in zip(behind_filters, indexes, strict=True)):
                raise SystemExit("the gated plan matched what the flat plan did not")
            by_index = [frozenset(subs[i].id for i in hit) for hit in indexes]
            if got != expected or by_index != expected:
                raise SystemExit(f"native and Python plans disagree at {size} subscriptions")
        py_us = median(py_times) / args.messages * 1e6
        native_us = median(native_times) / args.messages * 1e6
        ids_us = median(ids_times) / args.messages * 1e6
        gated_us = median(gated_times) / args.messages * 1e6
        matches = sum(len(m) for m in expected) / args.messages
        print(
            f"{len(subs):>13,} {py_us:>12.2f} {native_us:>9.2f} {py_us / native_us:>6.1f}x"
            f" {ids_us:>11.2f} {py_us / ids_us:>6.1f}x {gated_us:>14.2f} {matches:>12.2f}"
            f"  {t1 - t0:.1f}, {t2 - t1:.1f}"
        )


if __name__ == "__main__":
    main()
