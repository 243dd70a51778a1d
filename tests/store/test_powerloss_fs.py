"""The power-loss layer itself (powerloss_fs.py), then the stores on it.

First the layer keeps its promises: what was fsynced stays after a ``drop``, the rest goes; a
new name, a rename or an unlink without the folder's fsync is undone; a torn last write keeps a
part of it; a failed fsync loses its writes the way Linux does (and the next fsync succeeds);
writes fail with EIO and ENOSPC on command; a stalled fsync holds up no other call. Then
Warren's stores on it: a queue store and the definitions log made in a new folder keep, after a
power cut, everything they synced (the folder's own name was not made durable before:
``make_dirs_durable`` and ``fsync_ancestors`` in warren/store/fileio.py).
"""

from __future__ import annotations

import errno
import os
import threading
import time

import pytest

from tests.store.powerloss_fs import PowerLossFS, unavailable_reason
from warren.store import fileio
from warren.store.definitions import DefinitionsStore
from warren.store.queue_store import QueueStore

SKIP = unavailable_reason()
pytestmark = pytest.mark.skipif(SKIP is not None, reason=f"no FUSE here: {SKIP}")


@pytest.fixture(scope="module")
def plfs(tmp_path_factory):
    yield from PowerLossFS.mounted(tmp_path_factory.mktemp("powerloss"))


@pytest.fixture
def mnt(plfs):
    """The mount, emptied (durable state too) and without faults for each test."""
    plfs.reset()
    yield plfs.mountpoint
    plfs.clear()


def fsync_dir(path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_file(path, data: bytes, fsync: bool = True) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, data)
        if fsync:
            os.fsync(fd)
    finally:
        os.close(fd)


