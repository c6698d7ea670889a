"""Static type checking: refuse, with a caret, what can never be right.

Types are known for literals and for properties declared in ``types``; other properties are unknown here and
checked when the expression is evaluated. A fault is refused wherever it sits, even on a branch that
short-circuiting might skip: with the types known it is wrong whenever that branch runs.
"""

from __future__ import annotations

from collections.abc import Mapping

from . import ast
from .errors import ExpressionTypeError

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


def check(node: ast.Node, text: str, dialect: str, types: Mapping[str, str]) -> None:
    """Raise ``ExpressionTypeError`` if ``node`` can never evaluate correctly. ``types`` is normalized."""
    checker = _Checker(text, dialect, types)
    result = checker.infer(node)
    if result not in (None, "bool", "null"):
        raise ExpressionTypeError(f"expression must be boolean, not {result}", text, node.pos)


class _Checker:
    def __init__(self, text: str, dialect: str, types: Mapping[str, str]) -> None:
        self.text = text
        self.sql = dialect == "sql92"
        self.types = types
        self.number = "number" if self.sql else "int"

    def fail(self, message: str, node: ast.Node) -> ExpressionTypeError:
        return ExpressionTypeError(message, self.text, node.pos)

    def expect(self, node: ast.Node, wanted: str, what: str) -> None:
        t = self.infer(node)
        if t is not None and t != wanted and t != "null":
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
            return self.types.get(node.name)
        if isinstance(node, ast.Unary):
            if node.op == "not":
                self.expect(node.operand, "bool", "negation")
                return "bool"
            self.expect(node.operand, self.number, "unary minus" if node.op == "neg" else "unary plus")
            return self.number
        if isinstance(node, ast.Arith):
            self.expect(node.left, self.number, f"'{node.op}'")
            self.expect(node.right, self.number, f"'{node.op}'")
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
                self.expect(part, "number", "BETWEEN")
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
            for side, t in ((node.left, left), (node.right, right)):
                if t is not None and t != "null" and t not in orderable:
                    raise self.fail(f"'{op}' cannot order {_a(t)}", side)
        if left is not None and right is not None and "null" not in (left, right) and left != right:
            raise self.fail(f"'{op}' cannot compare {_a(left)} with {_a(right)}", node.right)
        return "bool"


def _a(type_name: str) -> str:
    return {"int": "an int", "string": "a string", "bool": "a boolean", "number": "a number"}.get(
        type_name, type_name
    )
