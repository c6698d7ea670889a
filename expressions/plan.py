"""The shared plan: every subscription of every app in one multi-rooted DAG (Presumo), with the predicates a
subscription requires indexed so that a message only evaluates the subscriptions it can still match
(RocketMQ's precomputation, in spirit).

How a plan is built:

1. Each subscription is parsed and checked, then normalized: ``&&``/``||`` chains are flattened, a literal on
   the left of a comparison moves to the right, and every node is interned, so structurally equal
   sub-expressions of all subscriptions (per dialect) are one object.
2. The top-level conjuncts of each subscription are searched for a *gate*: ``prop == literal``, sql92
   ``prop IN (...)``, an ``||`` of equalities of one property with literals of one type, a numeric range
   ``prop < <= > >= literal``, a sql92 ``prop BETWEEN lit AND lit``, or an *interval*: a lower and an upper
   bound of one property (``p >= a && p < b``, BETWEEN). A required conjunct that is not true makes the whole
   conjunction not true in both dialects (false, error, or sql92's FALSE/UNKNOWN), so a subscription whose
   gate does not hold can never match and is skipped. Equality gates go into a hash map per property and value
   type, range gates into sorted bounds per property and operator (bisect), intervals into sorted lower bounds
   per width class: an interval no wider than W can only hold v if its lower bound is in [v - W, v], so a
   message's candidates are about the intervals that hold it, however many there are.
3. When the gate holding is exactly the conjunct being true (every gate but BETWEEN), that conjunct is
   dropped: only the rest, the *residual*, is evaluated. This never changes the outcome: the conjunct would
   have been evaluated, without error, to true.
4. The residuals are compiled into closures; nodes used by more than one parent (or root) keep their value
   in a per-message memo, so each distinct comparison is evaluated at most once per message.

Per message, every property the plan reads is read once from the message into a snapshot; the index probes
give the candidates; the candidates' residuals are evaluated.

Steps 1 to 3 are published as data (``PlanEntry``: a subscription's normalized conjuncts and the ``Gate`` chosen
among them; ``Plan.entries``, or ``plan_entries`` without compiling): the native plan translates these and chooses
nothing itself (router/routing/native_plan.py).
"""

from __future__ import annotations

import dataclasses
import math
from bisect import bisect_left, bisect_right
from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from . import ast
from .compiler import Compiler, Fn, Props
from .expression import check
from .outcome import INT64_MAX, INT64_MIN, EvalError

_MISSING: Any = object()
_NONE: frozenset[Hashable] = frozenset()

# (subscription id, residual closure or None when the gate alone decides, True for sql92)
_Compiled = tuple[Hashable, Fn | None, bool]


@dataclass(frozen=True)
class Subscription:
    """One expression of the plan. ``id`` is what ``Plan.match`` returns for it."""

    id: Hashable
    text: str
    dialect: str = "bmq"
    types: Mapping[str, str] | None = field(default=None, hash=False)


@dataclass(frozen=True, slots=True)
class Gate:
    """The required conjunct a subscription is indexed by (step 2): it holding is implied by that conjunct being
    true, so a message for which it does not hold cannot match and does not evaluate the subscription.

    ``equality``: ``prop``'s value is one of ``values`` (literals of one value class: bool, str, or numbers,
    ints only in bmq). ``range``: ``prop op bound`` holds (the property on the left). ``interval``: ``low <= prop
    <= high`` (the conjunct is the lower bound's; both bounds stay in the residual).
    """

    kind: Literal["equality", "range", "interval"]
    prop: str
    conjunct: int  # index in ``PlanEntry.conjuncts`` of the conjunct it comes from
    droppable: bool  # the gate holding means the conjunct is true, so it need not be evaluated (step 3)
    values: tuple[Any, ...] = ()  # equality
    op: str = ""  # range: one of ast.ORDERING_OPS
    bound: Any = None  # range: the literal's value (int, or float in sql92)
    low: Any = None  # interval: the bounds' values (int, or float in sql92)
    high: Any = None


@dataclass(frozen=True, slots=True)
class PlanEntry:
    """One subscription as a plan indexes it: its checked and normalized ``tree`` (step 1), that tree's top-level
    conjuncts (the tree itself when it is not an ``and``), and the gate chosen among them (None: evaluated for
    every message)."""

    subscription: Subscription
    tree: ast.Node
    conjuncts: tuple[ast.Node, ...]
    gate: Gate | None

    @property
    def residual(self) -> tuple[ast.Node, ...]:
        """The conjuncts left to evaluate once the gate holds: all of them but a droppable gate's (step 3)."""
        gate = self.gate
        if gate is None or not gate.droppable:
            return self.conjuncts
        return self.conjuncts[: gate.conjunct] + self.conjuncts[gate.conjunct + 1 :]


