"""DefinitionsStore's deferred changes: their records are written by ``sync`` (the group commit's
pool thread) right before its fsync, never by the call that makes them (warren/store/
definitions.py, "Deferred fsyncs"): a write behind a stalled fsync of the same file held the
event loop. Order, crashes, failed writes and compactions with records not written yet."""

from __future__ import annotations

import errno
import os
import threading

import pytest

from warren.store import definitions as defs_mod
from warren.store.definitions import DefinitionsStore
from warren.store.record import Scan


@pytest.fixture
def path(tmp_path):
    return tmp_path / "definitions.log"


def ops_in_file(path) -> list[tuple[str, str]]:
    import json
    data = open(path, "rb").read()
    return [(r["op"], r.get("name") or r.get("destination")) for r in
            (json.loads(data[start:start + n]) for _, start, n in Scan(data))]


def crash(store: DefinitionsStore) -> None:
    """kill -9: nothing closed, nothing more written (the page cache is kept)."""
    os.close(store._fd)
    store._fd = None


def test_a_deferred_change_writes_nothing_until_sync_which_writes_then_fsyncs(path, monkeypatch):
    s = DefinitionsStore(path)
    size = os.path.getsize(path)
    events = []
    real_write, real_fsync = os.write, os.fsync
    monkeypatch.setattr(defs_mod.os, "write", lambda fd, b: events.append("write") or real_write(fd, b))
    monkeypatch.setattr(defs_mod.os, "fsync", lambda fd: events.append("fsync") or real_fsync(fd))
    s.defer_fsync = True
    assert s.declare_queue("/", "q") and s.bind("/", "amq.direct", "q", "k") and s.delete_queue("/", "q", token="t")
    assert events == [] and os.path.getsize(path) == size  # applied in memory, no I/O
    assert s.load().queues == [] and (s.changes, s.durable) == (3, 0)
    assert s.sync() == 3 and events == ["write", "fsync"]  # one write and one fsync for the three
    assert ops_in_file(path) == [("queue.declare", "q"), ("bind", "q"), ("queue.delete", "q")]
    s.close()


def test_a_crash_loses_only_the_changes_no_sync_took(path):
    """What was answered (made durable by a sync) is there; what was applied after it is not,
    and was never answered."""
    s = DefinitionsStore(path)
    s.defer_fsync = True
    s.declare_queue("/", "answered")
    s.sync()
    s.declare_queue("/", "unanswered")
    crash(s)
    again = DefinitionsStore(path)
    assert [q.name for q in again.load().queues] == ["answered"]
    again.close()


def test_a_synchronous_change_writes_the_deferred_ones_before_its_own(path):
    s = DefinitionsStore(path)
    s.defer_fsync = True
    s.declare_queue("/", "a")
    s.declare_queue("/", "b")
    s.defer_fsync = False
    s.delete_queue("/", "a")  # start-up's kind of change: written and fsynced in the call
    assert s.durable == s.changes == 3
    assert ops_in_file(path) == [("queue.declare", "a"), ("queue.declare", "b"), ("queue.delete", "a")]
    assert s.sync() == 3
    s.close()
    assert [q.name for q in DefinitionsStore(path).load().queues] == ["b"]


def test_a_redeclare_without_defer_fsync_makes_the_deferred_declare_durable(path):
    s = DefinitionsStore(path)
    s.defer_fsync = True
    s.declare_queue("/", "q")
    s.defer_fsync = False
    assert not s.declare_queue("/", "q") and s.durable == s.changes == 1
    assert ops_in_file(path) == [("queue.declare", "q")]
    s.close()


def test_a_change_made_while_a_sync_is_at_the_disk_waits_for_nothing(path, monkeypatch):
    """The loop's change during a stalled fsync returns at once (no write, no lock the sync
    holds); its record goes to the file after the ones the stalled sync took, by the next sync."""
    s = DefinitionsStore(path)
    s.defer_fsync = True
    s.declare_queue("/", "first")
    at_disk, release = threading.Event(), threading.Event()
    real_fsync = os.fsync

    def stalled_fsync(fd):
        at_disk.set()
        assert release.wait(30)
        real_fsync(fd)

    monkeypatch.setattr(defs_mod.os, "fsync", stalled_fsync)
    syncing = threading.Thread(target=s.sync)
    syncing.start()
    try:
        assert at_disk.wait(30)
        done = threading.Event()
        meanwhile = threading.Thread(target=lambda: (s.declare_queue("/", "second"), done.set()))
        meanwhile.start()
        assert done.wait(10), "a deferred change waited for the stalled fsync"
        assert s.durable == 0 and s.changes == 2
    finally:
        release.set()
        syncing.join(30)
    assert s.durable == 1  # the stalled sync covered the first only
    monkeypatch.setattr(defs_mod.os, "fsync", real_fsync)
    assert s.sync() == 2
    assert ops_in_file(path) == [("queue.declare", "first"), ("queue.declare", "second")]
    s.close()


