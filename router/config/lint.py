"""``subroute config lint``: static analysis of an app's subscriptions, offline and pure.

How it decides (README "Linting subscriptions"):

* Each expression is taken from the normalised plan (``expressions.plan_entries``: its top-level conjuncts).
  A conjunct is *analysable* when it is built of ``and``/``or``/``not``, literals, ``exists``, ``IS [NOT]
  NULL``, a boolean property, and comparisons of one property with literals (``== != < <= > >=``, ``BETWEEN``,
  ``IN``; ordering on numbers only). Anything else (LIKE, arithmetic, two properties compared, string ordering)
  is *unknown*: the analysis never guesses its truth.
* Per app and property, the literals the analysable conjuncts compare it with cut its values into finitely many
  *classes* (each literal, the open intervals between them, "another string", false/true), plus the class
  *absent* (a missing header, or one that does not decode as the declared type). Every analysable conjunct has
  one truth value per class, so evaluating it with the reference interpreter on one representative value per
  class gives its exact truth table; the true cells become *boxes* (a set of classes per property).
* An expression's boxes are the intersection of its analysable conjuncts' (a conjunction is true only when each
  conjunct is): exact when every conjunct is analysable, otherwise an over-approximation (what it may match).
  Findings only ever use an over-approximation where a larger set makes the finding harder to report, and
  an exact set elsewhere, so a finding is never false; where that cannot be decided, or a bound of work is
  reached, it says *unknown* instead.
* Point questions ("which subscriptions match this assignment?") are asked of the compiled plan itself, whose
  equality, range and interval indexes answer them without a pass over every subscription; pairs at one
  priority are found through an index of the boxes by class, not by comparing every two subscriptions.

Shadowing (the routing rule of README "Routing", step 3): subscription S (group G, priority p) is *shadowed*
when a subscription S' at a higher priority matches every message S matches and either S' is of G itself
(G is then a candidate at S''s level whenever S matches; G absent or full there is absent or full at p too;
except with ``group_by`` and ``spillover: true``, where the rendezvous hash among a lower level's groups may
pick G again, full, and the message waits for it), or
S' is of another group and the app has ``presence: ignored`` and ``spillover: false`` (the higher level always
has a present candidate and never spills). With ``presence: required`` or ``spillover: true`` a lower
subscription of another group still takes messages when the higher group is absent or full, so it is not
reported. Shadowed means never chosen: S never decides where a message goes; its ``max_unconfirmed`` still
counts towards its group's limit.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from bisect import bisect_left, bisect_right
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from subroute import expressions
from subroute.config.model import AppConfig, Config, GroupConfig
from subroute.expressions import ast
from subroute.expressions.interpreter import interpret
from subroute.expressions.outcome import INT64_MAX, INT64_MIN
from subroute.expressions.plan import PlanEntry

# Kinds of finding.
SHADOWED = "shadowed"
OVERLAP = "overlap"
NEVER_TRUE = "never-true"
ALWAYS_TRUE = "always-true"
WAITS_FOREVER = "waits-forever"
GROUP_SPLIT = "group-split"
KINDS = (SHADOWED, OVERLAP, NEVER_TRUE, ALWAYS_TRUE, WAITS_FOREVER, GROUP_SPLIT)

# Bounds of work, so that a large config is linted in seconds; reaching one is said (an Unknown), never hidden.
CELL_LIMIT = 4096  # truth-table cells of one conjunct
BOX_LIMIT = 256  # boxes of one expression
STEP_LIMIT = 20_000  # splitting steps of one coverage question
PAIR_LIMIT = 20_000  # pairs examined per app for overlaps (each one that overlaps costs a sample search)
DEFAULT_MAX_FINDINGS = 50  # findings of one kind listed per app

Ranges = tuple[tuple[int, int], ...]  # sorted, disjoint, inclusive class indexes; class 0 is "absent"
Box = dict[str, Ranges]  # a property not named is unconstrained
Ref = tuple[str, ...]  # ("filter", i) or ("subscription", group, i)
Sample = dict[str, Any]  # property -> value; None: the header is absent


@dataclass(frozen=True)
class Finding:
    kind: str
    app: str
    where: str  # the config location of the expression the finding is about
    message: str
    refs: tuple[Ref, ...] = ()  # the expressions involved, the finding's own first
    samples: tuple[Sample, ...] = ()  # property assignments that show it (None: header absent)

    def document(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "app": self.app,
            "where": self.where,
            "message": self.message,
            "samples": [dict(s) for s in self.samples],
        }


@dataclass(frozen=True)
class Unknown:
    app: str
    where: str
    reason: str

    def document(self) -> dict[str, Any]:
        return {"app": self.app, "where": self.where, "reason": self.reason}


@dataclass
class LintReport:
    findings: list[Finding] = field(default_factory=list)
    unknowns: list[Unknown] = field(default_factory=list)
    expressions: int = 0


def location(app: str, ref: Ref, config: Config | None = None) -> str:
    if ref[0] == "filter":
        return f"apps.{app}.filter[{ref[1]}]"
    if ref[0] == "app":
        return f"apps.{app}"
    group, index = ref[1], int(ref[2])
    if config is not None:
        g = config.groups.get((app, group))
        if g is not None and not g.subscriptions:
            return f"apps.{app}.groups.{group}"
    return f"apps.{app}.groups.{group}.subscriptions[{index}]"


# --- ranges and boxes ----------------------------------------------------------------------------------------------


def _norm(ranges: Iterable[tuple[int, int]]) -> Ranges:
    out: list[tuple[int, int]] = []
    for lo, hi in sorted(ranges):
        if lo > hi:
            continue
        if out and lo <= out[-1][1] + 1:
            if hi > out[-1][1]:
                out[-1] = (out[-1][0], hi)
        else:
            out.append((lo, hi))
    return tuple(out)


def _inter(a: Ranges, b: Ranges) -> Ranges:
    out = []
    i = j = 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if lo <= hi:
            out.append((lo, hi))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return tuple(out)


def _minus(a: Ranges, b: Ranges) -> Ranges:
    out = []
    for lo, hi in a:
        cur = lo
        for blo, bhi in b:
            if bhi < cur or blo > hi:
                continue
            if blo > cur:
                out.append((cur, blo - 1))
            cur = max(cur, bhi + 1)
            if cur > hi:
                break
        if cur <= hi:
            out.append((cur, hi))
    return tuple(out)


def _holds(ranges: Ranges, c: int) -> bool:
    i = bisect_right(ranges, (c, math.inf)) - 1
    return i >= 0 and ranges[i][0] <= c <= ranges[i][1]


def _box_inter(a: Box, b: Box) -> Box | None:
    out = dict(a)
    for prop, r in b.items():
        got = _inter(out[prop], r) if prop in out else r
        if not got:
            return None
        out[prop] = got
    return out


def _box_minus(a: Box, b: Box, full: Mapping[str, Ranges]) -> list[Box]:
    """``a`` minus ``b`` as disjoint boxes."""
    if _box_inter(a, b) is None:
        return [a]
    pieces = []
    cur = dict(a)
    for prop, r in b.items():
        have = cur.get(prop, full[prop])
        rest = _minus(have, r)
        if rest:
            pieces.append({**cur, prop: rest})
        cur[prop] = _inter(have, r)
    return pieces


def _box_holds(box: Box, point: Mapping[str, int]) -> bool:
    return all(_holds(r, point.get(prop, 0)) for prop, r in box.items())


def _point(box: Box) -> dict[str, int]:
    """One point of a box: each constrained property's first class (absent when allowed: 0 comes first)."""
    return {prop: r[0][0] for prop, r in box.items()}


