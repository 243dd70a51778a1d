"""QueueStore (warren.store.queue_store): API, rotation, segment deletion, recovery, threads."""

from __future__ import annotations

import os
import random
import threading
import time

import pytest
from hypothesis import given, settings, strategies as st

from warren.store import QueueStore, StoreError, decode_message, encode_message
from warren.store.message import encode_message_ss
from warren.store import fileio
from warren.store import queue_store as queue_store_mod
from warren.store import segment as segment_mod
from warren.store.record import T_ACK, encode_record

SEG = 1024  # small segments: rotation after a handful of records


def rec(seq: int, size: int = 100) -> bytes:
    return (b"%d:" % seq * size)[:size]


def files(d, prefix=""):
    return sorted(n for n in os.listdir(d) if n.startswith(prefix))


def fill(store, seqs, size=100):
    for s in seqs:
        store.append(s, rec(s, size))


@pytest.fixture
def python_file_io(monkeypatch):
    """The store's writes one os call at a time (fileio.py's Python twin), so that a test can
    watch or fail os.write; the compiled call does the same steps in C (tests/protocol/test_speedups.py
    compares them). ``QueueStore.sync`` fsyncs with os.fsync already (fsync_worker.run_job)."""
    monkeypatch.setattr(queue_store_mod, "write_and_dup", fileio.write_and_dup_py)


@pytest.fixture
def open_store(tmp_path):
    opened = []

    def _open(**kw):
        kw.setdefault("segment_size", SEG)
        s = QueueStore(tmp_path / "q", **kw)
        opened.append(s)
        return s

    yield _open
    for s in opened:
        try:
            s.close()
        except StoreError:
            pass


# --- message records -------------------------------------------------------------------------------

names = st.binary(max_size=255).map(lambda b: b.decode("utf-8", "surrogateescape"))


@given(names, names, st.binary(max_size=100), st.binary(max_size=2000))
@settings(max_examples=200, deadline=None)
def test_message_round_trip(exchange, routing_key, properties, body):
    data = encode_message(exchange, routing_key, properties, body)
    assert decode_message(data) == (exchange, routing_key, properties, body)
    assert decode_message(memoryview(data)) == (exchange, routing_key, properties, body)


def test_message_limits_and_damage():
    with pytest.raises(ValueError):
        encode_message("x" * 256, "", b"", b"")
    data = encode_message("ex", "rk", b"props", b"body")
    for cut in range(len(data) - 4):  # anything short of the properties is an error, not junk
        with pytest.raises(ValueError):
            decode_message(data[:cut])


# --- basic API ------------------------------------------------------------------------------------

def test_append_read_before_and_after_flush(open_store):
    s = open_store()
    fill(s, range(1, 6))
    assert [s.read(i) for i in range(1, 6)] == [rec(i) for i in range(1, 6)]  # from the buffer
    s.flush()
    assert [s.read(i) for i in range(1, 6)] == [rec(i) for i in range(1, 6)]  # from the file
    assert len(s) == 5 and s.message_bytes == 500 and s.last_seq == 5
    assert 3 in s and 6 not in s
    with pytest.raises(KeyError):
        s.read(6)


def test_a_record_given_as_its_parts_is_the_joined_record(open_store, tmp_path):
    """What the queues pass (exchange, routing key, properties, body): the same record as
    encode_message_ss's octets, in memory, in the file, across rotation and after recovery."""
    parts = [(b"\x02ex", b"\x03key", b"\x10\x00\x02", b"%d" % q * 40) for q in range(1, 40)]
    s = open_store()
    for q, p in enumerate(parts, 1):
        s.append(q, p)
    joined = [encode_message_ss(*p) for p in parts]
    assert [s.read(q) for q in range(1, 40)] == joined and s.message_bytes == sum(map(len, joined))
    assert s.segment_count > 1  # rotated on the parts' size
    s.close()
    assert [r for _, r, _ in open_store().recover()] == joined


