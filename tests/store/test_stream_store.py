"""StreamStore (warren.store.stream_store): appends, reads, rotation, retention, recovery, threads."""

from __future__ import annotations

import logging
import os
import random
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from warren.store import segment as segment_mod
from warren.store.queue_store import StoreError
from warren.store.record import FILE_HEADER_SIZE
from warren.store.stream_format import (
    ENTRY_HEADER_SIZE, EntryScan, append_entry, encode_entry, parse_entries,
)
from warren.store.stream_store import MAX_OPEN_SEALED, TS_BLOCK, StreamStore, segment_file_name

SEG = 1024  # small segments: rotation after a handful of records
BIG = 1 << 30


def rec(offset: int, size: int = 100) -> bytes:
    return (b"%d:" % offset * size)[:size]


def entry_size(size: int = 100) -> int:
    return ENTRY_HEADER_SIZE + size


def fill(store, n, size=100, ts=lambda o: 1000 + o):
    return [store.append(rec(store.next_offset, size), ts(store.next_offset)) for _ in range(n)]


def segment_files(d):
    return sorted(n for n in os.listdir(d) if n.startswith("stream."))


def everything(store, committed_only=False):
    return store.read(0, BIG, BIG, committed_only=committed_only)


def raw_all(store, offset=0, max_records=BIG, max_bytes=BIG, end=None):
    """Every committed entry from ``offset`` through read_raw, checking each answer's figures."""
    out = []
    while True:
        first, count, data = store.read_raw(offset, max_records, max_bytes, end)
        if count == 0:
            assert data == b""
            return out
        entries = parse_entries(data)
        assert len(entries) == count and entries[0][0] == first and first >= offset
        out += entries
        offset = first + count


@pytest.fixture
def open_store(tmp_path):
    opened = []

    def _open(**kw):
        kw.setdefault("segment_size", SEG)
        kw.setdefault("fsync", False)
        s = StreamStore(tmp_path / "s", **kw)
        opened.append(s)
        return s

    yield _open
    for s in opened:
        try:
            s.close()
        except StoreError:
            pass


# --- the entry format ----------------------------------------------------------------------------

@given(st.lists(st.tuples(st.integers(0, 2**64 - 1), st.integers(-2**63, 2**63 - 1), st.binary(max_size=300)),
                max_size=20))
@settings(max_examples=200, deadline=None)
def test_entry_round_trip(entries):
    buf = bytearray()
    sizes = [append_entry(buf, o, ts, r) for o, ts, r in entries]
    assert sizes == [ENTRY_HEADER_SIZE + len(r) for _, _, r in entries]
    assert parse_entries(buf) == entries
    assert b"".join(encode_entry(*e) for e in entries) == bytes(buf)


def test_entry_damage_is_detected():
    data = encode_entry(7, 1234, b"hello world")
    for i in range(len(data)):  # a flipped bit anywhere: header, offset, timestamp, length, record
        bad = bytearray(data)
        bad[i] ^= 0x10
        with pytest.raises(ValueError):
            parse_entries(bad)
    for cut in range(1, len(data)):
        with pytest.raises(ValueError, match="cut short"):
            parse_entries(data[:cut])


def test_entry_scan_wants_consecutive_offsets():
    buf = bytearray(b"12345")
    for o in (10, 11, 13):
        append_entry(buf, o, 0, b"x")
    scan = EntryScan().run(buf, 5, 10)
    assert list(scan.positions) == [5, 30] and scan.end == 55 and "expected 12" in scan.error


# --- appends and reads -----------------------------------------------------------------------------

def test_append_read_round_trip(open_store):
    s = open_store()
    assert (s.first_offset, s.next_offset, s.committed_offset) == (0, 0, -1)
    assert fill(s, 5) == [0, 1, 2, 3, 4]
    want = [(o, 1000 + o, rec(o)) for o in range(5)]
    assert everything(s) == want  # from the buffers
    s.flush()
    assert everything(s) == want  # from the tail cache
    assert s.read(2, 2, BIG) == want[2:4]
    assert s.message_count == 5 and s.byte_size == FILE_HEADER_SIZE + 5 * entry_size()
    assert s.first_timestamp_ms == 1000 and s.last_timestamp_ms == 1004


