"""Expression engine benchmark: ``python tests/perf/bench_expressions.py``.

Prints µs per message for plans of 10, 100, 1,000 and 10,000 subscriptions in three workloads, next to the
two naive ways of getting the same answer (each subscription on its own with the reference interpreter, and
with its own compiled predicate), and the plan compile time. Not a test: nothing here is collected by pytest.
"""

from __future__ import annotations

import random
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from subroute import expressions
from subroute.expressions import Subscription
from subroute.expressions.interpreter import interpret

Props = Mapping[str, int | float | str | bool]
SIZES = (10, 100, 1_000, 10_000)
MESSAGES = 2_000


def equality_heavy(n: int, rng: random.Random) -> tuple[list[Subscription], list[Props]]:
    """Issue 2's example: ``CustomerId == k && Amount > x``, one customer per subscription."""
    subs = [Subscription(i, f"CustomerId == {i} && Amount > {i * 37 % 1000}") for i in range(n)]
    msgs: list[Props] = [
        {"CustomerId": rng.randrange(n), "Amount": rng.randrange(1000)} for _ in range(MESSAGES)
    ]
    return subs, msgs


def apps(n: int, rng: random.Random) -> tuple[list[Subscription], list[Props]]:
    """Router-like: 10 apps with disjoint app filters; each consumer subscription repeats its app's filter
    and selects a region and a priority."""
    regions = max(1, n // 10 // 4)
    subs = [Subscription(("app", a), f'App == "app{a}"') for a in range(10)]
    for i in range(n - 10):
        a = i % 10
        subs.append(
            Subscription(i, f'App == "app{a}" && Region == "r{(i // 10) % regions}" && Priority > {i % 5}')
        )
    msgs: list[Props] = [
        {
            "App": f"app{rng.randrange(10)}",
            "Region": f"r{rng.randrange(regions)}",
            "Priority": rng.randrange(8),
            "Body": "x",
        }
        for _ in range(MESSAGES)
    ]
    return subs, msgs


def mixed(n: int, rng: random.Random) -> tuple[list[Subscription], list[Props]]:
    """Both dialects, equality, IN, OR-of-equalities, ranges, BETWEEN, LIKE, arithmetic, and a few
    unindexable expressions. Some forms match a share of all subscriptions (``targetUser = 'all'``, open
    ranges), so the work per message grows with the plan's size, as the number of matches does."""
    groups = max(1, n // 10)
    subs: list[Subscription] = []
    for i in range(n):
        k = i % groups
        form = i % 20
        if form < 8:
            text, dialect = f'Region == "r{k}" && Priority >= {i % 7} && !(Status == "closed")', "bmq"
        elif form < 12:
            text, dialect = (
                f"Symbol IN ('S{k}', 'S{k + 1}') AND Price BETWEEN {k % 50} AND {k % 50 + 20}.5",
                "sql92",
            )
        elif form < 15:
            text, dialect = (
                f"(targetUser = 'all' OR targetUser = 'u{k}') AND sender NOT IN ('dan', 'harry') "
                f"AND topic LIKE 'news/%'",
                "sql92",
            )
        elif form < 19:
            text, dialect = f'CustomerId == {k} && Amount * 2 + 1 > {i % 1000} && OrderType != "limit"', "bmq"
        else:
            text, dialect = f"Amount % {2 + k % 7} == 0 && Priority < {k % 5} || exists(Urgent{k % 3})", "bmq"
        subs.append(Subscription(i, text, dialect))
    msgs: list[Props] = []
    for _ in range(MESSAGES):
        k = rng.randrange(groups)
        props: dict[str, int | float | str | bool] = {
            "Region": f"r{k}",
            "Priority": rng.randrange(8),
            "Status": rng.choice(("open", "closed")),
            "Symbol": f"S{rng.randrange(groups)}",
            "Price": rng.uniform(0, 80),
            "targetUser": "all" if rng.random() < 0.05 else f"u{rng.randrange(groups)}",
            "sender": rng.choice(("dan", "bob", "eve")),
            "topic": rng.choice(("news/eu", "sports/x")),
            "CustomerId": rng.randrange(groups),
            "Amount": rng.randrange(1000),
            "OrderType": rng.choice(("limit", "market")),
        }
        if rng.random() < 0.01:
            props["Urgent0"] = True
        msgs.append(props)
    return subs, msgs


def per_message(fn: Callable[[Props], object], msgs: list[Props], budget: float = 0.5) -> float:
    """Best µs per message over a few rounds, stopping early once ``budget`` seconds are spent."""
    best = float("inf")
    spent = 0.0
    rounds = 0
    while rounds < 3 and (rounds == 0 or spent < budget):
        count = len(msgs)
        start = time.perf_counter()
        for i, props in enumerate(msgs):
            fn(props)
            if time.perf_counter() - start > budget:  # slow baselines: sample fewer messages
                count = i + 1
                break
        elapsed = time.perf_counter() - start
        spent += elapsed
        best = min(best, elapsed / count * 1e6)
        rounds += 1
    return best


def run(name: str, workload: Callable[[int, random.Random], tuple[list[Subscription], list[Props]]]) -> None:
    print(f"\n{name}")
    print(
        f"{'subs':>7} {'compile ms':>11} {'plan µs/msg':>12} {'matches/msg':>12} {'interp µs/msg':>14} "
        f"{'x faster':>9} {'compiled µs/msg':>16} {'x faster':>9}  index (eq/range/none, shared nodes)"
    )
    for n in SIZES:
        subs, msgs = workload(n, random.Random(n))
        start = time.perf_counter()
        plan = expressions.compile_plan(subs)
        compile_ms = (time.perf_counter() - start) * 1e3
        exprs = [(s.id, expressions.compile(s.text, dialect=s.dialect)) for s in subs]
        for props in msgs[:50]:  # the benchmark is only worth something if the answers agree
            assert plan.match(props) == {sid for sid, e in exprs if e.matches(props)}

        def interpreted(props: Props, exprs: list[tuple[object, expressions.Expression]] = exprs) -> object:
            return {sid for sid, e in exprs if interpret(e.ast, props, e.dialect).value}

        def compiled(props: Props, exprs: list[tuple[object, expressions.Expression]] = exprs) -> object:
            return {sid for sid, e in exprs if e.matches(props)}

        plan_us = per_message(plan.match, msgs)
        interp_us = per_message(interpreted, msgs)
        compiled_us = per_message(compiled, msgs)
        hits = sum(len(plan.match(m)) for m in msgs[:200]) / len(msgs[:200])
        s = plan.stats
        print(
            f"{n:>7} {compile_ms:>11.1f} {plan_us:>12.2f} {hits:>12.1f} {interp_us:>14.1f} "
            f"{interp_us / plan_us:>9.0f} {compiled_us:>16.1f} {compiled_us / plan_us:>9.0f}  "
            f"{s['indexed_equality']}/{s['indexed_range']}/{s['unindexed']}, {s['shared_nodes']}"
        )


def main() -> None:
    print(f"Python {sys.version.split()[0]}; {MESSAGES} messages per workload; best of up to 3 rounds")
    run("equality-heavy: CustomerId == k && Amount > x (one customer per subscription)", equality_heavy)
    run("apps: 10 disjoint app filters, consumer subscriptions App/Region/Priority", apps)
    run("mixed: both dialects, every indexable form and some unindexable ones", mixed)


if __name__ == "__main__":
    main()
