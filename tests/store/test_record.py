"""Record framing (warren.store.record): round trips, torn and corrupt tails, file headers."""

from __future__ import annotations

import zlib

import pytest
from hypothesis import given, settings, strategies as st

from warren.store.record import (
    FILE_HEADER_SIZE, HEADER, HEADER_SIZE, KIND_ACKS, KIND_MESSAGES, T_ACK, T_DEFINITION, T_DELIVERED, T_MESSAGE,
    FormatError, Scan, SeqScan, append_record, append_seq_record, append_seq_record_py, check_file_header, encode_record, file_header, verify,
)

TYPES = (T_MESSAGE, T_ACK, T_DELIVERED, T_DEFINITION)
records = st.lists(st.tuples(st.sampled_from(TYPES), st.binary(max_size=300)), max_size=20)


def build(recs, kind=KIND_MESSAGES) -> bytes:
    return file_header(kind) + b"".join(encode_record(t, p) for t, p in recs)


def scan_all(buf, **kw):
    s = Scan(buf, **kw)
    return [(t, bytes(buf[o:o + n])) for t, o, n in s], s


# --- file header -----------------------------------------------------------------------------

def test_file_header_layout():
    assert file_header(KIND_MESSAGES) == b"WRN\x01M"
    assert len(file_header(KIND_ACKS)) == FILE_HEADER_SIZE


def test_check_file_header():
    assert check_file_header(b"WRN\x01M" + b"rest", KIND_MESSAGES)
    for torn in (b"", b"W", b"WR", b"WRN", b"WRN\x01", b"\x00" * 5, b"\x00\x00", b"W\x00\x00\x00\x00", b"WRN\x00"):
        assert check_file_header(torn, KIND_MESSAGES) is False
    with pytest.raises(FormatError, match="kind"):
        check_file_header(b"WRN\x01A", KIND_MESSAGES)
    with pytest.raises(FormatError, match="version 2"):
        check_file_header(b"WRN\x02M", KIND_MESSAGES)
    with pytest.raises(FormatError):
        check_file_header(b"hello world", KIND_MESSAGES)


# --- round trips ---------------------------------------------------------------------------------

@given(records)
@settings(max_examples=200, deadline=None)
def test_round_trip(recs):
    buf = build(recs)
    got, s = scan_all(buf)
    assert got == recs
    assert s.end == len(buf) and s.error is None


@pytest.mark.parametrize("impl", [append_seq_record, append_seq_record_py], ids=["in-use", "pure-python"])
@given(rtype=st.sampled_from(TYPES), seq=st.integers(0, 2**64 - 1),
       rest=st.one_of(st.binary(max_size=100), st.binary(min_size=1000, max_size=3000)))
def test_append_seq_record(impl, rtype, seq, rest):
    """Both the compiled framing (warren/store/_records.c, its own CRC-32) and the Python one
    write exactly what encode_record (zlib's CRC-32) does."""
    buf = bytearray(b"x")
    assert impl(buf, rtype, seq, rest) == 8 + len(rest)
    assert bytes(buf) == b"x" + encode_record(rtype, seq.to_bytes(8, "big") + rest)


def test_the_compiled_framing_is_in_use_where_built():
    speedups = pytest.importorskip("warren.store._records", reason="not built (setup.py)")
    assert append_seq_record is speedups.append_seq_record


@given(st.lists(st.binary(max_size=50), max_size=5))
def test_append_record_parts_equal_joined(parts):
    buf = bytearray()
    n = append_record(buf, T_MESSAGE, *parts)
    assert n == sum(map(len, parts))
    assert bytes(buf) == encode_record(T_MESSAGE, b"".join(parts))


def test_header_layout_and_crc_covers_type_and_length():
    rec = encode_record(T_ACK, b"12345678")
    t, n, crc = HEADER.unpack_from(rec)
    assert (t, n, len(rec)) == (T_ACK, 8, HEADER_SIZE + 8)
    assert crc == zlib.crc32(rec[:5] + rec[HEADER_SIZE:])
    # the same payload with another type does not verify: a flipped type bit is caught
    forged = bytes((T_DELIVERED,)) + rec[1:]
    with pytest.raises(ValueError, match="CRC"):
        verify(forged, 0)
    assert verify(rec, 0) == (T_ACK, HEADER_SIZE, 8)


