"""subroute's subscription expressions: two dialects (``bmq``, ``sql92``), one compiled form, one shared plan.

expr = expressions.compile('CustomerId == 1000 && OrderType != "limit"')
expr.evaluate({"CustomerId": 1000, "OrderType": "market"})  # Outcome(value=True, error=None)

plan = expressions.compile_plan([Subscription("a", "x > 1"), Subscription("b", "y = 'z'", "sql92")])
plan.match({"x": 2})  # frozenset({"a"})
"""

from .errors import (
    ExpressionError,
    ExpressionLimitError,
    ExpressionSyntaxError,
    ExpressionTypeError,
    LiteralRangeError,
    UndeclaredPropertyError,
)
from .expression import Expression, compile
from .outcome import Outcome
from .plan import Plan, Subscription, compile_plan

DIALECTS = ("bmq", "sql92")

__all__ = [
    "DIALECTS",
    "Expression",
    "ExpressionError",
    "ExpressionLimitError",
    "ExpressionSyntaxError",
    "ExpressionTypeError",
    "LiteralRangeError",
    "Outcome",
    "Plan",
    "Subscription",
    "UndeclaredPropertyError",
    "compile",
    "compile_plan",
]
