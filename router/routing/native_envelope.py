"""The routed records of a whole batch of input records, assembled natively (router/routing/native/src/
python_envelope.rs).

``envelope.records_for`` is the rule and the reference: the records one input record turns into, its value,
headers and timestamp kept, the routing headers added in their fixed order. Assembling them costs a few dozen
interpreter steps per routed record (a list of a dozen headers, a tuple), which at tens of thousands of records a
second is a measurable share of the worker's loop; the native assembly makes the same objects without them. What
a decision's envelope holds is still made here in Python, once per decision object (``Envelopes.headers_of``).
Tested against ``records_for`` by tests/unit/native/test_native_envelope.py.
"""

from __future__ import annotations

from collections.abc import Sequence

from subroute import wire
from subroute.routing.decisions import Decision
from subroute.routing.envelope import WRITES_NOTHING, Envelopes, InputRecord, OutRecord
from subroute.routing.native_boundary import _native

# Compared with each decision's action by identity on the native side, which takes a list.
_WRITES_NOTHING = list(WRITES_NOTHING)


def input_records(
    messages: list[InputRecord],
    routed: Sequence[Sequence[Decision]],
    now_ms: int,
    envelopes: Envelopes,
) -> list[OutRecord]:
    """``records_for(message, decisions, now_ms, False, envelopes)`` for each message and its decisions, in
    order, as one list (input records only: a redriven pending record loses its parking headers first, which
    ``records_for`` does)."""
    _, version, routed_at = envelopes.stamp(now_ms)
    records: list[OutRecord] = _native.input_records(
        messages,
        routed,
        envelopes.made,
        envelopes.headers_of,
        wire.SOURCE,
        version,
        routed_at,
        _WRITES_NOTHING,
        now_ms,
    )
    return records
