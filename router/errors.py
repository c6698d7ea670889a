"""The one base of subroute's errors: ``except SubrouteError`` catches every error the package raises on purpose.

Each error also keeps the standard base its callers catch it by (``ValueError`` for input refused,
``RuntimeError`` for a state Kafka is in, ``LookupError`` for what does not exist). Imports nothing of subroute,
so every room, expressions/ included, may derive from it.
"""

from __future__ import annotations


class SubrouteError(Exception):
    """An error subroute raises on purpose (not a bug): bad input, a refused change, Kafka in a state it cannot use."""