def test_read_from_file_without_cache(open_store):
    s = open_store(tail_cache=0, segment_size=BIG)
    fill(s, 50)
    s.flush()
    fill(s, 10)  # half in the file, half buffered: one read spans both
    assert everything(s) == [(o, 1000 + o, rec(o)) for o in range(60)]
    assert s.read(45, 10, BIG) == [(o, 1000 + o, rec(o)) for o in range(45, 55)]


def test_committed_offset_semantics(open_store):
    s = open_store()
    fill(s, 3)
    assert s.committed_offset == -1 and s.last_offset == -1
    assert s.read_raw(0, 10, BIG) == (0, 0, b"")
    assert everything(s, committed_only=True) == [] and len(everything(s)) == 3
    s.flush()  # written, not synced: still not committed
    assert s.committed_offset == -1 and s.read_raw(0, 10, BIG)[1] == 0
    assert s.sync() == 2 and s.committed_offset == 2
    fill(s, 2)
    assert [e[0] for e in everything(s, committed_only=True)] == [0, 1, 2]
    assert [e[0] for e in raw_all(s)] == [0, 1, 2]
    assert s.sync() == 4 and s.sync() == 4  # an empty sync changes nothing


def test_limits_of_a_read(open_store):
    s = open_store(segment_size=BIG)
    fill(s, 10)
    s.sync()
    assert [e[0] for e in s.read(3, 4, BIG)] == [3, 4, 5, 6]
    assert [e[0] for e in s.read(3, 100, 3 * entry_size())] == [3, 4, 5]
    assert [e[0] for e in s.read(3, 100, 3 * entry_size() - 1)] == [3, 4]
    assert [e[0] for e in s.read(3, 100, 1)] == [3]  # at least one, however large
    assert s.read_raw(3, 100, 1)[:2] == (3, 1)
    assert s.read_raw(3, 100, 3 * entry_size())[:2] == (3, 3)
    assert s.read_raw(3, 100, 3 * entry_size() - 1)[:2] == (3, 2)
    assert s.read_raw(3, 2, BIG)[:2] == (3, 2)
    assert s.read_raw(3, 100, BIG, end=6)[:2] == (3, 3)
    assert s.read_raw(3, 100, BIG, end=3) == (3, 0, b"")
    assert s.read_raw(10, 100, BIG) == (10, 0, b"")
    assert s.read(10, 100, BIG) == [] and s.read(99, 100, BIG) == []
    assert s.read_raw(-5, 1, BIG)[:2] == (0, 1)


def test_no_syscall_per_append(open_store, monkeypatch):
    writes = []
    real = os.write
    monkeypatch.setattr(segment_mod.os, "write", lambda fd, b: writes.append(len(b)) or real(fd, b))
    s = open_store(segment_size=8 * 1024 * 1024)
    fill(s, 1000)
    assert writes == [] and os.listdir(s.directory) == []  # not even a file yet
    s.flush()
    assert len(writes) == 1
    s.sync()
    assert len(writes) == 1


def test_flush_threshold_bounds_buffering(open_store):
    s = open_store(segment_size=BIG, flush_threshold=10_000)
    fill(s, 200)
    assert s._buffered < 10_000 and segment_files(s.directory) == [segment_file_name(0)]


# --- rotation --------------------------------------------------------------------------------------

def test_rotation_and_reads_across_segments(open_store):
    s = open_store()
    fill(s, 40)
    s.sync()
    per_segment = (SEG - FILE_HEADER_SIZE) // entry_size()
    names = segment_files(s.directory)
    assert names == [segment_file_name(b) for b in range(0, 40, per_segment)]
    assert all(os.path.getsize(os.path.join(s.directory, n)) <= SEG for n in names)
    assert s.segment_count == len(names)
    want = [(o, 1000 + o, rec(o)) for o in range(40)]
    assert everything(s) == want
    assert s.read(per_segment - 2, 5, BIG) == want[per_segment - 2:per_segment + 3]  # crosses a boundary
    assert raw_all(s) == want
    # one read_raw answer never spans two segments: it is one contiguous range of one file
    assert s.read_raw(per_segment - 2, 5, BIG)[:2] == (per_segment - 2, 2)


def test_oversized_record_gets_its_own_segment(open_store):
    s = open_store()
    fill(s, 2)
    s.append(b"x" * 3000, 1)
    fill(s, 1)
    s.sync()
    assert segment_files(s.directory) == [segment_file_name(0), segment_file_name(2), segment_file_name(3)]
    assert s.read_raw(2, 10, 10)[1] == 1 and s.read(2, 1, 1)[0][2] == b"x" * 3000


