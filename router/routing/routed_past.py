"""The records of a pending partition routed past its head, and how the router's commit says which. Pure.

The router's committed position on a pending partition stays at its first record that still waits (its head),
so that no waiting record is ever skipped; records behind it that could go are routed all the same (records
waiting for different groups do not hold each other up: routing/passes.py). Their offsets lie beyond the
committed position, so the position cannot say they went: ``RoutedPast`` holds them, and the commit's metadata
carries them (``text``), so that a worker that takes the partition over, or a restart, passes over them.

The offsets are kept as sorted, disjoint ranges and written relative to the committed position in whichever of
two forms is shorter, base64url (no padding) after one letter:

* ``r``: run lengths, a gap then a length per range (the first gap counted from the position), each an unsigned
  LEB128 varint: a few bytes per range, however far behind the head;
* ``b``: a bitmap, one bit per offset from the position to the last range's end, least significant bit first:
  one byte per eight offsets, whatever the pattern.

The broker keeps at most ``offset.metadata.max.bytes`` (4096 by default) of a commit's metadata, shared with the
config version and the sweep mark. ``BUDGET_BYTES`` is what is left for the payload when those are at their
longest, below 4,000 characters in all: about 1,400 ranges whose lengths and gaps are below 128 offsets (two
bytes a range), about 950 spread out up to 16,000 offsets apart (three bytes), or any pattern within 23,000
offsets of the head (the bitmap). ``fits_with`` says whether one more offset keeps the set within it.
"""

from __future__ import annotations

import base64
import binascii
from bisect import bisect_right
from collections.abc import Iterable, Iterator

from subroute import wire

# The longest version part ("subroute.config-version=" and 20 digits: 44 characters), the longest sweep part
# (";subroute.sweep=", four fields of up to 20 characters and their commas: 99) and ";subroute.past=" with the
# form's letter (16) leave 3,841 characters below 4,000: 3,839 of base64 hold 2,879 bytes.
BUDGET_BYTES = 2_879
MAX_TEXT = wire.MAX_COMMIT_METADATA  # longer metadata than the broker keeps is not ours
_LETTER_RUNS, _LETTER_BITS = "r", "b"


