"""The reference interpreter: a plain tree walk, written for obviousness rather than speed.

It is the oracle the tests hold the compiled evaluator and the plan to, and the naive baseline of the
benchmarks. It shares nothing with the compiler but the AST and the ``Outcome`` type.
"""

from __future__ import annotations

from collections.abc import Mapping

from . import ast
from .like import like
from .outcome import ARITHMETIC, INT64_MAX, INT64_MIN, NAME, RESULT, TYPE, EvalError, Outcome

Value = int | float | str | bool | None
Props = Mapping[str, int | float | str | bool]


def interpret(node: ast.Node, props: Props, dialect: str) -> Outcome:
    """Evaluate ``node`` (a checked AST) on ``props`` in ``dialect``."""
    try:
        value = _BMQ(props).eval(node) if dialect == "bmq" else _SQL(props).eval(node)
    except EvalError as exc:
        return Outcome(False, exc.kind)
    if value is True:
        return Outcome(True)
    if value is False or (value is None and dialect == "sql92"):
        return Outcome(False)
    return Outcome(False, RESULT)


def _in_int64(n: int) -> bool:
    return INT64_MIN <= n <= INT64_MAX


def _c_divide(a: int, b: int) -> int:
    """C's integer division: the quotient truncated toward zero."""
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def _checked(n: int) -> int:
    if not _in_int64(n):
        raise EvalError(ARITHMETIC)
    return n


class _BMQ:
    """bmq: int, string and bool; any fault is an error that ends the evaluation."""

    def __init__(self, props: Props) -> None:
        self.props = props

    def eval(self, node: ast.Node) -> Value:
        if isinstance(node, ast.IntLit | ast.StrLit | ast.BoolLit):
            return node.value
        if isinstance(node, ast.Prop):
            if node.name not in self.props:
                raise EvalError(NAME)
            raw = self.props[node.name]
            if type(raw) is bool or type(raw) is str:
                return raw
            if type(raw) is int and _in_int64(raw):
                return raw
            raise EvalError(TYPE)
        if isinstance(node, ast.Exists):
            return node.name in self.props
        if isinstance(node, ast.Unary):
            value = self.eval(node.operand)
            if node.op == "not":
                if type(value) is not bool:
                    raise EvalError(TYPE)
                return not value
            if type(value) is not int:
                raise EvalError(TYPE)
            return _checked(-value)
        if isinstance(node, ast.Arith):
            a = self.eval(node.left)
            b = self.eval(node.right)
            if type(a) is not int or type(b) is not int:
                raise EvalError(TYPE)
            if node.op == "+":
                return _checked(a + b)
            if node.op == "-":
                return _checked(a - b)
            if node.op == "*":
                return _checked(a * b)
            if b == 0:
                raise EvalError(ARITHMETIC)
            if node.op == "/":
                return _checked(_c_divide(a, b))
            return a - b * _c_divide(a, b)  # C's %: the remainder takes the dividend's sign
        if isinstance(node, ast.Logical):
            left = self.eval(node.left)
            if type(left) is not bool:
                raise EvalError(TYPE)
            if node.op == "and" and not left:
                return False
            if node.op == "or" and left:
                return True
            right = self.eval(node.right)
            if type(right) is not bool:
                raise EvalError(TYPE)
            return right
        if isinstance(node, ast.Compare):
            a = self.eval(node.left)
            b = self.eval(node.right)
            if type(a) is not type(b):
                raise EvalError(TYPE)
            if node.op == "==":
                return a == b
            if node.op == "!=":
                return a != b
            if type(a) is bool:
                raise EvalError(TYPE)
            assert isinstance(a, int | str) and isinstance(b, int | str)
            # Python orders str by code point, which is the order of their UTF-8 bytes.
            if node.op == "<":
                return a < b  # type: ignore[operator]
            if node.op == "<=":
                return a <= b  # type: ignore[operator]
            if node.op == ">":
                return a > b  # type: ignore[operator]
            return a >= b  # type: ignore[operator]
        raise TypeError(f"not a bmq node: {node!r}")


def _is_number(v: Value) -> bool:
    return type(v) is int or type(v) is float


def _kind(v: Value) -> str:
    if type(v) is bool:
        return "bool"
    if type(v) is str:
        return "string"
    return "number"


def _not3(v: bool | None) -> bool | None:
    return None if v is None else not v