def _covered(boxes: Sequence[Box], by: Sequence[Box], full: Mapping[str, Ranges]) -> bool | None:
    """Whether the union of ``boxes`` lies inside the union of ``by``; None past the bound of work."""
    point, complete = _first_uncovered(boxes, by, full)
    return None if not complete else point is None


def _first_uncovered(
    boxes: Sequence[Box], by: Sequence[Box], full: Mapping[str, Ranges]
) -> tuple[dict[str, int] | None, bool]:
    """A point of ``boxes`` outside every box of ``by`` (None: none found), and whether the search was complete
    (False: it stopped at the bound of work)."""
    work = list(boxes)
    for _ in range(STEP_LIMIT):
        if not work:
            return None, True
        b = work.pop()
        point = _point(b)
        cover = next((c for c in by if _box_holds(c, point)), None)
        if cover is None:
            return point, True
        work.extend(_box_minus(b, cover, full))
    return None, not work


# --- classes of values ---------------------------------------------------------------------------------------------

_ABSENT = ("absent",)


def _int_classes(points: Sequence[Any]) -> list[tuple[Any, tuple[Any, ...]]]:
    out: list[tuple[Any, tuple[Any, ...]]] = []
    prev: Any = -math.inf
    for p in [*points, math.inf]:
        lo = INT64_MIN if prev == -math.inf else math.floor(prev) + 1
        hi = INT64_MAX if p == math.inf else math.ceil(p) - 1
        lo, hi = max(lo, INT64_MIN), min(hi, INT64_MAX)
        if lo <= hi:
            rep = lo if prev != -math.inf else (hi if p != math.inf else 0)
            out.append((rep, ("open", prev, p)))
        if p != math.inf and float(p).is_integer() and INT64_MIN <= p <= INT64_MAX:
            out.append((int(p), ("point", p)))
        prev = p
    return out


