"""The native routing core's Python side (issue 13): subscriptions are parsed and type-checked here (lark, the
same ``expressions.check`` the Python plan uses), lowered into a flat form, and handed to the Rust plan
(``_native``, built from ``router/routing/native``), which decodes the headers and evaluates every subscription of a
batch of records with the GIL released.

The flat form is a list of nodes, children first, each one ``(tag, sql92?, ints, float, bytes, [bytes])``;
equal sub-expressions are one node (hash-consed on that tuple), so a predicate shared by several subscriptions,
of one app or of many, is evaluated at most once per record. A property is a *slot*: a header name with the
type declared for it (undeclared: string), decoded once per record. Each subscription comes with the gate that
indexes it (equality, range or interval on one of its required conjuncts, chosen here as ``subroute.expressions.plan``
chooses) and its residual: the conjuncts left to evaluate once the gate holds.

Semantics are those of ``subroute.expressions.interpreter`` and ``subroute.routing.properties``; the tests in
``tests/unit/native`` hold the native plan to them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import cast

from subroute.errors import SubrouteError
from subroute.expressions import ast
from subroute.expressions.expression import check
from subroute.expressions.outcome import INT64_MAX, INT64_MIN
from subroute.expressions.plan import GateChoice, Subscription
from subroute.wire import HeadersIn

from . import _native

NodeTuple = tuple[str, bool, list[int], float, bytes, list[bytes]]
_CheckKey = tuple[str, str, tuple[tuple[str, str], ...]]  # text, dialect, declared types
KeyTuple = tuple[int, int, float, bytes]
# What a lowered entry depends on: the text, dialect and declared types, and the gate preferred for it.
_EntryKey = tuple[str, str, int, object]  # text, dialect, number of the declared types, preferred gate

# A later plan extends the node list of the plan it reuses, so nodes only entries of earlier plans read stay
# in it: it starts afresh once it holds more than twice the nodes of its last fresh start, plus this many.
GARBAGE_SLACK = 4096

TYPE_CODES = {"string": 0, "int": 1, "bool": 2, "float": 3}
_ARITH = {"+": 0, "-": 1, "*": 2, "/": 3, "%": 4}
_CMP = {"==": 0, "!=": 1, "<": 2, "<=": 3, ">": 4, ">=": 5}
# Gate kinds and equality-key classes, as router/routing/native/src/python.rs reads them.
_NO_GATE, _EQ, _RANGE, _INTERVAL = 0, 1, 2, 3
_K_INT, _K_SQL_INT, _K_SQL_FLOAT, _K_STR, _K_BOOL = 0, 1, 2, 3, 4
_GATE_NAMES: dict[int, str | None] = {_NO_GATE: None, _EQ: "equality", _RANGE: "range", _INTERVAL: "interval"}


class NativePlanError(SubrouteError, ValueError):
    """The lowered form was refused by the native side (a bug: checked expressions always lower)."""


def _text(value: str) -> bytes:
    # surrogatepass: a literal may hold a lone surrogate; its bytes still sort in code point order.
    return value.encode("utf-8", "surrogatepass")


@dataclass(frozen=True)
class _Gate:
    kind: int
    slot: int
    conjunct: int  # index of the conjunct it comes from
    droppable: bool  # the gate holding means that conjunct is true: it need not be evaluated again
    op: int = 0
    keys: tuple[KeyTuple, ...] = ()


def _conjuncts(node: ast.Node) -> list[ast.Node]:
    return _flatten(node, "and")


def _flatten(node: ast.Node, op: str) -> list[ast.Node]:
    """The items of an ``op`` chain, left to right (the parser builds binary, left-nested chains)."""
    if isinstance(node, ast.Logical | ast.Junction) and node.op == op:
        parts = (node.left, node.right) if isinstance(node, ast.Logical) else node.items
        return [item for part in parts for item in _flatten(part, op)]
    return [node]


def _oriented(node: ast.Node) -> ast.Node:
    """A comparison with a literal on the left, turned around (literals raise nothing, so order is free)."""
    if (
        isinstance(node, ast.Compare)
        and isinstance(node.left, ast.LITERALS)
        and not isinstance(node.right, ast.LITERALS)
    ):
        return ast.Compare(ast.MIRROR[node.op], node.right, node.left, pos=node.pos)
    return node


class _Lowering:
    """Lowers checked trees of both dialects into one node list, sharing equal nodes."""

    def __init__(self, extend: _Lowering | None = None) -> None:
        # Extending an earlier plan's lowering keeps its slot and node numbers, so its lowered entries stay
        # valid; a copy, as that plan may still be read (or extended again) while this one is built.
        self.slots: dict[tuple[str, str], int] = dict(extend.slots) if extend else {}
        self.nodes: list[NodeTuple] = list(extend.nodes) if extend else []
        self.index: dict[tuple[object, ...], int] = dict(extend.index) if extend else {}
        # The node count at the end of the build that started this lowering empty.
        self.fresh: int = extend.fresh if extend else 0
        # A number for each set of declared types met (sorted (name, type) pairs).
        self.type_numbers: dict[tuple[tuple[str, str], ...], int] = (
            dict(extend.type_numbers) if extend else {}
        )
        # Every entry lowered into these nodes, by what it depends on; and how many there were at the fresh start.
        self.entries: dict[_EntryKey, _native.Entry] = dict(extend.entries) if extend else {}
        self.fresh_entries: int = extend.fresh_entries if extend else 0

    def types_number(self, type_key: tuple[tuple[str, str], ...]) -> int:
        return self.type_numbers.setdefault(type_key, len(self.type_numbers))

    def extensible(self) -> bool:
        """Whether a later plan may extend this lowering (else the nodes and entries no plan reads any more are
        too many)."""
        return (
            len(self.nodes) <= 2 * self.fresh + GARBAGE_SLACK
            and len(self.entries) <= 2 * self.fresh_entries + GARBAGE_SLACK
        )

    def slot(self, name: str, types: Mapping[str, str]) -> int:
        key = (name, types.get(name, "string"))
        found = self.slots.get(key)
        if found is None:
            found = self.slots[key] = len(self.slots)
        return found

    def add(
        self,
        tag: str,
        sql: bool,
        ints: Sequence[int] = (),
        num: float = 0.0,
        text: bytes = b"",
        texts: Sequence[bytes] = (),
    ) -> int:
        # The float's type tags the key too: 0.0 and -0.0 are one key, and no operation the plan does can
        # tell them apart (only comparisons and division by zero see a zero).
        key = (tag, sql, tuple(ints), num, text, tuple(texts))
        found = self.index.get(key)
        if found is None:
            found = self.index[key] = len(self.nodes)
            self.nodes.append((tag, sql, list(ints), num, text, list(texts)))
        return found

    def lower(self, node: ast.Node, sql: bool, types: Mapping[str, str]) -> int:
        node = _oriented(node)
        if isinstance(node, ast.BoolLit):
            return self.add("bool", sql, (int(node.value),))
        if isinstance(node, ast.IntLit):
            if not INT64_MIN <= node.value <= INT64_MAX:  # the parser refuses these; never send them
                raise NativePlanError(f"integer literal outside int64: {node.value}")
            return self.add("int", sql, (node.value,))
        if isinstance(node, ast.FloatLit):
            return self.add("float", sql, (), node.value)
        if isinstance(node, ast.StrLit):
            return self.add("str", sql, (), 0.0, _text(node.value))
        if isinstance(node, ast.NullLit):
            return self.add("null", sql)
        if isinstance(node, ast.Prop):
            return self.add("prop", sql, (self.slot(node.name, types),))
        if isinstance(node, ast.Exists):
            return self.add("exists", sql, (self.slot(node.name, types),))
        if isinstance(node, ast.Unary):
            return self.add(node.op, sql, (self.lower(node.operand, sql, types),))
        if isinstance(node, ast.Arith):
            left, right = self.lower(node.left, sql, types), self.lower(node.right, sql, types)
            return self.add("arith", sql, (_ARITH[node.op], left, right))
        if isinstance(node, ast.Compare):
            left, right = self.lower(node.left, sql, types), self.lower(node.right, sql, types)
            return self.add("cmp", sql, (_CMP[node.op], left, right))
        if isinstance(node, ast.Logical | ast.Junction):
            items = [self.lower(item, sql, types) for item in _flatten(node, node.op)]
            return self.add(node.op, sql, items)
        if isinstance(node, ast.Between):
            parts = [self.lower(n, sql, types) for n in (node.operand, node.low, node.high)]
            return self.add("between", sql, (*parts, int(node.negated)))
        if isinstance(node, ast.In):
            operand = self.lower(node.operand, sql, types)
            values = sorted({_text(v) for v in node.values})
            return self.add("in", sql, (operand, int(node.negated)), texts=values)
        if isinstance(node, ast.Like):
            operand = self.lower(node.operand, sql, types)
            escape = -1 if node.escape is None else ord(node.escape)
            pattern = [ord(c) for c in node.pattern]
            return self.add("like", sql, (operand, int(node.negated), escape, *pattern))
        if isinstance(node, ast.IsNull):
            return self.add("isnull", sql, (self.lower(node.operand, sql, types), int(node.negated)))
        raise TypeError(f"unknown node {node!r}")  # pragma: no cover


def _eq_keys(node: ast.Node, sql: bool, slot: _SlotFn) -> tuple[int, list[KeyTuple]] | None:
    """``(slot, keys)`` when ``node`` is ``prop == literal`` or sql92 ``prop IN (...)``."""
    node = _oriented(node)
    if isinstance(node, ast.Compare) and node.op == "==" and isinstance(node.left, ast.Prop):
        lit = node.right
        key: KeyTuple
        if isinstance(lit, ast.BoolLit):
            key = (_K_BOOL, int(lit.value), 0.0, b"")
        elif isinstance(lit, ast.IntLit):
            key = (_K_SQL_INT if sql else _K_INT, lit.value, 0.0, b"")
        elif isinstance(lit, ast.StrLit):
            key = (_K_STR, 0, 0.0, _text(lit.value))
        elif sql and isinstance(lit, ast.FloatLit):
            key = (_K_SQL_FLOAT, 0, lit.value, b"")
        else:
            return None
        return slot(node.left.name), [key]
    if sql and isinstance(node, ast.In) and not node.negated and isinstance(node.operand, ast.Prop):
        return slot(node.operand.name), [(_K_STR, 0, 0.0, _text(v)) for v in node.values]
    return None


class _SlotFn:
    """The slot of a property name under one subscription's declared types."""

    def __init__(self, lowering: _Lowering, types: Mapping[str, str]) -> None:
        self.lowering = lowering
        self.types = types

    def __call__(self, name: str) -> int:
        return self.lowering.slot(name, self.types)