def test_fsynced_writes_are_kept_and_the_rest_dropped(plfs, mnt):
    fd = os.open(mnt / "log", os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
    os.write(fd, b"durable ")
    os.fsync(fd)
    fsync_dir(mnt)
    os.write(fd, b"lost")
    os.close(fd)
    assert (mnt / "log").read_bytes() == b"durable lost"  # programs see both before the cut
    report = plfs.drop()
    assert report["dropped_writes"] == 1 and report["dropped_octets"] == 4
    assert (mnt / "log").read_bytes() == b"durable "


def test_fdatasync_counts_as_fsync_and_truncation_waits_for_it(plfs, mnt):
    write_file(mnt / "f", b"0123456789")
    fsync_dir(mnt)
    fd = os.open(mnt / "f", os.O_RDWR)
    os.ftruncate(fd, 4)
    os.close(fd)
    plfs.drop()
    assert (mnt / "f").read_bytes() == b"0123456789"  # the truncation was not synced
    fd = os.open(mnt / "f", os.O_RDWR)
    os.ftruncate(fd, 4)
    os.fdatasync(fd)
    os.close(fd)
    plfs.drop()
    assert (mnt / "f").read_bytes() == b"0123"


def test_a_new_file_needs_its_folders_fsync(plfs, mnt):
    write_file(mnt / "a", b"synced data, unsynced name")
    (mnt / "sub").mkdir()
    plfs.drop()
    assert sorted(os.listdir(mnt)) == []
    write_file(mnt / "a", b"kept")
    fsync_dir(mnt)
    plfs.drop()
    assert os.listdir(mnt) == ["a"] and (mnt / "a").read_bytes() == b"kept"


def test_a_rename_without_the_folders_fsync_is_undone(plfs, mnt):
    write_file(mnt / "old", b"content")
    fsync_dir(mnt)
    os.rename(mnt / "old", mnt / "new")
    assert os.listdir(mnt) == ["new"]
    report = plfs.drop()
    assert report["dropped_names"] == 2  # "new" went, "old" came back
    assert os.listdir(mnt) == ["old"] and (mnt / "old").read_bytes() == b"content"
    os.rename(mnt / "old", mnt / "new")
    fsync_dir(mnt)
    plfs.drop()
    assert os.listdir(mnt) == ["new"] and (mnt / "new").read_bytes() == b"content"


def test_an_unlink_without_the_folders_fsync_is_undone(plfs, mnt):
    write_file(mnt / "doomed", b"still here")
    fsync_dir(mnt)
    os.unlink(mnt / "doomed")
    plfs.drop()
    assert (mnt / "doomed").read_bytes() == b"still here"


def test_a_torn_last_write_keeps_a_part_of_it(plfs, mnt):
    write_file(mnt / "t", b"head|")
    fsync_dir(mnt)
    write_file(mnt / "t", b"A" * 100, fsync=False)
    write_file(mnt / "t", b"B" * 100, fsync=False)
    report = plfs.drop(tear=True, seed=7)
    kept = report["torn"]["kept"]
    assert report["torn"]["path"] == "/t" and 0 < kept < 100
    # the last write, cut, lands where it was written; the lost one before it leaves zeros (a file
    # system that wrote the size before the data)
    assert (mnt / "t").read_bytes() == b"head|" + bytes(100) + b"B" * kept
    # the same seed tears at the same octet
    write_file(mnt / "t", b"C" * 100, fsync=False)
    assert plfs.drop(tear=True, seed=7)["torn"]["kept"] == kept


def test_a_failed_fsync_loses_its_writes_and_the_retry_succeeds(plfs, mnt):
    """Linux's behaviour since 4.13, which a store must not take for success (fsyncgate)."""
    write_file(mnt / "data", b"old|")
    fsync_dir(mnt)
    plfs.fault("fsync", path="/data", errno_name="EIO", times=1)
    fd = os.open(mnt / "data", os.O_RDWR | os.O_APPEND)
    os.write(fd, b"new")
    with pytest.raises(OSError) as e:
        os.fsync(fd)
    assert e.value.errno == errno.EIO
    os.fsync(fd)  # the retry "works": it has nothing left to write
    os.close(fd)
    assert (mnt / "data").read_bytes() == b"old|new"  # still read back from the cache
    plfs.drop()
    assert (mnt / "data").read_bytes() == b"old|"  # and gone at the power cut


def test_write_errors_and_a_full_disk(plfs, mnt):
    plfs.fault("write", path="/eio", errno_name="EIO")
    with pytest.raises(OSError) as e:
        write_file(mnt / "eio", b"x", fsync=False)
    assert e.value.errno == errno.EIO
    write_file(mnt / "other", b"fine", fsync=False)  # only the matching paths fail
    plfs.clear()
    plfs.capacity(1000)
    write_file(mnt / "big", b"x" * 900, fsync=False)
    with pytest.raises(OSError) as e:
        write_file(mnt / "big", b"y" * 200, fsync=False)
    assert e.value.errno == errno.ENOSPC
    assert os.statvfs(mnt).f_bavail * os.statvfs(mnt).f_frsize < 1000
    os.unlink(mnt / "big")  # a freed file gives its room back (at the next drop or collection)


def test_a_stalled_fsync_holds_up_no_other_call(plfs, mnt):
    write_file(mnt / "slow", b"x")
    plfs.fault("fsync", path="/slow", stall=2.0)
    fd = os.open(mnt / "slow", os.O_RDWR | os.O_APPEND)
    os.write(fd, b"y")
    done = threading.Event()
    started = time.monotonic()

    def stalled():
        os.fsync(fd)
        done.set()

    t = threading.Thread(target=stalled)
    t.start()
    try:
        for i in range(20):  # other files are written, fsynced and read while it stalls
            write_file(mnt / f"fast{i}", b"z" * 100)
            assert (mnt / f"fast{i}").read_bytes() == b"z" * 100
        assert not done.is_set(), "the other calls took as long as the stall"
        assert done.wait(10)
        assert time.monotonic() - started >= 2.0
        assert plfs.stats()["stalls"] == 1
    finally:
        t.join(10)
        os.close(fd)


# --- Warren's stores on the layer ------------------------------------------------------------


def test_a_queue_store_in_a_new_folder_keeps_what_it_synced(plfs, mnt):
    """Fails without make_dirs_durable: queues/<digest> was made by os.makedirs and its name never
    fsynced, so a power cut took the folder with every synced message in it."""
    (mnt / "data").mkdir()
    fsync_dir(mnt)  # the data folder exists durably, as after a broker's first start
    folder = mnt / "data" / "queues" / "q1"
    store = QueueStore(folder)
    for seq in range(1, 11):
        store.append(seq, b"message %d" % seq)
    store.sync()
    store.append(11, b"not synced")
    store.flush()
    store._release()  # the process dies: its descriptors close, nothing more is synced
    plfs.drop(tear=True, seed=3)
    again = QueueStore(folder)
    try:
        assert [seq for seq, _, _ in again.recover()] == list(range(1, 11))
    finally:
        again.close()


@pytest.mark.parametrize("seed", range(4))
def test_an_ack_log_cut_by_a_power_cut_is_a_torn_tail_not_damage(plfs, mnt, seed):
    """An ack log is written at every sync and fsynced once a second (ack_sync_interval): a
    power cut then leaves the writes since its fsync as zeros and the newest one whole or torn.
    Recovery took the records after the zeros for good records behind damage and reported
    (and kept aside) a false alarm; it is the tail a crash leaves, cut without a report."""
    (mnt / "data").mkdir()
    fsync_dir(mnt)
    folder = mnt / "data" / "queues" / "q1"
    store = QueueStore(folder)
    for seq in range(1, 201):
        store.append(seq, b"message %d" % seq)
    store.sync()
    for seq in range(1, 21):  # acks fsynced by this sync
        store.ack(seq)
    store.sync()
    store.ack_sync_interval = 3600  # from here ack logs are written at each sync, not fsynced
    for batch in range(3):  # three writes to the ack log, none fsynced
        for seq in range(21 + 30 * batch, 51 + 30 * batch):
            store.ack(seq)
        store.sync()
    store._release()
    cut = plfs.drop(tear=True, seed=seed)
    assert cut["torn"] and cut["torn"]["path"].endswith("acks.0000000001")
    again = QueueStore(folder)
    try:
        assert again.recovery_stats.damage == []
        assert not (mnt / "data" / "quarantine").exists()
        live = {seq for seq, _ in again.unacked()}
        assert set(range(1, 21)).isdisjoint(live) and set(range(111, 201)) <= live  # synced acks hold
    finally:
        again.close()


@pytest.mark.parametrize("seed", range(4))
def test_a_torn_tail_cut_at_start_is_cut_durably_before_the_next_append(plfs, mnt, seed):
    """Recovery cut a torn ack log back (zeros, whole records, a torn one) without fsyncing the
    cut; the next appends were written where the cut put the end. A second power cut before the
    log's next fsync undid the cut and kept a torn new write in the old tail's place, the rest of
    that tail after it: records behind a bad one, reported (and kept aside) as damage. The
    crash schedules found it (chains 24 and 32 of session 17's run); the cut is fsynced now."""
    (mnt / "data").mkdir()
    fsync_dir(mnt)
    folder = mnt / "data" / "queues" / "q1"
    store = QueueStore(folder)
    for seq in range(1, 301):
        store.append(seq, b"message %d" % seq)
    store.sync()
    for seq in range(1, 21):  # acks fsynced by this sync: the ack log is there for good
        store.ack(seq)
    store.sync()
    store.ack_sync_interval = 3600  # from here ack logs are written at each sync, not fsynced
    for batch in range(3):
        for seq in range(21 + 30 * batch, 51 + 30 * batch):
            store.ack(seq)
        store.sync()
    store._release()
    plfs.drop(tear=True, seed=seed)  # zeros, then the newest write whole or torn
    again = QueueStore(folder)  # cuts the torn tail
    again.ack_sync_interval = 3600
    assert again.recovery_stats.damage == []
    for seq in range(200, 210):  # one short write where the cut put the end, not fsynced
        again.ack(seq)
    again.sync()
    again._release()
    cut = plfs.drop(tear=True, seed=seed + 100)
    assert cut["torn"] and cut["torn"]["path"].endswith("acks.0000000001")
    third = QueueStore(folder)
    try:
        assert third.recovery_stats.damage == []
        assert not (mnt / "data" / "quarantine").exists()
    finally:
        third.close()


def test_a_new_data_folders_definitions_survive(plfs, mnt):
    """Fails without fsync_ancestors: mkdir -p made the data folder, whose name nobody fsynced."""
    folder = mnt / "a" / "b"
    folder.mkdir(parents=True)  # as lock_data_dir does, before the definitions log opens
    defs = DefinitionsStore(folder / "definitions.log")
    defs.declare_queue("/", "q1")
    defs.close()
    plfs.drop()
    again = DefinitionsStore(folder / "definitions.log")
    try:
        assert [q.name for q in again.load().queues] == ["q1"]
    finally:
        again.close()


def test_make_dirs_durable_fsyncs_the_parent_of_each_folder_it_makes(plfs, mnt):
    fileio.make_dirs_durable(str(mnt / "x" / "y" / "z"))
    plfs.drop()
    assert (mnt / "x" / "y" / "z").is_dir()
    fileio.make_dirs_durable(str(mnt / "x" / "y" / "z"))  # already there: nothing to do


def test_a_queue_store_whose_write_failed_confirms_nothing_more(plfs, mnt):
    """A flush past the threshold fails (EIO): the broker's next group commit (sync_begin, the
    worker's fsync, sync_end) must fail too, not succeed with nothing left to write and release
    the confirms of the messages whose write failed."""
    from warren.store.fsync_worker import run_job
    from warren.store.group_commit import StoreError

    (mnt / "data").mkdir()
    fsync_dir(mnt)
    store = QueueStore(mnt / "data" / "q", flush_threshold=1000)
    try:
        store.append(1, b"synced")
        store.sync()
        plfs.fault("write", path="/data/q/msgs", errno_name="EIO", times=1)
        store.append(2, b"x" * 500)
        with pytest.raises(OSError):
            store.append(3, b"y" * 600)  # past the threshold: the flush writes 2 and 3, and fails
        assert store.failed is not None
        with pytest.raises(StoreError):  # the group commit that would confirm 2 and 3
            work = store.sync_begin()
            store.sync_end(work, run_job(work.fds, work.unlinks, work.dir_fds))
    finally:
        store._release()
    plfs.drop()
    again = QueueStore(mnt / "data" / "q")
    try:
        assert [seq for seq, _, _ in again.recover()] == [1]
    finally:
        again.close()


def test_fsync_ancestors_passes_over_folders_that_take_no_fsync_but_not_a_failing_disk(plfs, mnt):
    (mnt / "a" / "b").mkdir(parents=True)
    plfs.fault("fsyncdir", path="/a", errno_name="EINVAL", exact=True)  # a file system without folder fsync
    fileio.fsync_ancestors(str(mnt / "a" / "b" / "definitions.log"))  # no error: it goes on upwards
    plfs.drop()
    assert os.listdir(mnt) == ["a"] and os.listdir(mnt / "a") == []  # "/" was fsynced, "a" could not be
    (mnt / "a" / "b").mkdir()
    plfs.clear()
    plfs.fault("fsyncdir", path="/a/b", errno_name="EIO", exact=True)
    with pytest.raises(OSError) as e:
        fileio.fsync_ancestors(str(mnt / "a" / "b" / "definitions.log"))
    assert e.value.errno == errno.EIO


def test_a_compaction_whose_folder_fsync_fails_leaves_no_change_in_an_unlinked_file(plfs, mnt):
    """The compacted log is renamed over the old one, then the folder is fsynced. When that
    fsync failed, the store kept appending to the old file, which the rename had unlinked: a
    later change was acknowledged there, and when the compaction retried with it failed too, it
    was gone at the next start. Now the store takes the file its name points to and, the
    rename's durability unknown, refuses further changes (fsyncgate: no retry)."""
    (mnt / "d").mkdir()
    fsync_dir(mnt)
    defs = DefinitionsStore(mnt / "d" / "definitions.log", compact_after=4)
    try:
        defs.declare_queue("/", "kept")
        plfs.fault("fsyncdir", path="/d", errno_name="EIO", exact=True, times=1)
        for _ in range(2):  # dead records: a declare and its delete, twice, and the log is compacted
            defs.declare_queue("/", "temp")
            defs.delete_queue("/", "temp")  # the change is durable; the compaction's folder fsync fails
        assert plfs.stats()["fault_hits"] == [1]
        # the next compaction (retried at the next change) fails before its rename this time
        plfs.fault("fsync", path="/d/definitions.log.compact", errno_name="EIO", exact=True, times=1)
        try:
            defs.declare_queue("/", "after")
            acknowledged_after = True
        except OSError:
            acknowledged_after = False  # refused: the client hears of it
    finally:
        defs.close()
    again = DefinitionsStore(mnt / "d" / "definitions.log")
    try:
        names = {q.name for q in again.load().queues}
        assert "kept" in names and "temp" not in names
        assert ("after" in names) == acknowledged_after, "an acknowledged change is missing at the next start"
    finally:
        again.close()
    assert not acknowledged_after  # the store failed: a failed fsync is not retried as if it worked