def varint_size(value: int) -> int:
    """Bytes of ``value`` as an unsigned LEB128 varint."""
    return max(1, (value.bit_length() + 6) // 7)


def _varint(value: int, into: bytearray) -> None:
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            into.append(byte | 0x80)
        else:
            into.append(byte)
            return


def _read_varints(data: bytes) -> list[int] | None:
    """The varints of ``data``; None when it does not hold a whole number of them (or one is absurdly long)."""
    found: list[int] = []
    value = shift = 0
    for byte in data:
        value |= (byte & 0x7F) << shift
        shift += 7
        if shift > 63:
            return None
        if not byte & 0x80:
            found.append(value)
            value = shift = 0
    return found if shift == 0 else None


def _runs_cost(ranges: Iterable[tuple[int, int]], previous_end: int) -> int:
    cost = 0
    for start, end in ranges:
        cost += varint_size(start - previous_end) + varint_size(end - start)
        previous_end = end
    return cost


class RoutedPast:
    """Offsets routed past the head of one pending partition: sorted disjoint ranges ``[start, end)``, at or
    beyond ``base`` (the router's committed position, which the written form counts from)."""

    __slots__ = ("_base", "_ends", "_runs_bytes", "_starts")

    def __init__(self, base: int = 0, ranges: Iterable[tuple[int, int]] = ()) -> None:
        self._base = base
        self._starts: list[int] = []
        self._ends: list[int] = []
        self._runs_bytes = 0  # size of the run-length form, kept as offsets are added
        for start, end in ranges:
            for offset in range(start, end):
                self.add(offset)

    @property
    def base(self) -> int:
        return self._base

    def __contains__(self, offset: object) -> bool:
        if not isinstance(offset, int):
            return False
        i = bisect_right(self._starts, offset) - 1
        return i >= 0 and offset < self._ends[i]

    def __bool__(self) -> bool:
        return bool(self._starts)

    def __len__(self) -> int:
        """How many offsets."""
        return sum(end - start for start, end in zip(self._starts, self._ends, strict=True))

    def __iter__(self) -> Iterator[int]:
        for start, end in zip(self._starts, self._ends, strict=True):
            yield from range(start, end)

    def ranges(self) -> list[tuple[int, int]]:
        return list(zip(self._starts, self._ends, strict=True))

    def size(self) -> int:
        """Payload bytes of the shorter written form (0 when empty)."""
        if not self._starts:
            return 0
        return min(self._runs_bytes, self._bitmap_bytes(self._ends[-1]))

    def fits_with(self, offset: int, budget: int = BUDGET_BYTES) -> bool:
        """Whether the set with ``offset`` added still fits ``budget`` bytes of payload."""
        delta = self._runs_delta(offset)
        if delta is None:
            return self.size() <= budget
        last = max(offset + 1, self._ends[-1]) if self._ends else offset + 1
        return min(self._runs_bytes + delta, self._bitmap_bytes(last)) <= budget

    def add(self, offset: int) -> None:
        """``offset`` (at or beyond ``base``) was routed past the head."""
        if offset < self._base:
            raise ValueError(f"offset {offset} is below the committed position {self._base}")
        delta = self._runs_delta(offset)
        if delta is None:
            return
        self._runs_bytes += delta
        starts, ends = self._starts, self._ends
        i = bisect_right(starts, offset) - 1
        joins_left = i >= 0 and ends[i] == offset
        joins_right = i + 1 < len(starts) and starts[i + 1] == offset + 1
        if joins_left and joins_right:
            ends[i] = ends[i + 1]
            del starts[i + 1], ends[i + 1]
        elif joins_left:
            ends[i] = offset + 1
        elif joins_right:
            starts[i + 1] = offset
        else:
            starts.insert(i + 1, offset)
            ends.insert(i + 1, offset + 1)

    def rebase(self, base: int) -> None:
        """The committed position moved to ``base``: offsets below it are forgotten (the position says them).
        Costs what it forgets: the position moves forward one record at a time while nothing stays before it."""
        if base == self._base:
            return
        starts, ends = self._starts, self._ends
        if base < self._base:  # not how positions move; kept exact all the same
            self._base = base
            self._runs_bytes = _runs_cost(self.ranges(), base)
            return
        cut = bisect_right(ends, base)  # ranges ending at or below base go entirely
        touched = list(zip(starts[: cut + 1], ends[: cut + 1], strict=True))
        before = _runs_cost(touched, self._base)
        del starts[:cut], ends[:cut]
        if starts and starts[0] < base:
            starts[0] = base
        self._base = base
        self._runs_bytes += (_runs_cost([(starts[0], ends[0])], base) if starts else 0) - before

    def text(self) -> str:
        """The written form ("" when empty)."""
        if not self._starts:
            return ""
        last = self._ends[-1]
        if self._bitmap_bytes(last) < self._runs_bytes:
            bits = bytearray(self._bitmap_bytes(last))
            for start, end in self.ranges():
                for offset in range(start - self._base, end - self._base):
                    bits[offset >> 3] |= 1 << (offset & 7)
            return _LETTER_BITS + _b64(bytes(bits))
        data = bytearray()
        previous = self._base
        for start, end in self.ranges():
            _varint(start - previous, data)
            _varint(end - start, data)
            previous = end
        return _LETTER_RUNS + _b64(bytes(data))

    @classmethod
    def parse(cls, text: str, base: int) -> RoutedPast | None:
        """The set ``text`` wrote relative to ``base``; None for anything else (commit metadata is not ours to
        trust: another writer, a damaged record)."""
        if not text or len(text) > MAX_TEXT or base < 0:
            return None
        letter, body = text[0], text[1:]
        try:
            data = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
        except (binascii.Error, ValueError):
            return None
        if not data:
            return None
        found = cls(base)
        if letter == _LETTER_BITS:
            starts, ends = found._starts, found._ends
            for index, byte in enumerate(data):
                for bit in range(8):
                    if byte >> bit & 1:
                        offset = base + index * 8 + bit
                        if ends and ends[-1] == offset:
                            ends[-1] = offset + 1
                        else:
                            starts.append(offset)
                            ends.append(offset + 1)
            if not starts:
                return None
        elif letter == _LETTER_RUNS:
            numbers = _read_varints(data)
            if numbers is None or len(numbers) % 2:
                return None
            previous = base
            for gap, length in zip(numbers[::2], numbers[1::2], strict=True):
                if length == 0 or (gap == 0 and previous != base):  # not how ranges are written
                    return None
                found._starts.append(previous + gap)
                found._ends.append(previous + gap + length)
                previous += gap + length
        else:
            return None
        found._runs_bytes = _runs_cost(found.ranges(), base)
        return found

    def _bitmap_bytes(self, last_end: int) -> int:
        return (last_end - self._base + 7) // 8

    def _runs_delta(self, offset: int) -> int | None:
        """How the run-length form's size changes when ``offset`` is added; None when it is in already."""
        starts, ends = self._starts, self._ends
        i = bisect_right(starts, offset) - 1
        if i >= 0 and offset < ends[i]:
            return None
        low = max(i, 0)  # the ranges that may change: the one before the offset and the one after it
        high = min(i + 2, len(starts))
        previous = ends[low - 1] if low > 0 else self._base
        old = list(zip(starts[low:high], ends[low:high], strict=True))
        new = _merged([*old, (offset, offset + 1)])
        following = starts[high] if high < len(starts) else None  # its gap counts from the last end here
        before = _runs_cost(old, previous)
        after = _runs_cost(new, previous)
        if following is not None:
            before += varint_size(following - old[-1][1])
            after += varint_size(following - new[-1][1])
        return after - before


def _merged(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for start, end in sorted(ranges):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode("ascii").rstrip("=")


def past_of(metadata: str | None, position: int) -> RoutedPast | None:
    """The offsets routed past ``position`` (the committed offset) in a commit's metadata
    (``wire.version_metadata``); None when there are none."""
    text = wire.past_text_of(metadata)
    return RoutedPast.parse(text, position) if text is not None else None
