"""The native routing core's plan, its Python side (issue 13): the Python plans' entries (``PlanEntry``: each
subscription's checked and normalized conjuncts and the gate chosen among them, subroute.expressions.plan) lowered
into a flat form and handed to the Rust plan (``_native``, built from router/routing/native), which decodes the
headers and evaluates every subscription of a batch of records with the GIL released.

The flat form is a list of nodes, children first (``native_boundary.Node``); equal sub-expressions are one node
(hash-consed), so a predicate shared by several subscriptions, of one app or of many, is evaluated at most once
per record. A property is a *slot*: a header name with the type declared for it (undeclared: string), decoded once
per record. A property read from the record's body (routing/body.py) is a slot of its own, filled from the body
only, never from a header of its name (``bodies``). Each subscription's gate is the one its Python plan chose,
translated; nothing is chosen here, so the two plans evaluate a subscription on the same records (except where the
native plan cannot index by that gate: ``translate_gate``).

Semantics are those of ``subroute.expressions.interpreter`` and ``subroute.routing.properties``; the tests in
``tests/unit/native`` hold the native plan to them.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import Literal, cast

from subroute.errors import SubrouteError
from subroute.expressions import ast
from subroute.expressions.outcome import INT64_MAX, INT64_MIN
from subroute.expressions.plan import Gate, PlanEntry, Subscription, plan_entries
from subroute.routing import native_boundary as boundary
from subroute.routing.native_boundary import _native
from subroute.wire import HeadersIn

# What a lowered entry depends on: its text, dialect, the number of its declared types and body properties, and its
# gate.
_EntryKey = tuple[str, str, int, Gate | None]

# A later plan extends the node list of the plan it reuses, so nodes only entries of earlier plans read stay
# in it: it starts afresh once it holds more than twice the nodes of its last fresh start, plus this many.
GARBAGE_SLACK = 4096


class NativePlanError(SubrouteError, ValueError):
    """The lowered form was refused by the native side (a bug: checked expressions always lower)."""


def _text(value: str) -> bytes:
    # surrogatepass: a literal may hold a lone surrogate; its bytes still sort in code point order.
    return value.encode("utf-8", "surrogatepass")


def _key(value: object, sql: bool) -> boundary.Key:
    if type(value) is bool:
        return {"kind": "bool", "value": value}
    if isinstance(value, str):
        return {"kind": "string", "value": _text(value)}
    return {"kind": "number" if sql else "int", "value": cast(int | float, value)}


def translate_gate(gate: Gate | None, sql: bool, slot: int, declared: str) -> boundary.Gate | None:
    """A Python plan's gate as the native plan indexes it (``slot``: its property's slot, ``declared``: that
    property's declared type). An interval is taken only on an int property with int bounds, where both plans'
    interval candidates are the same set; for any other the subscription is evaluated for every record (a
    superset of its Python plan's candidates)."""
    if gate is None:
        return None
    if gate.kind == "equality":
        # A value repeated in the gate is sent once (by type too: 5 and 5.0 are one key only natively).
        keys = {(type(v), v): _key(v, sql) for v in gate.values}
        return {"kind": "equality", "slot": slot, "keys": list(keys.values())}
    if gate.kind == "range":
        op = cast(boundary.OrderingOp, gate.op)
        return {"kind": "range", "slot": slot, "op": op, "bound": gate.bound}
    if declared == "int" and type(gate.low) is int and type(gate.high) is int:
        return {"kind": "interval", "slot": slot, "low": gate.low, "high": gate.high}
    return None


class _Lowering:
    """Lowers normalized trees of both dialects into one node list, sharing equal nodes."""

    def __init__(self, extend: _Lowering | None = None) -> None:
        # Extending an earlier plan's lowering keeps its slot and node numbers, so its lowered entries stay
        # valid; a copy, as that plan may still be read (or extended again) while this one is built.
        # (name, declared type, read from the body) -> slot
        self.slots: dict[tuple[str, str, bool], int] = dict(extend.slots) if extend else {}
        self.nodes: list[boundary.Node] = list(extend.nodes) if extend else []
        self.index: dict[tuple[object, ...], int] = dict(extend.index) if extend else {}
        # The node count at the end of the build that started this lowering empty.
        self.fresh: int = extend.fresh if extend else 0
        # A number for each set of declared types and body properties met (sorted (name, type) pairs, body names).
        self.type_numbers: dict[tuple[object, ...], int] = dict(extend.type_numbers) if extend else {}
        # Every entry lowered into these nodes, by what it depends on; and how many there were at the fresh start.
        self.entries: dict[_EntryKey, _native.Entry] = dict(extend.entries) if extend else {}
        self.fresh_entries: int = extend.fresh_entries if extend else 0

    def types_number(self, type_key: tuple[object, ...]) -> int:
        return self.type_numbers.setdefault(type_key, len(self.type_numbers))

    def extensible(self) -> bool:
        """Whether a later plan may extend this lowering (else the nodes and entries no plan reads any more are
        too many)."""
        return (
            len(self.nodes) <= 2 * self.fresh + GARBAGE_SLACK
            and len(self.entries) <= 2 * self.fresh_entries + GARBAGE_SLACK
        )

    def slot(self, name: str, types: Mapping[str, str], body: frozenset[str]) -> int:
        key = (name, types.get(name, "string"), name in body)
        found = self.slots.get(key)
        if found is None:
            found = self.slots[key] = len(self.slots)
        return found

    def add(self, key: tuple[object, ...], node: Callable[[], boundary.Node]) -> int:
        """The node of ``key`` (its tag, dialect and fields), made by ``node`` if it is new."""
        found = self.index.get(key)
        if found is None:
            found = self.index[key] = len(self.nodes)
            self.nodes.append(node())
        return found

    def lower(self, node: ast.Node, sql: bool, types: Mapping[str, str], body: frozenset[str]) -> int:
        """The node of a normalized tree (``expressions.plan``: chains flattened into ``Junction``s, literals on
        the right of comparisons)."""
        if isinstance(node, ast.BoolLit):
            flag = node.value
            return self.add(("bool", sql, flag), lambda: {"tag": "bool", "sql": sql, "value": flag})
        if isinstance(node, ast.IntLit):
            number = node.value
            if not INT64_MIN <= number <= INT64_MAX:  # the parser refuses these; never send them
                raise NativePlanError(f"integer literal outside int64: {number}")
            return self.add(("int", sql, number), lambda: {"tag": "int", "sql": sql, "value": number})
        if isinstance(node, ast.FloatLit):
            # 0.0 and -0.0 are one key, and no operation the plan does can tell them apart (only comparisons
            # and division by zero see a zero).
            real = node.value
            return self.add(("float", sql, real), lambda: {"tag": "float", "sql": sql, "value": real})
        if isinstance(node, ast.StrLit):
            text = _text(node.value)
            return self.add(("str", sql, text), lambda: {"tag": "str", "sql": sql, "value": text})
        if isinstance(node, ast.NullLit):
            return self.add(("null", sql), lambda: {"tag": "null", "sql": sql, "value": None})
        if isinstance(node, ast.Prop | ast.Exists):
            tag: Literal["prop", "exists"] = "prop" if isinstance(node, ast.Prop) else "exists"
            slot = self.slot(node.name, types, body)
            return self.add((tag, sql, slot), lambda: {"tag": tag, "sql": sql, "slot": slot})
        if isinstance(node, ast.Unary):
            op = cast(Literal["not", "neg", "pos"], node.op)
            operand = self.lower(node.operand, sql, types, body)
            return self.add((op, sql, operand), lambda: {"tag": op, "sql": sql, "operand": operand})
        if isinstance(node, ast.Arith):
            arith = cast(boundary.ArithmeticOp, node.op)
            left, right = self.lower(node.left, sql, types, body), self.lower(node.right, sql, types, body)
            return self.add(
                ("arith", sql, arith, left, right),
                lambda: {"tag": "arith", "sql": sql, "op": arith, "left": left, "right": right},
            )
        if isinstance(node, ast.Compare):
            cmp = cast(boundary.ComparisonOp, node.op)
            left, right = self.lower(node.left, sql, types, body), self.lower(node.right, sql, types, body)
            return self.add(
                ("cmp", sql, cmp, left, right),
                lambda: {"tag": "cmp", "sql": sql, "op": cmp, "left": left, "right": right},
            )
        if isinstance(node, ast.Junction):
            junction = cast(Literal["and", "or"], node.op)
            items = [self.lower(item, sql, types, body) for item in node.items]
            return self.add((junction, sql, *items), lambda: {"tag": junction, "sql": sql, "items": items})
        if isinstance(node, ast.Between):
            operand, low, high = (
                self.lower(n, sql, types, body) for n in (node.operand, node.low, node.high)
            )
            negated = node.negated
            return self.add(
                ("between", sql, operand, low, high, negated),
                lambda: {
                    "tag": "between",
                    "sql": sql,
                    "operand": operand,
                    "low": low,
                    "high": high,
                    "negated": negated,
                },
            )
        if isinstance(node, ast.In):
            operand, negated = self.lower(node.operand, sql, types, body), node.negated
            values = sorted({_text(v) for v in node.values})
            return self.add(
                ("in", sql, operand, negated, *values),
                lambda: {"tag": "in", "sql": sql, "operand": operand, "values": values, "negated": negated},
            )
        if isinstance(node, ast.Like):
            operand, negated = self.lower(node.operand, sql, types, body), node.negated
            escape = None if node.escape is None else ord(node.escape)
            pattern = [ord(c) for c in node.pattern]
            return self.add(
                ("like", sql, operand, negated, escape, *pattern),
                lambda: {
                    "tag": "like",
                    "sql": sql,
                    "operand": operand,
                    "pattern": pattern,
                    "escape": escape,
                    "negated": negated,
                },
            )
        if isinstance(node, ast.IsNull):
            operand, negated = self.lower(node.operand, sql, types, body), node.negated
            return self.add(
                ("isnull", sql, operand, negated),
                lambda: {"tag": "isnull", "sql": sql, "operand": operand, "negated": negated},
            )
        raise TypeError(f"not a normalized node: {node!r}")  # pragma: no cover


class NativePlan:
    """All the subscriptions, of any apps, dialects and declared types, in one native plan.

    ``match_batch`` gives, per record, exactly the ids that evaluating each subscription alone (with its own
    declared types decoding the headers) would match.

    ``entries`` are either the entries of Python plans (``Plan.entries``, each lowered with the gate its own plan
    chose: the router's case, decisions.py's plans being one per app and one per environment's filters), or
    subscriptions, given their entries here by ``expressions.plan.plan_entries`` (that same chooser, over all of
    them; it raises ``ExpressionError`` for a bad expression, as ``compile_plan`` does). An entry is evaluated on
    the records its gate lets through, so on the same records as in its Python plan, and reports the same
    errors, wherever the native plan can index by that gate (``translate_gate``; ``gate_of`` then says the
    gate's kind): the router relies on this to count evaluation errors as the Python plans do.

    ``reuse`` (an earlier plan) and ``pause`` are as in ``expressions.compile_plan``: expressions of an earlier
    plan are not parsed again, and ``pause`` is called after each subscription is given its entry (when they
    are made here), after each entry is lowered and after every 64 reused. An entry's lowered form depends only
    on its text, dialect, declared types and gate, so a plan built with ``reuse`` takes the lowered form of every
    such entry ``reuse`` holds instead of lowering it again (``stats``: ``lowered`` and ``reused``): a config
    change that rewrites one group lowers that group's expressions only. Its node list then extends that of
    ``reuse`` (``GARBAGE_SLACK``), so ``properties`` and the ``nodes`` count may include what only earlier plans
    read. The native build runs with the GIL released.

    ``opens`` and ``requires`` (aligned with the entries, a group label or None each) make one plan hold app
    filters and the subscriptions behind them (docs/design.md §2, step 1): a subscription that requires group g
    is evaluated, and can match, only on records where a subscription that opens g matched. An app filter's
    entries open the app's group and its consumer subscriptions require it; an app without a filter leaves its
    subscriptions requiring nothing. A subscription that is not evaluated reports no error.

    ``bodies`` (aligned with the entries) names, per entry, the properties its app reads from the record's body:
    they are slots of their own (``body_slot``), which the native decider fills from the body, never from a
    header of that name.
    """

    def __init__(
        self,
        entries: Iterable[PlanEntry] | Iterable[Subscription],
        reuse: NativePlan | None = None,
        pause: Callable[[], None] | None = None,
        opens: Sequence[Hashable | None] | None = None,
        requires: Sequence[Hashable | None] | None = None,
        bodies: Sequence[frozenset[str]] | None = None,
    ) -> None:
        given: tuple[PlanEntry | Subscription, ...] = tuple(entries)
        if all(isinstance(e, PlanEntry) for e in given):
            planned = cast(tuple[PlanEntry, ...], given)
        elif all(isinstance(e, Subscription) for e in given):
            earlier = reuse._entries if reuse is not None else ()
            planned = plan_entries(cast(tuple[Subscription, ...], given), earlier, pause)
        else:
            raise TypeError("a native plan is made of plan entries or of subscriptions, not of both")
        self._entries: tuple[PlanEntry, ...] = planned
        self.subscriptions: tuple[Subscription, ...] = tuple(e.subscription for e in planned)
        count = len(planned)
        group_ids: dict[Hashable, int] = {}

        def groups(labels: Sequence[Hashable | None] | None, what: str) -> list[int | None]:
            if labels is None:
                return [None] * count
            if len(labels) != count:
                raise ValueError(f"{what} has {len(labels)} entries for {count} subscriptions")
            return [None if g is None else group_ids.setdefault(g, len(group_ids)) for g in labels]

        opened, required = groups(opens, "opens"), groups(requires, "requires")
        if bodies is not None and len(bodies) != count:
            raise ValueError(f"bodies has {len(bodies)} entries for {count} subscriptions")
        no_body: frozenset[str] = frozenset()
        if any(o is not None and r is not None for o, r in zip(opened, required, strict=True)):
            raise ValueError("a subscription cannot both open a group and require one")
        # Lowered entries of ``reuse`` are valid only in its node and slot numbering: extend its lowering.
        extend = reuse is not None and reuse._lowering.extensible()
        lowering = _Lowering(reuse._lowering if extend and reuse is not None else None)
        cache = lowering.entries
        # The earlier plan's lowered entries by plan entry: an app whose Python plan is unchanged hands over the
        # very same entries, found here without computing their keys. (An id is taken only with the object it
        # was recorded for, which that plan keeps alive.)
        earlier_by_entry = reuse._by_entry if extend and reuse is not None else {}
        by_entry: dict[int, tuple[PlanEntry, _native.Entry, frozenset[str]]] = {}
        # The subscriptions of one app share one types mapping: its number is found once per build (ids are
        # stable, as ``planned`` holds every mapping until the end), and an entry's key holds that number,
        # cheaper to hash than the types themselves.
        type_of: dict[tuple[int, frozenset[str]], tuple[dict[str, str], int]] = {}
        lowered: list[_native.Entry] = []
        reused = 0
        made: set[_EntryKey] = (
            set()
        )  # the keys lowered by this build (an equal entry takes that one, unreused)
        for i, entry in enumerate(planned):
            body = bodies[i] if bodies is not None else no_body
            hit = earlier_by_entry.get(id(entry))
            found: _native.Entry | None = (
                hit[1] if hit is not None and hit[0] is entry and hit[2] == body else None
            )
            sub = entry.subscription
            if found is None:
                found_types = type_of.get((id(sub.types), body))
                if found_types is None:
                    type_key = tuple(sorted((sub.types or {}).items()))
                    found_types = type_of[(id(sub.types), body)] = (
                        dict(type_key),
                        lowering.types_number((*type_key, tuple(sorted(body)))),
                    )
                types, type_number = found_types
                key: _EntryKey = (sub.text, sub.dialect, type_number, entry.gate)
                found = cache.get(key)
                if found is None:
                    found = cache[key] = self._lower(entry, types, body, lowering)
                    made.add(key)
                    if (
                        pause is not None
                    ):  # a rebuild parses little: lowering the expressions is then the work
                        pause()
                if key in made:
                    by_entry[id(entry)] = (entry, found, body)
                    lowered.append(found)
                    continue
            by_entry[id(entry)] = (entry, found, body)
            lowered.append(found)
            reused += 1
            if pause is not None and not reused % 64:  # a reused entry costs about a microsecond
                pause()
        slots: list[boundary.TypedHeader] = [
            {"name": name, "declared": cast(boundary.PropertyType, declared)}
            for (name, declared, _) in lowering.slots
        ]
        spec: boundary.PlanSpec = {
            "slots": slots,
            "body_slots": [slot for (_, _, from_body), slot in lowering.slots.items() if from_body],
            "nodes": lowering.nodes,
            "entries": lowered,
            "opens": opened,
            "requires": required,
        }
        try:
            self._native = _native.NativePlan(spec)
        except ValueError as exc:
            raise NativePlanError(str(exc)) from exc
        if not extend:
            lowering.fresh, lowering.fresh_entries = len(lowering.nodes), len(cache)
        self._gate_kinds: tuple[str | None, ...] = tuple([e.kind for e in lowered])
        self.properties: frozenset[str] = frozenset(name for name, _, _ in lowering.slots)
        self.stats: dict[str, int] = {
            "subscriptions": count,
            "indexed_equality": self._gate_kinds.count("equality"),
            "indexed_range": self._gate_kinds.count("range"),
            "indexed_interval": self._gate_kinds.count("interval"),
            "unindexed": self._gate_kinds.count(None),
            "nodes": len(lowering.nodes),
            "lowered": count - reused,
            "reused": reused,
        }
        self._ids: tuple[Hashable, ...] = tuple(sub.id for sub in self.subscriptions)
        self._lowering: _Lowering = lowering
        self._by_entry: dict[int, tuple[PlanEntry, _native.Entry, frozenset[str]]] = by_entry

    @staticmethod
    def _lower(
        entry: PlanEntry, types: Mapping[str, str], body: frozenset[str], lowering: _Lowering
    ) -> _native.Entry:
        """The entry's gate, translated, and its residual: the conjuncts that gate leaves (all of them when the
        native plan cannot take the gate)."""
        sql = entry.subscription.dialect == "sql92"
        gate = entry.gate
        native_gate = None
        if gate is not None:
            slot = lowering.slot(gate.prop, types, body)
            native_gate = translate_gate(gate, sql, slot, types.get(gate.prop, "string"))
        rest = entry.residual if native_gate is not None else entry.conjuncts
        residual = [lowering.lower(c, sql, types, body) for c in rest]
        try:
            return _native.Entry({"gate": native_gate, "residual": residual})
        except ValueError as exc:
            raise NativePlanError(str(exc)) from exc

    def __len__(self) -> int:
        return len(self.subscriptions)

    @property
    def entries(self) -> tuple[PlanEntry, ...]:
        """The plan entries lowered, aligned with ``subscriptions``."""
        return self._entries

    @property
    def core(self) -> _native.NativePlan:
        """The native plan itself (``router/routing/native_decisions.py`` builds a decider on it)."""
        return self._native

    def body_slot(self, name: str, declared: str) -> int | None:
        """The slot of the body property ``name`` of type ``declared``; None when no entry reads it."""
        return self._lowering.slots.get((name, declared, True))

    def gate_of(self, position: int) -> str | None:
        """How the subscription at ``position`` is indexed: "equality", "range", "interval", or None (it is
        evaluated for every record)."""
        return self._gate_kinds[position]

    def gates(self) -> list[str | None]:
        """``gate_of`` of every position."""
        return list(self._gate_kinds)

    def match_indexes(self, records: Sequence[HeadersIn | None]) -> list[list[int]]:
        """Per record, the positions (ascending) of the subscriptions it matches."""
        return self._native.match_batch(records)

    def match_indexes_with_errors(
        self, records: Sequence[HeadersIn | None]
    ) -> list[tuple[list[int], list[int]]]:
        """Per record, ``(matched positions, positions whose evaluation ended in an evaluation error)``.

        As ``Plan.match_with_errors``: only subscriptions actually evaluated can report an error (one whose gate
        does not hold is known not to match without evaluating the rest), a non-boolean final value counts as
        an error, a sql92 UNKNOWN does not. Where this plan indexes an entry by its Python plan's gate
        (``gate_of``) it reports that plan's errors; elsewhere it may report more, never fewer.
        """
        found = self._native.match_batch_with_errors(records)
        return list(zip(found.matched, found.errors, strict=True))

    def candidate_counts(self, records: Sequence[HeadersIn | None]) -> list[tuple[int, int]]:
        """Per record, how many subscriptions the indexes listed (their gates hold) and how many of those were
        evaluated (in the apps whose filter the record passed); the matched ones are among them."""
        found = self._native.candidate_counts(records)
        return list(zip(found.listed, found.evaluated, strict=True))

    def match_batch(self, records: Sequence[HeadersIn | None]) -> list[frozenset[Hashable]]:
        """Per record, the ids of the subscriptions it matches."""
        ids = self._ids
        return [frozenset([ids[i] for i in hit]) for hit in self._native.match_batch(records)]

    def match(self, headers: HeadersIn | None) -> frozenset[Hashable]:
        """The ids of the subscriptions that one record with these headers matches."""
        return self.match_batch([headers])[0]