def test_seqs_must_increase(open_store):
    s = open_store()
    s.append(10, b"a")
    for bad in (10, 9, 0):
        with pytest.raises(ValueError):
            s.append(bad, b"b")
    s.append(12, b"c")  # gaps are fine: only persistent messages reach the store
    assert [q for q, _ in s.unacked()] == [10, 12]


def test_recover_after_reopen(open_store):
    s = open_store()
    fill(s, range(1, 41))
    for q in (1, 2, 5, 17, 40):
        s.ack(q)
    for q in (3, 4, 17, 30):
        s.mark_delivered(q)
    s.close()
    s = open_store()
    got = s.recover()
    want = [q for q in range(1, 41) if q not in (1, 2, 5, 17, 40)]
    assert [q for q, _, _ in got] == want
    assert all(r == rec(q) for q, r, _ in got)
    assert {q for q, _, d in got if d} == {3, 4, 30}
    assert s.unacked() == [(q, q in (3, 4, 30)) for q in want]
    assert s.recovery_stats.messages == len(want) and s.recovery_stats.bytes == 100 * len(want)
    assert s.last_seq == 40  # the acked 40 still counts: seqs are never reused
    with pytest.raises(ValueError):
        s.append(40, b"x")


def test_recover_includes_unflushed_appends(open_store):
    s = open_store()
    fill(s, range(1, 30))
    s.flush()
    fill(s, range(30, 35))
    assert [q for q, _, _ in s.recover()] == list(range(1, 35))


def test_ack_unknown_or_twice_is_ignored(open_store):
    s = open_store()
    fill(s, [1, 2])
    s.ack(1)
    s.ack(1)
    s.ack(99)
    s.mark_delivered(1)  # acked: nothing to mark
    s.mark_delivered(99)
    assert len(s) == 1
    with pytest.raises(KeyError):
        s.read(1)


def test_closed_store_refuses(open_store):
    s = open_store()
    s.append(1, b"x")
    s.close()
    s.close()  # idempotent
    for op in (lambda: s.append(2, b"y"), lambda: s.ack(1), s.flush, s.sync, lambda: s.read(1)):
        with pytest.raises(StoreError):
            op()


def test_context_manager_and_delete(tmp_path):
    with QueueStore(tmp_path / "q") as s:
        s.append(1, b"x")
    assert QueueStore(tmp_path / "q").recover() == [(1, b"x", False)]
    s = QueueStore(tmp_path / "q")
    s.delete()
    assert not (tmp_path / "q").exists()


def test_no_syscall_per_append(open_store, monkeypatch, python_file_io):
    writes = []
    real = os.write
    monkeypatch.setattr(segment_mod.os, "write", lambda fd, b: writes.append(len(b)) or real(fd, b))
    s = open_store(segment_size=8 * 1024 * 1024)
    fill(s, range(1, 1001))
    for q in range(1, 101):
        s.ack(q)
    assert writes == [] and os.listdir(s.directory) == []  # not even a file yet
    s.flush()
    assert len(writes) == 2  # one write() for the segment, one for its ack log
    s.sync()
    assert len(writes) == 2


def _fsynced_names(monkeypatch) -> list[str]:
    """Record the file names fsync is called on (through the dup()ed descriptors sync uses)."""
    names: list[str] = []
    real = os.fsync

    def fsync(fd):
        names.append(os.path.basename(os.readlink(f"/proc/self/fd/{fd}")))
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    return names


def test_ack_logs_are_written_at_every_sync_but_fsynced_only_when_due(open_store, monkeypatch, python_file_io):
    s = open_store(segment_size=8 * 1024 * 1024, ack_sync_interval=3600)
    fill(s, range(1, 11))
    s.sync()
    names = _fsynced_names(monkeypatch)
    s.ack(1)
    s.mark_delivered(2)
    fill(s, [11])
    s.sync()
    acks = [n for n in os.listdir(s.directory) if n.startswith("acks.")]
    assert acks and os.path.getsize(os.path.join(s.directory, acks[0])) > 0  # written: kill -9 loses none
    assert any(n.startswith("msgs.") for n in names) and not any(n.startswith("acks.") for n in names)
    assert s.acks_owed() and not s.acks_owed(time.monotonic())  # owed, not due for an hour
    s.close()  # the closing sync takes the ack logs
    assert any(n.startswith("acks.") for n in names) and not s.acks_owed()