def _and3(a: bool | None, b: bool | None) -> bool | None:
    if a is False or b is False:
        return False
    if a is None or b is None:
        return None
    return True


def _or3(a: bool | None, b: bool | None) -> bool | None:
    if a is True or b is True:
        return True
    if a is None or b is None:
        return None
    return False


class _SQL:
    """sql92: NULL, bool, number (int or float), string, with SQL's three-valued logic (None is UNKNOWN)."""

    def __init__(self, props: Props) -> None:
        self.props = props

    def bool3(self, v: Value) -> bool | None:
        if v is None or isinstance(v, bool):
            return v
        raise EvalError(TYPE)

    def eval(self, node: ast.Node) -> Value:
        if isinstance(node, ast.IntLit | ast.FloatLit | ast.StrLit | ast.BoolLit):
            return node.value
        if isinstance(node, ast.NullLit):
            return None
        if isinstance(node, ast.Prop):
            if node.name not in self.props:
                return None
            raw = self.props[node.name]
            if type(raw) in (bool, str, float) or (type(raw) is int and _in_int64(raw)):
                return raw
            raise EvalError(TYPE)
        if isinstance(node, ast.Unary):
            value = self.eval(node.operand)
            if node.op == "not":
                return _not3(self.bool3(value))
            if value is None:
                return None
            if not _is_number(value):
                raise EvalError(TYPE)
            assert isinstance(value, int | float)
            if node.op == "pos":
                return value
            return _checked(-value) if type(value) is int else -value
        if isinstance(node, ast.Arith):
            return self.arith(node.op, self.eval(node.left), self.eval(node.right))
        if isinstance(node, ast.Logical):
            left = self.bool3(self.eval(node.left))
            if node.op == "and":
                return False if left is False else _and3(left, self.bool3(self.eval(node.right)))
            return True if left is True else _or3(left, self.bool3(self.eval(node.right)))
        if isinstance(node, ast.Compare):
            return self.compare(node.op, self.eval(node.left), self.eval(node.right))
        if isinstance(node, ast.Between):
            # JMS: "x BETWEEN a AND b" is "x >= a AND x <= b"; "x NOT BETWEEN a AND b" is "x < a OR x > b".
            x, low, high = self.eval(node.operand), self.eval(node.low), self.eval(node.high)
            if node.negated:
                return _or3(self.compare("<", x, low), self.compare(">", x, high))
            return _and3(self.compare(">=", x, low), self.compare("<=", x, high))
        if isinstance(node, ast.In):
            x = self.eval(node.operand)
            if x is None:
                return None
            found = type(x) is str and x in node.values
            return found != node.negated
        if isinstance(node, ast.Like):
            x = self.eval(node.operand)
            if x is None:
                return None
            matched = type(x) is str and like(x, node.pattern, node.escape)
            return matched != node.negated
        if isinstance(node, ast.IsNull):
            return (self.eval(node.operand) is None) != node.negated
        raise TypeError(f"not a sql92 node: {node!r}")

    def arith(self, op: str, a: Value, b: Value) -> Value:
        for v in (a, b):
            if v is not None and not _is_number(v):
                raise EvalError(TYPE)
        if a is None or b is None:
            return None
        assert isinstance(a, int | float) and isinstance(b, int | float)
        if op == "/" and b == 0:
            raise EvalError(ARITHMETIC)
        if type(a) is int and type(b) is int:
            if op == "+":
                return _checked(a + b)
            if op == "-":
                return _checked(a - b)
            if op == "*":
                return _checked(a * b)
            return _checked(_c_divide(a, b))
        if op == "+":
            return a + b
        if op == "-":
            return a - b
        if op == "*":
            return a * b
        return a / b

    def compare(self, op: str, a: Value, b: Value) -> bool | None:
        if a is None or b is None:
            return None
        if op in ("==", "!="):
            # Values of different kinds are never equal (no implicit conversion), and <> is NOT =.
            equal = _kind(a) == _kind(b) and a == b
            return equal if op == "==" else not equal
        if not (_is_number(a) and _is_number(b)):
            return False  # JMS orders numbers only
        assert isinstance(a, int | float) and isinstance(b, int | float)
        if op == "<":
            return a < b
        if op == "<=":
            return a <= b
        if op == ">":
            return a > b
        return a >= b