# --- timestamps ------------------------------------------------------------------------------------

def test_offset_for_timestamp(open_store):
    s = open_store()
    assert s.offset_for_timestamp(0) == 0  # empty: next_offset
    fill(s, 300, size=10, ts=lambda o: 10 * o)
    assert s.offset_for_timestamp(-1) == 0
    assert s.offset_for_timestamp(0) == 0
    assert s.offset_for_timestamp(1) == 1
    assert s.offset_for_timestamp(10 * 137) == 137
    assert s.offset_for_timestamp(10 * 137 - 5) == 137
    assert s.offset_for_timestamp(10 * 299) == 299
    assert s.offset_for_timestamp(10 * 299 + 1) == 300
    s.sync()
    assert s.offset_for_timestamp(10 * 200 + 3) == 201  # from the file this time


@given(st.lists(st.integers(0, 50), min_size=1, max_size=400), st.integers(-1, 52), st.sampled_from([0, 1, 2]))
@settings(max_examples=150, deadline=None)
def test_offset_for_timestamp_with_clock_jumps(tmp_path_factory, stamps, target, flushed):
    """Timestamps need not grow (the clock can go back): the first offset at or after the target wins."""
    s = StreamStore(tmp_path_factory.mktemp("ts"), fsync=False, segment_size=700)
    for i, ts in enumerate(stamps):
        s.append(b"r", ts)
        if flushed == 1 and i == len(stamps) // 2:
            s.flush()
    if flushed == 2:
        s.sync()
    want = next((i for i, ts in enumerate(stamps) if ts >= target), len(stamps))
    assert s.offset_for_timestamp(target) == want
    s.close()


# --- retention -------------------------------------------------------------------------------------

def test_retention_by_bytes(open_store):
    s = open_store()
    fill(s, 40)
    per_segment = (SEG - FILE_HEADER_SIZE) // entry_size()
    s.set_retention(3 * SEG, None)
    assert s.enforce_retention(0) == 0  # nothing committed: the newest synced entry must stay on disk
    s.sync()
    before = s.segment_count
    dropped = s.enforce_retention(0)
    assert dropped % per_segment == 0 and dropped > 0
    assert s.byte_size <= 3 * SEG and s.segment_count == before - dropped // per_segment
    assert s.first_offset == dropped == s.read_raw(0, 1, BIG)[0]  # an offset gone reads from the first
    assert s.message_count == 40 - dropped
    assert segment_files(s.directory)[0] == segment_file_name(dropped)
    assert everything(s)[0][0] == dropped and raw_all(s)[-1][0] == 39
    s.set_retention(0, None)
    s.enforce_retention(0)
    assert s.segment_count == 1 and s.next_offset == 40  # never the newest segment


def test_retention_by_age(open_store):
    s = open_store()
    fill(s, 40, ts=lambda o: o * 1000)  # offset o is o seconds old at now=0 ... newest 39 s
    s.sync()
    per_segment = (SEG - FILE_HEADER_SIZE) // entry_size()
    s.set_retention(None, 10.0)
    # at now = 39 s, segments whose newest entry is older than 29 s go
    dropped = s.enforce_retention(39_000)
    assert dropped > 0 and dropped % per_segment == 0
    assert s.first_timestamp_ms == dropped * 1000
    segs = s._segments
    assert segs[0].max_ts >= 29_000 and s.first_offset == dropped
    assert s.enforce_retention(39_000) == 0
    before = s.message_count
    assert s.enforce_retention(10**9) == before - s.message_count > 0 and s.segment_count == 1


def test_retention_waits_for_a_committed_entry_after_the_segment(open_store):
    s = open_store()
    per_segment = (SEG - FILE_HEADER_SIZE) // entry_size()
    fill(s, per_segment)
    s.sync()
    fill(s, 1)  # a second segment, not synced
    s.set_retention(0, None)
    assert s.enforce_retention(0) == 0
    s.sync()
    assert s.enforce_retention(0) == per_segment and s.first_offset == per_segment


