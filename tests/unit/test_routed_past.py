"""The offsets routed past a pending partition's head and their written form (router/routing/routed_past.py):
the set behaves as a set of offsets at or beyond the committed position, its written form reads back as the same
set in as many bytes as ``size`` says, ``fits_with`` tells the truth about the budget, and anything else in the
metadata reads as no set rather than a wrong one."""

from __future__ import annotations

import base64
import copy

from hypothesis import given, settings
from hypothesis import strategies as st

from subroute.routing.routed_past import BUDGET_BYTES, RoutedPast


def _payload(text: str) -> bytes:
    body = text[1:]
    return base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))


def _ranges(offsets: set[int]) -> list[tuple[int, int]]:
    found: list[tuple[int, int]] = []
    for offset in sorted(offsets):
        if found and found[-1][1] == offset:
            found[-1] = (found[-1][0], offset + 1)
        else:
            found.append((offset, offset + 1))
    return found


# Operations: ("add", offset relative to the base) or ("rebase", how far forward the position moves).
_operations = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.integers(0, 400)),
        st.tuples(st.just("add"), st.integers(0, 3)),  # neighbours: ranges join
        st.tuples(st.just("rebase"), st.integers(0, 60)),
    ),
    max_size=120,
)


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 10**12), _operations)
def test_the_set_and_its_written_form_follow_a_plain_set(
    base: int, operations: list[tuple[str, int]]
) -> None:
    past = RoutedPast(base)
    model: set[int] = set()
    for kind, amount in operations:
        if kind == "add":
            offset = past.base + amount
            past.add(offset)
            model.add(offset)
        else:
            past.rebase(past.base + amount)
            model = {o for o in model if o >= past.base}
        assert past.ranges() == _ranges(model)
        assert len(past) == len(model) and bool(past) == bool(model)
        assert all(o in past for o in model) and past.base - 1 not in past
        text = past.text()
        if not model:
            assert text == "" and past.size() == 0
            continue
        assert len(_payload(text)) == past.size()  # the shorter form, measured without writing it
        again = RoutedPast.parse(text, past.base)
        assert again is not None and again.ranges() == past.ranges() and again.size() == past.size()


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 3000), max_size=200), st.integers(0, 3000), st.integers(1, 60))
def test_fits_with_says_whether_one_more_offset_keeps_the_set_within_the_budget(
    offsets: list[int], extra: int, budget: int
) -> None:
    past = RoutedPast(0)
    for offset in offsets:
        past.add(offset)
    grown = copy.deepcopy(past)
    grown.add(extra)
    assert past.fits_with(extra, budget) == (grown.size() <= budget)


def test_the_written_form_is_the_shorter_of_run_lengths_and_a_bitmap() -> None:
    runs = RoutedPast(1000, [(1001, 1500), (90_000, 90_010)])  # two long runs far apart: run lengths
    assert runs.text().startswith("r") and runs.size() < 10
    bits = RoutedPast(0, [(o, o + 1) for o in range(1, 2000, 2)])  # every other offset: a bitmap
    assert bits.text().startswith("b") and bits.size() == 250


def test_the_budget_holds_900_scattered_records_or_any_pattern_within_23_000_offsets() -> None:
    scattered = RoutedPast(0)
    for i in range(900):  # one record every thousand offsets (3 bytes each), 900,000 offsets behind the head
        scattered.add(1000 * i + 5)
    assert scattered.size() <= BUDGET_BYTES
    close = RoutedPast(0, [(o, o + 1) for o in range(0, 2 * 1400, 2)])  # gaps below 128: 2 bytes a range
    assert close.size() <= BUDGET_BYTES
    dense = RoutedPast(0, [(o, o + 1) for o in range(0, 23_000, 2)])
    assert dense.size() <= BUDGET_BYTES and not dense.fits_with(BUDGET_BYTES * 8 + 1)


@given(st.text(max_size=60), st.integers(0, 10**6))
def test_anything_else_in_the_metadata_is_no_set_or_a_set_at_or_beyond_the_position(
    text: str, base: int
) -> None:
    found = RoutedPast.parse(text, base)
    if found is not None:
        assert found and found.ranges()[0][0] >= base
        again = RoutedPast.parse(found.text(), base)
        assert again is not None and again.ranges() == found.ranges()


def test_damaged_forms_are_refused() -> None:
    good = RoutedPast(10, [(12, 14), (20, 21)]).text()
    assert RoutedPast.parse(good, 10) is not None
    for bad in ("", "r", "x" + good[1:], good + "!", "r" + "_" * 40, "b", "bAA", "r" + "gA"):
        assert RoutedPast.parse(bad, 10) is None, bad
    assert RoutedPast.parse(good, -1) is None
