"""JMS LIKE without backtracking: ``%`` any run of characters, ``_`` exactly one, an optional escape character.

The pattern is split at its ``%`` into segments of literal characters and ``_``. The first segment must match at
the start of the text and the last at its end (unless the pattern begins or ends with ``%``); every segment in
between is placed at its leftmost match after the previous one. Leftmost placement never loses a match (it
leaves the most text for what follows), so one pass decides: at most len(text) x len(pattern) comparisons, and
``str.find`` does the scanning where a segment has no ``_``. A regular expression here backtracks, and a pattern
such as ``%a%a%a%a%a%a%b`` on a few kB of text then runs for minutes.
"""

from __future__ import annotations

from dataclasses import dataclass

Segment = tuple[str | None, ...]  # None: ``_``


@dataclass(frozen=True)
class LikePattern:
    segments: tuple[Segment, ...]  # at least one; the pattern's ``%`` are between them

    def matches(self, text: str) -> bool:
        segments = self.segments
        first, last = segments[0], segments[-1]
        if len(segments) == 1:
            return len(text) == len(first) and _matches_at(text, first, 0)
        if len(first) + len(last) > len(text) or not _matches_at(text, first, 0):
            return False
        end = len(text) - len(last)
        if not _matches_at(text, last, end):
            return False
        position = len(first)
        for segment in segments[1:-1]:
            found = _find(text, segment, position, end)
            if found < 0:
                return False
            position = found + len(segment)
        return True


def compile_like(pattern: str, escape: str | None = None) -> LikePattern:
    """The pattern as segments (the parser has refused a pattern that ends with its escape character)."""
    segments: list[Segment] = []
    current: list[str | None] = []
    index = 0
    while index < len(pattern):
        char = pattern[index]
        if escape is not None and char == escape and index + 1 < len(pattern):
            current.append(pattern[index + 1])
            index += 2
            continue
        if char == "%":
            segments.append(tuple(current))
            current = []
        else:
            current.append(None if char == "_" else char)
        index += 1
    segments.append(tuple(current))
    return LikePattern(tuple(segments))


def like(text: str, pattern: str, escape: str | None = None) -> bool:
    return compile_like(pattern, escape).matches(text)


def _matches_at(text: str, segment: Segment, start: int) -> bool:
    if start < 0 or start + len(segment) > len(text):
        return False
    return all(c is None or text[start + k] == c for k, c in enumerate(segment))


def _find(text: str, segment: Segment, start: int, stop: int) -> int:
    """The leftmost position >= start where ``segment`` matches and ends by ``stop``; -1 if none."""
    if not segment:
        return start
    if None not in segment:
        return text.find("".join(segment), start, stop)  # type: ignore[arg-type]  # no None here
    # Scan from the first literal character with str.find; positions without it cannot match.
    anchor = next((k for k, c in enumerate(segment) if c is not None), None)
    position = start
    while position + len(segment) <= stop:
        if anchor is not None:
            hit = text.find(segment[anchor], position + anchor, stop - len(segment) + anchor + 1)  # type: ignore[arg-type]
            if hit < 0:
                return -1
            position = hit - anchor
        if _matches_at(text, segment, position):
            return position
        position += 1
    return -1