def test_ack_logs_are_fsynced_with_every_sync_by_default_and_once_due(open_store, monkeypatch, python_file_io):
    s = open_store(segment_size=8 * 1024 * 1024)  # ack_sync_interval 0: every sync
    fill(s, range(1, 11))
    names = _fsynced_names(monkeypatch)
    s.ack(1)
    s.sync()
    assert any(n.startswith("acks.") for n in names)
    s.ack_sync_interval = 0.05
    names.clear()
    s.ack(2)
    s.sync()
    assert not any(n.startswith("acks.") for n in names)
    deadline = time.monotonic() + 5
    while not s.acks_owed(time.monotonic()) and time.monotonic() < deadline:
        time.sleep(0.01)
    s.sync()
    assert any(n.startswith("acks.") for n in names) and not s.acks_owed()


def test_flush_threshold_bounds_buffering(open_store):
    s = open_store(segment_size=1 << 20, flush_threshold=10_000)
    fill(s, range(1, 200))
    assert s._buffered < 10_000 and files(s.directory) == ["msgs.0000000001"]


def test_sync_returns_covered_seq(open_store):
    s = open_store()
    assert s.sync() == 0
    fill(s, range(1, 11))
    assert s.sync() == 10
    s.ack(3)
    assert s.sync() == 10


def test_fsync_false(tmp_path):
    s = QueueStore(tmp_path / "q", segment_size=SEG, fsync=False)
    fill(s, range(1, 50))
    for q in range(1, 40):
        s.ack(q)
    s.close()
    s = QueueStore(tmp_path / "q", segment_size=SEG, fsync=False)
    assert [q for q, _, _ in s.recover()] == list(range(40, 50))
    s.close()


# --- rotation and deletion -------------------------------------------------------------------------

def test_rotation(open_store):
    s = open_store()
    fill(s, range(1, 31))  # 30 x (9 + 8 + 100) octets, about 3 records per 1 KiB segment
    s.sync()
    segs = files(s.directory, "msgs")
    assert len(segs) == s.segment_count >= 3
    for name in segs:
        assert os.path.getsize(os.path.join(s.directory, name)) <= SEG
    assert segs[0] == "msgs.0000000001"


def test_oversized_record_gets_its_own_segment(open_store):
    s = open_store()
    s.append(1, b"a")
    s.append(2, b"b" * 5000)
    s.append(3, b"c")
    s.sync()
    assert s.segment_count == 3 and s.read(2) == b"b" * 5000


def test_fully_acked_segments_are_deleted(open_store):
    s = open_store()
    fill(s, range(1, 31))
    s.sync()
    n = s.segment_count
    for q in range(1, 16):
        s.ack(q)
    s.sync()
    assert s.segment_count < n
    kept = files(s.directory, "msgs")
    assert len(kept) == s.segment_count
    assert files(s.directory, "acks")  # the partly acked first segment has an ack log
    s.close()
    s = open_store()
    assert [q for q, _, _ in s.recover()] == list(range(16, 31))


def test_out_of_order_acks_free_a_middle_segment(open_store):
    s = open_store()
    fill(s, range(1, 31))
    s.sync()
    before = files(s.directory, "msgs")
    seqs_by_seg = [list(seg.seqs) for seg in s._segments]
    for q in seqs_by_seg[2]:
        s.ack(q)
    s.sync()
    after = files(s.directory, "msgs")
    assert after == [n for i, n in enumerate(before) if i != 2]
    s.close()
    s = open_store()
    assert [q for q, _, _ in s.recover()] == [q for q in range(1, 31) if q not in seqs_by_seg[2]]


