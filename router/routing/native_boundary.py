"""The native routing core's boundary: every structure handed to ``_native`` (router/routing/native, PyO3), each
declared once here, and the check that the built module agrees with these declarations.

What Python hands over is a TypedDict, which Rust reads by key (router/routing/native/src/boundary.rs); what Rust
makes for Python is either a class of the native module with named attributes (``_native.pyi``) or an object of a
Python class whose fields it sets by name (``RouteResult``, ``Decision`` and ``InputRecord``, whose ``__init__``
it does not call: a call by keyword would cost about a third of a record's routing). So no tuple is read by
position, and no dataclass's field order is a contract. The exceptions are what the client defines: a record's
headers, confluent-kafka's ``[(name, value)]`` list, read as the client gives it (``wire.HeadersIn``), and the
records ``Producer.produce`` takes (``_native.pyi`` says which).

At import, the module's own lists of the structures it reads (``_native.READS``) and of the fields it sets
(``_native.MAKES``) are compared with the declarations below: a module built from other sources (an editable
install not rebuilt after a change) fails here, naming what differs, instead of mid-build or mid-batch.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from types import ModuleType
from typing import Literal, TypedDict

# Re-exported: the modules of the native side import it from here, so that nothing uses it unchecked.
from subroute.routing import _native as _native
from subroute.routing.decisions import Action, Decision, RouteResult
from subroute.routing.envelope import InputRecord

PropertyType = Literal["string", "int", "bool", "float"]
# Operators as the expressions' AST spells them (subroute.expressions.ast).
ArithmeticOp = Literal["+", "-", "*", "/", "%"]
ComparisonOp = Literal["==", "!=", "<", "<=", ">", ">="]
OrderingOp = Literal["<", "<=", ">", ">="]
Fairness = Literal["round-robin", "proportional", "fast"]  # config.model.AppConfig.fairness


class TypedHeader(TypedDict):
    """A header read as one declared type (a config's ``properties``; undeclared: "string"). In a plan, one
    such pair is a *slot*: a property decoded once per record."""

    name: str
    declared: PropertyType


class BodyRead(TypedDict):
    """A property read from a record value (``routing/body.py``'s ``BodyRead``): its name, the JSON Pointer's
    reference tokens (UTF-8, surrogates passed) and its declared type."""

    name: str
    tokens: list[bytes]
    declared: PropertyType


# --- the plan's nodes: children are indexes of earlier nodes; ``sql``: the sql92 dialect (else bmq) ----------


class ValueNode(TypedDict):
    """A literal: "int" (int64), "float", "str" (UTF-8 bytes, surrogates passed), "bool", "null" (value None)."""

    tag: Literal["int", "float", "str", "bool", "null"]
    sql: bool
    value: int | float | bytes | bool | None


class PropertyNode(TypedDict):
    """A property's value ("prop") or whether it is there ("exists"), by slot."""

    tag: Literal["prop", "exists"]
    sql: bool
    slot: int


class UnaryNode(TypedDict):
    tag: Literal["not", "neg", "pos"]
    sql: bool
    operand: int


class ArithmeticNode(TypedDict):
    tag: Literal["arith"]
    sql: bool
    op: ArithmeticOp
    left: int
    right: int


class CompareNode(TypedDict):
    tag: Literal["cmp"]
    sql: bool
    op: ComparisonOp
    left: int
    right: int


class JunctionNode(TypedDict):
    """A flattened chain, evaluated left to right with short-circuit."""

    tag: Literal["and", "or"]
    sql: bool
    items: list[int]


class BetweenNode(TypedDict):
    tag: Literal["between"]
    sql: bool
    operand: int
    low: int
    high: int
    negated: bool


class InNode(TypedDict):
    tag: Literal["in"]
    sql: bool
    operand: int
    values: list[bytes]  # UTF-8, surrogates passed
    negated: bool


class LikeNode(TypedDict):
    tag: Literal["like"]
    sql: bool
    operand: int
    pattern: list[int]  # code points
    escape: int | None  # a code point
    negated: bool


class IsNullNode(TypedDict):
    tag: Literal["isnull"]
    sql: bool
    operand: int
    negated: bool


Node = (
    ValueNode
    | PropertyNode
    | UnaryNode
    | ArithmeticNode
    | CompareNode
    | JunctionNode
    | BetweenNode
    | InNode
    | LikeNode
    | IsNullNode
)

# --- a subscription's gate and residual ---------------------------------------------------------------------


class Key(TypedDict):
    """An equality gate's key: "int" (a bmq int), "number" (a sql92 int or float: 5 and 5.0 are one key),
    "string" (UTF-8 bytes, surrogates passed) or "bool"."""

    kind: Literal["int", "number", "string", "bool"]
    value: int | float | bytes | bool


class EqualityGate(TypedDict):
    """The slot's value is one of the keys."""

    kind: Literal["equality"]
    slot: int
    keys: list[Key]


class RangeGate(TypedDict):
    """``slot op bound`` holds (an int bound is a bmq int or a sql92 number by the node's dialect: both compare
    numerically with the value)."""

    kind: Literal["range"]
    slot: int
    op: OrderingOp
    bound: int | float


class IntervalGate(TypedDict):
    """``low <= slot <= high`` (int bounds)."""

    kind: Literal["interval"]
    slot: int
    low: int
    high: int


Gate = EqualityGate | RangeGate | IntervalGate


class EntrySpec(TypedDict):
    """One subscription lowered: its gate (None: evaluated for every record) and its residual, the nodes that
    must all be true once the gate holds."""

    gate: Gate | None
    residual: list[int]


class PlanSpec(TypedDict):
    """A plan: its slots (by index), nodes (children first) and entries, each entry opening a group (its matching
    lets the entries that require that group be evaluated) or requiring one, or neither (None). ``body_slots``
    are filled from record bodies (by the decider), never from headers of their names."""

    slots: list[TypedHeader]
    body_slots: list[int]
    nodes: list[Node]
    entries: list[_native.Entry]
    opens: list[int | None]
    requires: list[int | None]


# --- a table's decider --------------------------------------------------------------------------------------


class CandidateSpec(TypedDict):
    """One consumer subscription of an app (``decisions.Candidate``), in ``AppRoute.levels`` order."""

    priority: int
    max_unconfirmed: int | None
    slot: int  # the (app, group) slot of its group: the index of its count, presence and holdings
    group: str
    position: int | None  # its plan position; None for a group without subscriptions (matches anything)
    routed: Decision  # what a record routed by it gets (without a message-group key or band)


class AppDecisions(TypedDict):
    """An app's decisions made once (``AppRoute``): most records get one of these very objects."""

    expired: Decision
    pending: Decision
    waiting_capacity: Decision
    waiting_no_consumer: Decision
    filtered: Decision


class AppSpec(TypedDict):
    """One app of the table, as ``decide_app`` decides for it."""

    name: str
    start: int  # its plan entries are the positions [start, end)
    end: int
    filters: list[int]  # the positions of its filter's entries
    bands: list[int]  # the positions of its priority thresholds ``(priority) >= k``, k = 1..9
    environment: int
    first_cursor: int  # its round-robin cursors are first_cursor.. (one per priority level)
    fairness: Fairness
    spillover: bool
    presence_required: bool
    group_by: str | None
    default_group: bytes
    expiration_ms: int | None
    candidates: list[CandidateSpec]
    decisions: AppDecisions


class Vocabulary(TypedDict):
    """The Python objects the results are made of."""

    result: type[RouteResult]
    decision: type[Decision]
    route: Action
    pending: Action
    capacity: str  # wire.CAPACITY
    no_consumer: str  # wire.NO_CONSUMER


class BodyProperty(TypedDict):
    """A property read from record values, the source it is read from (an index into ``DeciderSpec``'s
    ``sources``), and the plan slot it fills (None: no entry reads it, only its decode failures count)."""

    read: BodyRead
    source: int
    slot: int | None


class BodySource(TypedDict):
    """How the record values of some environments are encoded: JSON, or Avro, plain under ``schema`` (the app's
    writer schema, lowered: native_avro.py) or, without one, in Confluent's wire format (the writer schema of the
    id in each value's header: ``BatchState``'s ``schemas``)."""

    format: Literal["json", "avro"]
    schema: list[AvroNode] | None


class DeciderSpec(TypedDict):
    """A table's decider: its apps, and per plan position the app it belongs to (``owner``) and whether it reports
    exactly its Python plan's errors (``exact``; a record with an error on an inexact entry of its apps is handed
    back); the first ``filter_count`` positions are app filters. Per environment, the headers it decodes and the
    body properties it reads (indexes into ``body``: each is read once per record, whichever environments read
    it), each from one of ``sources``."""

    apps: list[AppSpec]
    owner: list[int]
    exact: list[bool]
    filter_count: int
    environments: list[list[TypedHeader]]
    sources: list[BodySource]
    body: list[BodyProperty]
    bodies: list[list[int]]
    expiration_header: str
    vocabulary: Vocabulary


class RouteGroup(TypedDict):
    """The apps (by index) a record of one topic is routed for that share one environment."""

    environment: int
    apps: list[int]


class BatchState(TypedDict):
    """What one batch is decided with, besides its headers: per record its route (``add_route``) and timestamp;
    the unconfirmed count of each slot whose count decides (a candidate there has a max_unconfirmed), the slots
    whose count routing adds to (measured), every cursor's value, the absent slots, and the holders of message
    groups (``Holders.by_app``; None: nothing is held); each record's value (None when the decider reads no
    body); and, when some value is read in Confluent's wire format, the writer schema of a schema id the decider
    has not met (``schemas(id)``: its node table, None when the registry does not have it), called with the GIL
    held before anything is decided."""

    routes: list[int]
    timestamps: list[int]
    now_ms: int
    unconfirmed: dict[int, int]
    tracked: list[int]
    cursors: list[int]
    absent: list[int]
    holders: dict[str, dict[bytes, str]] | None
    values: list[bytes | None] | None
    schemas: Callable[[int], list[AvroNode] | None] | None


# --- Avro bodies (native/src/body_avro.rs; native_avro.py lowers a writer schema to these) ---------------------


class AvroNode(TypedDict):
    """One node of a writer schema, the root first: ``children`` are node positions (a record's field types, an
    array's items, a map's values, a union's branches), ``names`` a record's field names or an enum's symbols,
    ``size`` a fixed's byte count. A named type is one node, so a recursive type is a cycle."""

    kind: Literal[
        "null",
        "boolean",
        "int",
        "long",
        "float",
        "double",
        "bytes",
        "string",
        "fixed",
        "enum",
        "array",
        "map",
        "union",
        "record",
    ]
    size: int
    children: list[int]
    names: list[str]


class AvroRead(TypedDict):
    """A property read from an Avro body: its name, its JSON Pointer's reference tokens, its declared type
    (None: the leaf's own)."""

    name: str
    tokens: list[str]
    declared: PropertyType | None


# Every structure handed over, by the name the native module knows it by.
READ: dict[str, type] = {
    cls.__name__: cls
    for cls in (
        TypedHeader,
        BodyRead,
        BodyProperty,
        BodySource,
        ValueNode,
        PropertyNode,
        UnaryNode,
        ArithmeticNode,
        CompareNode,
        JunctionNode,
        BetweenNode,
        InNode,
        LikeNode,
        IsNullNode,
        Key,
        EqualityGate,
        RangeGate,
        IntervalGate,
        EntrySpec,
        PlanSpec,
        CandidateSpec,
        AppDecisions,
        AppSpec,
        Vocabulary,
        DeciderSpec,
        RouteGroup,
        BatchState,
        AvroNode,
        AvroRead,
    )
}
# The Python classes the native module makes objects of, setting each field by name.
MADE: dict[str, type] = {cls.__name__: cls for cls in (RouteResult, Decision, InputRecord)}


def mismatches(module: ModuleType) -> list[str]:
    """How ``module`` (the built ``_native``) differs from the declarations here; empty when it agrees."""
    found: list[str] = []
    reads: Mapping[str, Sequence[str]] = getattr(module, "READS", {})
    for name, declared in READ.items():
        keys = set(declared.__required_keys__ | declared.__optional_keys__)  # type: ignore[attr-defined]
        built = reads.get(name)
        if built is None:
            found.append(f"{name} is declared here but not read by the module")
        elif set(built) != keys:
            found.append(f"{name} is declared with {sorted(keys)}, the module reads {sorted(built)}")
    found.extend(
        f"{name} is read by the module but not declared here" for name in sorted(set(reads) - set(READ))
    )
    makes: Mapping[str, Sequence[str]] = getattr(module, "MAKES", {})
    for name, cls in MADE.items():
        fields = {f.name for f in dataclasses.fields(cls)}
        built = makes.get(name)
        if built is None:
            found.append(f"{name} is made here but not by the module")
        elif set(built) != fields:
            found.append(f"{name} has the fields {sorted(fields)}, the module sets {sorted(built)}")
        if hasattr(cls, "__post_init__"):  # the module does not call __init__, so nothing may depend on it
            found.append(f"{name} has a __post_init__, which objects the module makes would skip")
    found.extend(f"{name} is made by the module but not here" for name in sorted(set(makes) - set(MADE)))
    return found


def check(module: ModuleType) -> None:
    """Raise ImportError, naming every difference, unless ``module`` reads and makes what is declared here."""
    found = mismatches(module)
    if found:
        raise ImportError(
            f"the native routing core {module.__name__} ({getattr(module, '__file__', '?')}) was built from other"
            " sources than router/routing/native_boundary.py declares (rebuild it: pip install --no-deps"
            " --no-build-isolation -e .): " + "; ".join(found)
        )


check(_native)
