"""Record framing shared by every Warren store file.

A file is a 5-octet format header followed by records::

    file header : b"WRN"  version (1 octet)  kind (1 octet: b"M" messages, b"A" acks, b"D" definitions)
    record      : type (1 octet)  length (uint32, big-endian)  crc (uint32)  payload (length octets)

``crc`` is the CRC-32 of the type and length octets followed by the payload. Covering the
header as well as the payload means a flipped bit in the type (an ack turning into a
delivered mark) or in the length is caught like a flipped bit in the payload.

What a crash leaves behind: files are only ever appended to, so the damage is confined to the
end of a file. A write that did not reach the disk completely leaves a record whose header or
payload is cut short (torn), and on file systems that update the file size before the data
(ext4 ``data=writeback``, XFS) the tail can read back as zeros. Neither passes the checks
below (type 0 is never valid, the length runs past the end, or the CRC does not match).
``Scan`` yields every record up to the first one that fails them and records where the valid
prefix ends (``Scan.end``).

Damage in the middle (a flipped bit, a lost sector in synced data) is another matter: the
records after it are good and were acknowledged. ``find_seq_record`` finds the next record
boundary again: the first offset after the bad record where a record's type, length, seq and
CRC all check out (the offset its own length field points to is tried first, so a damaged
payload costs that one record and nothing inside it is looked at). A random match needs the
32-bit CRC over the header and payload to agree as well as the type and bounds, so garbage is
not taken for a record (about one chance in 2^32 per candidate offset that passes the cheap
checks). damage.py decides what is a torn tail and what is damage, and keeps the file aside.
"""

from __future__ import annotations

import struct
import zlib
from array import array

__all__ = [
    "MAGIC", "VERSION", "FILE_HEADER_SIZE", "HEADER", "HEADER_SIZE", "KIND_MESSAGES", "KIND_ACKS",
    "KIND_DEFINITIONS", "T_MESSAGE", "T_ACK", "T_DELIVERED", "T_RETURNED", "T_DEFINITION", "FormatError",
    "file_header", "check_file_header", "encode_record", "append_record", "append_seq_record", "Scan", "SeqScan",
    "verify", "find_seq_record",
]

MAGIC = b"WRN"
VERSION = 1
FILE_HEADER_SIZE = 5

KIND_MESSAGES = b"M"
KIND_ACKS = b"A"
KIND_DEFINITIONS = b"D"

# Record types. Zero is deliberately unused: a zero-filled tail must never parse as a record.
T_MESSAGE = 0x4D     # "M": uint64 seq + the caller's record
T_ACK = 0x41         # "A": uint64 seq
T_DELIVERED = 0x44   # "D": uint64 seq
T_RETURNED = 0x52    # "R": uint64 seq; the message came back (a quorum queue's delivery count + 1)
T_DEFINITION = 0x4A  # "J": a JSON definition record

HEADER = struct.Struct(">BII")  # type, payload length, crc
HEADER_SIZE = HEADER.size       # 9
_TYPE_LEN = struct.Struct(">BI")
_HEADER_SEQ = struct.Struct(">BIIQ")  # a header and the uint64 seq that starts message and ack payloads
_TYPE_LEN_SEQ = struct.Struct(">BIQ")

_crc32 = zlib.crc32


class FormatError(Exception):
    """A file that is not a Warren store file of the expected kind and version."""


def file_header(kind: bytes) -> bytes:
    return MAGIC + bytes((VERSION,)) + kind


def check_file_header(buf, kind: bytes) -> bool:
    """True if ``buf`` starts with a complete header of ``kind``.

    False if the header itself is torn: what there is of it is a prefix of the header followed
    by nothing or by zeros (the file size reached the disk, the data did not). None of the
    records of such a file can have been synced (a sync covers the header with them), so the
    caller treats it as empty. Anything else raises FormatError: it is not our file, or it is
    a version we cannot read, and guessing would lose data.
    """
    want = file_header(kind)
    head = bytes(buf[:FILE_HEADER_SIZE])
    if head == want:
        return True
    k = 0
    while k < len(head) and head[k] == want[k]:
        k += 1
    if not any(head[k:]):  # a prefix of the header, then nothing or zeros
        return False
    if head[:3] == MAGIC and len(head) >= 4 and head[3] != VERSION:
        raise FormatError(f"unsupported store format version {head[3]} (this is {VERSION})")
    raise FormatError(f"not a Warren store file of kind {kind!r}: header {head!r}")