def _float_classes(points: Sequence[Any]) -> list[tuple[Any, tuple[Any, ...]]]:
    out: list[tuple[Any, tuple[Any, ...]]] = []
    prev: Any = -math.inf
    for p in [*points, math.inf]:
        if prev == -math.inf and p == math.inf:
            rep = 0.0
        elif prev == -math.inf:
            rep = float(p) - abs(float(p)) - 1.0
        elif p == math.inf:
            rep = float(prev) + abs(float(prev)) + 1.0
        else:
            rep = (float(prev) + float(p)) / 2
            if not prev < rep < p:
                rep = math.nextafter(float(prev), math.inf)
        if math.isfinite(rep) and prev < rep < p:
            out.append((rep, ("open", prev, p)))
        if p != math.inf:
            out.append((float(p), ("point", p)))
        prev = p
    return out


def _classes(kind: str, literals: Iterable[Any]) -> list[tuple[Any, tuple[Any, ...]]]:
    """The value classes (representative, description) of a property of type ``kind`` cut by ``literals``,
    absent first."""
    lits = set(literals)
    out: list[tuple[Any, tuple[Any, ...]]] = [(None, _ABSENT)]
    if kind == "bool":
        return [*out, (False, ("bool", False)), (True, ("bool", True))]
    if kind in ("int", "float"):
        points = sorted(lits)
        return out + (_int_classes(points) if kind == "int" else _float_classes(points))
    strings = sorted(lits)
    other = "other"  # not empty: an empty group_by header is the default message group, not a value
    while other in lits:
        other += "~"
    return [*out, *((s, ("str", s)) for s in strings), (other, ("other", frozenset(strings)))]


@dataclass
class _Domain:
    """One property's classes in one app: index 0 absent, then the values' classes."""

    kind: str
    reps: list[Any]
    numbers: list[Any] = field(default_factory=list)  # int/float: reps[1:], ascending
    where: dict[Any, int] = field(default_factory=dict)  # string/bool: value -> index

    @classmethod
    def of(cls, kind: str, literals: Iterable[Any]) -> _Domain:
        reps = [rep for rep, _ in _classes(kind, literals)]
        dom = cls(kind, reps)
        if kind in ("int", "float"):
            dom.numbers = reps[1:]
        else:
            dom.where = {r: i for i, r in enumerate(reps) if i > 0}
        return dom

    @property
    def full(self) -> Ranges:
        return ((0, len(self.reps) - 1),)

    def ranges(self, desc: tuple[Any, ...]) -> Ranges:
        """The classes of this domain that make up a class ``desc`` of a coarser cut."""
        tag = desc[0]
        if tag == "absent":
            return ((0, 0),)
        if tag == "point":
            i = bisect_left(self.numbers, desc[1])
            return ((i + 1, i + 1),)
        if tag == "open":
            lo = 0 if desc[1] == -math.inf else bisect_right(self.numbers, desc[1])
            hi = len(self.numbers) if desc[2] == math.inf else bisect_left(self.numbers, desc[2])
            return ((lo + 1, hi),) if lo < hi else ()
        if tag in ("str", "bool"):
            return ((self.where[desc[1]],) * 2,)
        taken = [(self.where[s], self.where[s]) for s in desc[1]]
        return _minus(((1, len(self.reps) - 1),), _norm(taken))


# --- analysable conjuncts --------------------------------------------------------------------------------------------


class _NotAnalysable(Exception):
    pass


def _literal(node: ast.Node) -> tuple[bool, Any]:
    if isinstance(node, ast.IntLit | ast.FloatLit | ast.StrLit | ast.BoolLit):
        return True, node.value
    if isinstance(node, ast.NullLit):
        return True, None
    if (
        isinstance(node, ast.Unary)
        and node.op in ("neg", "pos")
        and isinstance(node.operand, ast.IntLit | ast.FloatLit)
    ):
        v = node.operand.value
        return True, -v if node.op == "neg" else v
    return False, None


def _fits(kind: str, value: Any) -> bool:
    if value is None:
        return True
    if kind in ("int", "float"):
        return type(value) in (int, float)
    return type(value) is (bool if kind == "bool" else str)