class Plan:
    """The compiled plan. ``match`` returns exactly the ids of the subscriptions that evaluating each alone
    would match."""

    def __init__(
        self,
        subscriptions: Iterable[Subscription],
        reuse: Plan | None = None,
        pause: Callable[[], None] | None = None,
    ) -> None:
        self.subscriptions: tuple[Subscription, ...] = tuple(subscriptions)
        builder = _PlanBuilder(reuse.entries if reuse is not None else ())
        for sub in self.subscriptions:
            builder.add(sub)
            if pause is not None:
                pause()
        builder.finish(pause)
        # Each subscription's normalized tree (mostly shared with the residuals) and chosen gate: a later plan
        # that has the same expression starts from its tree instead of parsing and type-checking the text again,
        # and the native plan translates these (router/routing/native_plan.py).
        self.entries: tuple[PlanEntry, ...] = tuple(builder.entries)
        self.properties: frozenset[str] = frozenset(builder.properties)
        self._names = self.properties
        self._always: tuple[_Compiled, ...] = tuple(builder.always)
        self._eq_probes = tuple(builder.eq_probes())
        self._range_probes = tuple(builder.range_probes())
        self._interval_probes = tuple(builder.interval_probes())
        self.stats: dict[str, int] = {
            "subscriptions": len(self.subscriptions),
            "indexed_equality": builder.counts["eq"],
            "indexed_range": builder.counts["range"],
            "indexed_interval": builder.counts["interval"],
            "unindexed": len(self._always),
            "shared_nodes": builder.shared_count,
        }

    def __len__(self) -> int:
        return len(self.subscriptions)

    def _snapshot(self, props: Props) -> Mapping[str, Any]:
        """Each property the plan reads, read once from the message. A plain dict is read as it is: reading it
        twice gives the same value, and the names the plan does not read are never looked at."""
        if type(props) is dict:
            return props
        names = self._names
        if len(props) <= len(names):
            return {k: v for k, v in props.items() if k in names}
        return {k: props[k] for k in names if k in props}

    def _candidates(self, vals: Mapping[str, Any]) -> list[_Compiled]:
        missing = _MISSING  # a local, read once per probe
        cands = list(self._always)
        for name, by_type in self._eq_probes:
            v = vals.get(name, missing)
            if v is not missing:
                table = by_type.get(type(v))
                if table is not None:
                    hit = table.get(v)
                    if hit is not None:
                        cands.extend(hit)
        for name, floats, op, bounds, entries in self._range_probes:
            v = vals.get(name, missing)
            t = type(v)
            if t is int:
                if not INT64_MIN <= v <= INT64_MAX:
                    continue
            elif t is not float or not floats or math.isnan(v):
                continue
            # bounds ascend; "prop > b" holds for the bounds below v, "prop < b" for those above, etc.
            if op == ">":
                cands.extend(entries[: bisect_left(bounds, v)])
            elif op == ">=":
                cands.extend(entries[: bisect_right(bounds, v)])
            elif op == "<":
                cands.extend(entries[bisect_right(bounds, v) :])
            else:
                cands.extend(entries[bisect_left(bounds, v) :])
        for name, floats, classes in self._interval_probes:
            v = vals.get(name, missing)
            t = type(v)
            if t is int:
                if not INT64_MIN <= v <= INT64_MAX:
                    continue
            elif t is not float or not floats or not math.isfinite(v):
                continue
            for width, lows, entries in classes:
                lowest = v - width
                if t is float:  # step past the rounding of the subtraction: a superset is fine, a subset not
                    lowest = math.nextafter(math.nextafter(lowest, -math.inf), -math.inf)
                i = bisect_left(lows, lowest)
                j = bisect_right(lows, v)
                if i < j:
                    cands.extend(entries[i:j])
        return cands

    def match(self, props: Props) -> frozenset[Hashable]:
        """The ids of the subscriptions that match the message with these properties."""
        vals = self._snapshot(props)
        memo: dict[int, Any] = {}
        out = []
        for sid, fn, _ in self._candidates(vals):
            if fn is None:
                out.append(sid)
                continue
            try:
                if fn(vals, memo) is True:
                    out.append(sid)
            except EvalError:
                pass
        return frozenset(out)

    def match_with_errors(self, props: Props) -> tuple[frozenset[Hashable], frozenset[Hashable]]:
        """``(matched ids, ids whose evaluation ended in an evaluation error)``.

        Only subscriptions actually evaluated can report an error: one skipped by the index (its gate, a
        required conjunct, does not hold) is known not to match without evaluating the rest, so an error the
        rest would have raised is not counted. A non-boolean final value counts as an error, a sql92 UNKNOWN
        does not.
        """
        vals = props if type(props) is dict else self._snapshot(props)  # the router's case, without a call
        memo: dict[int, Any] = {}
        out = []
        errors = []
        for sid, fn, sql in self._candidates(vals):
            if fn is None:
                out.append(sid)
                continue
            try:
                v = fn(vals, memo)
            except EvalError:
                errors.append(sid)
                continue
            if v is True:
                out.append(sid)
            elif v is not False and not (v is None and sql):
                errors.append(sid)
        return frozenset(out), frozenset(errors) if errors else _NONE