def _key_class(key: KeyTuple) -> int:
    # sql92 ints and floats compare numerically: one class for an OR of equalities.
    return _K_SQL_INT if key[0] == _K_SQL_FLOAT else key[0]


def _gates(conjuncts: list[ast.Node], sql: bool, slot: _SlotFn) -> list[_Gate]:
    """Every gate the conjuncts offer (see ``subroute.expressions.plan``): each is implied by its conjunct being true."""
    numeric = (ast.IntLit, ast.FloatLit) if sql else (ast.IntLit,)
    gates: list[_Gate] = []
    lower: dict[int, tuple[int, int]] = {}
    upper: dict[int, int] = {}
    for i, raw in enumerate(conjuncts):
        c = _oriented(raw)
        eq = _eq_keys(c, sql, slot)
        if eq is None and isinstance(c, ast.Junction | ast.Logical) and c.op == "or":
            # p == a || p == b || p IN (...): one property, one key class.
            found = [_eq_keys(item, sql, slot) for item in _flatten(c, "or")]
            if all(f is not None for f in found):
                parts = [f for f in found if f is not None]
                if len({p[0] for p in parts}) == 1 and len({_key_class(k) for p in parts for k in p[1]}) == 1:
                    eq = (parts[0][0], [k for p in parts for k in p[1]])
        if eq is not None:
            gates.append(_Gate(_EQ, eq[0], i, True, keys=tuple(dict.fromkeys(eq[1]))))
            continue
        if (
            isinstance(c, ast.Compare)
            and c.op in ast.ORDERING_OPS
            and isinstance(c.left, ast.Prop)
            and isinstance(c.right, numeric)
        ):
            s = slot(c.left.name)
            bound = _bound(c.right, sql)
            gates.append(_Gate(_RANGE, s, i, True, op=_CMP[c.op], keys=(bound,)))
            if isinstance(c.right, ast.IntLit):
                if c.op in (">", ">="):
                    lower.setdefault(s, (i, c.right.value))
                else:
                    upper.setdefault(s, c.right.value)
        elif (
            sql
            and isinstance(c, ast.Between)
            and not c.negated
            and isinstance(c.operand, ast.Prop)
            and isinstance(c.low, numeric)
        ):
            s = slot(c.operand.name)
            # BETWEEN is true only if "x >= low" is; the conjunct stays to check the upper bound.
            gates.append(_Gate(_RANGE, s, i, False, op=_CMP[">="], keys=(_bound(c.low, sql),)))
            if isinstance(c.low, ast.IntLit) and isinstance(c.high, ast.IntLit):
                lower.setdefault(s, (i, c.low.value))
                upper.setdefault(s, c.high.value)
    for s, (i, low) in lower.items():
        if s in upper:
            keys = ((_K_INT, low, 0.0, b""), (_K_INT, upper[s], 0.0, b""))
            gates.append(_Gate(_INTERVAL, s, i, False, keys=keys))
            break
    return gates