def _literals(node: ast.Node, types: Mapping[str, str], found: dict[str, set[Any]]) -> None:
    """Collect, per property, the literals ``node`` compares it with; raise when ``node`` is not analysable."""

    def kind(name: str) -> str:
        return types.get(name, "string")

    def prop_with(name: str, values: Iterable[Any], ordering: bool) -> None:
        k = kind(name)
        if ordering and k not in ("int", "float"):
            raise _NotAnalysable("orders strings")
        vals = [v for v in values if v is not None]
        if not all(_fits(k, v) for v in vals):
            raise _NotAnalysable("compares values of another type")
        found.setdefault(name, set()).update(vals)

    if isinstance(node, ast.Junction):
        for item in node.items:
            _literals(item, types, found)
    elif isinstance(node, ast.Logical):
        _literals(node.left, types, found)
        _literals(node.right, types, found)
    elif isinstance(node, ast.Unary):
        if node.op == "not":
            _literals(node.operand, types, found)
        elif not _literal(node)[0]:
            raise _NotAnalysable("arithmetic")
    elif isinstance(node, ast.LITERALS):
        pass
    elif isinstance(node, ast.Exists):
        found.setdefault(node.name, set())
    elif isinstance(node, ast.Prop):
        if kind(node.name) != "bool":
            raise _NotAnalysable("a non-boolean property used as a condition")
        found.setdefault(node.name, set())
    elif isinstance(node, ast.IsNull):
        if not isinstance(node.operand, ast.Prop):
            raise _NotAnalysable("IS NULL of a computed value")
        found.setdefault(node.operand.name, set())
    elif isinstance(node, ast.Compare):
        left_lit, lv = _literal(node.left)
        right_lit, rv = _literal(node.right)
        if left_lit and right_lit:
            return
        if isinstance(node.left, ast.Prop) and right_lit:
            prop_with(node.left.name, [rv], node.op in ast.ORDERING_OPS)
        elif isinstance(node.right, ast.Prop) and left_lit:
            prop_with(node.right.name, [lv], node.op in ast.ORDERING_OPS)
        elif isinstance(node.left, ast.Prop) and isinstance(node.right, ast.Prop):
            raise _NotAnalysable("compares two properties")
        else:
            raise _NotAnalysable("arithmetic")
    elif isinstance(node, ast.Between):
        low_lit, low = _literal(node.low)
        high_lit, high = _literal(node.high)
        if not (isinstance(node.operand, ast.Prop) and low_lit and high_lit):
            raise _NotAnalysable("BETWEEN of computed values")
        prop_with(node.operand.name, [low, high], True)
    elif isinstance(node, ast.In):
        if not isinstance(node.operand, ast.Prop):
            raise _NotAnalysable("IN of a computed value")
        prop_with(node.operand.name, node.values, False)
    elif isinstance(node, ast.Like):
        raise _NotAnalysable("LIKE")
    else:
        raise _NotAnalysable(type(node).__name__)


# --- one app ---------------------------------------------------------------------------------------------------------


@dataclass
class _Expr:
    ref: Ref
    entry: PlanEntry | None  # None: a group without subscriptions (any message)
    boxes: list[Box]  # what it may match (exact when ``exact``)
    exact: bool
    reason: str | None = None  # why it is not exact
    group: str = ""
    priority: int = 0
    order: int = 0


@dataclass(frozen=True)
class Matchers:
    """An app's filters and subscriptions compiled with the refs findings name (``Finding.refs``)."""

    filter_plan: expressions.Plan  # ids ("filter", i)
    plan: expressions.Plan  # ids ("subscription", group, i) of subscriptions with an expression
    unconditional: tuple[Ref, ...]  # groups without subscriptions: they match any message
    refs: tuple[Ref, ...]  # every subscription, in configuration order

    def passes(self, props: Mapping[str, Any]) -> bool:
        return not self.filter_plan.subscriptions or bool(self.filter_plan.match(props))

    def matched(self, props: Mapping[str, Any]) -> frozenset[Hashable]:
        return self.plan.match(props) | frozenset(self.unconditional)


def matchers(config: Config, app: AppConfig) -> Matchers:
    types = dict(app.properties)
    filters = [
        expressions.Subscription(("filter", str(i)), t, app.dialect, types) for i, t in enumerate(app.filter)
    ]
    subs: list[expressions.Subscription] = []
    unconditional: list[Ref] = []
    refs: list[Ref] = []
    for group in config.groups_of(app.name):
        for i, sub in enumerate(group.effective_subscriptions):
            ref: Ref = ("subscription", group.name, str(i))
            refs.append(ref)
            if sub.expression is None:
                unconditional.append(ref)
            else:
                subs.append(expressions.Subscription(ref, sub.expression, app.dialect, types))
    return Matchers(
        expressions.compile_plan(filters), expressions.compile_plan(subs), tuple(unconditional), tuple(refs)
    )


