"""Router throughput against the ceiling: ``python tests/perf/bench_router.py [--messages N] [--repeat R]``.

On one local broker (Apache Kafka, or Tansu) and one pre-loaded input topic (200-byte values, five headers), in turn and ``--repeat``
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
import gc
import time
from collections.abc import Callable, Sequence
from typing import Any

import perfkit
from perfkit import median, spread, verdict

from subroute import expressions
from subroute.expressions.interpreter import interpret
from subroute.ops.metrics import RouterMetrics
from subroute.routing import decisions, properties
from subroute.routing.decisions import Action, MessageView, Router, RoutingTable, decide_app
from subroute.routing.native_routing import build_table
from subroute.routing.properties import decode_headers
from subroute.worker import loop
from subroute.worker.loop import Worker, WorkerOptions


def throughput(args: argparse.Namespace) -> dict[str, list[float]]:
    results: dict[str, list[float]] = {
        "pipe": [],
        "pipe_headers": [],
        "1000": [],
        "10000": [],
        "fanout": [],
        "fanout_in": [],
    }
    for rep in range(args.repeat):
        # A fresh broker per run: Tansu keeps everything in memory and slows as it fills up.
        with perfkit.broker() as b:
            base = perfkit.settings(b.bootstrap_servers)
            topic = f"{base.topic_prefix}-orders"
            perfkit.create_topic(base, topic, args.partitions)
            perfkit.produce_input(base, topic, perfkit.message_headers(args.messages))
            configs = {
                "1000": perfkit.subscription_config(1_000, topic),
                "10000": perfkit.subscription_config(10_000, topic),
                "fanout": perfkit.subscription_config(1_000, topic, fanout=3),
            }
            pipe = perfkit.run_pipe(
                perfkit.settings(b.bootstrap_servers), topic, f"{topic}-copy", args.messages
            )
            results["pipe"].append(pipe.rate)
            piped = perfkit.run_pipe(
                perfkit.settings(b.bootstrap_servers),
                topic,
                f"{topic}-copyh",
                args.messages,
                routing_headers=True,
            )
            results["pipe_headers"].append(piped.rate)
            line = [f"run {rep + 1}: pipe {pipe.rate:,.0f}/s, pipe + routing headers {piped.rate:,.0f}/s"]
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
    """Median CPU µs per message over a few passes (slow baselines stop after ``budget`` seconds). CPU time of
    this process, so that other work on the machine disturbs the figure less than it would wall time."""
    samples = []
    for _ in range(5):
        count = 0
        start = time.process_time()
        for v in views:
            fn(v)
            count += 1
            if count % 64 == 0 and time.process_time() - start > budget:
                break
        samples.append((time.process_time() - start) / count * 1e6)
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


class _Message:
    """Stands in for confluent_kafka.Message (same methods) so the worker's Python path runs without Kafka."""

    __slots__ = ("_h", "_o")

    def __init__(self, offset: int, headers: perfkit.Headers) -> None:
        self._o, self._h = offset, headers

    def error(self) -> None:
        return None

    def topic(self) -> str:
        return "orders"

    def partition(self) -> int:
        return 0

    def offset(self) -> int:
        return self._o

    def key(self) -> bytes:
        return b"k"

    def value(self) -> bytes:
        return b"v" * perfkit.VALUE_BYTES

    def headers(self) -> perfkit.Headers:
        return list(self._h)

    def timestamp(self) -> tuple[int, int]:
        return 1, 1_795_320_112_822


class _Sink:
    """Stands in for the consumer, the checkpoint (and its producer) and capacity: every Kafka call a no-op."""

    on_delivery = None  # the window's delivery callback (none: nothing is delivered here)
    number = 0  # as the commit window's number (the window is the sink itself)

    @property
    def window(self) -> _Sink:
        return self

    @property
    def producers(self) -> _Sink:
        return self

    def produce_of(self, topic: str) -> _Sink:
        return self

    def __call__(self, *args: object, **kwargs: object) -> None:
        pass  # produce

    def commit_if_due(self, drained: bool) -> None:
        pass

    def begin(self) -> None:
        pass

    def add(self, *args: object) -> None:
        pass

    def flush(self, *args: object) -> int:
        return 0

    def commit(self, *args: object, **kwargs: object) -> list[object]:
        return []  # as the real client's synchronous commit

    def snapshot(self) -> dict[tuple[str, str], int]:
        return {}


def worker_python(size: int, messages: int, passes: int = 5) -> float:
    """CPU µs per record of the worker's own batch loop (route, build the records, count, hand them to a
    producer) with Kafka's clients replaced by no-ops: the Python cost the pipe does not have."""
    table = build_table(perfkit.subscription_config(size, "orders"))
    gc.freeze()  # as the worker does after each build: a full collection would walk the whole plan
    worker = Worker(perfkit.settings("127.0.0.1:1"), WorkerOptions(), RouterMetrics())
    sink = _Sink()
    worker.checkpoint = worker.consumer = sink  # type: ignore[assignment]
    worker.capacity = sink  # type: ignore[assignment]
    batch = [_Message(i, h) for i, h in enumerate(perfkit.message_headers(messages, seed=5))]
    worker._process_batch(table, batch)  # type: ignore[arg-type]  # first pass: caches filled
    samples = []
    for _ in range(passes):
        start = time.process_time()
        worker._process_batch(table, batch)  # type: ignore[arg-type]
        samples.append((time.process_time() - start) / len(batch) * 1e6)
    worker.store.close()
    worker.capacity = None  # type: ignore[assignment]
    return median(samples) if samples else 0.0


