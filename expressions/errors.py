"""Compile-time errors. Every one knows the expression text and the 0-based position of the fault, and its
``str()`` shows the offending line with a caret under that position."""

from __future__ import annotations


class ExpressionError(Exception):
    """Base class of every error raised while compiling an expression."""

    kind = "error"

    def __init__(self, message: str, text: str, position: int) -> None:
        self.message = message
        self.text = text
        self.position = max(0, min(position, len(text)))
        super().__init__(message)

    def caret(self) -> str:
        """The line of the expression that holds the fault, and a caret under the fault."""
        start = self.text.rfind("\n", 0, self.position) + 1
        end = self.text.find("\n", self.position)
        line = self.text[start : end if end >= 0 else len(self.text)]
        # Keep tabs in the padding so the caret lines up whatever the tab width of the terminal.
        pad = "".join(c if c == "\t" else " " for c in self.text[start : self.position])
        return f"  {line}\n  {pad}^"

    def __str__(self) -> str:
        return f"{self.message} (at position {self.position})\n{self.caret()}"


class ExpressionSyntaxError(ExpressionError):
    """The text is not a well-formed expression of its dialect."""

    kind = "syntax"


class LiteralRangeError(ExpressionSyntaxError):
    """A numeric literal that does not fit (int64, or a finite float)."""

    kind = "range"


class ExpressionTypeError(ExpressionError):
    """The expression can never be right given the types that are statically known."""

    kind = "type"


class ExpressionLimitError(ExpressionError):
    """The expression is too long or too deeply nested."""

    kind = "limit"