def test_write_segment_never_deleted(open_store):
    s = open_store()
    fill(s, range(1, 4))
    for q in range(1, 4):
        s.ack(q)
    s.sync()
    assert s.segment_count == 1 and files(s.directory, "msgs") == ["msgs.0000000001"]
    s.close()
    s = open_store()
    assert s.recover() == [] and s.last_seq == 3
    assert s.recovery_stats.deleted_segments == 0
    s.append(4, b"x")  # the write segment takes appends again
    s.close()
    assert open_store().recover() == [(4, b"x", False)]


def test_everything_acked_keeps_last_seq(open_store):
    s = open_store()
    fill(s, range(1, 31))
    for q in range(1, 31):
        s.ack(q)
    s.close()
    assert len(files(s.directory, "msgs")) == 1
    s = open_store()
    assert s.recover() == [] and s.last_seq == 30 and len(s) == 0


def test_segment_holding_last_seq_kept_until_a_higher_seq(open_store, tmp_path):
    """With an empty write segment (its records torn), a fully acked older one remembers last_seq."""
    s = open_store()
    fill(s, range(1, 31))
    last_id = s._segments[-1].id
    in_last = list(s._segments[-1].seqs)
    s.close()
    newest = tmp_path / "q" / f"msgs.{last_id:010d}"
    holder = f"msgs.{last_id - 1:010d}"
    newest.write_bytes(b"WR")  # torn at its header
    s = open_store()
    survivors = [q for q, _, _ in s.recover()]
    top = max(survivors)
    assert top == in_last[0] - 1
    for q in survivors:
        s.ack(q)
    s.sync()
    assert files(s.directory, "msgs") == [holder]  # the others went; this one holds last_seq
    s.close()
    newest.write_bytes(b"WRN\x01M")  # the write segment was created, with no record yet
    s = open_store()
    assert s.recover() == [] and s.last_seq == top and s.recovery_stats.deleted_segments == 0
    assert holder in files(s.directory)
    s.append(top + 1, b"next")
    s.sync()
    assert holder not in files(s.directory)  # a higher seq exists now: it may go
    s.close()
    s = open_store()
    assert s.recover() == [(top + 1, b"next", False)] and s.last_seq == top + 1


def test_deletion_waits_for_sync(open_store):
    s = open_store()
    fill(s, range(1, 31))
    s.sync()
    n = len(files(s.directory, "msgs"))
    for q in range(1, 16):
        s.ack(q)
    s.flush()
    assert len(files(s.directory, "msgs")) == n  # with fsync, only a sync deletes
    s.sync()
    assert len(files(s.directory, "msgs")) < n


def test_fully_acked_segment_left_by_a_crash_is_deleted_on_open(open_store, tmp_path):
    s = open_store()
    fill(s, range(1, 31))
    first = list(s._segments[0].seqs)
    for q in first[:-1]:
        s.ack(q)
    s.close()
    # the crash came after the last ack reached the log but before the segment was deleted
    with open(tmp_path / "q" / "acks.0000000001", "ab") as f:
        f.write(encode_record(T_ACK, first[-1].to_bytes(8, "big")))
    s = open_store()
    assert s.recovery_stats.deleted_segments == 1
    assert "msgs.0000000001" not in files(s.directory) and "acks.0000000001" not in files(s.directory)
    assert [q for q, _, _ in s.recover()] == list(range(first[-1] + 1, 31))


def test_orphan_ack_log_is_deleted(open_store, tmp_path):
    s = open_store()
    fill(s, range(1, 5))
    s.ack(1)
    s.close()
    os.rename(tmp_path / "q" / "acks.0000000001", tmp_path / "q" / "acks.0000000000")
    s = open_store()
    assert "acks.0000000000" not in files(s.directory)
    assert len(s) == 4  # the ack went with its (renamed) log


def test_ack_durable_message_lost(open_store, tmp_path):
    """The ack log reached the disk, the message did not: the seq must never be reused."""
    s = open_store(segment_size=1 << 20)
    fill(s, range(1, 11))
    s.ack(10)
    s.close()
    path = tmp_path / "q" / "msgs.0000000001"
    os.truncate(path, path.stat().st_size - 50)  # record 10 torn
    s = open_store(segment_size=1 << 20)
    assert [q for q, _, _ in s.recover()] == list(range(1, 10))
    assert s.last_seq == 10
    with pytest.raises(ValueError):
        s.append(10, b"new")