def _failing_write(monkeypatch, times: int) -> list:
    """os.write fails with EIO on every descriptor after writing half its data, ``times`` times."""
    real = os.write
    failed: list = []

    def write(fd, data):
        if len(failed) < times:
            failed.append(fd)
            real(fd, bytes(data)[:len(data) // 2])
            raise OSError(errno.EIO, "Input/output error")
        return real(fd, data)

    monkeypatch.setattr(defs_mod.os, "write", write)
    return failed


def test_a_failed_write_in_sync_is_handled_as_a_failed_fsync_the_log_rewritten(path, monkeypatch, caplog):
    s = DefinitionsStore(path)
    s.declare_queue("/", "before")
    s.defer_fsync = True
    s.declare_queue("/", "a")
    s.bind("/", "amq.direct", "a", "k")
    old_ino = os.stat(path).st_ino
    failed = _failing_write(monkeypatch, 1)
    assert s.sync() == s.changes == 3 and failed
    assert s.rewrites == 1 and os.stat(path).st_ino != old_ino
    assert "rewritten after a failed write; nothing was lost" in caplog.text
    s.declare_queue("/", "after")
    assert s.sync() == 4
    s.close()
    again = DefinitionsStore(path)
    assert [q.name for q in again.load().queues] == ["before", "a", "after"]
    assert [b.destination for b in again.load().bindings] == ["a"]
    again.close()


def test_a_failed_write_whose_rewrite_fails_too_fails_the_store(path, monkeypatch):
    """The group commit fails (the broker stops); nothing answered is lost, and the partial
    record left in the old file is a torn tail that the next open drops."""
    s = DefinitionsStore(path)
    s.declare_queue("/", "before")
    s.defer_fsync = True
    s.declare_queue("/", "a")
    _failing_write(monkeypatch, 100)
    with pytest.raises(OSError, match="definitions log .*write failed"):
        s.sync()
    with pytest.raises(OSError, match="failed earlier"):
        s.sync()
    with pytest.raises(OSError, match="failed earlier"):
        s.declare_queue("/", "refused")
    monkeypatch.undo()
    crash(s)
    again = DefinitionsStore(path)
    assert [q.name for q in again.load().queues] == ["before"]
    again.close()


def test_a_compaction_takes_the_records_not_written_yet_once(path, monkeypatch):
    """A sync that compacts writes every live definition to the new file, the changes made
    since it took its records too: those are not written again after it."""
    s = DefinitionsStore(path, compact_after=4)
    s.defer_fsync = True
    for i in range(6):
        s.declare_queue("/", "kept", arguments={"x-n": i})
    real_fsync = os.fsync

    def fsync_racing(fd):
        monkeypatch.setattr(defs_mod.os, "fsync", real_fsync)
        s.declare_queue("/", "meanwhile")  # the loop's, after the sync took its records
        real_fsync(fd)

    monkeypatch.setattr(defs_mod.os, "fsync", fsync_racing)
    s.sync()
    assert s.dead_records == 0 and s.durable == s.changes == 7 and s._unwritten == []
    assert s.sync() == 7
    assert ops_in_file(path) == [("queue.declare", "kept"), ("queue.declare", "meanwhile")]
    s.close()


def test_compact_and_close_take_the_records_not_written_yet(path):
    s = DefinitionsStore(path)
    s.defer_fsync = True
    s.declare_queue("/", "a")
    s.compact()
    assert s.durable == s.changes == 1 and ops_in_file(path) == [("queue.declare", "a")]
    s.declare_queue("/", "b")
    s.close()
    assert ops_in_file(path) == [("queue.declare", "a"), ("queue.declare", "b")]
