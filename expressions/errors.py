"""Compile-time errors. Every one knows the expression text and the 0-based position of the fault, and its
``str()`` shows the offending line with a caret under that position."""

from __future__ import annotations

from subroute.errors import SubrouteError

EXCERPT = 60


class ExpressionError(SubrouteError):
    """Base class of every error raised while compiling an expression."""

    kind = "error"

    def __init__(self, message: str, text: str, position: int) -> None:
        self.message = message
        self.text = text
        self.position = max(0, min(position, len(text)))
        super().__init__(message)

    def caret(self) -> str:
        """The line of the expression that holds the fault, and a caret under the fault.

        At most ``EXCERPT`` characters either side of the fault are shown (``…`` marks a cut), so an error
        about a huge expression stays a short message.
        """
        start = self.text.rfind("\n", 0, self.position) + 1
        end = self.text.find("\n", self.position)
        end = end if end >= 0 else len(self.text)
        low, high = max(start, self.position - EXCERPT), min(end, self.position + EXCERPT)
        head, tail = ("…" if low > start else ""), ("…" if high < end else "")
        line = f"{head}{self.text[low:high]}{tail}"
        # Keep tabs in the padding so the caret lines up whatever the tab width of the terminal.
        pad = " " * len(head) + "".join(c if c == "\t" else " " for c in self.text[low : self.position])
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


class UndeclaredPropertyError(ExpressionTypeError):
    """A property the caller did not declare, read as text (a string), used where a string can never be right:
    as a number or as a condition. ``wanted`` is the type to declare it with (``int``, ``float`` or ``bool``);
    the message ends with the fix, which a caller can name its own way (``with_fix``)."""

    def __init__(
        self, name: str, wanted: str, need: str, text: str, position: int, fix: str | None = None
    ) -> None:
        self.name = name
        self.wanted = wanted
        self.need = need
        message = f"property {name!r} is not declared, so it is a string (header text), and {need}: " + (
            fix or f"declare its type ({wanted})"
        )
        super().__init__(message, text, position)

    def with_fix(self, fix: str) -> UndeclaredPropertyError:
        """The same error, with ``fix`` as the way to declare the property."""
        return UndeclaredPropertyError(self.name, self.wanted, self.need, self.text, self.position, fix)