def test_ids_never_reused(open_store):
    s = open_store()
    fill(s, range(1, 31))
    last_id = s._segments[-1].id
    for q in range(1, 31):
        s.ack(q)
    s.close()
    s = open_store()
    fill(s, range(31, 40))
    assert all(seg.id >= last_id for seg in s._segments)


# --- a model check ---------------------------------------------------------------------------------

@given(st.lists(st.tuples(st.sampled_from("aadkrs"), st.integers(0, 1000)), max_size=120), st.integers(0, 3))
@settings(max_examples=100, deadline=None)
def test_model(tmp_path_factory, ops, reopen_every):
    """Random appends, acks, delivered marks, syncs and reopens against a dict model."""
    d = tmp_path_factory.mktemp("model")
    s = QueueStore(d, segment_size=512, fsync=False)
    model: dict[int, list] = {}
    seq = 0
    for i, (op, x) in enumerate(ops):
        if op == "a":
            seq += 1 + x % 3
            s.append(seq, rec(seq, x % 200))
            model[seq] = [rec(seq, x % 200), False]
        elif op == "k" and model:
            q = sorted(model)[x % len(model)]
            s.ack(q)
            del model[q]
        elif op == "d" and model:
            q = sorted(model)[x % len(model)]
            s.mark_delivered(q)
            model[q][1] = True
        elif op == "r" and model:
            q = sorted(model)[x % len(model)]
            assert s.read(q) == model[q][0]
        elif op == "s":
            s.sync()
        if reopen_every and i % (reopen_every * 10) == 0:
            s.close()
            s = QueueStore(d, segment_size=512, fsync=False)
    assert s.recover() == [(q, r, dl) for q, (r, dl) in sorted(model.items())]
    s.close()
    s = QueueStore(d, segment_size=512, fsync=False)
    assert s.recover() == [(q, r, dl) for q, (r, dl) in sorted(model.items())]
    assert s.last_seq >= max(model, default=0)
    s.close()


# --- threads ------------------------------------------------------------------------------------------

def test_sync_on_another_thread(open_store):
    """The loop thread appends, acks and reads while a worker syncs in a loop."""
    s = open_store(segment_size=64 * 1024)
    stop = threading.Event()
    synced = []
    errors = []

    def worker():
        try:
            while not stop.is_set():
                synced.append(s.sync())
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    t = threading.Thread(target=worker)
    t.start()
    rng = random.Random(7)
    live = []
    # at least 20,000 appends, then on until the worker has synced a few times: how many syncs
    # fit in the first 20,000 depends on the scheduler (CI once saw two), and the point is overlap
    deadline = time.monotonic() + 30
    q = 0
    try:
        while q < 20000 or (len(synced) < 4 and time.monotonic() < deadline):
            q += 1
            s.append(q, rec(q, rng.randrange(10, 300)))
            live.append(q)
            if rng.random() < 0.6:
                a = live.pop(0 if rng.random() < 0.8 else rng.randrange(len(live)))
                s.ack(a)
            if rng.random() < 0.05 and live:
                probe = rng.choice(live)
                assert s.read(probe).startswith(b"%d:" % probe)
    finally:
        stop.set()
        t.join()
    assert not errors and synced == sorted(synced) and synced[-1] <= q
    # the two threads did overlap while the loop thread appended
    assert len(synced) >= 4
    s.close()
    s = open_store(segment_size=64 * 1024)
    got = s.recover()
    assert [q for q, _, _ in got] == live
    assert all(r.startswith(b"%d:" % q) for q, r, _ in got)


def test_failed_write_poisons_the_store(open_store, monkeypatch, python_file_io):
    s = open_store()
    s.append(1, b"x")

    def boom(fd, data):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(segment_mod.os, "write", boom)
    with pytest.raises(OSError):
        s.flush()
    monkeypatch.undo()
    with pytest.raises(StoreError, match="failed earlier"):
        s.append(2, b"y")
    with pytest.raises(StoreError):
        s.sync()