def decision_path(messages: int) -> dict[str, float]:
    views = [MessageView("orders", h, 0) for h in perfkit.message_headers(messages, seed=5)]
    out: dict[str, float] = {}
    for size in (10, 1_000, 10_000):
        config = perfkit.subscription_config(size, "orders")
        table = build_table(config)
        gc.freeze()  # as the worker does after each build (router/worker/loop.py)
        router = Router()
        out[f"router_{size}"] = per_message(lambda v, t=table, r=router: r.route(t, v, {}, 0), views)
        out[f"batch_{size}"] = per_batch(table, views)
        if size == 1_000:
            out["compiled_1000"] = per_message(naive(table, interpreted=False), views)
            out["interpreted_1000"] = per_message(naive(table, interpreted=True), views)
            # both approaches must agree on every decision
            ref = naive(table, interpreted=False)
            for v in views[:300]:
                assert [d.action for d in Router().route(table, v, {}, 0).decisions] == ref(v)
        out[f"worker_{size}"] = worker_python(size, messages)
    return out


def per_batch(table: RoutingTable, views: Sequence[MessageView], passes: int = 5) -> float:
    """Median CPU µs per message of ``Router.route_batch`` over the whole list (one native plan evaluation),
    after checking that it decides as ``route`` does."""
    reference, router = Router(), Router()
    got = router.route_batch(table, views[:300], {}, 0)
    assert [r.decisions for r in got] == [reference.route(table, v, {}, 0).decisions for v in views[:300]]
    samples = []
    for _ in range(passes):
        start = time.process_time()
        router.route_batch(table, views, {}, 0)
        samples.append((time.process_time() - start) / len(views) * 1e6)
    return median(samples)


def compiled_or_not() -> str:
    """Whether the hot modules run as plain Python or as compiled extensions (e.g. a mypyc build left in the
    tree): their figures are not comparable."""

    modules = (expressions.plan, properties, decisions, loop)
    compiled = [m.__name__ for m in modules if not (m.__file__ or "").endswith(".py")]
    if compiled:
        return f"compiled extensions: {', '.join(compiled)}"
    return "plain Python (no compiled extensions)"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    perfkit.common_arguments(parser, messages=100_000)
    parser.add_argument("--partitions", type=int, default=1, help="input partitions (default 1)")
    parser.add_argument("--skip-kafka", action="store_true", help="only the decision path")
    parser.add_argument(
        "--python-path-passes",
        type=int,
        metavar="N",
        help="only run the worker's whole Python path N times over 2,000 records at --size expressions, then "
        "exit: run it under valgrind --tool=callgrind with N and 0, the difference / (N x 2,000) is "
        "instructions per record, a figure the load on the machine does not move (docs/performance.md)",
    )
    parser.add_argument("--size", type=int, default=1_000, help="expressions for --python-path-passes")
    perfkit.python_routing_argument(parser)
    args = parser.parse_args()
    if args.python_routing:
        perfkit.use_python_routing()
    if args.python_path_passes is not None:
        worker_python(args.size, 2_000, passes=args.python_path_passes)
        return

    print(f"hot modules: {compiled_or_not()}")
    print("decision path (no Kafka), CPU µs per message, median of 5 passes over 2,000 messages:")
    d = decision_path(2_000)
    print(
        f"  router: 10 expressions {d['router_10']:.1f}, 1,000 {d['router_1000']:.1f}, 10,000 {d['router_10000']:.1f}"
    )
    print(
        f"  router, batch (route_batch: the native plan once per 2,000): 10 expressions {d['batch_10']:.1f}, "
        f"1,000 {d['batch_1000']:.1f}, 10,000 {d['batch_10000']:.1f}"
    )
    print(f"  naive at 1,000: compiled {d['compiled_1000']:.0f}, interpreted {d['interpreted_1000']:.0f}")
    print(
        f"  the worker's whole Python path per record (routing, records, counting; Kafka clients stubbed): "
        f"10 expressions {d['worker_10']:.1f}, 1,000 {d['worker_1000']:.1f}, 10,000 {d['worker_10000']:.1f}"
    )
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

    print(f"\nthroughput on the local broker, {args.messages:,} records per run, {args.repeat} runs:")
    r = throughput(args)
    pipe = median(r["pipe"])
    ratio_1k = [a / p for a, p in zip(r["1000"], r["pipe"], strict=True)]
    ratio_10k = [a / p for a, p in zip(r["10000"], r["pipe"], strict=True)]
    ratio_fan = [a / p for a, p in zip(r["fanout"], r["pipe"], strict=True)]
    print(f"  pipe (ceiling): {spread(r['pipe'])} records/s")
    print(f"  pipe adding the six routing headers: {spread(r['pipe_headers'])} records/s")
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
    ratio_h = [a / p for a, p in zip(r["1000"], r["pipe_headers"], strict=True)]
    ratio_h10 = [a / p for a, p in zip(r["10000"], r["pipe_headers"], strict=True)]
    print(
        f"  router vs the pipe adding the routing headers: {median(ratio_h):.2f} at 1,000, "
        f"{median(ratio_h10):.2f} at 10,000 (same bytes written; the rest is the routing work)"
    )
    print(f"  (pipe median {pipe:,.0f} records/s)")


if __name__ == "__main__":
    main()
