"""A consumed batch's records read natively (router/routing/native/src/python_inputs.rs).

``envelope.InputRecord.of`` is the rule and the reference: a record's topic, headers (an empty list when it has
none), timestamp, value, partition, offset and key, as the client gives them. Read in Python, with the batch's
sorting into input and pending records and the offsets each input partition spans, a record cost the worker's
poll loop a dozen interpreter steps besides the client's own calls (issue 26); the native reading makes the
same objects without them. Tested against ``InputRecord.of`` by tests/unit/native/test_native_inputs.py.
"""

from __future__ import annotations

from collections.abc import Sequence

from subroute.routing.envelope import ConsumedRecord, InputRecord
from subroute.routing.native_boundary import _native


def read_inputs(batch: Sequence[ConsumedRecord], pending_topics: dict[str, str]) -> _native.ConsumedBatch:
    """``batch`` read: each record without error as ``InputRecord.of`` reads it, those of ``pending_topics``
    (topic -> app) apart from the others."""
    return _native.read_inputs(batch, InputRecord, pending_topics)