def compile_plan(
    subscriptions: Iterable[Subscription],
    reuse: Plan | None = None,
    pause: Callable[[], None] | None = None,
) -> Plan:
    """Compile subscriptions into one plan. Raises the first ``ExpressionError`` met.

    With ``reuse`` (an earlier plan), expressions it already holds (same text, dialect and types) are not parsed
    and type-checked again: parsing is most of the cost of compiling, and a change usually keeps most of them.
    ``pause`` is called after each subscription is parsed and after each is compiled, so that a caller compiling
    in a background thread can let other threads run (it does not change the plan).
    """
    return Plan(subscriptions, reuse, pause)


def plan_entries(
    subscriptions: Iterable[Subscription],
    reuse: Iterable[PlanEntry] = (),
    pause: Callable[[], None] | None = None,
) -> tuple[PlanEntry, ...]:
    """What ``compile_plan(subscriptions).entries`` would be, without compiling the residuals: each subscription
    checked, normalized and given its gate, chosen among all of them as a plan chooses. ``reuse`` (entries of an
    earlier plan) spares the parse of the expressions it holds; ``pause`` is called after each subscription."""
    builder = _PlanBuilder(reuse)
    for sub in subscriptions:
        builder.add(sub)
        if pause is not None:
            pause()
    builder.choose()
    return tuple(builder.entries)


class _Normalizer:
    """Flattens and/or chains, puts literals on the right of comparisons and interns every node (one dialect)."""

    def __init__(self) -> None:
        self.interned: dict[ast.Node, ast.Node] = {}

    def intern(self, node: ast.Node) -> ast.Node:
        return self.interned.setdefault(node, node)

    def normalize(self, node: ast.Node) -> ast.Node:
        if isinstance(node, ast.Logical | ast.Junction):
            items: list[ast.Node] = []
            parts = (node.left, node.right) if isinstance(node, ast.Logical) else node.items
            for part in parts:
                n = self.normalize(part)
                if isinstance(n, ast.Junction) and n.op == node.op:
                    items.extend(n.items)
                else:
                    items.append(n)
            return self.intern(ast.Junction(node.op, tuple(items), pos=node.pos))
        if isinstance(node, ast.Compare):
            left, right = self.normalize(node.left), self.normalize(node.right)
            # Literals have no effect and raise nothing, so swapping the evaluation order is harmless.
            if isinstance(left, ast.LITERALS) and not isinstance(right, ast.LITERALS):
                return self.intern(ast.Compare(ast.MIRROR[node.op], right, left, pos=node.pos))
            return self.intern(ast.Compare(node.op, left, right, pos=node.pos))
        kids = ast.children(node)
        if not kids:
            return self.intern(node)
        if isinstance(node, ast.Unary | ast.In | ast.Like | ast.IsNull):
            return self.intern(dataclasses.replace(node, operand=self.normalize(node.operand)))
        if isinstance(node, ast.Arith):
            return self.intern(
                dataclasses.replace(node, left=self.normalize(node.left), right=self.normalize(node.right))
            )
        if isinstance(node, ast.Between):
            return self.intern(
                dataclasses.replace(
                    node,
                    operand=self.normalize(node.operand),
                    low=self.normalize(node.low),
                    high=self.normalize(node.high),
                )
            )
        raise TypeError(f"unknown node {node!r}")  # pragma: no cover


