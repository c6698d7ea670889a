"""The typed AST shared by both dialects.

Nodes are frozen dataclasses. ``pos`` (0-based offset of the node's anchor: the operator of an operation, the
first character of a leaf) is excluded from equality and hashing, so structurally equal sub-expressions compare
and hash equal wherever they appear; the plan relies on this to share them. Literal kinds are separate classes
so that ``1``, ``1.0`` and ``true`` never compare equal as Python's numbers would.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# Operator spellings in the AST are dialect-neutral: sql92 ``=`` and ``<>`` become ``==`` and ``!=``.
ARITHMETIC_OPS = frozenset({"+", "-", "*", "/", "%"})
EQUALITY_OPS = frozenset({"==", "!="})
ORDERING_OPS = frozenset({"<", "<=", ">", ">="})
COMPARISON_OPS = EQUALITY_OPS | ORDERING_OPS
# ``a OP b`` is ``b MIRROR[OP] a``.
MIRROR = {"==": "==", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}


@dataclass(frozen=True, slots=True)
class Node:
    pos: int = field(default=0, compare=False, hash=False, repr=False, kw_only=True)


@dataclass(frozen=True, slots=True)
class IntLit(Node):
    value: int


@dataclass(frozen=True, slots=True)
class FloatLit(Node):
    value: float


@dataclass(frozen=True, slots=True)
class StrLit(Node):
    value: str


@dataclass(frozen=True, slots=True)
class BoolLit(Node):
    value: bool


@dataclass(frozen=True, slots=True)
class NullLit(Node):
    """sql92 ``NULL``."""


@dataclass(frozen=True, slots=True)
class Prop(Node):
    """A message property, by name."""

    name: str


@dataclass(frozen=True, slots=True)
class Exists(Node):
    """bmq ``exists(name)``."""

    name: str


@dataclass(frozen=True, slots=True)
class Unary(Node):
    """``op`` is ``"not"``, ``"neg"`` or (sql92) ``"pos"``."""

    op: str
    operand: Node


@dataclass(frozen=True, slots=True)
class Arith(Node):
    op: str  # one of ARITHMETIC_OPS
    left: Node
    right: Node


@dataclass(frozen=True, slots=True)
class Compare(Node):
    op: str  # one of COMPARISON_OPS
    left: Node
    right: Node


@dataclass(frozen=True, slots=True)
class Logical(Node):
    """``&&``/``||`` (bmq) or ``AND``/``OR`` (sql92); ``op`` is ``"and"`` or ``"or"``. Always binary here; the
    plan flattens chains."""

    op: str
    left: Node
    right: Node


@dataclass(frozen=True, slots=True)
class Between(Node):
    """sql92 ``operand [NOT] BETWEEN low AND high``."""

    operand: Node
    low: Node
    high: Node
    negated: bool = False


@dataclass(frozen=True, slots=True)
class In(Node):
    """sql92 ``operand [NOT] IN ('a', ...)``."""

    operand: Node
    values: tuple[str, ...]
    negated: bool = False


@dataclass(frozen=True, slots=True)
class Like(Node):
    """sql92 ``operand [NOT] LIKE 'pattern' [ESCAPE 'c']``."""

    operand: Node
    pattern: str
    escape: str | None = None
    negated: bool = False


@dataclass(frozen=True, slots=True)
class IsNull(Node):
    """sql92 ``operand IS [NOT] NULL``."""

    operand: Node
    negated: bool = False


@dataclass(frozen=True, slots=True)
class Junction(Node):
    """A flattened chain of ``and`` or ``or``, evaluated left to right with short-circuit. Only the plan's
    normalizer makes these; the parser always builds binary ``Logical`` nodes."""

    op: str
    items: tuple[Node, ...]


LITERALS = (IntLit, FloatLit, StrLit, BoolLit, NullLit)


def children(node: Node) -> tuple[Node, ...]:
    """The direct sub-expressions of ``node``, left to right."""
    if isinstance(node, Unary):
        return (node.operand,)
    if isinstance(node, Arith | Compare | Logical):
        return (node.left, node.right)
    if isinstance(node, Between):
        return (node.operand, node.low, node.high)
    if isinstance(node, In | Like | IsNull):
        return (node.operand,)
    if isinstance(node, Junction):
        return node.items
    return ()


def property_names(node: Node) -> frozenset[str]:
    """Every property name the expression may read (``exists(name)`` included)."""
    names: set[str] = set()
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, Prop | Exists):
            names.add(n.name)
        stack.extend(children(n))
    return frozenset(names)
