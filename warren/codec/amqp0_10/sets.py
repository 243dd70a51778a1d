"""``sequence-set`` and ``byte-ranges`` values, and RFC-1982 serial arithmetic for sequence numbers.

A 0-10 ``sequence-set`` is a list of inclusive ranges of 32-bit serial numbers (command ids,
transfer ids): ``[lower, upper]`` with ``upper`` reached from ``lower`` going forward, possibly
through the wrap from 0xFFFFFFFF to 0. ``SequenceSet`` keeps the ranges as they came (so it
encodes back to the same octets) and answers membership and iteration with serial arithmetic;
``SequenceSet.of(ids)`` builds the shortest set of ranges for some ids. ``ByteRanges`` is the
same for 64-bit byte offsets (no wrap).
"""

from __future__ import annotations

__all__ = ["SEQ_MOD", "serial_add", "serial_diff", "serial_lt", "SequenceSet", "ByteRanges"]

SEQ_MOD = 1 << 32
_HALF = 1 << 31


def serial_add(a: int, n: int) -> int:
    return (a + n) % SEQ_MOD


def serial_diff(a: int, b: int) -> int:
    """``a - b`` in serial arithmetic: a signed distance in (-2**31, 2**31]."""
    d = (a - b) % SEQ_MOD
    return d - SEQ_MOD if d > _HALF else d


def serial_lt(a: int, b: int) -> bool:
    return serial_diff(a, b) < 0


class SequenceSet:
    """Inclusive ranges of sequence numbers (see module docstring)."""

    __slots__ = ("ranges",)

    def __init__(self, ranges=()) -> None:
        self.ranges: list[tuple[int, int]] = [(int(lo), int(hi)) for lo, hi in ranges]

    @classmethod
    def of(cls, ids) -> SequenceSet:
        """The set of these ids (in any order), as the fewest ranges; ids are taken modulo 2**32
        and a run through the wrap is one range."""
        ordered = sorted({i % SEQ_MOD for i in ids})
        ranges: list[list[int]] = []
        for i in ordered:
            if ranges and ranges[-1][1] + 1 == i:
                ranges[-1][1] = i
            else:
                ranges.append([i, i])
        if len(ranges) > 1 and ranges[0][0] == 0 and ranges[-1][1] == SEQ_MOD - 1:
            lo = ranges.pop()[0]
            ranges[0][0] = lo
            ranges.append(ranges.pop(0))
        return cls((lo, hi) for lo, hi in ranges)

    def __contains__(self, n: int) -> bool:
        return any((n - lo) % SEQ_MOD <= (hi - lo) % SEQ_MOD for lo, hi in self.ranges)

    def __iter__(self):
        """Every id in the set, range by range (a range of 2**31 ids is iterated lazily)."""
        for lo, hi in self.ranges:
            for k in range((hi - lo) % SEQ_MOD + 1):
                yield (lo + k) % SEQ_MOD

    def __len__(self) -> int:
        return sum((hi - lo) % SEQ_MOD + 1 for lo, hi in self.ranges)

    def __bool__(self) -> bool:
        return bool(self.ranges)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SequenceSet) and self.ranges == other.ranges

    def __hash__(self):
        raise TypeError("unhashable type: SequenceSet")

    def __repr__(self) -> str:
        return "SequenceSet(" + ", ".join(f"{lo}" if lo == hi else f"{lo}-{hi}" for lo, hi in self.ranges) + ")"


class ByteRanges:
    """Inclusive ranges of 64-bit byte offsets (the ``byte-ranges`` type)."""

    __slots__ = ("ranges",)

    def __init__(self, ranges=()) -> None:
        self.ranges: list[tuple[int, int]] = [(int(lo), int(hi)) for lo, hi in ranges]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ByteRanges) and self.ranges == other.ranges

    def __hash__(self):
        raise TypeError("unhashable type: ByteRanges")

    def __repr__(self) -> str:
        return f"ByteRanges({self.ranges!r})"