def test_retention_under_a_reader(open_store):
    """A segment deleted while a reader holds it: the reader finishes from the unlinked file."""
    s = open_store(tail_cache=0)
    fill(s, 40)
    s.sync()
    with s._lock:
        seg = s._segments[0]
        s._pin(seg)
    s.set_retention(0, None)
    s.enforce_retention(0)
    assert not os.path.exists(seg.file.path) and seg.file.fd is not None
    data = os.pread(seg.file.fd, 30, FILE_HEADER_SIZE + ENTRY_HEADER_SIZE)
    assert data == rec(0)[:30]
    with s._lock:
        s._unpin(seg)
    assert seg.file.fd is None


# --- reopening and recovery ------------------------------------------------------------------------

def test_reopen_after_close(open_store):
    s = open_store()
    fill(s, 40)
    s.close()
    s = open_store()
    want = [(o, 1000 + o, rec(o)) for o in range(40)]
    assert (s.first_offset, s.next_offset, s.committed_offset) == (0, 40, 39)
    assert everything(s) == want and raw_all(s) == want
    assert s.message_count == 40 and s.last_timestamp_ms == 1039 and s.first_timestamp_ms == 1000
    assert s.recovery_stats.records == 40 and s.recovery_stats.truncated_files == 0
    assert fill(s, 1) == [40]
    s.close()
    s = open_store()
    assert everything(s) == want + [(40, 1040, rec(40))]


def test_reopen_empty(open_store):
    s = open_store()
    s.close()
    s = open_store()
    assert (s.first_offset, s.next_offset, s.committed_offset, s.message_count) == (0, 0, -1, 0)
    assert s.first_timestamp_ms is None and s.last_timestamp_ms is None


def test_reopen_after_retention_keeps_offsets(open_store):
    s = open_store()
    fill(s, 40)
    s.sync()
    s.set_retention(0, None)
    s.enforce_retention(0)
    first = s.first_offset
    s.close()
    s = open_store()
    assert (s.first_offset, s.next_offset) == (first, 40)
    assert s.read_raw(0, 1, BIG)[0] == first


def _last_entry_start(path) -> int:
    data = open(path, "rb").read()
    scan = EntryScan().run(data, FILE_HEADER_SIZE, int(os.path.basename(path).split(".")[1]))
    return scan.positions[-1]


@pytest.mark.parametrize("damage", ["cut", "zeros", "garbage"])
def test_torn_tail_at_every_octet_of_the_last_entry(tmp_path, damage):
    d = tmp_path / "s"
    with StreamStore(d, fsync=False, segment_size=SEG) as s:
        fill(s, 12, size=40)
        last = s._segments[-1]
        path, base = last.file.path, last.base
    start = _last_entry_start(path)
    original = open(path, "rb").read()
    end = len(original)
    rng = random.Random(5)
    for cut in range(start, end):
        if damage == "cut":
            data = original[:cut]
        elif damage == "zeros":  # the size reached the disk, the data did not
            data = original[:cut] + bytes(end - cut)
        else:
            data = original[:cut] + bytes(rng.randrange(256) for _ in range(end - cut))
        with open(path, "wb") as f:
            f.write(data)
        with StreamStore(d, fsync=False, segment_size=SEG) as s:
            assert s.next_offset == 11 and s.committed_offset == 10  # last valid + 1
            assert os.path.getsize(path) == start
            assert [e[0] for e in everything(s)] == list(range(11))
            assert s.recovery_stats.truncated_files == (1 if cut > start or damage != "cut" else 0)
            assert s.append(b"new", 1) == 11
        with StreamStore(d, fsync=False, segment_size=SEG) as s:
            assert s.read(11, 1, BIG) == [(11, 1, b"new")]
            assert s.recovery_stats.truncated_files == 0
        with open(path, "wb") as f:  # back to the original for the next cut
            f.write(original)
    assert base < 11


def test_torn_header_of_the_newest_segment(tmp_path):
    d = tmp_path / "s"
    with StreamStore(d, fsync=False, segment_size=SEG) as s:
        fill(s, 20)
        newest = s._segments[-1]
        path, base = newest.file.path, newest.base
    for size in range(FILE_HEADER_SIZE):
        with open(path, "wb") as f:
            f.write(b"WRN\x01S"[:size] + bytes(3))
        with StreamStore(d, fsync=False, segment_size=SEG) as s:
            assert s.next_offset == base and s.recovery_stats.removed_files == 1
            assert not os.path.exists(path)
            assert s.append(b"again", 5) == base
    with pytest.raises(StoreError, match="not a Warren store file"):
        with open(path, "wb") as f:
            f.write(b"HELLO, not ours")
        StreamStore(d, fsync=False, segment_size=SEG)