class _App:
    def __init__(self, config: Config, app: AppConfig, max_findings: int) -> None:
        self.config = config
        self.app = app
        self.types: Mapping[str, str] = dict(app.properties)
        self.dialect = app.dialect
        self.max_findings = max_findings
        self.groups: tuple[GroupConfig, ...] = config.groups_of(app.name)
        self.findings: list[Finding] = []
        self.unknowns: list[Unknown] = []
        self.counts: dict[str, int] = {}
        self.meta: list[tuple[Ref, GroupConfig, int, int]] = []  # ref, group, priority, order
        order = 0
        for group in self.groups:
            for i, sub in enumerate(group.effective_subscriptions):
                self.meta.append((("subscription", group.name, str(i)), group, sub.priority, order))
                order += 1
        # The compiled plans: they answer "what matches this assignment" exactly and through their indexes.
        compiled = matchers(config, app)
        self.filter_plan = compiled.filter_plan
        self.plan = compiled.plan
        entries: dict[Hashable, PlanEntry] = {e.subscription.id: e for e in self.filter_plan.entries}
        entries.update({e.subscription.id: e for e in self.plan.entries})
        # Classes of each property: every literal of every analysable conjunct cuts them.
        literals: dict[str, set[Any]] = {}
        self.analysable: dict[ast.Node, str | None] = {}
        for entry in entries.values():
            for conjunct in entry.conjuncts:
                if conjunct in self.analysable:
                    continue
                found: dict[str, set[Any]] = {}
                try:
                    _literals(conjunct, self.types, found)
                except _NotAnalysable as exc:
                    self.analysable[conjunct] = str(exc)
                    continue
                self.analysable[conjunct] = None
                for prop, vals in found.items():
                    literals.setdefault(prop, set()).update(vals)
        if app.group_by is not None:
            literals.setdefault(app.group_by, set())
        self.domains = {p: _Domain.of(self.kind(p), vals) for p, vals in literals.items()}
        self.full: dict[str, Ranges] = {p: d.full for p, d in self.domains.items()}
        self.cells: dict[ast.Node, list[Box] | None] = {}
        self.filters = [
            self._expr(("filter", str(i)), entries[("filter", str(i))]) for i in range(len(app.filter))
        ]
        self.subs: list[_Expr] = []
        for ref, group, priority, order in self.meta:
            own = entries.get(ref)
            e = self._expr(ref, own) if own is not None else _Expr(ref, None, [{}], True)
            e.group, e.priority, e.order = group.name, priority, order
            self.subs.append(e)
        self.by_ref = {e.ref: e for e in self.subs}

    def kind(self, prop: str) -> str:
        return self.types.get(prop, "string")

    def where(self, ref: Ref) -> str:
        return location(self.app.name, ref, self.config)

    # -- expressions as boxes

    def _conjunct_boxes(self, node: ast.Node) -> list[Box] | None:
        if node in self.cells:
            return self.cells[node]
        found: dict[str, set[Any]] = {}
        _literals(node, self.types, found)
        props = sorted(found)
        local = [_classes(self.kind(p), found[p]) for p in props]
        if math.prod(len(c) for c in local) > CELL_LIMIT:
            self.cells[node] = None
            return None
        boxes: list[Box] = []
        tree = _binary(node)
        for cell in itertools.product(*local):
            values = {p: rep for p, (rep, _) in zip(props, cell, strict=True) if rep is not None}
            if interpret(tree, values, self.dialect).value:
                boxes.append(
                    {p: self.domains[p].ranges(desc) for p, (_, desc) in zip(props, cell, strict=True)}
                )
        result = _merge(boxes, self.full)
        self.cells[node] = result
        return result

    def _expr(self, ref: Ref, entry: PlanEntry) -> _Expr:
        boxes: list[Box] = [{}]
        reason = None
        for conjunct in entry.conjuncts:
            why = self.analysable[conjunct]
            own = self._conjunct_boxes(conjunct) if why is None else None
            if own is None:
                reason = reason or why or "too many cases to enumerate"
                continue
            product = [b for x in boxes for y in own if (b := _box_inter(x, y)) is not None]
            if len(product) > BOX_LIMIT:
                reason = reason or "too many cases to enumerate"
                continue  # leaving a conjunct out keeps an over-approximation
            boxes = product
        return _Expr(ref, entry, boxes, reason is None, reason)

    def values(self, point: Mapping[str, int]) -> dict[str, Any]:
        return {p: self.domains[p].reps[c] for p, c in point.items() if c != 0}

    def sample(self, point: Mapping[str, int], props: Iterable[str]) -> Sample:
        names = sorted(set(props) | {p for p, c in point.items() if c != 0})
        return {p: (self.domains[p].reps[point[p]] if point.get(p, 0) != 0 else None) for p in names}

    def matched(self, point: Mapping[str, int]) -> frozenset[Hashable]:
        return self.plan.match(self.values(point))

    def passes(self, point: Mapping[str, int]) -> bool:
        return not self.app.filter or bool(self.filter_plan.match(self.values(point)))

    def top_groups(self, point: Mapping[str, int]) -> set[str]:
        """The groups of the highest priority level the assignment matches (all groups present, with room)."""
        hits = self.matched(point)
        level = [e for e in self.subs if e.entry is None or e.ref in hits]
        if not level:
            return set()
        top = max(e.priority for e in level)
        return {e.group for e in level if e.priority == top}

    def props_of(self, *exprs: _Expr) -> set[str]:
        out: set[str] = set()
        for e in exprs:
            if e.entry is not None:
                out |= ast.property_names(e.entry.tree) & set(self.domains)
        return out

    def filter_boxes(self) -> list[Box] | None:
        """What passes the app's filter, exactly (None when a filter is not analysable)."""
        if not self.app.filter:
            return [{}]
        if not all(f.exact for f in self.filters):
            return None
        return [b for f in self.filters for b in f.boxes]

    def report(
        self, kind: str, ref: Ref, message: str, refs: Sequence[Ref] = (), samples: Sequence[Sample] = ()
    ) -> bool:
        """Record a finding; False once the kind's limit is reached for this app."""
        n = self.counts.get(kind, 0)
        self.counts[kind] = n + 1
        if n == self.max_findings:
            self.unknowns.append(
                Unknown(
                    self.app.name,
                    f"apps.{self.app.name}",
                    f"more {kind} findings not listed (limit {self.max_findings}: --max-findings)",
                )
            )
        if n >= self.max_findings:
            return False
        self.findings.append(
            Finding(kind, self.app.name, self.where(ref), message, (ref, *refs), tuple(samples))
        )
        return True

    # -- the checks

    def run(self) -> None:
        for e in [*self.filters, *self.subs]:
            if e.entry is not None and not e.exact:
                self.unknowns.append(
                    Unknown(self.app.name, self.where(e.ref), f"not fully analysed: {e.reason}")
                )
        self.check_constant()
        self.check_shadowed()
        self.check_overlap()
        self.check_waits()
        self.check_group_split()

    def check_constant(self) -> None:
        for e in [*self.filters, *self.subs]:
            if e.entry is None:
                continue
            what = "filter" if e.ref[0] == "filter" else "subscription"
            if not e.boxes:
                self.report(NEVER_TRUE, e.ref, f"the {what} can never be true: {e.entry.subscription.text}")
            elif e.exact and _covered([{}], e.boxes, self.full):
                self.report(
                    ALWAYS_TRUE,
                    e.ref,
                    f"the {what} is always true, absent headers included: {e.entry.subscription.text}",
                )

    def check_shadowed(self) -> None:
        app = self.app
        others_count = app.presence == "ignored" and not app.spillover
        # With group_by and spillover, a full group met again at a lower level can still be picked there by
        # the rendezvous hash, and the message then waits for it: its lower subscription does decide.
        own_counts = not (app.group_by is not None and app.spillover)
        for s in self.subs:
            if not s.boxes:
                continue
            # Whatever shadows S matches every point of S: one point's matches (the plan's index) narrow the
            # candidates to a few.
            hits = self.matched(_point(s.boxes[0]))
            candidates = [self.by_ref[h] for h in hits]  # type: ignore[index]
            candidates += [e for e in self.subs if e.entry is None]
            for t in sorted(candidates, key=lambda e: e.order):
                if t.priority <= s.priority or not t.exact:
                    continue
                if not (own_counts if t.group == s.group else others_count):
                    continue
                if _covered(s.boxes, t.boxes, self.full) is True:
                    why = "of the same group" if t.group == s.group else "(presence: ignored, no spillover)"
                    self.report(
                        SHADOWED,
                        s.ref,
                        f"never chosen: {self.where(t.ref)} at priority {t.priority} {why} matches every "
                        f"message it matches (priority {s.priority})",
                        [t.ref],
                    )
                    break

    def check_overlap(self) -> None:
        if self.app.group_by is not None or self.app.fairness == "fast":
            # group_by: equal groups share message groups by hashing them, the sharding it is for; fast: the
            # first with room takes them, nothing alternates
            return
        allowed = self.filter_boxes()
        if allowed is None:
            self.unknowns.append(
                Unknown(
                    self.app.name,
                    f"apps.{self.app.name}",
                    "overlaps not checked: the filter is not fully analysed",
                )
            )
            return
        by_level: dict[int, list[_Expr]] = {}
        for e in self.subs:
            if e.exact and e.boxes:
                by_level.setdefault(e.priority, []).append(e)
        budget = PAIR_LIMIT
        for priority, level in sorted(by_level.items(), reverse=True):
            if len({e.group for e in level}) < 2:
                continue
            higher = [e for e in self.subs if e.priority > priority and e.boxes]
            index = _BoxIndex(level)
            seen: set[tuple[str, ...]] = set()
            for s in level:
                for t in index.candidates(s):
                    if t.order <= s.order or t.group == s.group:
                        continue
                    pair = (s.group, t.group, *sorted((str(s.ref), str(t.ref))))
                    if pair in seen:
                        continue
                    budget -= 1
                    if budget < 0:
                        self.unknowns.append(
                            Unknown(
                                self.app.name,
                                f"apps.{self.app.name}",
                                f"overlaps: unknown (too many pairs; {PAIR_LIMIT} examined)",
                            )
                        )
                        return
                    both = [b for x in s.boxes for y in t.boxes if (b := _box_inter(x, y)) is not None]
                    both = [b for x in both for f in allowed if (b := _box_inter(x, f)) is not None]
                    if not both:
                        continue
                    # A message this level decides: one no higher subscription may match.
                    point = _uncovered(both, [b for h in higher for b in h.boxes], self.full)
                    if point is None:
                        continue
                    seen.add(pair)
                    if not self.report(
                        OVERLAP,
                        s.ref,
                        f"overlaps {self.where(t.ref)} at the same priority {priority} in another group: messages "
                        f"matching both are shared between groups {s.group} and {t.group}",
                        [t.ref],
                        [self.sample(point, self.props_of(s, t))],
                    ):
                        return

    def check_waits(self) -> None:
        allowed = self.filter_boxes()
        if allowed is None:
            self.unknowns.append(
                Unknown(
                    self.app.name,
                    f"apps.{self.app.name}",
                    "waiting forever not checked: the filter is not fully analysed",
                )
            )
            return
        if any(e.entry is None for e in self.subs):
            return  # a group without subscriptions takes any message
        work = [b for b in allowed]
        steps = 0
        while work:
            steps += 1
            if steps > STEP_LIMIT:
                self.unknowns.append(
                    Unknown(
                        self.app.name, f"apps.{self.app.name}", "waiting forever: unknown (too many cases)"
                    )
                )
                return
            b = work.pop()
            point = _point(b)
            hits = self.matched(point)
            if not hits:
                props = self.props_of(*self.filters, *self.subs) if len(self.subs) <= 20 else set(point)
                self.report(
                    WAITS_FOREVER,
                    ("app",),
                    "messages pass the filter but match no subscription: they wait on the pending topic until the "
                    "configuration changes",
                    samples=[self.sample(point, props)],
                )
                return
            cover = next(
                (c for h in hits for c in self.by_ref[h].boxes if _box_holds(c, point)),  # type: ignore[index]
                None,
            )
            if cover is None:  # pragma: no cover - a match lies in the expression's boxes by construction
                raise AssertionError(f"{hits} matched {point} outside its boxes")
            work.extend(_box_minus(b, cover, self.full))

    def check_group_split(self) -> None:
        key = self.app.group_by
        if key is None:
            return
        allowed = self.filter_boxes() or [{}]
        # Per class of the group_by property, a group that alone is at the top level for some message of it.
        alone: dict[int, dict[str, tuple[Ref, dict[str, int]]]] = {}
        reported: set[tuple[str, str]] = set()
        for s in self.subs:
            for box in s.boxes:
                for f in allowed:
                    b = _box_inter(box, f)
                    if b is None:
                        continue
                    r = b.get(key, self.full[key])
                    for k in dict.fromkeys((r[0][0], r[-1][1])):
                        point = {**_point(b), key: k}
                        if not self.passes(point):
                            continue
                        top = self.top_groups(point)
                        if top != {s.group}:
                            continue
                        seen = alone.setdefault(k, {})
                        seen.setdefault(s.group, (s.ref, point))
                        for g, (ref, other) in seen.items():
                            if g == s.group or (min(g, s.group), max(g, s.group)) in reported:
                                continue
                            reported.add((min(g, s.group), max(g, s.group)))  # one finding per two groups
                            value = self.domains[key].reps[k]
                            group_id = (
                                f"{key}={value!r}" if k else f"the default group: messages without {key}"
                            )
                            if not self.report(
                                GROUP_SPLIT,
                                s.ref,
                                f"one message group ({group_id}) can go to groups {g} and {s.group}: "
                                f"{self.where(ref)} and this subscription each decide some of its messages "
                                "(when it has none outstanding)",
                                [ref],
                                [
                                    self.sample(other, shown := self.props_of(s, self.by_ref[ref]) | {key}),
                                    self.sample(point, shown),
                                ],
                            ):
                                return