def test_empty_payload():
    buf = build([(T_ACK, b""), (T_ACK, b"x")])
    assert scan_all(buf)[0] == [(T_ACK, b""), (T_ACK, b"x")]


# --- damage at the end -----------------------------------------------------------------------------

RECS = [(T_MESSAGE, b"first record"), (T_ACK, b"\x00" * 8), (T_MESSAGE, bytes(range(40)))]


def test_truncated_at_every_offset_of_last_record():
    full = build(RECS)
    last_start = len(full) - HEADER_SIZE - len(RECS[-1][1])
    for cut in range(last_start, len(full)):
        got, s = scan_all(full[:cut])
        assert got == RECS[:-1], cut
        assert s.end == last_start
        assert (s.error is None) == (cut == last_start)
        if cut > last_start:
            assert "torn" in s.error


@pytest.mark.parametrize("pos", range(HEADER_SIZE + 40))
def test_flipped_byte_in_last_record_drops_it(pos):
    full = bytearray(build(RECS))
    last_start = len(full) - HEADER_SIZE - 40
    full[last_start + pos] ^= 0x40
    got, s = scan_all(bytes(full))
    assert got == RECS[:-1]
    assert s.end == last_start and s.error


def test_flipped_byte_in_middle_stops_there():
    full = bytearray(build(RECS))
    full[FILE_HEADER_SIZE + HEADER_SIZE + 3] ^= 1  # inside the first payload
    got, s = scan_all(bytes(full))
    assert got == [] and s.end == FILE_HEADER_SIZE and "CRC" in s.error


@pytest.mark.parametrize("zeros", [1, 8, 9, 17, 4096])
def test_zero_tail_is_ignored(zeros):
    full = build(RECS)
    got, s = scan_all(full + bytes(zeros))
    assert got == RECS and s.end == len(full)
    assert s.error


def test_types_filter():
    buf = build([(T_ACK, b"a"), (T_MESSAGE, b"m"), (T_ACK, b"b")])
    got, s = scan_all(buf, types=frozenset((T_ACK,)))
    assert got == [(T_ACK, b"a")] and "invalid record type" in s.error


def test_absurd_length_is_torn_not_a_memory_bomb():
    buf = file_header(KIND_MESSAGES) + HEADER.pack(T_MESSAGE, 0xFFFFFFFF, 0) + b"abc"
    got, s = scan_all(buf)
    assert got == [] and s.end == FILE_HEADER_SIZE


def test_scan_accepts_bytearray_and_memoryview():
    buf = build(RECS)
    assert scan_all(bytearray(buf))[0] == RECS
    assert scan_all(memoryview(buf))[0] == RECS


# --- SeqScan: the fast path recovery uses -----------------------------------------------------------

seq_records = st.lists(st.tuples(st.sampled_from((T_MESSAGE, T_ACK)), st.integers(0, 2**64 - 1),
                                 st.binary(max_size=40)), max_size=15)


@given(seq_records, st.integers(0, 2000), st.integers(0, 255), st.booleans())
@settings(max_examples=300, deadline=None)
def test_seq_scan_agrees_with_scan(recs, cut, flip, damage):
    buf = bytearray(file_header(KIND_MESSAGES) + b"".join(
        encode_record(t, q.to_bytes(8, "big") + p) for t, q, p in recs))
    if damage and len(buf) > FILE_HEADER_SIZE:
        pos = FILE_HEADER_SIZE + cut % (len(buf) - FILE_HEADER_SIZE)
        buf[pos] ^= flip or 1
        del buf[len(buf) - cut % 7:]
    buf = bytes(buf)
    types = frozenset((T_MESSAGE, T_ACK))
    ref = Scan(buf, types=types)
    want = [(t, int.from_bytes(buf[o:o + 8], "big"), o - HEADER_SIZE, n - 8) for t, o, n in ref if n >= 8]
    s = SeqScan().run(buf, FILE_HEADER_SIZE, types)
    assert list(zip(s.types, s.seqs, s.offsets, s.lengths)) == want
    assert s.end == ref.end and (s.error is None) == (ref.error is None)
