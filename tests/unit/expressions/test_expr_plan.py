"""The shared plan: same answers as each subscription alone, sharing, indexing, errors."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from subroute import expressions
from subroute.expressions import Subscription, compile_plan


def alone(subs: list[Subscription], props: Mapping[str, int | float | str | bool]) -> frozenset[object]:
    return frozenset(s.id for s in subs if expressions.compile(s.text, dialect=s.dialect).matches(props))


def test_empty_plan() -> None:
    plan = compile_plan([])
    assert len(plan) == 0
    assert plan.match({"x": 1}) == frozenset()
    assert plan.properties == frozenset()


def test_equality_index_and_residual() -> None:
    subs = [Subscription(i, f"CustomerId == {i} && Amount > {i * 10}") for i in range(1000)]
    plan = compile_plan(subs)
    assert plan.stats["indexed_equality"] == 1000
    assert plan.match({"CustomerId": 7, "Amount": 71}) == {7}
    assert plan.match({"CustomerId": 7, "Amount": 70}) == frozenset()
    assert plan.match({"CustomerId": 7}) == frozenset()
    assert plan.match_with_errors({"CustomerId": 7}) == (frozenset(), frozenset({7}))
    assert plan.match({"CustomerId": True, "Amount": 1000}) == frozenset()  # True is not 1
    assert plan.match({"CustomerId": 1.0, "Amount": 1000}) == frozenset()  # no floats in bmq
    assert plan.properties == {"CustomerId", "Amount"}


def test_bool_is_not_one_in_the_index() -> None:
    subs = [
        Subscription("one", "x == 1"),
        Subscription("true", "x == true"),
        Subscription("s", "x = 1", "sql92"),
    ]
    plan = compile_plan(subs)
    assert plan.match({"x": 1}) == {"one", "s"}
    assert plan.match({"x": True}) == {"true"}
    assert plan.match({"x": 1.0}) == {"s"}  # sql92 compares numbers numerically


def test_range_index() -> None:
    subs = [Subscription(f"{op}{n}", f"x {op} {n}") for op in ("<", "<=", ">", ">=") for n in range(-3, 4)]
    subs += [Subscription(f"s{op}{n}", f"x {op} {n}", "sql92") for op in ("<", ">=") for n in (-1.5, 0, 2.5)]
    subs += [Subscription("between", "x BETWEEN 1 AND 2", "sql92"), Subscription("mirror", "2 < x")]
    plan = compile_plan(subs)
    assert plan.stats["unindexed"] == 0
    for value in (-4, -3, -1, 0, 1, 2, 2.5, 3, 5, float("nan"), float("inf"), 2**63, -(2**63), "1", True):
        props = {"x": value}
        assert plan.match(props) == alone(subs, props), value


def test_or_of_equalities_and_in_are_indexed() -> None:
    subs = [
        Subscription("chat4", "(targetUser = 'all') OR (targetUser = '4')", "sql92"),
        Subscription("chat5", "(targetUser = 'all') OR (targetUser = '5')", "sql92"),
        Subscription("in", "targetUser IN ('4', '6') AND prio > 1", "sql92"),
        Subscription("bmq", 'targetUser == "all" || targetUser == "7"'),
        Subscription("mixed", 'targetUser == "all" || targetUser == 7'),  # two types: not indexable
    ]
    plan = compile_plan(subs)
    assert plan.stats["unindexed"] == 1  # only "mixed"
    for props in (
        {"targetUser": "all"},
        {"targetUser": "4", "prio": 2},
        {"targetUser": "6"},
        {"targetUser": 7},
        {},
    ):
        assert plan.match(props) == alone(subs, props), props


def test_identical_sub_expressions_are_shared() -> None:
    # Presumo's example: targetUser = 'all' is one node, evaluated once per message.
    subs = [
        Subscription(c, f"(targetUser = 'all' OR targetUser = '{c}') AND NOT (sender = 'x')", "sql92")
        for c in ("2", "4", "5")
    ]
    plan = compile_plan(subs)
    assert plan.stats["shared_nodes"] >= 1
    assert plan.match({"targetUser": "all", "sender": "y"}) == {"2", "4", "5"}


def test_shared_nodes_are_evaluated_once_per_message() -> None:
    class CountingDict(dict[str, object]):
        reads = 0

        def __getitem__(self, key: str) -> object:
            CountingDict.reads += 1
            return super().__getitem__(key)

    subs = [Subscription(i, f"a * b + c > {i} || a * b + c < -{i}") for i in range(50)]
    plan = compile_plan(subs)
    props = CountingDict(a=2, b=3, c=1, unrelated=0)
    assert plan.match(props) == frozenset(range(7))
    assert CountingDict.reads <= 3  # each property read once from the message


def test_duplicate_subscriptions_and_ids() -> None:
    subs = [Subscription("a", "x == 1"), Subscription("b", "x == 1"), Subscription("a", "y == 1")]
    plan = compile_plan(subs)
    assert len(plan) == 3
    assert plan.match({"x": 1}) == {"a", "b"}
    assert plan.match({"y": 1}) == {"a"}


def test_match_with_errors_counts_evaluated_errors_only() -> None:
    subs = [
        Subscription("div", "x / y > 0"),
        Subscription("gated", "k == 1 && x / y > 0"),
        Subscription("sql-unknown", "z > 1", "sql92"),
        Subscription("result", "flag"),
    ]
    plan = compile_plan(subs)
    matched, errors = plan.match_with_errors({"x": 1, "y": 0, "k": 2, "flag": 5})
    assert matched == frozenset()
    assert errors == {"div", "result"}  # "gated" was skipped by its index, UNKNOWN is no error
    matched, errors = plan.match_with_errors({"x": 1, "y": 0, "k": 1, "flag": True})
    assert matched == {"result"}
    assert errors == {"div", "gated"}


def test_mixed_dialects_and_types() -> None:
    subs = [
        Subscription("bmq", "x == 1", "bmq", {"x": "int"}),
        Subscription("sql", "x = 1", "sql92", {"x": "float"}),
        Subscription("sql-null", "x IS NULL", "sql92"),
    ]
    plan = compile_plan(subs)
    assert plan.match({"x": 1}) == {"bmq", "sql"}
    assert plan.match({}) == {"sql-null"}


def test_compile_plan_raises_the_first_error() -> None:
    with pytest.raises(expressions.ExpressionSyntaxError) as info:
        compile_plan([Subscription(1, "x == 1"), Subscription(2, "x = 1"), Subscription(3, "x ==")])
    assert info.value.text == "x = 1"
    with pytest.raises(expressions.ExpressionTypeError):
        compile_plan([Subscription(1, 'x == "a"', types={"x": "int"})])


def test_empty_sql92_selector_in_a_plan_matches_everything() -> None:
    plan = compile_plan([Subscription("all", "", "sql92"), Subscription("x", "x > 1")])
    assert plan.match({}) == {"all"}
    assert plan.match({"x": 2}) == {"all", "x"}


def test_lazy_mapping_is_read_once_per_property() -> None:
    reads: list[str] = []

    class Lazy(Mapping[str, object]):
        def __init__(self, data: dict[str, object]) -> None:
            self.data = data

        def __getitem__(self, key: str) -> object:
            reads.append(key)
            return self.data[key]

        def __iter__(self):  # type: ignore[no-untyped-def]
            return iter(self.data)

        def __len__(self) -> int:
            return len(self.data)

    subs = [Subscription(i, f'a == {i % 3} && (b > {i} || c == "x")') for i in range(30)]
    plan = compile_plan(subs)
    got = plan.match(Lazy({"a": 1, "b": 10, "c": "x"}))  # type: ignore[arg-type]
    assert got == {i for i in range(30) if i % 3 == 1}
    assert sorted(reads) == ["a", "b", "c"]


def test_the_most_selective_gate_is_chosen() -> None:
    # Every subscription repeats its app's filter; the customer equality is the one worth indexing.
    subs = [Subscription(i, f'App == "a{i % 2}" && CustomerId == {i}') for i in range(200)]
    plan = compile_plan(subs)

    assert plan.match({"App": "a1", "CustomerId": 7}) == {7}
    # The candidates for one message are the one customer's subscription, not an app's hundred.
    assert len(plan._candidates({"App": "a1", "CustomerId": 7})) == 1