def _eq_literal(node: ast.Node, sql: bool) -> tuple[str, Any] | None:
    """``(prop, value)`` when ``node`` is ``prop == literal`` (a literal the index can key on)."""
    if isinstance(node, ast.Compare) and node.op == "==" and isinstance(node.left, ast.Prop):
        lit = node.right
        if isinstance(lit, ast.IntLit | ast.StrLit | ast.BoolLit) or (sql and isinstance(lit, ast.FloatLit)):
            return node.left.name, lit.value
    return None


def _value_class(value: Any, sql: bool) -> str:
    t = type(value)
    if t is bool:
        return "bool"
    if t is str:
        return "str"
    return "num" if sql else "int"


def _find_gates(conjuncts: tuple[ast.Node, ...], sql: bool) -> list[Gate]:
    """Every gate the conjuncts offer; the plan picks the most selective one."""
    gates: list[Gate] = []
    interval = _interval_gate(conjuncts, sql)
    if interval is not None:
        gates.append(interval)
    for i, c in enumerate(conjuncts):
        gate: Gate | None = None
        literal = _eq_literal(c, sql)
        if literal is not None:
            gate = Gate("equality", literal[0], i, True, values=(literal[1],))
        elif sql and isinstance(c, ast.In) and not c.negated and isinstance(c.operand, ast.Prop):
            gate = Gate("equality", c.operand.name, i, True, values=c.values)
        elif isinstance(c, ast.Junction) and c.op == "or":
            gate = _or_gate(c, i, sql)
        else:
            gate = _range_gate(c, i, sql)
        if gate is not None:
            gates.append(gate)
    return gates


def _or_gate(c: ast.Junction, i: int, sql: bool) -> Gate | None:
    """``p == a || p == b || p IN (...)``, one property and one literal type: true exactly when p's value is
    of that type and among the literals (an earlier disjunct compares a value of the same type, so it is false
    without error)."""
    prop: str | None = None
    values: list[Any] = []
    for item in c.items:
        literal = _eq_literal(item, sql)
        if literal is not None:
            name, found = literal[0], [literal[1]]
        elif sql and isinstance(item, ast.In) and not item.negated and isinstance(item.operand, ast.Prop):
            name, found = item.operand.name, list(item.values)
        else:
            return None
        if prop is not None and name != prop:
            return None
        prop = name
        values.extend(found)
    if prop is None or len({_value_class(v, sql) for v in values}) != 1:
        return None
    return Gate("equality", prop, i, True, values=tuple(values))


def _range_gate(c: ast.Node, i: int, sql: bool) -> Gate | None:
    numeric = (ast.IntLit, ast.FloatLit) if sql else (ast.IntLit,)
    if (
        isinstance(c, ast.Compare)
        and c.op in ast.ORDERING_OPS
        and isinstance(c.left, ast.Prop)
        and isinstance(c.right, numeric)
    ):
        return Gate("range", c.left.name, i, True, op=c.op, bound=c.right.value)
    if (
        sql
        and isinstance(c, ast.Between)
        and not c.negated
        and isinstance(c.operand, ast.Prop)
        and isinstance(c.low, numeric)
    ):
        # BETWEEN is true only if "x >= low" is; the conjunct itself stays to check the upper bound.
        return Gate("range", c.operand.name, i, False, op=">=", bound=c.low.value)
    return None


def _interval_gate(conjuncts: tuple[ast.Node, ...], sql: bool) -> Gate | None:
    """A lower and an upper numeric bound of one property among the conjuncts (a BETWEEN is both). The gate
    only narrows the candidates; the bounds stay in the residual, which decides exactly."""
    numeric = (ast.IntLit, ast.FloatLit) if sql else (ast.IntLit,)
    lower: dict[str, tuple[int, Any]] = {}
    upper: dict[str, Any] = {}
    for i, c in enumerate(conjuncts):
        if isinstance(c, ast.Compare) and isinstance(c.left, ast.Prop) and isinstance(c.right, numeric):
            if c.op in (">", ">="):
                lower.setdefault(c.left.name, (i, c.right.value))
            elif c.op in ("<", "<="):
                upper.setdefault(c.left.name, c.right.value)
        elif (
            sql
            and isinstance(c, ast.Between)
            and not c.negated
            and isinstance(c.operand, ast.Prop)
            and isinstance(c.low, numeric)
            and isinstance(c.high, numeric)
        ):
            lower.setdefault(c.operand.name, (i, c.low.value))
            upper.setdefault(c.operand.name, c.high.value)
    for prop, (i, low) in lower.items():
        if prop in upper and math.isfinite(upper[prop] - low):
            return Gate("interval", prop, i, False, low=low, high=upper[prop])
    return None