def _uncovered(boxes: Sequence[Box], by: Sequence[Box], full: Mapping[str, Ranges]) -> dict[str, int] | None:
    """A point of ``boxes`` outside every box of ``by`` (None: there is none, or the bound was reached)."""
    return _first_uncovered(boxes, by, full)[0]


def _binary(node: ast.Node) -> ast.Node:
    """The plan's flattened ``and``/``or`` chains as the parser's left-nested pairs, which the reference
    interpreter evaluates (the same order, so the same short-circuits)."""
    if isinstance(node, ast.Junction):
        items = [_binary(i) for i in node.items]
        out = items[0]
        for item in items[1:]:
            out = ast.Logical(node.op, out, item)
        return out
    if isinstance(node, ast.Unary | ast.IsNull | ast.In | ast.Like):
        return dataclasses.replace(node, operand=_binary(node.operand))
    if isinstance(node, ast.Compare | ast.Logical | ast.Arith):
        return dataclasses.replace(node, left=_binary(node.left), right=_binary(node.right))
    if isinstance(node, ast.Between):
        return dataclasses.replace(
            node, operand=_binary(node.operand), low=_binary(node.low), high=_binary(node.high)
        )
    return node


def _merge(boxes: list[Box], full: Mapping[str, Ranges]) -> list[Box]:
    """Fewer, larger boxes with the same union: boxes equal but in one property are one box."""
    if len(boxes) <= 1:
        return [_trim(b, full) for b in boxes]
    props = sorted({p for b in boxes for p in b})
    for prop in props:
        grouped: dict[tuple[tuple[str, Ranges], ...], list[Ranges]] = {}
        for b in boxes:
            rest = tuple(sorted((p, r) for p, r in b.items() if p != prop))
            grouped.setdefault(rest, []).append(b.get(prop, full[prop]))
        boxes = [
            {**dict(rest), prop: _norm(r for rs in parts for r in rs)} for rest, parts in grouped.items()
        ]
    return [_trim(b, full) for b in boxes]


