"""Property test: the native assembly of a batch's routed records (router/routing/native_envelope.py) makes
exactly the records ``envelope.records_for`` makes for each input record, in order: the same topic, value, key,
headers (names, values and order) and timestamp, for every kind of decision (routed to a group or a priority
band, pending with or without a reason, dead-lettered, dropped, filtered), message-group keys, records without
a key, value or timestamp, and decisions met for the first time (made on a miss) or already made."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from subroute.config.model import Config
from subroute.routing.decisions import Action, Decision
from subroute.routing.envelope import Envelopes, InputRecord, records_for
from subroute.routing.native_envelope import input_records
from subroute.routing.native_routing import build_table

TABLE = build_table(Config())

NAMES = st.sampled_from(["app1", "billing", "é", "a.b-c_d"])
TEXT = st.text(min_size=1, max_size=12)

decisions = st.one_of(
    st.builds(
        Decision,
        NAMES,
        st.just(Action.ROUTE),
        group=NAMES,
        subscription=st.none() | TEXT,
        key=st.none() | st.binary(max_size=8),
        band=st.integers(0, 9),
    ),
    st.builds(
        Decision,
        NAMES,
        st.just(Action.PENDING),
        key=st.none() | st.binary(max_size=8),
        reason=st.none() | st.sampled_from(["capacity", "no-consumer"]),
    ),
    st.builds(Decision, NAMES, st.sampled_from([Action.DEAD_LETTER, Action.DROP]), reason=st.none() | TEXT),
    st.builds(Decision, NAMES, st.just(Action.FILTERED)),
)

headers = st.lists(
    st.tuples(
        st.sampled_from(["Region", "Customer", "subroute.expiration", "x"]), st.none() | st.binary(max_size=6)
    ),
    max_size=4,
)

messages = st.builds(
    InputRecord,
    st.sampled_from(["orders", "orders-eu", "t.x_y-z"]),
    headers,
    st.sampled_from([-1, 0, 1, 1_700_000_000_000]),
    st.none() | st.binary(max_size=10),
    st.integers(0, 2**31 - 1),
    st.integers(0, 2**62),
    st.none() | st.binary(max_size=6),
)


@settings(max_examples=400, deadline=None)
@given(
    batch=st.lists(st.tuples(messages, st.lists(decisions, max_size=4)), max_size=6),
    shared=st.lists(decisions, min_size=1, max_size=3),
    now_ms=st.sampled_from([0, 1_795_320_112_822]),
    warm=st.booleans(),
)
def test_the_native_assembly_makes_what_records_for_makes(
    batch: list[tuple[InputRecord, list[Decision]]], shared: list[Decision], now_ms: int, warm: bool
) -> None:
    # Decision objects shared by several records, as the tables make most of them: made once, then found.
    batch = [(m, [*ds, shared[i % len(shared)]]) for i, (m, ds) in enumerate(batch)]
    reference, native = Envelopes("p", TABLE), Envelopes("p", TABLE)
    if warm:
        for d in shared:
            native.headers_of(d)
    want = [r for m, ds in batch for r in records_for(m, ds, now_ms, False, reference)]
    have = input_records([m for m, _ in batch], [ds for _, ds in batch], now_ms, native)
    assert have == want
    assert [type(r) for r in have] == [tuple] * len(want)


def test_a_decision_made_on_a_miss_is_kept_for_the_next_record() -> None:
    decision = Decision("app1", Action.ROUTE, group="g1", subscription="x > 1")
    envelopes = Envelopes("p", TABLE)
    message = InputRecord("orders", [("x", b"2")], 5, b"v", 0, 7, b"k")
    (record,) = input_records([message], [[decision]], 9, envelopes)
    assert id(decision) in envelopes.made
    assert record[0] == "p.app1.g1"
    assert ("subroute.source", b"orders/0/7") in record[3]


def test_lists_of_different_lengths_are_refused() -> None:
    with pytest.raises(ValueError, match="1 decision lists for 0 messages"):
        input_records([], [[]], 0, Envelopes("p", TABLE))