def _bound(lit: ast.IntLit | ast.FloatLit, sql: bool) -> KeyTuple:
    if isinstance(lit, ast.FloatLit):
        return (_K_SQL_FLOAT, 0, lit.value, b"")
    return (_K_SQL_INT if sql else _K_INT, lit.value, 0.0, b"")


class NativePlan:
    """All the subscriptions, of any apps, dialects and declared types, in one native plan.

    ``match_batch`` gives, per record, exactly the ids that evaluating each subscription alone (with its own
    declared types decoding the headers) would match. Raises ``ExpressionError`` for a bad expression, as
    ``expressions.compile_plan`` does; ``reuse`` and ``pause`` are as there (expressions of an earlier plan
    are not parsed again; ``pause`` is called after each parse, after each subscription is lowered and after
    every 64 reused). ``trees`` (aligned with the subscriptions, optional) are their checked trees, normalized or not
    (``Plan.trees``): nothing is then parsed. The native build runs with the GIL released.

    ``opens`` and ``requires`` (aligned with the subscriptions, a group label or None each) make one plan hold
    app filters and the subscriptions behind them (docs/design.md §2, step 1): a subscription that requires group
    g is evaluated, and can match, only on records where a subscription that opens g matched. An app filter's
    entries open the app's group and its consumer subscriptions require it; an app without a filter leaves
    its subscriptions requiring nothing. A subscription that is not evaluated reports no error.

    ``prefer`` (aligned with the subscriptions) gives, for each, the gate a Python plan chose for it
    (``Plan.gate_choices``) instead of the one this plan would choose: the same conjunct, so the same records
    evaluate it and can report its errors. Where this plan cannot index by that gate (an interval with float
    bounds, or on a property not declared int) the subscription is evaluated for every record: a superset.
    The router relies on this to count evaluation errors as the Python plans do (``decisions.Router``).

    With ``prefer``, a subscription's lowered form depends only on it and its preferred gate, so a plan built
    with ``reuse`` takes the lowered form of every such subscription ``reuse`` holds instead of lowering it
    again (``stats``: ``lowered`` and ``reused``): a config change that rewrites one group lowers that group's
    expressions only. Its node list then extends that of ``reuse`` (``GARBAGE_SLACK``), so ``properties`` and
    the ``nodes`` count may include what only earlier plans read.
    """

    def __init__(
        self,
        subscriptions: Iterable[Subscription],
        reuse: NativePlan | None = None,
        pause: Callable[[], None] | None = None,
        opens: Sequence[Hashable | None] | None = None,
        requires: Sequence[Hashable | None] | None = None,
        prefer: Sequence[GateChoice] | None = None,
        trees: Sequence[ast.Node] | None = None,
    ) -> None:
        self.subscriptions: tuple[Subscription, ...] = tuple(subscriptions)
        count = len(self.subscriptions)
        for name, aligned in (("prefer", prefer), ("trees", trees)):
            if aligned is not None and len(aligned) != count:
                raise ValueError(f"{name} has {len(aligned)} entries for {count} subscriptions")
        group_ids: dict[Hashable, int] = {}

        def groups(labels: Sequence[Hashable | None] | None, what: str) -> list[int]:
            if labels is None:
                return [-1] * count
            if len(labels) != count:
                raise ValueError(f"{what} has {len(labels)} entries for {count} subscriptions")
            return [-1 if g is None else group_ids.setdefault(g, len(group_ids)) for g in labels]

        opened, required = groups(opens, "opens"), groups(requires, "requires")
        if any(o >= 0 and r >= 0 for o, r in zip(opened, required, strict=True)):
            raise ValueError("a subscription cannot both open a group and require one")
        # Lowered entries of ``reuse`` are valid only in its node and slot numbering: extend its lowering.
        extend = reuse is not None and reuse._lowering.extensible()
        lowering = _Lowering(reuse._lowering if extend and reuse is not None else None)
        entries = lowering.entries
        # The earlier plan's entries by subscription object: an app whose Python plan is unchanged hands over
        # the very same subscriptions and gate choices, found here without computing their keys. (An id is
        # taken only with the object it was recorded for, which that plan keeps alive.)
        earlier_by_sub = reuse._by_sub if extend and reuse is not None else {}
        by_sub: dict[int, tuple[Subscription, GateChoice, _native.Entry]] = {}
        # Parsing is most of the cost of a build; a later plan starts from the trees of ``reuse``.
        earlier: dict[_CheckKey, ast.Node] = reuse._checked if reuse is not None else {}
        checked: dict[_CheckKey, ast.Node] = {}

        def keep_tree(sub: Subscription, type_key: tuple[tuple[str, str], ...]) -> None:
            """Carry a reused entry's checked tree over, for a later plan that may want it under another gate."""
            tree = earlier.get((sub.text, sub.dialect, type_key))
            if tree is not None:
                checked[(sub.text, sub.dialect, type_key)] = tree

        # Per subscription its lowered form, once known; the others' (position, entry key, conjuncts, dialect,
        # types, gates), to lower once the gates are counted.
        lowered: list[_native.Entry | None] = []
        to_lower: list[
            tuple[int, _EntryKey | None, list[ast.Node], bool, Mapping[str, str], list[_Gate]]
        ] = []
        eq_count: Counter[tuple[int, tuple[object, ...]]] = Counter()
        range_count: Counter[tuple[int, int]] = Counter()
        # The subscriptions of one app share one types mapping: its number is found once per build (ids are
        # stable, as ``self.subscriptions`` holds every mapping until the end), and an entry's key holds that
        # number, cheaper to hash than the types themselves.
        type_of: dict[int, tuple[tuple[tuple[str, str], ...], int]] = {}
        reused = 0
        for position, sub in enumerate(self.subscriptions):
            if prefer is not None:
                hit = earlier_by_sub.get(id(sub))
                if hit is not None and hit[0] is sub and _same_choice(hit[1], prefer[position]):
                    by_sub[id(sub)] = hit
                    lowered.append(hit[2])
                    reused += 1
                    if trees is None:
                        keep_tree(sub, tuple(sorted((sub.types or {}).items())))
                    if pause is not None and not reused % 64:  # a reused entry costs under a microsecond
                        pause()
                    continue
            found_types = type_of.get(id(sub.types))
            if found_types is None:
                type_key = tuple(sorted((sub.types or {}).items()))
                found_types = type_of[id(sub.types)] = (type_key, lowering.types_number(type_key))
            type_key, type_number = found_types
            entry_key: _EntryKey | None = None
            if prefer is not None:
                choice = prefer[position]
                gate_key = choice if choice is None or choice[2] is None else _choice_key(choice)
                entry_key = (sub.text, sub.dialect, type_number, gate_key)
                found = entries.get(entry_key)
                if found is not None:
                    by_sub[id(sub)] = (sub, choice, found)
                    lowered.append(found)
                    reused += 1
                    if trees is None:
                        keep_tree(sub, type_key)
                    if pause is not None and not reused % 64:  # a reused entry costs about a microsecond
                        pause()
                    continue
            key = (sub.text, sub.dialect, type_key)
            tree = trees[position] if trees is not None else checked.get(key) or earlier.get(key)
            if tree is None:
                tree = check(sub.text, sub.dialect, dict(type_key))
                if pause is not None:  # let other threads run between parses (see compile_plan)
                    pause()
            checked[key] = tree
            sql = sub.dialect == "sql92"
            types = dict(type_key)
            conjuncts = _conjuncts(tree)
            gates = _gates(conjuncts, sql, _SlotFn(lowering, types))
            if prefer is None:  # the gates' costs, to choose among them
                for g in gates:
                    if g.kind == _EQ:
                        eq_count.update((g.slot, _num_key(k)) for k in g.keys)
                    elif g.kind == _RANGE:
                        range_count[(g.slot, g.op)] += 1
            lowered.append(None)
            to_lower.append((position, entry_key, conjuncts, sql, types, gates))

        def cost(g: _Gate) -> tuple[float, int, int]:
            # The expected number of candidates the gate lets through (as expressions.plan estimates it).
            if g.kind == _EQ:
                return (float(sum(eq_count[(g.slot, _num_key(k))] for k in g.keys)), 0, g.conjunct)
            if g.kind == _INTERVAL:
                return (2.0, 1, g.conjunct)
            return (max(1.0, range_count[(g.slot, g.op)] / 2), 2, g.conjunct)

        int_slots = {slot for (_, type_name), slot in lowering.slots.items() if type_name == "int"}

        def preferred(gates: list[_Gate], choice: GateChoice) -> _Gate | None:
            if choice is None:
                return None
            kind, conjunct, bounds = choice
            for g in gates:
                if g.conjunct != conjunct:
                    continue
                if (kind == "equality" and g.kind == _EQ) or (kind == "range" and g.kind == _RANGE):
                    return g  # one conjunct offers one such gate, exactly as the Python plan's
                if kind == "interval" and g.kind == _INTERVAL and bounds is not None and g.slot in int_slots:
                    low, high = bounds
                    # An int property's value is an int: both plans then take the same intervals' candidates.
                    ints = type(low) is int and type(high) is int
                    if ints and g.keys == ((_K_INT, low, 0.0, b""), (_K_INT, high, 0.0, b"")):
                        return g
            return None

        for position, entry_key, conjuncts, sql, entry_types, gates in to_lower:
            if pause is not None:  # a rebuild parses little: lowering the expressions is then the work
                pause()
            if prefer is None:
                gate = min(gates, key=cost) if gates else None
            else:
                gate = preferred(gates, prefer[position])
            rest = conjuncts
            if gate is not None and gate.droppable:
                rest = conjuncts[: gate.conjunct] + conjuncts[gate.conjunct + 1 :]
            residual = [lowering.lower(c, sql, entry_types) for c in rest]
            try:
                entry = (
                    _native.Entry(_NO_GATE, 0, 0, [], residual)
                    if gate is None
                    else _native.Entry(gate.kind, gate.slot, gate.op, gate.keys, residual)
                )
            except ValueError as exc:
                raise NativePlanError(str(exc)) from exc
            if entry_key is not None and prefer is not None:
                entries[entry_key] = entry
                sub = self.subscriptions[position]
                by_sub[id(sub)] = (sub, prefer[position], entry)
            lowered[position] = entry
        done = cast(list[_native.Entry], lowered)  # every position is lowered now
        props = [(name, TYPE_CODES[type_name]) for (name, type_name) in lowering.slots]
        try:
            self._native = _native.NativePlan(props, lowering.nodes, done, opened, required)
        except ValueError as exc:
            raise NativePlanError(str(exc)) from exc
        if not extend:
            lowering.fresh, lowering.fresh_entries = len(lowering.nodes), len(entries)
        self._gate_kinds: tuple[int, ...] = tuple([e.kind for e in done])
        self.properties: frozenset[str] = frozenset(name for name, _ in lowering.slots)
        self.stats: dict[str, int] = {
            "subscriptions": count,
            "indexed_equality": self._gate_kinds.count(_EQ),
            "indexed_range": self._gate_kinds.count(_RANGE),
            "indexed_interval": self._gate_kinds.count(_INTERVAL),
            "unindexed": self._gate_kinds.count(_NO_GATE),
            "nodes": len(lowering.nodes),
            "lowered": count - reused,
            "reused": reused,
        }
        self._ids: tuple[Hashable, ...] = tuple(sub.id for sub in self.subscriptions)
        self._checked: dict[_CheckKey, ast.Node] = checked
        self._lowering: _Lowering = lowering
        self._by_sub: dict[int, tuple[Subscription, GateChoice, _native.Entry]] = by_sub

    def __len__(self) -> int:
        return len(self.subscriptions)

    @property
    def core(self) -> _native.NativePlan:
        """The native plan itself (``router/routing/native_decisions.py`` builds a decider on it)."""
        return self._native

    def gate_of(self, position: int) -> str | None:
        """How the subscription at ``position`` is indexed: "equality", "range", "interval", or None (it is
        evaluated for every record)."""
        return _GATE_NAMES[self._gate_kinds[position]]

    def gates(self) -> list[str | None]:
        """``gate_of`` of every position."""
        return [_GATE_NAMES[kind] for kind in self._gate_kinds]

    def match_indexes(self, records: Sequence[HeadersIn | None]) -> list[list[int]]:
        """Per record, the positions (ascending) of the subscriptions it matches."""
        return self._native.match_batch(records)

    def match_indexes_with_errors(
        self, records: Sequence[HeadersIn | None]
    ) -> list[tuple[list[int], list[int]]]:
        """Per record, ``(matched positions, positions whose evaluation ended in an evaluation error)``.

        As ``Plan.match_with_errors``: only subscriptions actually evaluated can report an error (one whose gate
        does not hold is known not to match without evaluating the rest), a non-boolean final value counts as
        an error, a sql92 UNKNOWN does not. The gates chosen here are not always the Python plan's, so on a
        record where a gate fails the two may count an error differently; the matches never differ.
        """
        return self._native.match_batch_with_errors(records)

    def match_batch(self, records: Sequence[HeadersIn | None]) -> list[frozenset[Hashable]]:
        """Per record, the ids of the subscriptions it matches."""
        ids = self._ids
        return [frozenset([ids[i] for i in hit]) for hit in self._native.match_batch(records)]

    def match(self, headers: HeadersIn | None) -> frozenset[Hashable]:
        """The ids of the subscriptions that one record with these headers matches."""
        return self.match_batch([headers])[0]


def _same_choice(a: GateChoice, b: GateChoice) -> bool:
    return a is b or (a == b and _choice_key(a) == _choice_key(b))


def _choice_key(choice: GateChoice) -> object:
    """A preferred gate as a cache key: an interval's bounds with their types (5 == 5.0, but only int bounds
    give an interval gate)."""
    if choice is None or choice[2] is None:
        return choice
    low, high = choice[2]
    return (*choice, type(low).__name__, type(high).__name__)


def _num_key(key: KeyTuple) -> tuple[object, ...]:
    """The equality bucket a key falls in (5 and 5.0 are one bucket in sql92), for the cost estimate only."""
    if key[0] in (_K_SQL_INT, _K_SQL_FLOAT):
        value = key[1] if key[0] == _K_SQL_INT else key[2]
        return ("num", value)
    return key