def _trim(box: Box, full: Mapping[str, Ranges]) -> Box:
    return {p: r for p, r in box.items() if r != full[p]}


class _BoxIndex:
    """Expressions of one level by the classes their boxes allow, per property: the expressions that can share
    a point with S are among those allowing one of S's classes of its most selective property."""

    WIDE = 64  # classes of a constraint indexed class by class; wider ones are listed as unconstrained

    def __init__(self, exprs: Sequence[_Expr]) -> None:
        self.exprs = list(exprs)
        self.by_class: dict[str, dict[int, list[_Expr]]] = {}
        self.loose: dict[str, list[_Expr]] = {}  # per property: expressions not indexed on it
        props = {p for e in exprs for b in e.boxes for p in b}
        for e in exprs:
            for prop in props:
                classes: set[int] = set()
                wide = False
                for b in e.boxes:
                    r = b.get(prop)
                    if r is None or sum(hi - lo + 1 for lo, hi in r) > self.WIDE:
                        wide = True
                        break
                    classes.update(c for lo, hi in r for c in range(lo, hi + 1))
                if wide:
                    self.loose.setdefault(prop, []).append(e)
                else:
                    table = self.by_class.setdefault(prop, {})
                    for c in classes:
                        table.setdefault(c, []).append(e)

    def candidates(self, s: _Expr) -> list[_Expr]:
        best: list[_Expr] | None = None
        for prop in {p for b in s.boxes for p in b}:
            classes: set[int] = set()
            for b in s.boxes:
                r = b.get(prop)
                if r is None or sum(hi - lo + 1 for lo, hi in r) > self.WIDE:
                    classes = set()
                    break
                classes.update(c for lo, hi in r for c in range(lo, hi + 1))
            if not classes:
                continue
            table = self.by_class.get(prop, {})
            found = {id(e): e for c in classes for e in table.get(c, ())}
            found.update((id(e), e) for e in self.loose.get(prop, ()))
            if best is None or len(found) < len(best):
                best = list(found.values())
        return self.exprs if best is None else best


def lint(config: Config, max_findings: int = DEFAULT_MAX_FINDINGS) -> LintReport:
    """Every finding and unknown of every app of ``config`` (expressions validated before)."""
    report = LintReport()
    for name in sorted(config.apps):
        analysis = _App(config, config.apps[name], max_findings)
        analysis.run()
        report.findings.extend(analysis.findings)
        report.unknowns.extend(analysis.unknowns)
        report.expressions += len(analysis.filters) + sum(1 for e in analysis.subs if e.entry is not None)
    return report