def _width_class(width: Any) -> int:
    """The smallest power of two at least ``width`` (0 for an empty or one-point interval); an int, so that
    ``v - class`` is exact for int values."""
    if width <= 0:
        return 0
    whole: int = math.ceil(width)
    return 1 << (whole - 1).bit_length()


_CheckKey = tuple[str, str, tuple[tuple[str, str], ...]]  # text, dialect, declared types


def _check_key(sub: Subscription) -> _CheckKey:
    return (sub.text, sub.dialect, tuple(sorted((sub.types or {}).items())))


class _PlanBuilder:
    def __init__(self, reuse: Iterable[PlanEntry] = ()) -> None:
        self.properties: set[str] = set()
        self.normalizers = {"bmq": _Normalizer(), "sql92": _Normalizer()}
        self.checked: dict[_CheckKey, ast.Node] = {}
        # Normalized trees of an earlier plan. Normalizing is idempotent, so normalizing one again (below) only
        # interns it into this plan's nodes; the outcome is that of parsing and checking its text again.
        self.reused: dict[_CheckKey, ast.Node] = {_check_key(e.subscription): e.tree for e in reuse}
        # (subscription, normalized tree, top-level conjuncts, the gates they offer)
        self.items: list[tuple[Subscription, ast.Node, tuple[ast.Node, ...], list[Gate]]] = []
        self.entries: list[PlanEntry] = []
        # Per entry, its residual as one node (None when the gate alone decides)
        self.residuals: list[ast.Node | None] = []
        self.always: list[_Compiled] = []
        self.eq: dict[tuple[str, str], dict[str, dict[Any, list[_Compiled]]]] = {}
        self.ranges: dict[tuple[str, str, str], list[tuple[Any, int, _Compiled]]] = {}
        self.intervals: dict[tuple[str, str], dict[int, list[tuple[Any, int, _Compiled]]]] = {}
        self.counts = {"eq": 0, "range": 0, "interval": 0}
        self.shared_count = 0

    def add(self, sub: Subscription) -> None:
        key = _check_key(sub)
        tree = self.checked.get(key)
        if tree is None:
            tree = self.reused.get(key)
            if tree is None:
                tree = check(sub.text, sub.dialect, sub.types)
            self.checked[key] = tree
        self.properties |= ast.property_names(tree)
        sql = sub.dialect == "sql92"
        norm = self.normalizers[sub.dialect]
        root = norm.normalize(tree)
        conjuncts = root.items if isinstance(root, ast.Junction) and root.op == "and" else (root,)
        self.items.append((sub, root, conjuncts, _find_gates(conjuncts, sql)))

    def choose(self) -> None:
        """Give each subscription its most selective gate: the one whose index bucket holds the fewest
        subscriptions (an app filter repeated by all of an app's subscriptions is a poor gate, the customer
        equality next to it a good one). Ranges count as half their bucket; equality wins ties."""
        eq_count: Counter[tuple[str, str, str, Any]] = Counter()
        range_count: Counter[tuple[str, str, str]] = Counter()
        for sub, _, _, gates in self.items:
            dialect = sub.dialect
            sql = dialect == "sql92"
            for g in gates:
                if g.kind == "equality":
                    eq_count.update((dialect, g.prop, _value_class(v, sql), v) for v in set(g.values))
                elif g.kind == "range":
                    range_count[(dialect, g.prop, g.op)] += 1

        def cost(dialect: str, g: Gate) -> tuple[float, int, int]:
            if g.kind == "equality":
                sql = dialect == "sql92"
                keys = {(dialect, g.prop, _value_class(v, sql), v) for v in g.values}
                return (sum(eq_count[k] for k in keys), 0, g.conjunct)
            if g.kind == "interval":  # about the intervals holding the value, plus a neighbour or two
                return (2.0, 1, g.conjunct)
            return (max(1.0, range_count[(dialect, g.prop, g.op)] / 2), 2, g.conjunct)

        for sub, root, conjuncts, gates in self.items:
            dialect = sub.dialect
            gate = min(gates, key=lambda g: cost(dialect, g)) if gates else None
            entry = PlanEntry(sub, root, conjuncts, gate)
            rest = entry.residual
            residual: ast.Node | None
            if not rest:
                residual = None
            elif len(rest) == 1:
                residual = rest[0]
            else:
                residual = self.normalizers[dialect].intern(ast.Junction("and", rest))
            self.entries.append(entry)
            self.residuals.append(residual)

    def finish(self, pause: Callable[[], None] | None = None) -> None:
        self.choose()
        compilers = {d: Compiler(d, self._shared(d)) for d in ("bmq", "sql92")}
        for entry, residual in zip(self.entries, self.residuals, strict=True):
            if pause is not None:
                pause()
            dialect, gate = entry.subscription.dialect, entry.gate
            sql = dialect == "sql92"
            compiled: _Compiled = (
                entry.subscription.id,
                None if residual is None else compilers[dialect].compile(residual),
                sql,
            )
            if gate is None:
                self.always.append(compiled)
            elif gate.kind == "equality":
                self.counts["eq"] += 1
                by_class = self.eq.setdefault((dialect, gate.prop), {})
                table = by_class.setdefault(_value_class(gate.values[0], sql), {})
                # A value repeated in the gate must not list the subscription twice.
                for value in dict.fromkeys(gate.values):
                    table.setdefault(value, []).append(compiled)
            elif gate.kind == "interval":
                self.counts["interval"] += 1
                classes = self.intervals.setdefault((dialect, gate.prop), {})
                bucket = classes.setdefault(_width_class(gate.high - gate.low), [])
                bucket.append((gate.low, len(bucket), compiled))
            else:
                self.counts["range"] += 1
                bucket = self.ranges.setdefault((dialect, gate.prop, gate.op), [])
                bucket.append((gate.bound, len(bucket), compiled))

    def _shared(self, dialect: str) -> dict[ast.Node, int]:
        """Memo slots for the nodes with more than one parent (or root) in this dialect's DAG. Leaves are
        cheap to evaluate again and get none."""
        counts: dict[int, int] = {}
        nodes: dict[int, ast.Node] = {}
        stack: list[ast.Node] = []
        for entry, residual in zip(self.entries, self.residuals, strict=True):
            if entry.subscription.dialect == dialect and residual is not None:
                counts[id(residual)] = counts.get(id(residual), 0) + 1
                if id(residual) not in nodes:
                    nodes[id(residual)] = residual
                    stack.append(residual)
        while stack:
            # Interned nodes are unique objects, so identity stands for structure here.
            for child in ast.children(stack.pop()):
                counts[id(child)] = counts.get(id(child), 0) + 1
                if id(child) not in nodes:
                    nodes[id(child)] = child
                    stack.append(child)
        shared: dict[ast.Node, int] = {}
        for key, n in counts.items():
            node = nodes[key]
            if n > 1 and ast.children(node):
                shared[node] = len(shared) + (0 if dialect == "bmq" else 1 << 30)
        self.shared_count += len(shared)
        return shared

    def eq_probes(self) -> Iterable[tuple[str, dict[type, dict[Any, list[_Compiled]]]]]:
        for (_, prop), by_class in self.eq.items():
            by_type: dict[type, dict[Any, list[_Compiled]]] = {}
            for cls, table in by_class.items():
                if cls == "num":
                    # sql92 compares int and float numerically; 5 and 5.0 are also one dict key.
                    by_type[int] = by_type[float] = table
                else:
                    by_type[{"int": int, "str": str, "bool": bool}[cls]] = table
            yield prop, by_type

    def interval_probes(
        self,
    ) -> Iterable[tuple[str, bool, tuple[tuple[int, list[Any], list[_Compiled]], ...]]]:
        for (dialect, prop), classes in self.intervals.items():
            probe = []
            for width, bucket in sorted(classes.items()):
                bucket.sort(key=lambda item: (item[0], item[1]))
                probe.append((width, [low for low, _, _ in bucket], [e for _, _, e in bucket]))
            yield prop, dialect == "sql92", tuple(probe)

    def range_probes(self) -> Iterable[tuple[str, bool, str, list[Any], list[_Compiled]]]:
        for (dialect, prop, op), bucket in self.ranges.items():
            bucket.sort(key=lambda item: (item[0], item[1]))
            yield prop, dialect == "sql92", op, [b for b, _, _ in bucket], [e for _, _, e in bucket]