def _crc(rtype: int, payload_len: int, *parts) -> int:
    crc = _crc32(_TYPE_LEN.pack(rtype, payload_len))
    for p in parts:
        crc = _crc32(p, crc)
    return crc


def encode_record(rtype: int, payload: bytes) -> bytes:
    """One complete record (header + payload)."""
    return HEADER.pack(rtype, len(payload), _crc(rtype, len(payload), payload)) + payload


def append_record(buf: bytearray, rtype: int, *parts) -> int:
    """Append one record whose payload is the concatenation of ``parts`` to ``buf``.

    Returns the payload length. The parts are appended one after the other rather than joined
    first, so a message body is copied once (into the buffer) and not twice.
    """
    n = 0
    for p in parts:
        n += len(p)
    buf += HEADER.pack(rtype, n, _crc(rtype, n, *parts))
    for p in parts:
        buf += p
    return n


def append_seq_record_py(buf: bytearray, rtype: int, seq: int, rest=b"") -> int:
    """``append_record(buf, rtype, <seq as uint64>, rest)``, with fewer steps (the hot path of appends).
    ``append_seq_record`` is this, compiled when warren/store/_records.c is built (the same octets)."""
    n = 8 + len(rest)
    buf += _HEADER_SEQ.pack(rtype, n, _crc32(rest, _crc32(_TYPE_LEN_SEQ.pack(rtype, n, seq))), seq)
    buf += rest
    return n


try:  # the framing and CRC of every message and ack record in C: ~8 % of a persistent message's CPU
    from warren.store._records import append_seq_record
except ImportError:
    append_seq_record = append_seq_record_py


def verify(buf, off: int) -> tuple[int, int, int]:
    """Check the record at ``off`` of ``buf``: (type, payload offset, payload length) or ValueError."""
    if off + HEADER_SIZE > len(buf):
        raise ValueError("record header runs past the end")
    rtype, n, crc = HEADER.unpack_from(buf, off)
    start = off + HEADER_SIZE
    if rtype == 0 or start + n > len(buf):
        raise ValueError("torn record")
    if _crc32(memoryview(buf)[start:start + n], _crc32(_TYPE_LEN.pack(rtype, n))) != crc:
        raise ValueError("record CRC mismatch")
    return rtype, start, n


class Scan:
    """Iterate over the valid records of ``buf`` from ``start``: yields (type, payload offset, length).

    Stops at the end of the buffer or at the first record that is torn or fails its CRC (or
    whose type is not in ``types``, when given). Afterwards ``end`` is the offset where the
    valid prefix ends and ``error`` says why the scan stopped early (None if it reached the end).
    """

    __slots__ = ("buf", "start", "types", "end", "error")

    def __init__(self, buf, start: int = FILE_HEADER_SIZE, types: frozenset | None = None) -> None:
        self.buf = buf
        self.start = start
        self.types = types
        self.end = start
        self.error: str | None = None

    def __iter__(self):
        buf = self.buf
        mv = memoryview(buf)
        size = len(buf)
        off = self.start
        types = self.types
        unpack = HEADER.unpack_from
        pack_tl = _TYPE_LEN.pack
        crc32 = _crc32
        try:
            while off < size:
                if off + HEADER_SIZE > size:
                    self.error = f"torn record header at {off}"
                    return
                rtype, n, crc = unpack(buf, off)
                start = off + HEADER_SIZE
                end = start + n
                if rtype == 0 or (types is not None and rtype not in types):
                    self.error = f"invalid record type {rtype} at {off}"
                    return
                if end > size:
                    self.error = f"torn record at {off} (needs {end - size} more octets)"
                    return
                if crc32(mv[start:end], crc32(pack_tl(rtype, n))) != crc:
                    self.error = f"CRC mismatch in record at {off}"
                    return
                yield rtype, start, n
                off = end
                self.end = off
        finally:
            mv.release()