def test_offsets_never_go_back_when_nothing_valid_is_left(tmp_path):
    d = tmp_path / "s"
    d.mkdir()
    open(d / segment_file_name(500), "wb").write(b"WR")  # a segment started, never synced
    with StreamStore(d, fsync=False) as s:
        assert s.next_offset == 500 and s.first_offset == 500 and s.append(b"x", 0) == 500


def test_missing_middle_segment_is_a_hole(tmp_path, caplog):
    d = tmp_path / "s"
    with StreamStore(d, fsync=False, segment_size=SEG) as s:
        fill(s, 40)
        segs = [(seg.base, seg.end) for seg in s._segments]
    lost_base, lost_end = segs[1]
    os.unlink(d / segment_file_name(lost_base))
    with caplog.at_level(logging.ERROR, logger="warren.store"):
        s = StreamStore(d, fsync=False, segment_size=SEG)
    assert f"offsets {lost_base} to {lost_end - 1} are missing" in caplog.text
    assert s.recovery_stats.holes == 1 and s.next_offset == 40
    want = [(o, 1000 + o, rec(o)) for o in range(40) if not lost_base <= o < lost_end]
    assert everything(s) == want and raw_all(s) == want
    assert s.message_count == len(want)
    assert s.read_raw(lost_base, 100, BIG)[0] == lost_end  # an offset in the hole reads from after it
    assert s.read(lost_base + 1, 1, BIG)[0][0] == lost_end
    s.close()


def test_overlapping_segment_is_set_aside(tmp_path, caplog):
    """Damage only (appends never do it): a segment repeating offsets of the one before it."""
    d = tmp_path / "s"
    with StreamStore(d, fsync=False, segment_size=SEG) as s:
        fill(s, 20)
        first_end = s._segments[0].end
    buf = bytearray(b"WRN\x01S")
    for o in range(first_end - 2, first_end + 1):
        append_entry(buf, o, 0, b"dup")
    name = segment_file_name(first_end - 2)
    open(d / name, "wb").write(buf)
    with caplog.at_level(logging.ERROR, logger="warren.store"):
        s = StreamStore(d, fsync=False, segment_size=SEG)
    assert "overlap" in caplog.text and os.path.exists(d / (name + ".damaged"))
    assert s.next_offset == 20 and everything(s) == [(o, 1000 + o, rec(o)) for o in range(20)]
    s.close()
    with StreamStore(d, fsync=False, segment_size=SEG) as s:  # set aside for good
        assert s.recovery_stats.removed_files == 0 and s.next_offset == 20


def test_closed_store_refuses(open_store):
    s = open_store()
    fill(s, 2)
    s.close()
    for call in (lambda: s.append(b"x", 0), lambda: s.read(0, 1, 1), lambda: s.read_raw(0, 1, 1), s.sync):
        with pytest.raises(StoreError, match="closed"):
            call()
    s.close()  # twice is fine


def test_failed_write_poisons_the_store(open_store, monkeypatch):
    s = open_store()
    fill(s, 1)

    def boom(fd, data):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(segment_mod.os, "write", boom)
    with pytest.raises(OSError):
        s.flush()
    monkeypatch.undo()
    with pytest.raises(StoreError, match="failed earlier"):
        s.append(b"y", 0)
    with pytest.raises(StoreError):
        s.sync()


def test_delete(tmp_path):
    s = StreamStore(tmp_path / "s", fsync=True)
    fill(s, 3)
    s.sync()
    s.delete()
    assert not (tmp_path / "s").exists()


def test_fsync_true_round_trip(tmp_path):
    with StreamStore(tmp_path / "s", segment_size=SEG) as s:
        fill(s, 30)
        assert s.sync() == 29
    with StreamStore(tmp_path / "s", segment_size=SEG) as s:
        assert s.committed_offset == 29 and len(raw_all(s)) == 30


def test_open_descriptors_are_bounded(open_store):
    s = open_store(segment_size=200, tail_cache=0)
    fill(s, 200, size=50)
    s.sync()
    assert s.segment_count > 3 * MAX_OPEN_SEALED
    fds_before = len(os.listdir("/proc/self/fd"))
    assert len(raw_all(s)) == 200
    assert len([e for e in everything(s)]) == 200
    assert len(os.listdir("/proc/self/fd")) <= fds_before + MAX_OPEN_SEALED + 1


