"""The front door for one expression: text -> AST -> checked AST -> compiled closure."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from types import MappingProxyType

from . import ast, parser, typecheck
from .compiler import Compiler, Fn, Props
from .outcome import MATCH, NO_MATCH, RESULT, EvalError, Outcome


def check(
    text: str,
    dialect: str = "bmq",
    types: Mapping[str, str] | None = None,
    declared: Collection[str] | None = None,
) -> ast.Node:
    """Parse and type-check ``text``; return its AST. Raises ``ExpressionError`` (``ValueError`` for a bad
    dialect or type name). ``declared``: see ``compile``."""
    if dialect not in parser.DIALECTS:
        raise ValueError(f"unknown dialect {dialect!r} (expected one of {', '.join(parser.DIALECTS)})")
    normalized = typecheck.normalize_types(types, dialect)
    tree = parser.parse(text, dialect)
    typecheck.check(tree, text, dialect, normalized, declared)
    return tree


class Expression:
    """A compiled expression. Build it with ``subroute.expressions.compile``."""

    __slots__ = ("_fn", "ast", "dialect", "properties", "text", "types")

    def __init__(self, text: str, dialect: str, types: Mapping[str, str] | None, tree: ast.Node) -> None:
        self.text = text
        self.dialect = dialect
        self.types: Mapping[str, str] = MappingProxyType(dict(types or {}))
        self.ast = tree
        self.properties: frozenset[str] = ast.property_names(tree)
        self._fn: Fn = Compiler(dialect).compile(tree)

    def evaluate(self, props: Props) -> Outcome:
        """Evaluate on one message's properties (an absent key is a missing property)."""
        try:
            value = self._fn(props, None)
        except EvalError as exc:
            return Outcome(False, exc.kind)
        if value is True:
            return MATCH
        if value is False or (value is None and self.dialect == "sql92"):
            return NO_MATCH
        return Outcome(False, RESULT)

    def matches(self, props: Props) -> bool:
        """True when the expression evaluates to true without error."""
        try:
            return self._fn(props, None) is True
        except EvalError:
            return False

    def __repr__(self) -> str:
        return f"Expression({self.text!r}, dialect={self.dialect!r})"


def compile(
    text: str,
    *,
    dialect: str = "bmq",
    types: Mapping[str, str] | None = None,
    declared: Collection[str] | None = None,
) -> Expression:
    """Compile ``text`` in ``dialect`` (``"bmq"`` or ``"sql92"``). ``types`` maps property names to ``"int"``,
    ``"string"``, ``"bool"`` (and ``"float"`` in sql92) so that what can never be right is refused now.
    ``declared``: for properties read from text (headers), the names the caller declared; any other property
    is then a string, and its use as a number or a condition raises ``UndeclaredPropertyError`` (None, the
    default: other properties are of a type known only when evaluating).

    Raises an ``ExpressionError`` subclass for a bad expression, ``ValueError`` for a bad dialect or type name.
    """
    return Expression(text, dialect, types, check(text, dialect, types, declared))
