"""Static type checking: refuse, with a caret, what can never be right.

Types are known for literals and for properties declared in ``types``; other properties are unknown here and
checked when the expression is evaluated. A fault is refused wherever it sits, even on a branch that
short-circuiting might skip: with the types known it is wrong whenever that branch runs.

A caller that reads properties from text (Kafka headers: the router, ``subroute expr``) passes ``declared``, the
names it declared. Any other property is then a string, the header's text, so using it as a number or as a
condition could never be right, and is refused with ``UndeclaredPropertyError``, which names the fix: declare its
type. A declared name missing from ``types`` (its type was bad, and is reported by the caller) stays unknown.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from . import ast
from .errors import ExpressionTypeError, UndeclaredPropertyError

TYPE_NAMES = {
    "bmq": frozenset({"int", "string", "bool"}),
    "sql92": frozenset({"int", "string", "bool", "float"}),
}

# Static types: "int", "string", "bool" (bmq); "number", "string", "bool", "null" (sql92); None = unknown.
StaticType = str | None


def normalize_types(types: Mapping[str, str] | None, dialect: str) -> dict[str, str]:
    """Validate a property-type map for ``dialect``; raises ``ValueError`` on a bad type name."""
    allowed = TYPE_NAMES[dialect]
    out: dict[str, str] = {}
    for name, type_name in (types or {}).items():
        if type_name not in allowed:
            raise ValueError(
                f"unknown type {type_name!r} for property {name!r} in dialect {dialect} "
                f"(expected one of {', '.join(sorted(allowed))})"
            )
        # sql92 compares int and float numerically, so for checking they are one type.
        out[name] = "number" if dialect == "sql92" and type_name in ("int", "float") else type_name
    return out


def check(
    node: ast.Node,
    text: str,
    dialect: str,
    types: Mapping[str, str],
    declared: Collection[str] | None = None,
) -> None:
    """Raise ``ExpressionTypeError`` if ``node`` can never evaluate correctly. ``types`` is normalized;
    ``declared``: see the module's doc (None: undeclared properties are unknown)."""
    checker = _Checker(text, dialect, types, declared)
    result = checker.infer(node)
    if result not in (None, "bool", "null"):
        if checker.undeclared(node):
            raise checker.fix(node, "the expression must be a condition", "bool")
        raise ExpressionTypeError(f"expression must be boolean, not {result}", text, node.pos)


class _Checker:
    def __init__(
        self, text: str, dialect: str, types: Mapping[str, str], declared: Collection[str] | None
    ) -> None:
        self.text = text
        self.sql = dialect == "sql92"
        self.types = types
        self.declared = None if declared is None else frozenset(declared)
        self.number = "number" if self.sql else "int"

    def fail(self, message: str, node: ast.Node) -> ExpressionTypeError:
        return ExpressionTypeError(message, self.text, node.pos)

    def undeclared(self, node: ast.Node) -> bool:
        """A property read as text because it was not declared (only when the caller says what it declared)."""
        return (
            isinstance(node, ast.Prop)
            and self.declared is not None
            and node.name not in self.declared
            and node.name not in self.types
        )

    def fix(
        self, node: ast.Node, need: str, wanted: str, beside: tuple[ast.Node, ...] = ()
    ) -> UndeclaredPropertyError:
        """The error for undeclared ``node`` where ``wanted`` was needed; a number is declared ``float`` next to
        a decimal literal (sql92), else ``int``."""
        assert isinstance(node, ast.Prop)
        if wanted == "number":
            wanted = "float" if any(isinstance(n, ast.FloatLit) for n in beside) else "int"
        return UndeclaredPropertyError(node.name, wanted, need, self.text, node.pos)

    def expect(self, node: ast.Node, wanted: str, what: str, beside: tuple[ast.Node, ...] = ()) -> None:
        t = self.infer(node)
        if t is not None and t != wanted and t != "null":
            if self.undeclared(node):
                raise self.fix(node, f"{what} needs {_a(wanted)}", wanted, beside)
            raise self.fail(f"{what} needs {_a(wanted)}, not {_a(t)}", node)

    def infer(self, node: ast.Node) -> StaticType:
        if isinstance(node, ast.IntLit | ast.FloatLit):
            return self.number
        if isinstance(node, ast.StrLit):
            return "string"
        if isinstance(node, ast.BoolLit | ast.Exists):
            return "bool"
        if isinstance(node, ast.NullLit):
            return "null"
        if isinstance(node, ast.Prop):
            return "string" if self.undeclared(node) else self.types.get(node.name)
        if isinstance(node, ast.Unary):
            if node.op == "not":
                self.expect(node.operand, "bool", "negation")
                return "bool"
            self.expect(node.operand, self.number, "unary minus" if node.op == "neg" else "unary plus")
            return self.number
        if isinstance(node, ast.Arith):
            self.expect(node.left, self.number, f"'{node.op}'", (node.right,))
            self.expect(node.right, self.number, f"'{node.op}'", (node.left,))
            return self.number
        if isinstance(node, ast.Logical):
            word = ("AND" if node.op == "and" else "OR") if self.sql else ("&&" if node.op == "and" else "||")
            self.expect(node.left, "bool", f"'{word}'")
            self.expect(node.right, "bool", f"'{word}'")
            return "bool"
        if isinstance(node, ast.Compare):
            return self.compare(node)
        if isinstance(node, ast.Between):
            for part in (node.operand, node.low, node.high):
                self.expect(part, "number", "BETWEEN", (node.operand, node.low, node.high))
            return "bool"
        if isinstance(node, ast.In):
            self.expect(node.operand, "string", "IN")
            return "bool"
        if isinstance(node, ast.Like):
            self.expect(node.operand, "string", "LIKE")
            return "bool"
        if isinstance(node, ast.IsNull):
            self.infer(node.operand)
            return "bool"
        raise TypeError(f"unknown node {node!r}")  # pragma: no cover

    def compare(self, node: ast.Compare) -> StaticType:
        left = self.infer(node.left)
        right = self.infer(node.right)
        op = "=" if self.sql and node.op == "==" else "<>" if self.sql and node.op == "!=" else node.op
        if node.op in ast.ORDERING_OPS:
            # bmq orders ints and strings; JMS orders numbers only (strings and booleans: = and <> only).
            orderable = ("number",) if self.sql else ("int", "string")
            for side, t, other in ((node.left, left, node.right), (node.right, right, node.left)):
                if t is not None and t != "null" and t not in orderable:
                    if self.undeclared(side):
                        raise self.fix(side, f"'{op}' orders numbers only", orderable[0], (other,))
                    raise self.fail(f"'{op}' cannot order {_a(t)}", side)
        if left is not None and right is not None and "null" not in (left, right) and left != right:
            # Point at the property that is a string only for want of a declaration, if one is.
            for side, other, t in ((node.left, node.right, right), (node.right, node.left, left)):
                if self.undeclared(side):
                    raise self.fix(side, f"'{op}' compares it with {_a(t)}", t, (other,))
            raise self.fail(f"'{op}' cannot compare {_a(left)} with {_a(right)}", node.right)
        return "bool"


def _a(type_name: str) -> str:
    return {"int": "an int", "string": "a string", "bool": "a boolean", "number": "a number"}.get(
        type_name, type_name
    )
