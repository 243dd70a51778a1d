"""Segment files (warren.store.segment): buffering, loading, tail repair."""

from __future__ import annotations

import sys

import pytest

from warren.store.record import (
    FILE_HEADER_SIZE, HEADER_SIZE, KIND_MESSAGES, T_MESSAGE, FormatError, encode_record, file_header,
)
from warren.store.segment import LogFile, Segment, segment_name


def write_segment(path, seqs, size=30) -> Segment:
    seg = Segment(1, str(path), seqs[0] if seqs else 1)
    for s in seqs:
        seg.add(s, bytes([s % 256]) * size)
    data = seg.file.take()
    fd, created = seg.file.ensure_fd()
    assert created
    seg.file.write_out(fd, data)
    seg.file.done(len(data))
    seg.file.close()
    return seg


def test_segment_name():
    assert segment_name("msgs", 1) == "msgs.0000000001"
    assert segment_name("acks", 1234567890) == "acks.1234567890"


def test_logfile_buffers_until_written(tmp_path):
    lf = LogFile(str(tmp_path / "f"), KIND_MESSAGES)
    off, n = lf.add(T_MESSAGE, 7, b"abcdef")
    assert (off, n) == (FILE_HEADER_SIZE, 14)
    assert not (tmp_path / "f").exists()  # nothing touches the disk before a flush
    assert lf.memory_part(off, HEADER_SIZE + 14)[HEADER_SIZE:] == (7).to_bytes(8, "big") + b"abcdef"
    assert lf.memory_part(off, HEADER_SIZE + 14) == encode_record(T_MESSAGE, (7).to_bytes(8, "big") + b"abcdef")
    data = lf.take()
    assert data.startswith(file_header(KIND_MESSAGES)) and lf.inflight == [data]
    lf.add(T_MESSAGE, 8, b"more")  # while the first part is in flight
    assert lf.memory_part(off, HEADER_SIZE + 14)[HEADER_SIZE + 8:] == b"abcdef"
    fd, _ = lf.ensure_fd()
    lf.write_out(fd, data)
    lf.done(len(data))
    assert lf.memory_part(off, 1) is None  # now in the file
    assert lf.memory_part(lf.written, HEADER_SIZE + 12)[HEADER_SIZE + 8:] == b"more"
    assert (tmp_path / "f").read_bytes() == data
    lf.close()


def test_logfile_reads_two_buffers_in_flight_until_each_is_written(tmp_path):
    """A group commit's buffers wait on the FsyncWorker while the next takes more (queue_store.py)."""
    lf = LogFile(str(tmp_path / "f"), KIND_MESSAGES)
    first, _ = lf.add(T_MESSAGE, 1, b"one")
    a = lf.take()
    second, _ = lf.add(T_MESSAGE, 2, b"two")
    b = lf.take()
    third, _ = lf.add(T_MESSAGE, 3, b"three")
    assert lf.inflight == [a, b]
    for off, seq, body in ((first, 1, b"one"), (second, 2, b"two"), (third, 3, b"three")):
        n = HEADER_SIZE + 8 + len(body)
        assert lf.memory_part(off, n) == encode_record(T_MESSAGE, seq.to_bytes(8, "big") + body)
    assert lf.unwritten(second, lf.size) == bytes(b) + bytes(lf.pending)
    assert lf.unwritten(first + 3, second + 2) == bytes(a)[first + 3:] + bytes(b)[:2]
    fd, _ = lf.ensure_fd()
    lf.write_out(fd, a)
    lf.done(len(a))
    assert lf.memory_part(first, 1) is None and lf.inflight == [b]
    assert lf.memory_part(second, HEADER_SIZE + 11)[HEADER_SIZE + 8:] == b"two"
    lf.write_out(fd, b)
    lf.done(len(b))
    assert lf.memory_part(second, 1) is None and lf.inflight == []
    assert lf.memory_part(third, HEADER_SIZE + 13)[HEADER_SIZE + 8:] == b"three"
    lf.close()


def test_load_round_trip(tmp_path):
    path = tmp_path / "msgs.0000000001"
    write_segment(path, [3, 5, 9])
    seg, dropped, _ = Segment.load(1, str(path))
    assert dropped == 0
    assert list(seg.seqs) == [3, 5, 9] and seg.live == 3 and seg.first == 3 and seg.last == 9
    assert seg.index(5) == 1 and seg.index(4) == -1 and seg.index(10) == -1
    data = path.read_bytes()
    off, n = seg.span(2)
    assert seg.record_at(data[off:off + n], 0) == bytes([9]) * 30


def test_truncation_at_every_offset_of_last_record(tmp_path):
    src = tmp_path / "src"
    write_segment(src, [1, 2, 3, 4])
    full = src.read_bytes()
    rec_len = HEADER_SIZE + 8 + 30
    last_start = len(full) - rec_len
    for cut in range(last_start, len(full)):  # inside the header and inside the payload
        path = tmp_path / f"cut{cut}"
        path.write_bytes(full[:cut])
        seg, dropped, _ = Segment.load(1, str(path))
        assert list(seg.seqs) == [1, 2, 3], cut
        assert dropped == cut - last_start
        assert path.stat().st_size == last_start  # cut back to the last valid record
        path.unlink()


def test_flipped_byte_drops_last_record(tmp_path):
    path = tmp_path / "msgs"
    write_segment(path, [1, 2, 3])
    data = bytearray(path.read_bytes())
    data[-15] ^= 0xFF
    path.write_bytes(bytes(data))
    seg, dropped, _ = Segment.load(1, str(path))
    assert list(seg.seqs) == [1, 2] and dropped == HEADER_SIZE + 8 + 30


def test_zero_tail_ignored_and_cut(tmp_path):
    path = tmp_path / "msgs"
    write_segment(path, [1, 2])
    size = path.stat().st_size
    with open(path, "ab") as f:
        f.write(bytes(8192))
    seg, dropped, _ = Segment.load(1, str(path))
    assert list(seg.seqs) == [1, 2] and dropped == 8192 and path.stat().st_size == size


@pytest.mark.parametrize("content", [b"", b"WR", b"WRN\x01", b"\x00" * 5, b"\x00" * 100])
def test_torn_file_header_means_empty(tmp_path, content):
    path = tmp_path / "msgs"
    path.write_bytes(content)
    seg, dropped, _ = Segment.load(1, str(path))
    assert len(seg) == 0 and dropped == len(content)
    assert not path.exists() and not seg.file.created  # recreated at its next flush


def test_foreign_file_refused(tmp_path):
    path = tmp_path / "msgs"
    path.write_bytes(b"PK\x03\x04 not ours")
    with pytest.raises(FormatError):
        Segment.load(1, str(path))


def test_out_of_order_seq_is_damage(tmp_path):
    path = tmp_path / "msgs"
    seg = Segment(1, str(path), 1)
    for s in (1, 2, 2, 3):  # only a bug or damage could write this; appends refuse it
        seg.add(s, b"x")
    fd, _ = seg.file.ensure_fd()
    seg.file.write_out(fd, seg.file.take())
    seg.file.close()
    loaded, dropped, _ = Segment.load(1, str(path))
    assert list(loaded.seqs) == [1, 2] and dropped > 0


def test_index_is_compact():
    seg = Segment(1, "/nonexistent", 1)
    for s in range(1, 100_001):
        seg.add(s, b"")
    seg.file.pending = bytearray()  # the write buffer is not part of the index
    index = sum(sys.getsizeof(a) for a in (seg.seqs, seg.offsets, seg.lengths, seg.flags))
    assert 17 <= index / 100_000 < 22  # octets per message, over-allocation included