# --- a model check ---------------------------------------------------------------------------------

@given(st.lists(st.tuples(st.sampled_from("aaaafsrRxo"), st.integers(0, 1000)), max_size=80),
       st.sampled_from([0, 64, 300]))
@settings(max_examples=100, deadline=None)
def test_model(tmp_path_factory, ops, tail_cache):
    """Random appends, flushes, syncs, reads, retention and reopens against a list."""
    d = tmp_path_factory.mktemp("model")
    s = StreamStore(d, fsync=False, segment_size=400, tail_cache=tail_cache)
    model: list[tuple[int, int, bytes]] = []
    committed = -1
    for op, x in ops:
        if op == "a":
            o = s.append(rec(len(model), x % 150), x)
            assert o == len(model)
            model.append((o, x, rec(o, x % 150)))
        elif op == "f":
            s.flush()
        elif op == "s":
            committed = s.sync()
            assert committed == len(model) - 1
        elif op == "r":
            start = x % (len(model) + 2)
            got = s.read(start, 1 + x % 7, x)
            kept = [e for e in model if e[0] >= max(start, s.first_offset)]
            assert got == kept[:len(got)] and (got or not kept)
        elif op == "R":
            start = x % (len(model) + 2)
            first, count, data = s.read_raw(start, 1 + x % 7, x)
            kept = [e for e in model if e[0] >= max(start, s.first_offset) and e[0] <= committed]
            assert parse_entries(data) == kept[:count] and (count or not kept)
        elif op == "x":
            s.set_retention(x * 3, None)
            s.enforce_retention(0)
        elif op == "o":
            s.close()
            s = StreamStore(d, fsync=False, segment_size=400, tail_cache=tail_cache)
            committed = len(model) - 1
            assert s.committed_offset == committed
    assert s.next_offset == len(model)
    assert everything(s) == model[s.first_offset:]
    s.close()
    s = StreamStore(d, fsync=False, segment_size=400)
    assert everything(s) == model[s.first_offset:] and raw_all(s) == model[s.first_offset:]
    s.close()


# --- threads ---------------------------------------------------------------------------------------

def test_reads_on_threads_while_appending(open_store):
    """The loop thread appends and enforces retention, a worker syncs, readers read_raw and read."""
    s = open_store(segment_size=16 * 1024, tail_cache=4096)
    s.set_retention(64 * 1024, None)
    stop = threading.Event()
    errors = []
    seen = {"raw": 0, "read": 0}

    def syncer():
        while not stop.is_set():
            s.sync()
            time.sleep(0.0005)

    def raw_reader():
        offset = 0
        while not stop.is_set():
            first, count, data = s.read_raw(offset, 50, 8192)
            if count:
                entries = parse_entries(data)  # checks every CRC
                assert first >= offset and [e[0] for e in entries] == list(range(first, first + count))
                assert all(r == rec(o, len(r)) for o, _, r in entries)
                assert first + count - 1 <= s.committed_offset
                offset = first + count
                seen["raw"] += count

    def reader():
        offset = 0
        while not stop.is_set():
            got = s.read(offset, 40, 6000, committed_only=bool(offset % 2))
            if got:
                # increasing; consecutive unless retention removed the rest of a segment mid-read
                offsets = [e[0] for e in got]
                assert offsets[0] >= offset and offsets == sorted(set(offsets))
                assert all(r == rec(o, len(r)) for o, _, r in got)
                offset = got[-1][0] + 1
                seen["read"] += len(got)

    def guard(fn):
        def run():
            try:
                fn()
            except BaseException as e:  # reported below
                errors.append(e)
                stop.set()
        return run

    threads = [threading.Thread(target=guard(f)) for f in (syncer, raw_reader, reader)]
    for t in threads:
        t.start()
    rng = random.Random(3)
    try:
        for i in range(20_000):
            if stop.is_set():
                break
            s.append(rec(s.next_offset, rng.randrange(1, 200)), i)
            if i % 500 == 0:
                s.enforce_retention(i)
    finally:
        time.sleep(0.05)
        stop.set()
        for t in threads:
            t.join(10)
    assert not errors, errors
    assert all(not t.is_alive() for t in threads)
    assert seen["raw"] > 0 and seen["read"] > 0
    assert s.first_offset > 0  # retention ran under the readers
    s.sync()
    assert raw_all(s, s.first_offset)[-1][0] == 19_999


