"""JMS LIKE without backtracking: ``%`` any run of characters, ``_`` exactly one, an optional escape character.

The pattern is split at its ``%`` into segments of literal characters and ``_``. The first segment must match at
the start of the text and the last at its end (unless the pattern begins or ends with ``%``); every segment in
between is placed at its leftmost match after the previous one. Leftmost placement never loses a match (it
leaves the most text for what follows), so one pass decides. ``str.find`` does the scanning where a segment has
no ``_``; a short segment with ``_`` is tried at each occurrence of one of its literal characters; a longer one is
found by a bit-parallel Shift-And scan (one big-integer step per character of text, whatever the segment's
length), since trying each position costs len(text) x len(segment): a 4 kB segment such as ``a___...___b`` on
10 kB of ``a`` took a second. A regular expression here backtracks, and a pattern such as ``%a%a%a%a%a%a%b`` on
a few kB of text then runs for minutes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

Segment = tuple[str | None, ...]  # None: ``_``
# Shift-And tables of a segment: bit i of masks[c] is set where unit i accepts c; the second item is the mask of
# a character the segment does not name (its ``_`` units).
ShiftAnd = tuple[dict[str, int], int]

# Segments with ``_`` and at most this many units are tried position by position (cheap at this length, and
# str.find skips to the candidates); longer ones are scanned with Shift-And.
SHORT_SEGMENT = 8


@dataclass(frozen=True)
class LikePattern:
    segments: tuple[Segment, ...]  # at least one; the pattern's ``%`` are between them
    # Aligned with segments: the tables of the long segments with ``_`` (derived from segments: not compared).
    scanners: tuple[ShiftAnd | None, ...] = field(default=(), compare=False, repr=False)

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
        scanners = self.scanners or (None,) * len(segments)
        for segment, scanner in zip(segments[1:-1], scanners[1:-1], strict=True):
            found = _find(text, segment, position, end, scanner)
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
    return LikePattern(tuple(segments), tuple(_shift_and(s) for s in segments))


def _shift_and(segment: Segment) -> ShiftAnd | None:
    if len(segment) <= SHORT_SEGMENT or None not in segment:
        return None
    any_mask = 0
    masks: dict[str, int] = {}
    for i, unit in enumerate(segment):
        if unit is None:
            any_mask |= 1 << i
        else:
            masks[unit] = masks.get(unit, 0) | 1 << i
    return {c: m | any_mask for c, m in masks.items()}, any_mask


def like(text: str, pattern: str, escape: str | None = None) -> bool:
    return compile_like(pattern, escape).matches(text)


def _matches_at(text: str, segment: Segment, start: int) -> bool:
    if start < 0 or start + len(segment) > len(text):
        return False
    return all(c is None or text[start + k] == c for k, c in enumerate(segment))


def _find(text: str, segment: Segment, start: int, stop: int, scanner: ShiftAnd | None = None) -> int:
    """The leftmost position >= start where ``segment`` matches and ends by ``stop``; -1 if none."""
    if not segment:
        return start
    if None not in segment:
        return text.find("".join(segment), start, stop)  # type: ignore[arg-type]  # no None here
    if scanner is not None:
        return _scan(text, len(segment), start, stop, scanner)
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


def _scan(text: str, length: int, start: int, stop: int, scanner: ShiftAnd) -> int:
    """Shift-And: bit i of ``state`` is set when the segment's first i + 1 units match the text just read. All
    matches are ``length`` long, so the first to end is the leftmost."""
    masks, any_mask = scanner
    get = masks.get
    done = 1 << (length - 1)
    state = 0
    for j in range(start, stop):
        state = ((state << 1) | 1) & get(text[j], any_mask)
        if state & done:
            return j + 1 - length
    return -1
