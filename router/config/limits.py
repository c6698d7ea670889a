"""Bounds on what a configuration may hold, so that no config record can make the plan unboundedly large or slow.

Every limit has a default and an environment variable that overrides it (read when a config is validated):

=============================  =======================================  ========
limit                          environment variable                     default
=============================  =======================================  ========
expression length (characters) ``SUBROUTE_MAX_EXPRESSION_LENGTH``         4096
expression nesting depth       ``SUBROUTE_MAX_NESTING_DEPTH``              200
subscriptions per app          ``SUBROUTE_MAX_SUBSCRIPTIONS_PER_APP``   10,000
subscriptions in total         ``SUBROUTE_MAX_SUBSCRIPTIONS_TOTAL``    100,000
partitions of an app's topics  ``SUBROUTE_MAX_PARTITIONS``               1,000
=============================  =======================================  ========

Partitions are bounded because every worker creates an app's topics (group, band, pending, dead-letter topics,
each with that many partitions): a count the cluster cannot hold would stop every worker, and partitions cost
the brokers memory and file handles whether used or not.

The expression language has its own hard bounds on top: bmq expressions are at most 128 characters, and no
expression nests deeper than 200 levels (``subroute.expressions.parser``), so the depth limit can only be lowered.
"Subscriptions" counts every expression an app contributes to the plan: its filter entries and the
subscriptions of all its groups.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, fields

from subroute.errors import SubrouteError
from subroute.expressions.parser import MAX_DEPTH

ENV_PREFIX = "SUBROUTE_"


class LimitsError(SubrouteError, ValueError):
    """An environment variable sets a limit to something that is not a positive integer."""


@dataclass(frozen=True)
class Limits:
    max_expression_length: int = 4096
    max_nesting_depth: int = MAX_DEPTH
    max_subscriptions_per_app: int = 10_000
    max_subscriptions_total: int = 100_000
    max_partitions: int = 1_000

    @staticmethod
    def variable(field_name: str) -> str:
        """The environment variable of a limit: ``max_expression_length`` -> ``SUBROUTE_MAX_EXPRESSION_LENGTH``."""
        return ENV_PREFIX + field_name.upper()

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Limits:
        env = os.environ if environ is None else environ
        values: dict[str, int] = {}
        for f in fields(cls):
            name = cls.variable(f.name)
            raw = env.get(name)
            if raw is None or raw.strip() == "":
                continue
            try:
                value = int(raw.strip().replace("_", ""))
            except ValueError:
                raise LimitsError(f"{name}={raw!r}: expected a positive integer") from None
            if value < 1:
                raise LimitsError(f"{name}={raw!r}: expected a positive integer")
            values[f.name] = value
        limits = cls(**values)
        if limits.max_nesting_depth > MAX_DEPTH:
            raise LimitsError(
                f"{cls.variable('max_nesting_depth')}={limits.max_nesting_depth}: the expression parser refuses "
                f"anything deeper than {MAX_DEPTH} levels, so the limit can be at most {MAX_DEPTH}"
            )
        return limits


def current_limits() -> Limits:
    """The limits in force: the defaults, overridden by ``SUBROUTE_MAX_*`` environment variables."""
    return Limits.from_env()
