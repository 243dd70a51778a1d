"""The entry format of stream segments, which is also the BULK FORMAT of the HTTP records endpoint.

One entry per record::

    crc32 (uint32)  offset (uint64)  timestamp_ms (int64)  length (uint32)  record (length octets)

all big-endian, a 24-octet header (its layout: ``warren/codec/bulk_records.py``). ``crc32`` is the CRC-32 of the 20 header octets after it
followed by the record, so a flipped bit in the offset, the timestamp or the length is caught
like one in the record. A segment file is a 5-octet file header (record.py, kind ``b"S"``)
followed by entries and nothing else, which is why a range of entries can be served to a
reader exactly as it lies on disk, with one read and no re-encoding: the reader checks the
CRCs itself.

``EntryScan`` is the recovery scan (one tight loop that fills arrays, as ``record.SeqScan``);
``find_entry`` finds the next good entry after a damaged one (damage.py decides what is damage);
``parse_entries`` is what a client of the bulk format calls.
"""

from __future__ import annotations

import re
import struct
import zlib
from array import array

from warren.codec.bulk_records import ENTRY_HEADER, ENTRY_HEADER_SIZE

__all__ = ["KIND_STREAM", "append_entry", "encode_entry", "parse_entries", "EntryScan", "find_entry"]

KIND_STREAM = b"S"

_COVERED = struct.Struct(">QqI")        # the 20 header octets the crc covers

_crc32 = zlib.crc32
_NONZERO = re.compile(rb"[^\x00]")
_pack_header = ENTRY_HEADER.pack
_pack_covered = _COVERED.pack


def append_entry(buf: bytearray, offset: int, timestamp_ms: int, record) -> int:
    """Append one entry to ``buf``; returns its size (header + record).

    The record is appended after the header rather than joined with it first, so it is
    copied once, into the buffer.
    """
    n = len(record)
    buf += _pack_header(_crc32(record, _crc32(_pack_covered(offset, timestamp_ms, n))), offset, timestamp_ms, n)
    buf += record
    return ENTRY_HEADER_SIZE + n


def encode_entry(offset: int, timestamp_ms: int, record) -> bytes:
    buf = bytearray()
    append_entry(buf, offset, timestamp_ms, record)
    return bytes(buf)


def parse_entries(data, verify: bool = True) -> list[tuple[int, int, bytes]]:
    """(offset, timestamp_ms, record) of every entry of ``data``, in order.

    ValueError if an entry is cut short or (with ``verify``) fails its CRC: bulk data is whole
    entries only, so either means damage in transit or on disk.
    """
    mv = memoryview(data)
    size = len(mv)
    off = 0
    out = []
    unpack = ENTRY_HEADER.unpack_from
    try:
        while off < size:
            if off + ENTRY_HEADER_SIZE > size:
                raise ValueError(f"entry header cut short at {off}")
            crc, offset, ts, n = unpack(mv, off)
            start = off + ENTRY_HEADER_SIZE
            end = start + n
            if end > size:
                raise ValueError(f"entry at {off} cut short (needs {end - size} more octets)")
            if verify and _crc32(mv[start:end], _crc32(mv[off + 4:start])) != crc:
                raise ValueError(f"CRC mismatch in the entry of offset {offset} at {off}")
            out.append((offset, ts, bytes(mv[start:end])))
            off = end
    finally:
        mv.release()
    return out


