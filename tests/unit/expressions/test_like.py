"""LIKE without backtracking, checked against a plain dynamic-programming reference; hostile patterns bounded."""

from __future__ import annotations

import re
import time

from hypothesis import given, settings
from hypothesis import strategies as st

from subroute.expressions.like import like


def reference_like(text: str, pattern: str, escape: str | None) -> bool:
    """JMS LIKE by dynamic programming over (pattern position, text position): slow, obviously right."""
    tokens: list[tuple[str, str]] = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if escape is not None and c == escape and i + 1 < len(pattern):
            tokens.append(("lit", pattern[i + 1]))
            i += 2
            continue
        tokens.append(("any", "") if c == "%" else ("one", "") if c == "_" else ("lit", c))
        i += 1
    reachable = [True] + [False] * len(text)
    for kind, c in tokens:
        nxt = [False] * (len(text) + 1)
        for j in range(len(text) + 1):
            if kind == "any":
                nxt[j] = reachable[j] or (j > 0 and nxt[j - 1])
            elif j > 0 and reachable[j - 1] and (kind == "one" or text[j - 1] == c):
                nxt[j] = True
        reachable = nxt
    return reachable[len(text)]


ALPHABET = "ab%_!é"


@settings(max_examples=3000, deadline=None)
@given(
    st.text(alphabet="abé!", max_size=12),
    st.text(alphabet=ALPHABET, max_size=10),
    st.sampled_from([None, "!"]),
)
def test_like_equals_the_reference(text: str, pattern: str, escape: str | None) -> None:
    if escape is not None and pattern.endswith(escape):
        pattern += "a"  # the parser refuses a pattern ending in its escape
    assert like(text, pattern, escape) == reference_like(text, pattern, escape)


def test_jms_examples() -> None:
    assert like("12%3", "12!%3", "!") and not like("1234", "12!%3", "!")
    assert like("phone", "ph_ne") and not like("phoone", "ph_ne")
    assert like("", "%") and like("abc", "%") and not like("", "_")
    assert like("a\nb", "a_b")  # any character, newlines included
    assert like("axxbxxc", "a%b%c") and not like("axxcxxb", "a%b%c")


def test_hostile_patterns_finish_in_bounded_time() -> None:
    text = "a" * 3_000
    pattern = "%a%a%a%a%a%a%b"
    began = time.perf_counter()
    assert not like(text, pattern)
    assert not like("a" * 50_000 + "c", "%a_a_a_a_a%b")
    assert time.perf_counter() - began < 1.0  # the former regex did not finish in 30 s
    # The regex the old compiler built, for the record: it backtracks (not run on the long text).
    assert re.fullmatch(".*a.*a.*a.*a.*a.*a.*b", "a" * 20, re.DOTALL) is None


@settings(max_examples=1500, deadline=None)
@given(
    st.text(alphabet="ab", max_size=60),
    st.lists(st.one_of(st.just("%"), st.text(alphabet="ab_", min_size=1, max_size=30)), max_size=5).map(
        "".join
    ),
)
def test_long_segments_equal_the_reference(text: str, pattern: str) -> None:
    """Segments longer than SHORT_SEGMENT with ``_`` go through the Shift-And scan."""
    assert like(text, pattern) == reference_like(text, pattern, None)


def test_long_segment_with_underscores_is_linear() -> None:
    """Found by tests/reliability/test_long_input_fuzz.py: a segment of literals and ``_`` was tried at every
    position, len(text) x len(segment) steps (a 4,000-unit segment on 10,000 characters took a second)."""
    began = time.perf_counter()
    for length in (100, 1_000, 4_000):
        pattern = "%a" + "_" * (length - 2) + "b%"
        assert not like("a" * 10_000, pattern)
        assert like("a" * 10_000 + "b", pattern)
        assert like("a" * 5_000 + "b" + "a" * 5_000, "%a" + "_" * (length - 2) + "b%a%")
    assert not like("ab" * 50_000, "%" + "a_" * 2_000 + "b_b%")
    assert time.perf_counter() - began < 1.0
