"""Which Kafka clients of this process are still open, and what holds each: the session's broker fixture
(tests/conftest.py) fails the run when any is left when the broker stops."""

from __future__ import annotations

import gc
import sys
import threading
import types
from collections.abc import Sequence
from typing import Any

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient


def open_clients() -> list[tuple[object, str]]:
    """The Kafka clients of this process that are not closed, each with what holds it.

    Found among the objects the garbage collector tracks (confluent-kafka's clients are), after a collection:
    a client only reference cycles kept is destroyed by it, as it would be in time anyway. The worker freezes
    what is alive when it builds a table (router/worker/tables.py), which hides those objects from both the
    collector and ``gc.get_objects``: they are unfrozen first. An admin client has no close(): it is open
    while referenced. A closed producer or consumer refuses calls.
    """
    gc.unfreeze()
    gc.collect()
    clients = [o for o in gc.get_objects() if isinstance(o, AdminClient | Producer | Consumer)]
    return [(c, f"{type(c).__name__}, held by {_holders(c, clients)}") for c in clients if _is_open(c)]


def _is_open(client: Any) -> bool:
    try:
        if hasattr(client, "assignment"):  # a Consumer
            client.assignment()
        elif hasattr(client, "flush"):  # a Producer: poll(0) serves its delivery callbacks, if any are due
            client.poll(0)
    except RuntimeError:  # "Consumer closed", "Producer has been closed"
        return False
    return True


def _running_frames() -> list[tuple[str, types.FrameType]]:
    """Every frame on every thread's stack (a running function's locals are not seen as referrers)."""
    names = {t.ident: t.name for t in threading.enumerate()}
    found: list[tuple[str, types.FrameType]] = []
    for ident, frame in sys._current_frames().items():
        current: types.FrameType | None = frame
        while current is not None:
            if current.f_code.co_filename != __file__:
                found.append((names.get(ident, str(ident)), current))
            current = current.f_back
    return found


def _holders(obj: object, ours: Sequence[object]) -> str:
    """Where ``obj`` is referenced from: an attribute of an object, a variable of a running function."""
    found: list[str] = []
    for thread, frame in _running_frames():
        if any(value is obj for value in frame.f_locals.values()):
            code = frame.f_code
            found.append(
                f"a local of {code.co_name}() ({code.co_filename}:{frame.f_lineno}, thread {thread})"
            )
    for referrer in gc.get_referrers(obj):
        if referrer is ours or isinstance(referrer, types.FrameType):
            continue
        if obj in vars(referrer).values() if hasattr(referrer, "__dict__") else False:
            names = [
                k for k, v in vars(referrer).items() if v is obj
            ]  # an instance's own (inlined) attributes
            found.append(f"{type(referrer).__module__}.{type(referrer).__qualname__} [{', '.join(names)}]")
        elif isinstance(referrer, dict):
            owners = [o for o in gc.get_referrers(referrer) if getattr(o, "__dict__", None) is referrer]
            names = [k for k, v in referrer.items() if v is obj]
            where = ", ".join(f"{type(o).__module__}.{type(o).__qualname__}" for o in owners) or "a dict"
            found.append(f"{where} [{', '.join(map(str, names))}]")
        else:
            found.append(type(referrer).__name__)
    return "; ".join(found[:4]) or "nothing traced (a C extension or a cycle through one)"
