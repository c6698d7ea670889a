"""What an evaluation gives: the shared result type and the evaluation-error signal."""

from __future__ import annotations

from dataclasses import dataclass

from subroute.errors import SubrouteError

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1

# Kinds of evaluation error (``Outcome.error``).
NAME = "name"  # a bmq property the expression needs is missing
TYPE = "type"  # a value of the wrong type (or a property value no dialect type can hold)
ARITHMETIC = "arithmetic"  # division or modulo by zero, int64 overflow
RESULT = "result"  # the final value is not a boolean


@dataclass(frozen=True, slots=True)
class Outcome:
    """The result of evaluating one expression on one message. ``value`` is False whenever ``error`` is set;
    a sql92 UNKNOWN is ``Outcome(False, None)``."""

    value: bool
    error: str | None = None


MATCH = Outcome(True)
NO_MATCH = Outcome(False)


class EvalError(SubrouteError):
    """Raised inside evaluators; ``kind`` is one of the kinds above."""

    def __init__(self, kind: str) -> None:
        super().__init__(kind)
        self.kind = kind