class SeqScan:
    """``Scan`` for records whose payload starts with a uint64 seq (message and ack records).

    The same checks, but in one tight loop that fills arrays instead of yielding tuples:
    recovery reads millions of these, and this is nearly twice as fast. After ``run``:
    ``types`` (one octet per record), ``seqs``, ``offsets`` (of the record header) and
    ``lengths`` (of the payload after the seq), plus ``end`` and ``error`` as for ``Scan``.
    """

    __slots__ = ("types", "seqs", "offsets", "lengths", "end", "error")

    def __init__(self) -> None:
        self.types = bytearray()
        self.seqs = array("Q")
        self.offsets = array("I")
        self.lengths = array("I")
        self.end = FILE_HEADER_SIZE
        self.error: str | None = None

    def run(self, buf, start: int, types: frozenset) -> "SeqScan":
        mv = memoryview(buf)
        size = len(buf)
        off = self.end = start
        unpack = _HEADER_SEQ.unpack_from
        pack_tl = _TYPE_LEN.pack
        crc32 = _crc32
        add_type, add_seq = self.types.append, self.seqs.append
        add_off, add_len = self.offsets.append, self.lengths.append
        try:
            while off < size:
                if off + HEADER_SIZE + 8 > size:
                    self.error = f"torn record at {off}"
                    break
                rtype, n, crc, seq = unpack(buf, off)
                end = off + HEADER_SIZE + n
                if rtype not in types or n < 8:
                    self.error = f"invalid record (type {rtype}, length {n}) at {off}"
                    break
                if end > size:
                    self.error = f"torn record at {off} (needs {end - size} more octets)"
                    break
                if crc32(mv[off + HEADER_SIZE:end], crc32(pack_tl(rtype, n))) != crc:
                    self.error = f"CRC mismatch in record at {off}"
                    break
                add_type(rtype)
                add_seq(seq)
                add_off(off)
                add_len(n - 8)
                off = end
        finally:
            mv.release()
        self.end = off
        return self


def find_seq_record(buf, bad: int, types: frozenset, after_seq: int = -1, exact_length: int | None = None,
                    limit: int | None = None) -> int | None:
    """The offset of the first whole, valid seq record after the bad record at ``bad``, or None.

    A candidate must have a type in ``types``, a payload of at least the seq (``exact_length``
    octets when given: ack records are always 8), fit in ``buf`` (or below ``limit``), carry a
    seq above ``after_seq`` (appends enforce increasing seqs in message files) and pass its CRC.
    The offset the bad record's own length points to is tried first: when only the payload is
    damaged, that is the next record and nothing inside the damaged payload is looked at.
    """
    size = len(buf) if limit is None else limit
    mv = memoryview(buf)
    unpack = _HEADER_SEQ.unpack_from
    pack_tl = _TYPE_LEN.pack
    crc32 = _crc32
    min_n = 8 if exact_length is None else exact_length

    def good(off: int) -> bool:
        if off + HEADER_SIZE + 8 > size:
            return False
        rtype, n, crc, seq = unpack(buf, off)
        if rtype not in types or n < min_n or (exact_length is not None and n != exact_length):
            return False
        end = off + HEADER_SIZE + n
        if end > size or seq <= after_seq:
            return False
        return crc32(mv[off + HEADER_SIZE:end], crc32(pack_tl(rtype, n))) == crc

    try:
        if bad + HEADER_SIZE <= size:
            skip = bad + HEADER_SIZE + HEADER.unpack_from(buf, bad)[1]
            if skip < size and good(skip):
                return skip
        type_octets = bytes(sorted(types))
        off = bad + 1
        while off + HEADER_SIZE + 8 <= size:
            # only offsets holding a valid type octet can start a record: find the nearest
            nxt = -1
            for t in type_octets:
                k = buf.find(bytes((t,)), off, size)
                if k >= 0 and (nxt < 0 or k < nxt):
                    nxt = k
            if nxt < 0:
                return None
            if good(nxt):
                return nxt
            off = nxt + 1
        return None
    finally:
        mv.release()
