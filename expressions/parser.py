"""Text -> AST for both dialects: lark does the LALR parsing; this module turns lark's parse tree into
``ast`` nodes and lark's exceptions into ``ExpressionError`` with the position of the fault."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lark import Lark, Token, Tree
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken

from . import ast
from .errors import ExpressionError, ExpressionLimitError, ExpressionSyntaxError, LiteralRangeError

DIALECTS = ("bmq", "sql92")
INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
BMQ_MAX_LENGTH = 128
# Deeper trees are refused rather than risking Python's recursion limit in the recursive passes that follow;
# 128 characters of bmq cannot nest deeper than this.
MAX_DEPTH = 200

_COMPARISON_TOKENS = frozenset({"EQ", "NE", "LT", "LE", "GT", "GE"})
_OPERAND_TOKENS = frozenset({"IDENT", "INT", "STRING", "DECIMAL", "LPAR"})


class _Fault(Exception):
    """Raised inside the tree builder; ``parse`` adds the text and turns it into the public error class."""

    def __init__(self, cls: type[ExpressionError], message: str, position: int) -> None:
        super().__init__(message)
        self.cls = cls
        self.message = message
        self.position = position


@dataclass(frozen=True, slots=True)
class _RawInt:
    """An unsigned integer literal before we know whether a unary minus folds into it (so that
    ``-9223372036854775808`` is a valid literal while ``9223372036854775808`` is not)."""

    value: int
    pos: int


@functools.cache
def _lark(dialect: str) -> Lark:
    grammar = (Path(__file__).parent / f"{dialect}.lark").read_text(encoding="utf-8")
    return Lark(grammar, parser="lalr", lexer="basic", start="start")


def parse(text: str, dialect: str = "bmq") -> ast.Node:
    """Parse ``text`` in ``dialect`` into an AST (no type checking). Raises ``ExpressionError``."""
    if dialect not in DIALECTS:
        raise ValueError(f"unknown dialect {dialect!r} (expected one of {', '.join(DIALECTS)})")
    if dialect == "bmq":
        if len(text) > BMQ_MAX_LENGTH:
            raise ExpressionLimitError(
                f"expression is {len(text)} characters long; at most {BMQ_MAX_LENGTH} are allowed",
                text,
                BMQ_MAX_LENGTH,
            )
        if not text.strip(" \t\n"):
            raise ExpressionSyntaxError("empty expression", text, 0)
    try:
        tree = _lark(dialect).parse(text)
        return _TreeBuilder(dialect).build(tree)
    except _Fault as fault:
        raise fault.cls(fault.message, text, fault.position) from None
    except UnexpectedInput as exc:
        raise _syntax_error(exc, text, dialect) from None


def _syntax_error(exc: UnexpectedInput, text: str, dialect: str) -> ExpressionSyntaxError:
    if isinstance(exc, UnexpectedCharacters):
        pos = exc.pos_in_stream or 0
        char = text[pos] if pos < len(text) else ""
        nxt = text[pos + 1 : pos + 2]
        if dialect == "bmq":
            hints = {"=": "did you mean '=='?", "&": "did you mean '&&'?", "|": "did you mean '||'?"}
            if char == '"':
                return ExpressionSyntaxError("unterminated string literal", text, pos)
            if char == "'":
                return ExpressionSyntaxError("strings are written in double quotes", text, pos)
            if char == "=" and nxt == ">":
                return ExpressionSyntaxError("unexpected '=>'; did you mean '>='?", text, pos)
            if char in hints:
                return ExpressionSyntaxError(f"unexpected '{char}'; {hints[char]}", text, pos)
        else:
            if char == "'":
                return ExpressionSyntaxError("unterminated string literal", text, pos)
            if char == "!" and nxt == "=":
                return ExpressionSyntaxError("unexpected '!='; did you mean '<>'?", text, pos)
            if char == '"':
                return ExpressionSyntaxError("strings are written in single quotes", text, pos)
        if char.isspace():
            return ExpressionSyntaxError(f"unexpected white space character {char!r}", text, pos)
        return ExpressionSyntaxError(f"unexpected character {char!r}", text, pos)
    if isinstance(exc, UnexpectedToken):
        token = exc.token
        if token.type == "$END":
            return ExpressionSyntaxError("unexpected end of expression", text, len(text))
        pos = token.start_pos if token.start_pos is not None else len(text)
        expected = set(exc.expected)
        if dialect == "sql92" and token.type == "EQ" and text[pos - 1 : pos] == "=":
            return ExpressionSyntaxError("unexpected '='; equality is a single '=' in sql92", text, pos)
        if token.type in _COMPARISON_TOKENS and not expected & _OPERAND_TOKENS:
            return ExpressionSyntaxError(
                f"comparisons do not chain: put parentheses around one side of '{token}'", text, pos
            )
        return ExpressionSyntaxError(f"unexpected '{token}'", text, pos)
    if isinstance(exc, UnexpectedEOF):
        return ExpressionSyntaxError("unexpected end of expression", text, len(text))
    return ExpressionSyntaxError(str(exc), text, 0)  # pragma: no cover - lark has no other kinds


class _TreeBuilder:
    """Turns lark's parse tree into AST nodes, bottom-up and without recursion (so that a long chain such as
    ``1+1+...+1`` is refused by the depth limit instead of overflowing the Python stack)."""

    def __init__(self, dialect: str) -> None:
        self.dialect = dialect
        self.handlers: dict[str, Callable[[list[Any]], Any]] = {
            "start": self._start,
            "logical": self._logical,
            "compare": self._compare,
            "arith": self._arith,
            "not_": self._not,
            "neg": self._neg,
            "pos": self._pos,
            "int_lit": self._int_lit,
            "float_lit": self._float_lit,
            "str_lit": self._str_lit,
            "bool_lit": self._bool_lit,
            "null_lit": self._null_lit,
            "prop": self._prop,
            "exists": self._exists,
            "group": self._group,
            "between": self._between,
            "in_": self._in,
            "strings": self._strings,
            "like": self._like,
            "is_null": self._is_null,
        }

    def build(self, tree: Tree[Token] | Token) -> ast.Node:
        results: list[Any] = []
        depths: list[int] = []
        stack: list[tuple[Any, bool]] = [(tree, False)]
        while stack:
            item, done = stack.pop()
            if isinstance(item, Token):
                results.append(item)
                depths.append(0)
            elif not done:
                stack.append((item, True))
                stack.extend((child, False) for child in reversed(item.children))
            else:
                n = len(item.children)
                args = results[len(results) - n :] if n else []
                depth = max(depths[len(depths) - n :], default=0) + (0 if item.data == "group" else 1)
                del results[len(results) - n :]
                del depths[len(depths) - n :]
                value = self.handlers[str(item.data)](args)
                if depth > MAX_DEPTH:
                    raise _Fault(
                        ExpressionLimitError,
                        f"expression nested too deeply (over {MAX_DEPTH} levels)",
                        _pos(args),
                    )
                results.append(value)
                depths.append(depth)
        (top,) = results
        return _node(top if not isinstance(top, Token) else self.handlers["prop"]([top]))

    # -- handlers: each receives the already-built children of one parse-tree node --

    def _start(self, args: list[Any]) -> ast.Node:
        # Only sql92 may be empty: an empty selector matches everything.
        return _node(args[0]) if args else ast.BoolLit(True, pos=0)

    def _logical(self, args: list[Any]) -> ast.Node:
        left, op, right = args
        return ast.Logical(
            "and" if op.type in ("ANDAND", "AND") else "or", _node(left), _node(right), pos=_at(op)
        )

    def _compare(self, args: list[Any]) -> ast.Node:
        left, op, right = args
        spelled = {"EQ": "==", "NE": "!=", "LT": "<", "LE": "<=", "GT": ">", "GE": ">="}[op.type]
        return ast.Compare(spelled, _node(left), _node(right), pos=_at(op))

    def _arith(self, args: list[Any]) -> ast.Node:
        left, op, right = args
        return ast.Arith(str(op), _node(left), _node(right), pos=_at(op))

    def _not(self, args: list[Any]) -> ast.Node:
        op, operand = args
        return ast.Unary("not", _node(operand), pos=_at(op))

    def _neg(self, args: list[Any]) -> ast.Node:
        op, operand = args
        if isinstance(operand, _RawInt):
            # Fold the sign into the literal: the only way to write int64's minimum.
            if operand.value > -INT64_MIN:
                raise _Fault(LiteralRangeError, "integer literal out of int64 range", operand.pos)
            return ast.IntLit(-operand.value, pos=_at(op))
        if isinstance(operand, ast.FloatLit):
            return ast.FloatLit(-operand.value, pos=_at(op))  # exact, and lets the plan index "x < -1.5"
        return ast.Unary("neg", _node(operand), pos=_at(op))

    def _pos(self, args: list[Any]) -> ast.Node:
        op, operand = args
        return ast.Unary("pos", _node(operand), pos=_at(op))

    def _int_lit(self, args: list[Any]) -> _RawInt:
        (tok,) = args
        digits = str(tok).lstrip("0") or "0"
        if len(digits) > 19:  # past any int64; and int() refuses (or is slow on) thousands of digits
            raise _Fault(LiteralRangeError, "integer literal out of int64 range", _at(tok))
        return _RawInt(int(digits), _at(tok))

    def _float_lit(self, args: list[Any]) -> ast.Node:
        (tok,) = args
        value = float(str(tok))
        if not math.isfinite(value):
            raise _Fault(LiteralRangeError, "decimal literal out of range", _at(tok))
        return ast.FloatLit(value, pos=_at(tok))

    def _str_lit(self, args: list[Any]) -> ast.Node:
        (tok,) = args
        return ast.StrLit(self._string(tok), pos=_at(tok))

    def _string(self, tok: Token) -> str:
        raw = str(tok)[1:-1]
        if self.dialect == "sql92":
            return raw.replace("''", "'")
        out: list[str] = []
        i = 0
        while i < len(raw):
            c = raw[i]
            if c == "\\":
                nxt = raw[i + 1]  # the token pattern guarantees a character after a backslash
                if nxt not in '"\\':
                    raise _Fault(
                        ExpressionSyntaxError,
                        f'invalid escape sequence {c + nxt!r}: only \\" and \\\\ are allowed',
                        _at(tok) + 1 + i,
                    )
                out.append(nxt)
                i += 2
            else:
                out.append(c)
                i += 1
        return "".join(out)

    def _bool_lit(self, args: list[Any]) -> ast.Node:
        (tok,) = args
        return ast.BoolLit(tok.type == "TRUE", pos=_at(tok))

    def _null_lit(self, args: list[Any]) -> ast.Node:
        (tok,) = args
        return ast.NullLit(pos=_at(tok))

    def _prop(self, args: list[Any]) -> ast.Node:
        (tok,) = args
        return ast.Prop(str(tok), pos=_at(tok))

    def _exists(self, args: list[Any]) -> ast.Node:
        kw, _, name, _ = args
        return ast.Exists(str(name), pos=_at(kw))

    def _group(self, args: list[Any]) -> Any:
        _, inner, _ = args
        return inner

    def _between(self, args: list[Any]) -> ast.Node:
        negated = len(args) == 6
        operand, kw, low, high = args[0], args[1], args[-3], args[-1]
        return ast.Between(_node(operand), _node(low), _node(high), negated, pos=_at(kw))

    def _strings(self, args: list[Any]) -> list[str]:
        return [self._string(t) for t in args if t.type == "STRING"]

    def _in(self, args: list[Any]) -> ast.Node:
        negated = args[1].type == "NOT"
        values: list[str] = args[-2]
        # Duplicates change nothing; keeping the first of each makes equal lists share one node.
        return ast.In(_node(args[0]), tuple(dict.fromkeys(values)), negated, pos=_at(args[1]))

    def _like(self, args: list[Any]) -> ast.Node:
        operand, kw = args[0], args[1]
        negated = kw.type == "NOT"
        rest = args[3:] if negated else args[2:]
        pattern_tok = rest[0]
        pattern = self._string(pattern_tok)
        escape: str | None = None
        if len(rest) == 3:
            escape_tok = rest[2]
            escape = self._string(escape_tok)
            if len(escape) != 1:
                raise _Fault(ExpressionSyntaxError, "ESCAPE takes exactly one character", _at(escape_tok))
            if _ends_with_lone_escape(pattern, escape):
                raise _Fault(
                    ExpressionSyntaxError, "LIKE pattern ends with the escape character", _at(pattern_tok)
                )
        return ast.Like(_node(operand), pattern, escape, negated, pos=_at(kw))

    def _is_null(self, args: list[Any]) -> ast.Node:
        negated = len(args) == 4
        return ast.IsNull(_node(args[0]), negated, pos=_at(args[1]))


def _ends_with_lone_escape(pattern: str, escape: str) -> bool:
    i = 0
    while i < len(pattern):
        if pattern[i] == escape:
            if i + 1 == len(pattern):
                return True
            i += 2
        else:
            i += 1
    return False


def _at(tok: Token) -> int:
    return tok.start_pos if tok.start_pos is not None else 0


def _pos(args: Sequence[Any]) -> int:
    for a in args:
        if isinstance(a, Token):
            return _at(a)
        if isinstance(a, ast.Node | _RawInt):
            return a.pos
    return 0


def _node(value: Any) -> ast.Node:
    """An AST node for a built child: a pending unsigned literal is range-checked now that no minus can fold."""
    if isinstance(value, _RawInt):
        if value.value > INT64_MAX:
            raise _Fault(LiteralRangeError, "integer literal out of int64 range", value.pos)
        return ast.IntLit(value.value, pos=value.pos)
    if not isinstance(value, ast.Node):  # pragma: no cover - the grammar only puts nodes here
        raise TypeError(f"unexpected parse result {value!r}")
    return value