def test_overlapping_segments_keep_the_first_copy(open_store, tmp_path):
    """Damage only (appends forbid it): a segment repeating seqs of an earlier one."""
    s = open_store()
    fill(s, range(1, 31))
    s.close()
    d = tmp_path / "q"
    segs = sorted(p for p in d.iterdir() if p.name.startswith("msgs"))
    (d / "msgs.0000000099").write_bytes(segs[0].read_bytes())  # a copy of 1.. after the newest
    s = open_store()
    got = s.recover()
    assert [q for q, _, _ in got] == list(range(1, 31))  # no duplicates
    assert s.last_seq == 30
    s.ack(1)
    assert 1 not in s and s.read(2) == rec(2)


def test_unacked_after_pages_through_the_live_messages_in_order(tmp_path):
    from warren.store.queue_store import QueueStore
    s = QueueStore(tmp_path / "q", segment_size=256, fsync=False)
    for seq in range(1, 101):
        s.append(seq, b"r%d" % seq)
    for seq in range(1, 101, 3):
        s.ack(seq)
    s.mark_delivered(50)
    live = [seq for seq in range(1, 101) if seq % 3 != 1]
    got, after = [], 0
    while True:
        page = s.unacked_after(after, 7)
        if not page:
            break
        got += [seq for seq, _ in page]
        after = page[-1][0]
    assert got == live
    assert dict(s.unacked_after(49, 1)) == {50: True}
    assert s.read(50) == b"r50"
    s.close()


def _ack_log_records(d) -> list[tuple[int, int]]:
    """(type, seq) of every record in the directory's ack logs."""
    from warren.store.record import Scan
    out = []
    for name in files(d, "acks."):
        with open(os.path.join(d, name), "rb") as f:
            data = f.read()
        for rtype, start, _n in Scan(data):
            out.append((rtype, int.from_bytes(data[start:start + 8], "big")))
    return out


def test_a_delivered_mark_acked_before_the_flush_is_never_written(tmp_path):
    from warren.store.record import T_DELIVERED
    d = tmp_path / "q"
    s = QueueStore(d, fsync=False)
    fill(s, range(1, 5))
    s.sync()
    for q in (1, 2, 3):
        s.mark_delivered(q)
    s.ack(1)
    s.ack(2)
    s.sync()
    logged = _ack_log_records(d)
    assert (T_DELIVERED, 3) in logged and (T_ACK, 1) in logged and (T_ACK, 2) in logged
    assert (T_DELIVERED, 1) not in logged and (T_DELIVERED, 2) not in logged
    s.mark_delivered(4)  # not flushed, yet the flags readers see it at once
    assert s.unacked() == [(3, True), (4, True)]
    assert s.unacked_after(0, 10) == [(3, True), (4, True)]
    s.close()
    s = QueueStore(d, fsync=False)
    assert [(q, dl) for q, _, dl in s.recover()] == [(3, True), (4, True)]
    s.close()


# --- overlapping syncs (two group commits at the disk at once) ---------------------------------------

def test_overlapping_syncs_return_in_order_and_unlink_only_after_the_earlier_fsyncs(open_store, monkeypatch, python_file_io):
    """The broker starts a second group commit while one is at the disk: the second may write
    and fsync at once, but returns (and deletes fully acked segments) only after the first."""
    store = open_store(fsync=True)
    fill(store, range(1, 31))  # several segments
    store.sync()
    first_in_fsync, release_first = threading.Event(), threading.Event()
    real_fsync = os.fsync
    calls = []

    def slow_first_fsync(fd):
        calls.append(threading.current_thread().name)
        if threading.current_thread().name == "first":
            first_in_fsync.set()
            assert release_first.wait(30)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", slow_first_fsync)
    results = {}
    store.append(31, rec(31))
    first = threading.Thread(target=lambda: results.setdefault("first", store.sync()), name="first")
    first.start()
    assert first_in_fsync.wait(30)
    for s in range(1, 11):  # whole segments acked: their files go, but not before the first sync ends
        store.ack(s)
    store.append(32, rec(32))
    before = files(store.directory, "msgs")
    second = threading.Thread(target=lambda: results.setdefault("second", store.sync()), name="second")
    second.start()
    deadline = time.monotonic() + 30
    while calls.count("second") == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert calls.count("second") >= 1  # its fsyncs ran while the first was at the disk
    second.join(0.3)
    assert second.is_alive() and "second" not in results  # but it waits for the first to finish
    assert files(store.directory, "msgs") == before  # and has deleted nothing yet
    release_first.set()
    first.join(30)
    second.join(30)
    assert results == {"first": 31, "second": 32}
    assert len(files(store.directory, "msgs")) < len(before)  # the acked segments went after all
    monkeypatch.setattr(os, "fsync", real_fsync)
    store.close()
    reopened = open_store(fsync=True)
    assert [seq for seq, _, _ in reopened.recover()] == list(range(11, 33))


