"""Router throughput against the ceiling: ``python tests/perf/bench_router.py [--messages N] [--repeat R]``.

On one embedded broker and one pre-loaded input topic (200-byte values, five headers), in turn and ``--repeat``
times (the median is reported):

* the pass-through pipe, the ceiling: consume a batch, produce every record with its headers, flush, commit;
* the worker with 1,000 expressions (10 apps x 100: equality, ranges, IN, string comparisons, mixed) and with
  10,000, on disjoint app filters: every input record goes to exactly one group topic, as the pipe's does;
* the worker on a fan-out workload (every record passes three apps' filters), as routed records per second.

Then the decision path without Kafka: the router against the naive approach (every expression evaluated on
its own per message, compiled and interpreted) at 1,000 expressions, and the cost growth from 10 to 10,000.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Sequence
from typing import Any

import perfkit
from perfkit import median, spread, verdict

import expressions
from expressions.interpreter import interpret
from router.properties import decode_headers
from router.routing import Action, MessageView, Router, RoutingTable, build_table, decide_app


def throughput(args: argparse.Namespace) -> dict[str, list[float]]:
    results: dict[str, list[float]] = {"pipe": [], "1000": [], "10000": [], "fanout": [], "fanout_in": []}
    with perfkit.broker() as b:
        base = perfkit.settings(b.bootstrap_servers)
        topic = f"{base.topic_prefix}-orders"
        perfkit.create_topic(base, topic, args.partitions)
        seconds = perfkit.produce_input(base, topic, perfkit.message_headers(args.messages))
        print(
            f"loaded {args.messages} records into {topic} in {seconds:.1f} s ({args.messages / seconds:,.0f}/s)"
        )
        configs = {
            "1000": perfkit.subscription_config(1_000, topic),
            "10000": perfkit.subscription_config(10_000, topic),
            "fanout": perfkit.subscription_config(1_000, topic, fanout=3),
        }
        for rep in range(args.repeat):
            pipe = perfkit.run_pipe(
                perfkit.settings(b.bootstrap_servers), topic, f"{topic}-copy{rep}", args.messages
            )
            results["pipe"].append(pipe.rate)
            line = [f"run {rep + 1}: pipe {pipe.rate:,.0f}/s"]
            for name, config in configs.items():
                s = perfkit.settings(b.bootstrap_servers)
                perfkit.write_config(s, config)
                worker = perfkit.run_worker(s, args.messages)
                t = worker.timing
                if name == "fanout":
                    results["fanout"].append(t.produced_rate)
                    results["fanout_in"].append(t.rate)
                    line.append(f"fan-out {t.rate:,.0f} in/s, {t.produced_rate:,.0f} routed/s")
                else:
                    assert t.produced == t.messages, (t.produced, t.messages)  # one destination each
                    results[name].append(t.rate)
                    line.append(f"{name} subs {t.rate:,.0f}/s")
            print("; ".join(line), flush=True)
    return results


# --- the decision path, no Kafka ---------------------------------------------------------------------------------


def per_message(
    fn: Callable[[MessageView], object], views: Sequence[MessageView], budget: float = 1.0
) -> float:
    """Median µs per message over a few passes (slow baselines stop after ``budget`` seconds)."""
    samples = []
    for _ in range(5):
        count = 0
        start = time.perf_counter()
        for v in views:
            fn(v)
            count += 1
            if count % 64 == 0 and time.perf_counter() - start > budget:
                break
        samples.append((time.perf_counter() - start) / count * 1e6)
    return median(samples)


def naive(table: RoutingTable, interpreted: bool) -> Callable[[MessageView], object]:
    """The router without the plan: every filter and subscription of every app compiled (or interpreted) on its
    own and evaluated per message; the same decision functions choose among the matches."""
    compiled: list[tuple[Any, list[tuple[tuple[str, ...], expressions.Expression]]]] = []
    for app in table.apps:
        c = app.config
        exprs = [
            (("filter", c.name, str(i)), expressions.compile(t, dialect=c.dialect, types=dict(c.properties)))
            for i, t in enumerate(c.filter)
        ]
        for level in app.levels:
            for cand in level:
                if cand.plan_id is not None:
                    exprs.append(
                        (
                            cand.plan_id,
                            expressions.compile(cand.label, dialect=c.dialect, types=dict(c.properties)),
                        )
                    )
        compiled.append((app, exprs))
    router = Router()

    def route(view: MessageView) -> object:
        decisions = []
        props, _ = decode_headers(view.headers, perfkit.TYPES)  # every app here declares the same types
        for app, exprs in compiled:
            if interpreted:
                matched = frozenset(i for i, e in exprs if interpret(e.ast, props, e.dialect).value is True)
            else:
                matched = frozenset(i for i, e in exprs if e.matches(props))
            if app.config.filter and not any(
                ("filter", app.name, str(i)) in matched for i in range(len(app.config.filter))
            ):
                decisions.append(Action.FILTERED)
                continue
            decisions.append(decide_app(app, matched, None, {}, router.cursors).action)
        return decisions

    return route


def decision_path(messages: int) -> dict[str, float]:
    views = [MessageView("orders", h, 0) for h in perfkit.message_headers(messages, seed=5)]
    out: dict[str, float] = {}
    for size in (10, 1_000, 10_000):
        config = perfkit.subscription_config(size, "orders")
        table = build_table(config)
        router = Router()
        out[f"router_{size}"] = per_message(lambda v, t=table, r=router: r.route(t, v, {}, 0), views)
        if size == 1_000:
            out["compiled_1000"] = per_message(naive(table, interpreted=False), views)
            out["interpreted_1000"] = per_message(naive(table, interpreted=True), views)
            # both approaches must agree on every decision
            ref = naive(table, interpreted=False)
            for v in views[:300]:
                assert [d.action for d in Router().route(table, v, {}, 0).decisions] == ref(v)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    perfkit.common_arguments(parser, messages=100_000)
    parser.add_argument("--partitions", type=int, default=1, help="input partitions (default 1)")
    parser.add_argument("--skip-kafka", action="store_true", help="only the decision path")
    args = parser.parse_args()

    print("decision path (no Kafka), µs per message, median of 5 passes over 2,000 messages:")
    d = decision_path(2_000)
    print(
        f"  router: 10 expressions {d['router_10']:.1f}, 1,000 {d['router_1000']:.1f}, 10,000 {d['router_10000']:.1f}"
    )
    print(f"  naive at 1,000: compiled {d['compiled_1000']:.0f}, interpreted {d['interpreted_1000']:.0f}")
    naive_compiled = d["compiled_1000"] / d["router_1000"]
    naive_interp = d["interpreted_1000"] / d["router_1000"]
    growth = d["router_10000"] / d["router_10"]
    print(
        f"  router vs naive compiled at 1,000: {naive_compiled:.0f}x faster (target >= 10x: {verdict(naive_compiled >= 10)})"
    )
    print(
        f"  router vs naive interpreted at 1,000: {naive_interp:.0f}x faster (target >= 20x: {verdict(naive_interp >= 20)})"
    )
    print(f"  cost growth, µs/msg at 10,000 vs 10: {growth:.2f}x (target <= 3x: {verdict(growth <= 3)})")
    if args.skip_kafka:
        return

    print(f"\nthroughput on the embedded broker, {args.messages:,} records per run, {args.repeat} runs:")
    r = throughput(args)
    pipe = median(r["pipe"])
    ratio_1k = [a / p for a, p in zip(r["1000"], r["pipe"], strict=True)]
    ratio_10k = [a / p for a, p in zip(r["10000"], r["pipe"], strict=True)]
    ratio_fan = [a / p for a, p in zip(r["fanout"], r["pipe"], strict=True)]
    print(f"  pipe (ceiling): {spread(r['pipe'])} records/s")
    print(f"  router, 1,000 expressions: {spread(r['1000'])} records/s")
    print(f"  router, 10,000 expressions: {spread(r['10000'])} records/s")
    print(
        f"  router vs pass-through pipe at 1,000: {median(ratio_1k):.2f} (per run {', '.join(f'{x:.2f}' for x in ratio_1k)}; target >= 0.7: {verdict(median(ratio_1k) >= 0.7)})"
    )
    print(
        f"  router vs pass-through pipe at 10,000: {median(ratio_10k):.2f} (per run {', '.join(f'{x:.2f}' for x in ratio_10k)}; target >= 0.6: {verdict(median(ratio_10k) >= 0.6)})"
    )
    print(
        f"  fan-out x3 at 1,000: {spread(r['fanout_in'])} input records/s, {spread(r['fanout'])} routed records/s; "
        f"routed records vs pipe records: {median(ratio_fan):.2f}"
    )
    print(f"  (pipe median {pipe:,.0f} records/s)")


if __name__ == "__main__":
    main()
