"""The fast evaluator: each AST node becomes a Python closure.

Closures are built from the checked AST only; nothing of the user's text is ever executed, and literals and
property names are captured as plain values. Each closure takes ``(props, memo)``: ``props`` is the message's
property mapping, ``memo`` the per-message cache a plan gives to the nodes it shares (``None`` outside a plan).
The semantics are those of ``interpreter``, written independently so that each checks the other.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from typing import Any

from . import ast
from .like import LikePattern, compile_like
from .outcome import ARITHMETIC, INT64_MAX, INT64_MIN, NAME, TYPE, EvalError

Value = Any  # int | float | str | bool | None
Props = Mapping[str, Any]
Memo = dict[int, Value] | None
Fn = Callable[[Props, Memo], Value]

_MISSING: Any = object()
_MIN = INT64_MIN
_MAX = INT64_MAX
_NUM = frozenset({int, float})
_OPS: dict[str, Callable[[Any, Any], bool]] = {
    "==": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


class Compiler:
    """Compiles nodes of one dialect. Equal nodes compile once (so a plan's shared sub-expressions are one
    closure), and nodes listed in ``shared`` keep their value in the per-message memo under their slot."""

    def __init__(self, dialect: str, shared: Mapping[ast.Node, int] | None = None) -> None:
        self.sql = dialect == "sql92"
        self.shared = shared or {}
        self.cache: dict[ast.Node, Fn] = {}

    def compile(self, node: ast.Node) -> Fn:
        fn = self.cache.get(node)
        if fn is None:
            fn = self._sql(node) if self.sql else self._bmq(node)
            slot = self.shared.get(node)
            if slot is not None:
                fn = _memoized(fn, slot)
            self.cache[node] = fn
        return fn

    # ---------------------------------------------------------------- bmq

    def _bmq(self, node: ast.Node) -> Fn:
        if isinstance(node, ast.IntLit | ast.StrLit | ast.BoolLit):
            return _constant(node.value)
        if isinstance(node, ast.Prop):
            return _bmq_read(node.name)
        if isinstance(node, ast.Exists):
            return _exists(node.name)
        if isinstance(node, ast.Unary):
            return (
                _bmq_not(self.compile(node.operand))
                if node.op == "not"
                else _bmq_neg(self.compile(node.operand))
            )
        if isinstance(node, ast.Arith):
            return _bmq_arith(node.op, self.compile(node.left), self.compile(node.right))
        if isinstance(node, ast.Logical):
            return _bmq_junction(node.op, (self.compile(node.left), self.compile(node.right)))
        if isinstance(node, ast.Junction):
            return _bmq_junction(node.op, tuple(self.compile(item) for item in node.items))
        if isinstance(node, ast.Compare):
            left, right = node.left, node.right
            if isinstance(left, ast.Prop) and isinstance(right, ast.IntLit | ast.StrLit | ast.BoolLit):
                return _bmq_compare_prop(node.op, left.name, right.value)
            return _bmq_compare(node.op, self.compile(left), self.compile(right))
        raise TypeError(f"not a bmq node: {node!r}")

    # ---------------------------------------------------------------- sql92

    def _sql(self, node: ast.Node) -> Fn:
        if isinstance(node, ast.IntLit | ast.FloatLit | ast.StrLit | ast.BoolLit):
            return _constant(node.value)
        if isinstance(node, ast.NullLit):
            return _constant(None)
        if isinstance(node, ast.Prop):
            return _sql_read(node.name)
        if isinstance(node, ast.Unary):
            operand = self.compile(node.operand)
            return _sql_not(operand) if node.op == "not" else _sql_sign(operand, node.op == "neg")
        if isinstance(node, ast.Arith):
            return _sql_arith(node.op, self.compile(node.left), self.compile(node.right))
        if isinstance(node, ast.Logical):
            return _sql_junction(node.op, (self.compile(node.left), self.compile(node.right)))
        if isinstance(node, ast.Junction):
            return _sql_junction(node.op, tuple(self.compile(item) for item in node.items))
        if isinstance(node, ast.Compare):
            left, right = node.left, node.right
            if isinstance(left, ast.Prop) and isinstance(
                right, ast.IntLit | ast.FloatLit | ast.StrLit | ast.BoolLit
            ):
                return _sql_compare_prop(node.op, left.name, right.value)
            return _sql_compare(node.op, self.compile(left), self.compile(right))
        if isinstance(node, ast.Between):
            return _sql_between(
                self.compile(node.operand), self.compile(node.low), self.compile(node.high), node.negated
            )
        if isinstance(node, ast.In):
            return _sql_in(self.compile(node.operand), frozenset(node.values), node.negated)
        if isinstance(node, ast.Like):
            return _sql_like(
                self.compile(node.operand), compile_like(node.pattern, node.escape), node.negated
            )
        if isinstance(node, ast.IsNull):
            return _sql_is_null(self.compile(node.operand), node.negated)
        raise TypeError(f"not a sql92 node: {node!r}")


# ---------------------------------------------------------------- shared building blocks


def _memoized(fn: Fn, slot: int) -> Fn:
    # An evaluation error is not stored: the node is evaluated again and raises again (errors are rare).
    def memoized(p: Props, m: Memo) -> Value:
        if m is None:
            return fn(p, m)
        r = m.get(slot, _MISSING)
        if r is _MISSING:
            r = m[slot] = fn(p, m)
        return r

    return memoized


def _constant(value: Value) -> Fn:
    def constant(p: Props, m: Memo) -> Value:
        return value

    return constant


def _exists(name: str) -> Fn:
    def exists(p: Props, m: Memo) -> Value:
        return name in p

    return exists


def _int_division(a: int, b: int) -> int:
    """C's quotient (truncated toward zero) from Python's floored one."""
    q = a // b
    if q < 0 and q * b != a:
        q += 1
    return q


def _int_remainder(a: int, b: int) -> int:
    """C's remainder (sign of the dividend) from Python's (sign of the divisor)."""
    r = a % b
    if r and (a < 0) != (b < 0):
        r -= b
    return r


def _int_arith(op: str) -> Callable[[int, int], int]:
    def add(a: int, b: int) -> int:
        r = a + b
        if _MIN <= r <= _MAX:
            return r
        raise EvalError(ARITHMETIC)

    def sub(a: int, b: int) -> int:
        r = a - b
        if _MIN <= r <= _MAX:
            return r
        raise EvalError(ARITHMETIC)

    def mul(a: int, b: int) -> int:
        r = a * b
        if _MIN <= r <= _MAX:
            return r
        raise EvalError(ARITHMETIC)

    def div(a: int, b: int) -> int:
        if b == 0:
            raise EvalError(ARITHMETIC)
        r = _int_division(a, b)
        if r > _MAX:  # only INT64_MIN / -1
            raise EvalError(ARITHMETIC)
        return r

    def mod(a: int, b: int) -> int:
        if b == 0:
            raise EvalError(ARITHMETIC)
        return _int_remainder(a, b)

    return {"+": add, "-": sub, "*": mul, "/": div, "%": mod}[op]


# ---------------------------------------------------------------- bmq building blocks


def _bmq_read(name: str) -> Fn:
    def read(p: Props, m: Memo) -> Value:
        v = p.get(name, _MISSING)
        t = type(v)
        if t is int:
            if _MIN <= v <= _MAX:
                return v
            raise EvalError(TYPE)
        if t is str or t is bool:
            return v
        raise EvalError(NAME if v is _MISSING else TYPE)

    return read


def _bmq_not(f: Fn) -> Fn:
    def not_(p: Props, m: Memo) -> Value:
        v = f(p, m)
        if v is True:
            return False
        if v is False:
            return True
        raise EvalError(TYPE)

    return not_


def _bmq_neg(f: Fn) -> Fn:
    def neg(p: Props, m: Memo) -> Value:
        v = f(p, m)
        if type(v) is not int:
            raise EvalError(TYPE)
        if v == _MIN:
            raise EvalError(ARITHMETIC)
        return -v

    return neg


def _bmq_arith(op: str, lf: Fn, rf: Fn) -> Fn:
    compute = _int_arith(op)

    def arith(p: Props, m: Memo) -> Value:
        a = lf(p, m)
        b = rf(p, m)
        if type(a) is int and type(b) is int:
            return compute(a, b)
        raise EvalError(TYPE)

    return arith


def _bmq_junction(op: str, fns: tuple[Fn, ...]) -> Fn:
    stop = op == "or"  # the value that ends an ``or`` chain; ``and`` stops on False

    if len(fns) == 2:
        first, second = fns

        def pair(p: Props, m: Memo) -> Value:
            v = first(p, m)
            if v is stop:
                return v
            if v is not (not stop):
                raise EvalError(TYPE)
            v = second(p, m)
            if v is True or v is False:
                return v
            raise EvalError(TYPE)

        return pair

    def chain(p: Props, m: Memo) -> Value:
        for f in fns:
            v = f(p, m)
            if v is stop:
                return v
            if v is not (not stop):
                raise EvalError(TYPE)
        return not stop

    return chain


def _bmq_compare(op: str, lf: Fn, rf: Fn) -> Fn:
    compare = _OPS[op]
    ordering = op in ast.ORDERING_OPS

    def cmp(p: Props, m: Memo) -> Value:
        a = lf(p, m)
        b = rf(p, m)
        t = type(a)
        if t is not type(b) or (ordering and t is bool):
            raise EvalError(TYPE)
        return compare(a, b)

    return cmp


def _bmq_compare_prop(op: str, name: str, c: Value) -> Fn:
    """``property OP literal``: the common case, read and compared in one closure."""
    compare = _OPS[op]
    want = type(c)
    if want is int:

        def cmp_int(p: Props, m: Memo) -> Value:
            v = p.get(name, _MISSING)
            if type(v) is int:
                if _MIN <= v <= _MAX:
                    return compare(v, c)
                raise EvalError(TYPE)
            raise EvalError(NAME if v is _MISSING else TYPE)

        return cmp_int

    def cmp(p: Props, m: Memo) -> Value:
        v = p.get(name, _MISSING)
        if type(v) is want:
            return compare(v, c)
        raise EvalError(NAME if v is _MISSING else TYPE)

    return cmp


# ---------------------------------------------------------------- sql92 building blocks


def _sql_value(v: Value) -> Value:
    """A property value as sql92 sees it (``_MISSING`` is NULL); raises for values no sql92 type holds."""
    t = type(v)
    if t is str or t is float or t is bool:
        return v
    if t is int and _MIN <= v <= _MAX:
        return v
    if v is _MISSING:
        return None
    raise EvalError(TYPE)


def _sql_read(name: str) -> Fn:
    def read(p: Props, m: Memo) -> Value:
        return _sql_value(p.get(name, _MISSING))

    return read


def _sql_not(f: Fn) -> Fn:
    def not_(p: Props, m: Memo) -> Value:
        v = f(p, m)
        if v is True:
            return False
        if v is False:
            return True
        if v is None:
            return None
        raise EvalError(TYPE)

    return not_


def _sql_sign(f: Fn, negate: bool) -> Fn:
    def sign(p: Props, m: Memo) -> Value:
        v = f(p, m)
        t = type(v)
        if t is int:
            if negate and v == _MIN:
                raise EvalError(ARITHMETIC)
            return -v if negate else v
        if t is float:
            return -v if negate else v
        if v is None:
            return None
        raise EvalError(TYPE)

    return sign


def _sql_arith(op: str, lf: Fn, rf: Fn) -> Fn:
    compute_int = _int_arith(op)
    float_op: Callable[[Any, Any], Any] = {
        "+": operator.add,
        "-": operator.sub,
        "*": operator.mul,
        "/": operator.truediv,
    }[op]

    def arith(p: Props, m: Memo) -> Value:
        a = lf(p, m)
        b = rf(p, m)
        ta = type(a)
        tb = type(b)
        if ta is int and tb is int:
            return compute_int(a, b)
        if (ta not in _NUM and a is not None) or (tb not in _NUM and b is not None):
            raise EvalError(TYPE)
        if a is None or b is None:
            return None
        if op == "/" and b == 0:
            raise EvalError(ARITHMETIC)
        return float_op(a, b)

    return arith


def _sql_junction(op: str, fns: tuple[Fn, ...]) -> Fn:
    stop = op == "or"  # True ends an OR chain, False an AND chain; UNKNOWN (None) never does

    def chain(p: Props, m: Memo) -> Value:
        unknown = False
        for f in fns:
            v = f(p, m)
            if v is stop:
                return v
            if v is None:
                unknown = True
            elif v is not (not stop):
                raise EvalError(TYPE)
        return None if unknown else not stop

    return chain


def _compare3(op: str, a: Value, b: Value) -> Value:
    """A sql92 comparison of two evaluated operands: None (UNKNOWN) if either is NULL; values of different kinds
    are never equal; only numbers are ordered."""
    if a is None or b is None:
        return None
    ta = type(a)
    tb = type(b)
    numbers = ta in _NUM and tb in _NUM
    if op == "==":
        return (numbers or ta is tb) and a == b
    if op == "!=":
        return not ((numbers or ta is tb) and a == b)
    return numbers and _OPS[op](a, b)


def _sql_compare(op: str, lf: Fn, rf: Fn) -> Fn:
    def cmp(p: Props, m: Memo) -> Value:
        return _compare3(op, lf(p, m), rf(p, m))

    return cmp


def _sql_compare_prop(op: str, name: str, c: Value) -> Fn:
    """``property OP literal`` in one closure. The checker lets only numbers be ordered, so a string or
    boolean literal here is under = or <>."""
    compare = _OPS[op]
    # The answer when the property holds a value of another kind than the literal.
    mismatch = op == "!="
    if type(c) in _NUM:

        def cmp_number(p: Props, m: Memo) -> Value:
            v = p.get(name, _MISSING)
            t = type(v)
            if t is float or (t is int and _MIN <= v <= _MAX):
                return compare(v, c)
            return None if _sql_value(v) is None else mismatch

        return cmp_number

    want = type(c)

    def cmp(p: Props, m: Memo) -> Value:
        v = p.get(name, _MISSING)
        if type(v) is want:
            return compare(v, c)
        return None if _sql_value(v) is None else mismatch

    return cmp


def _sql_between(xf: Fn, lowf: Fn, highf: Fn, negated: bool) -> Fn:
    # JMS defines BETWEEN as x >= low AND x <= high, and NOT BETWEEN as x < low OR x > high.
    def between(p: Props, m: Memo) -> Value:
        x = xf(p, m)
        low = lowf(p, m)
        high = highf(p, m)
        if negated:
            a, b = _compare3("<", x, low), _compare3(">", x, high)
            return True if (a or b) else (None if a is None or b is None else False)
        a, b = _compare3(">=", x, low), _compare3("<=", x, high)
        return False if (a is False or b is False) else (None if a is None or b is None else True)

    return between


def _sql_in(f: Fn, values: frozenset[str], negated: bool) -> Fn:
    def in_(p: Props, m: Memo) -> Value:
        v = f(p, m)
        if v is None:
            return None
        return (type(v) is str and v in values) is not negated

    return in_


def _sql_like(f: Fn, pattern: LikePattern, negated: bool) -> Fn:
    matches = pattern.matches

    def like(p: Props, m: Memo) -> Value:
        v = f(p, m)
        if v is None:
            return None
        return (type(v) is str and matches(v)) is not negated

    return like


def _sql_is_null(f: Fn, negated: bool) -> Fn:
    def is_null(p: Props, m: Memo) -> Value:
        return (f(p, m) is None) is not negated

    return is_null