def test_sync_timestamp_block_index_survives_reopen(open_store):
    s = open_store(segment_size=BIG)
    fill(s, 3 * TS_BLOCK + 5, size=4, ts=lambda o: 5 * o)
    s.close()
    s = open_store(segment_size=BIG)
    assert len(s._segments[0].block_max) == 4
    assert s.offset_for_timestamp(5 * (2 * TS_BLOCK + 3)) == 2 * TS_BLOCK + 3


# --- kill -9 ---------------------------------------------------------------------------------------

CHILD = """
import random, sys, time
from warren.store.stream_store import StreamStore
directory, cycle = sys.argv[1], int(sys.argv[2])
rng = random.Random(cycle)
s = StreamStore(directory, fsync=False, segment_size=4096, max_bytes=32 * 1024)
print("R", s.next_offset, flush=True)
while True:
    for _ in range(rng.randint(1, 40)):
        o = s.next_offset
        s.append(b"%d@%d;" % (o, cycle) * rng.randint(1, 20), cycle)
    print("S", s.sync(), flush=True)
    s.enforce_retention(0)
"""


def test_kill_9_never_loses_or_reuses_a_committed_offset(tmp_path):
    """A child appends, syncs and enforces retention until SIGKILL; every reported commit must hold."""
    d = tmp_path / "s"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(Path(__file__).parents[2]),
                                                                   os.environ.get("PYTHONPATH")) if p))
    seen: dict[int, bytes] = {}  # committed offset -> its record, as first read back
    committed = -1
    rng = random.Random()
    deadline = time.monotonic() + 15
    cycles = 0
    while cycles < 12 and time.monotonic() < deadline:
        cycles += 1
        p = subprocess.Popen([sys.executable, "-c", CHILD, str(d), str(cycles)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        try:
            ready = p.stdout.readline()
            assert ready.startswith(b"R "), p.stderr.read().decode()
            assert int(ready.split()[1]) == committed + 1  # the next offset: last committed + 1
            time.sleep(rng.uniform(0.02, 0.2))
        finally:
            p.kill()
        out, err = p.stdout.read(), p.stderr.read()
        p.wait()
        p.stdout.close()
        p.stderr.close()
        assert p.returncode == -9, err.decode()
        for line in out.split(b"\n")[:-1]:  # the last piece may be cut short
            kind, value = line.split()
            if kind == b"S":
                committed = max(committed, int(value))
        with StreamStore(d, fsync=False, segment_size=4096) as s:
            assert s.committed_offset >= committed  # flushed before the kill: more may be there
            entries = everything(s)
            offsets = [e[0] for e in entries]
            assert offsets == list(range(s.first_offset, s.next_offset))  # no hole, no duplicate
            for o, _, r in entries:
                assert r.startswith(b"%d@" % o)
                if o in seen:
                    assert seen[o] == r, f"offset {o} was reused"
                seen[o] = r
            committed = s.committed_offset  # everything recovered is committed from now on
    assert cycles >= 3 and committed > 0


def test_read_raw_file_gives_a_part_of_a_segment_file_or_octets_from_memory(tmp_path):
    """``read_raw_file`` (the HTTP records endpoint's, for sendfile): a range wholly in a segment
    file as (a duplicate descriptor, position, length) whose octets are ``read_raw``'s; one in
    the tail cache as octets; the descriptor outlives the segment's deletion."""
    import os
    store = StreamStore(tmp_path / "s", fsync=False, tail_cache=4096, segment_size=20_000)
    for i in range(200):
        store.append(b"%04d" % i + b"r" * 300, 1000 + i)
    store.sync()
    first, count, part = store.read_raw_file(0, 10, 1 << 20)
    assert type(part) is tuple and (first, count) == (0, 10)
    fd, position, length = part
    try:
        expected = store.read_raw(0, 10, 1 << 20)[2]
        assert os.pread(fd, length, position) == expected
        for f in os.listdir(tmp_path / "s"):  # the segment deleted (retention): the duplicate still reads
            os.unlink(tmp_path / "s" / f)
        assert os.pread(fd, length, position) == expected
    finally:
        os.close(fd)
    first, count, data = store.read_raw_file(199, 10, 1 << 20)  # the newest: in the tail cache
    assert (first, count) == (199, 1) and type(data) is bytes and b"0199" in data