def test_a_sync_after_a_failed_one_fails_too(open_store, monkeypatch, python_file_io):
    """A sync whose predecessor's fsync failed cannot claim what that one wrote."""
    store = open_store(fsync=True)
    store.append(1, rec(1))
    first_in_fsync, release_first = threading.Event(), threading.Event()
    real_fsync = os.fsync

    def failing_first_fsync(fd):
        if threading.current_thread().name == "first":
            first_in_fsync.set()
            assert release_first.wait(30)
            raise OSError(5, "Input/output error")
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", failing_first_fsync)
    errors = {}

    def run(name):
        try:
            store.sync()
        except Exception as e:  # noqa: BLE001 - the test looks at which
            errors[name] = e

    first = threading.Thread(target=run, args=("first",), name="first")
    first.start()
    assert first_in_fsync.wait(30)
    store.append(2, rec(2))
    second = threading.Thread(target=run, args=("second",), name="second")
    second.start()
    release_first.set()
    first.join(30)
    second.join(30)
    assert isinstance(errors["first"], OSError)
    assert isinstance(errors["second"], StoreError)


# --- the broker's three steps: sync_begin on the loop, an FsyncWorker job, sync_end --------------


def _through_worker(worker, works):
    """Submit each SyncWork as the server does and wait for the jobs, in order."""
    import select
    for i, work in enumerate(works):
        writes = work.deferred.writes if work.deferred is not None else []
        worker.submit(i, work.fds, work.unlinks, work.dir_fds, writes)
    done = []
    while len(done) < len(works):
        assert select.select([worker.fileno()], [], [], 10)[0], "the fsync worker never reported"
        done += worker.completed()
    return done


@pytest.mark.parametrize("defer", [False, True], ids=["writes-on-begin", "writes-deferred"])
@pytest.mark.parametrize("twin", ["compiled", "python"])
def test_syncs_in_three_steps_keep_the_ordering_rules(open_store, twin, defer, monkeypatch):
    """Two syncs begun before either's fsync: the acked segments go with the job that was handed
    them, after the fsyncs before it; each sync_end returns what its begin covered; a reopen
    finds every record the syncs covered and none of the acked ones. With ``defer`` (the
    broker's), the job writes the buffers too, and they are read from memory until then."""
    from warren.store import fsync_worker
    if twin == "compiled" and fsync_worker.FsyncWorker is fsync_worker.FsyncWorkerPy:
        pytest.skip("built without the extension (setup.py): the Python twin runs alone")
    worker = fsync_worker.FsyncWorker() if twin == "compiled" else fsync_worker.FsyncWorkerPy()
    try:
        store = open_store(fsync=True)
        fill(store, range(1, 31))  # several segments
        first = store.sync_begin(defer_writes=defer)
        for s in range(1, 11):  # whole segments acked: the next sync unlinks them
            store.ack(s)
        store.append(31, rec(31))
        before = files(store.directory, "msgs")
        second = store.sync_begin(defer_writes=defer)
        assert (first.deferred is not None) == defer
        if defer:  # nothing written yet: every record comes from memory, and nobody else writes
            assert all(os.path.getsize(os.path.join(store.directory, f)) == 0
                       for f in files(store.directory, "msgs"))
            assert [store.read(s) for s in (11, 30, 31)] == [rec(11), rec(30), rec(31)]
            assert store.unwritten > 30 * len(rec(1))  # the memory alarm counts them
            monkeypatch.setattr(queue_store_mod, "DEFERRED_WAIT_S", 0.05)
            with pytest.raises(StoreError):  # it would wait for writes_done, which this thread calls
                store.sync()
            store.append(32, rec(32))
            store.flush()  # does nothing: it would overtake the job's writes
            assert store.read(32) == rec(32)
        assert first.ticket + 1 == second.ticket and second.unlinks and not first.unlinks
        assert files(store.directory, "msgs") == before  # nothing deleted before the fsyncs
        assert _through_worker(worker, [first, second]) == [(0, 0), (1, 0)]
        if defer:
            store.writes_done(first.deferred, 0)
            store.writes_done(second.deferred, 0)
        assert store.sync_end(first, 0) == 30 and store.sync_end(second, 0) == 31
        assert len(files(store.directory, "msgs")) < len(before)
        assert [store.read(s) for s in (11, 30, 31)] == [rec(11), rec(30), rec(31)]  # from the file
        store.close()
        last = 33 if defer else 32
        assert [seq for seq, _, _ in open_store(fsync=True).recover()] == list(range(11, last))
    finally:
        worker.close()