class EntryScan:
    """Scan the entries of one segment file's octets, checking each, into arrays.

    Entries must carry consecutive offsets starting at ``base`` (a segment's offsets are dense:
    every append takes the next one). The scan stops at the first entry that is cut short,
    fails its CRC or has an unexpected offset. After ``run``: ``positions`` (file position of
    each entry's header), ``timestamps``, ``end`` (where the valid prefix ends) and ``error``
    (why the scan stopped early, None if it reached the end of the data).
    """

    __slots__ = ("positions", "timestamps", "end", "error")

    def __init__(self) -> None:
        self.positions = array("I")
        self.timestamps = array("q")
        self.end = 0
        self.error: str | None = None

    def run(self, buf, start: int, base: int) -> "EntryScan":
        mv = memoryview(buf)
        size = len(mv)
        off = self.end = start
        expect = base
        unpack = ENTRY_HEADER.unpack_from
        crc32 = _crc32
        add_pos, add_ts = self.positions.append, self.timestamps.append
        try:
            while off < size:
                if off + ENTRY_HEADER_SIZE > size:
                    self.error = f"torn entry header at {off}"
                    break
                crc, offset, ts, n = unpack(mv, off)
                end = off + ENTRY_HEADER_SIZE + n
                if end > size:
                    self.error = f"torn entry at {off} (needs {end - size} more octets)"
                    break
                if crc32(mv[off + ENTRY_HEADER_SIZE:end], crc32(mv[off + 4:off + ENTRY_HEADER_SIZE])) != crc:
                    self.error = f"CRC mismatch in entry at {off}"
                    break
                if offset != expect:
                    self.error = f"offset {offset} at {off}, expected {expect}"
                    break
                add_pos(off)
                add_ts(ts)
                expect += 1
                off = end
        finally:
            mv.release()
        self.end = off
        return self


def find_entry(buf, bad: int, expect: int) -> tuple[int, int] | None:
    """(file position, offset) of the first valid entry after the bad one at ``bad``, or None.

    ``expect`` is the offset the bad entry should have carried. A candidate's offset must lie
    between ``expect`` and ``expect`` plus the number of 24-octet headers that fit between
    ``bad`` and it (every lost entry took at least that much room), its length must fit, and
    its CRC must check: a random match needs all three, so garbage is not taken for an entry.
    The position the bad entry's own length points to is tried first (a damaged record costs
    that entry only, and nothing inside it is looked at).

    Speed (recovery of a damaged segment): only positions whose offset field starts with the
    octets every allowed offset shares are looked at (``bytes.find``), and a run of zeros (a
    zero-filled tail) is stepped over whole. Measured here: 1 ms per MiB of random octets, 50 ms
    per MiB of zeros (3 s and 1.5 s looking at every position); octets full of short runs of
    zeros are the slow case, about 2 s per MiB. A scan ends at the first good entry, so it covers
    the damaged stretch, not the file.
    """
    mv = memoryview(buf)
    size = len(mv)
    unpack = ENTRY_HEADER.unpack_from
    crc32 = _crc32

    def good(pos: int) -> int | None:
        crc, offset, ts, n = unpack(mv, pos)
        if not expect <= offset <= expect + (pos - bad) // ENTRY_HEADER_SIZE:
            return None
        end = pos + ENTRY_HEADER_SIZE + n
        if end > size or crc32(mv[pos + ENTRY_HEADER_SIZE:end], crc32(mv[pos + 4:pos + ENTRY_HEADER_SIZE])) != crc:
            return None
        return offset

    try:
        last = size - ENTRY_HEADER_SIZE
        if bad + ENTRY_HEADER_SIZE <= size:
            skip = bad + ENTRY_HEADER_SIZE + unpack(mv, bad)[3]
            if skip <= last:
                offset = good(skip)
                if offset is not None:
                    return skip, offset
        # the octets shared by every offset a candidate may carry: its offset field starts with them
        low = expect.to_bytes(8, "big")
        high = (expect + max(size - bad, 0) // ENTRY_HEADER_SIZE).to_bytes(8, "big")
        shared = 0
        while shared < 8 and low[shared] == high[shared]:
            shared += 1
        prefix = low[:shared]
        search = buf if hasattr(buf, "find") else bytes(buf)
        pos = bad + 1
        while pos <= last:
            if prefix:
                k = search.find(prefix, pos + 4)
                if k < 0:
                    return None
                pos = k - 4
                if pos > last:
                    return None
            if not any(mv[pos:pos + ENTRY_HEADER_SIZE]):  # zeros: no header here, nor until they end
                m = _NONZERO.search(search, pos)
                nonzero = m.start() if m is not None else size
                pos = max(pos + 1, nonzero - ENTRY_HEADER_SIZE + 1)
                continue
            offset = good(pos)
            if offset is not None:
                return pos, offset
            pos += 1
        return None
    finally:
        mv.release()