def test_a_failed_job_fails_the_store_and_the_syncs_after_it(open_store):
    """The worker's error reaches sync_end, which fails the store for good: the next sync ends
    with the same error (the worker fails every later job) and a new sync cannot begin."""
    from warren.store.fsync_worker import FsyncWorkerPy
    worker = FsyncWorkerPy()
    try:
        store = open_store(fsync=True)
        fill(store, range(1, 4))
        first = store.sync_begin()
        os.close(first.fds[0])
        first.fds[0] = 1_000_000  # a descriptor nothing has open: its fsync fails, EBADF
        fill(store, range(4, 6))
        second = store.sync_begin()
        assert _through_worker(worker, [first, second]) == [(0, 9), (1, 9)]
        with pytest.raises(OSError):
            store.sync_end(first, 9)
        with pytest.raises(OSError):
            store.sync_end(second, 9)
        with pytest.raises(StoreError):
            store.sync_begin()
    finally:
        worker.close()


def test_a_flush_past_the_threshold_goes_to_the_writer_and_is_read_from_memory_until_written(open_store):
    """The broker's stores (durability.py): a flush past ``flush_threshold`` hands its buffers
    to ``writer`` instead of writing on the appending thread; they are read from memory until
    ``writes_done``; the next sync fsyncs them; a failed write fails the store."""
    from warren.store.fsync_worker import run_job
    store = open_store(fsync=True, flush_threshold=1000)
    handed = []
    store.writer = lambda s, batch: handed.append((s, batch))
    fill(store, range(1, 21))  # 2,000 octets and more: two flushes
    assert len(handed) >= 1 and all(s is store for s, _ in handed)
    assert all(os.path.getsize(os.path.join(store.directory, f)) == 0 for f in files(store.directory, "msgs"))
    assert [store.read(s) for s in (1, 20)] == [rec(1), rec(20)]
    for _, batch in handed:
        assert run_job([], [], [], batch.writes) == 0
        store.writes_done(batch, 0)
    assert store.read(1) == rec(1) and store.unwritten < 1000
    store.writer = None
    assert store.sync() == 20
    store.close()
    assert [seq for seq, _, _ in open_store(fsync=True).recover()] == list(range(1, 21))


def test_a_failed_handed_write_fails_the_store(open_store):
    store = open_store(fsync=True, flush_threshold=100)
    handed = []
    store.writer = lambda s, batch: handed.append(batch)
    fill(store, range(1, 3))
    for fd, _ in handed[0].writes:
        os.close(fd)
    store.writes_done(handed[0], 5)  # EIO
    with pytest.raises(StoreError):
        store.append(3, rec(3))
