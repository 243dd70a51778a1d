"""The group commit's fsync worker: the compiled one (no GIL) and its Python twin, side by side.

Both must give the same answers for the same jobs: descriptors fsynced and closed, unlinks
after the fsyncs, the directory last, jobs finished in the order they came and reported
through the eventfd, and a failure that fails every later job without touching the disk.
"""

from __future__ import annotations

import errno
import os
import select

import pytest

from warren.store import fsync_worker
from warren.store.fsync_worker import FsyncWorkerPy

TWINS = [pytest.param(FsyncWorkerPy, id="python")]
if fsync_worker.FsyncWorker is not FsyncWorkerPy:
    TWINS.insert(0, pytest.param(fsync_worker.FsyncWorker, id="compiled"))

UNUSED_FD = 1_000_000  # a descriptor number nothing has open


def is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


def wait_done(worker, count: int, timeout: float = 5.0) -> list:
    """Wait on the eventfd, as the loop does, until ``count`` jobs were reported."""
    done: list = []
    while len(done) < count:
        ready, _, _ = select.select([worker.fileno()], [], [], timeout)
        assert ready, f"only {len(done)} of {count} jobs reported within {timeout} s"
        done += worker.completed()
    return done


@pytest.fixture(params=TWINS)
def worker(request):
    w = request.param()
    yield w
    w.close()


def test_a_job_fsyncs_closes_unlinks_then_syncs_the_directory(worker, tmp_path):
    data = os.open(tmp_path / "msgs.1", os.O_WRONLY | os.O_CREAT, 0o644)
    os.write(data, b"record")
    (tmp_path / "msgs.0").write_bytes(b"acked")
    dup, dir_fd = os.dup(data), os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    worker.submit(1, [dup], [os.fsencode(tmp_path / "msgs.0")], [dir_fd])
    assert wait_done(worker, 1) == [(1, 0)]
    os.close(data)
    assert not is_open(dup) and not is_open(dir_fd)  # the worker closed them
    assert not (tmp_path / "msgs.0").exists() and (tmp_path / "msgs.1").read_bytes() == b"record"
    assert worker.completed() == []  # reported once


def test_jobs_finish_in_the_order_they_came_and_a_missing_file_is_no_error(worker, tmp_path):
    fd = os.open(tmp_path / "f", os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        for job in range(20):
            worker.submit(job, [os.dup(fd)], [os.fsencode(tmp_path / f"gone{job}")], [])
        assert wait_done(worker, 20) == [(job, 0) for job in range(20)]
    finally:
        os.close(fd)


def test_wait_idle_returns_once_every_job_ran(worker, tmp_path):
    fds = [os.open(tmp_path / f"f{i}", os.O_WRONLY | os.O_CREAT, 0o644) for i in range(50)]
    for i, fd in enumerate(fds):
        worker.submit(i, [fd], [], [])
    worker.wait_idle()
    assert [job for job, _ in worker.completed()] == list(range(50))


def test_a_failed_fsync_fails_every_later_job_and_touches_nothing_more(worker, tmp_path):
    """After a failed fsync the kernel may have dropped dirty pages: the job's unlinks and
    directory fsync are skipped, every descriptor is closed all the same, and every later job
    fails with the same errno without an unlink."""
    good = os.open(tmp_path / "f", os.O_WRONLY | os.O_CREAT, 0o644)
    (tmp_path / "a").write_bytes(b"")
    (tmp_path / "b").write_bytes(b"")
    first, last, later = os.dup(good), os.dup(good), os.dup(good)
    dir_fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    worker.submit(1, [first, UNUSED_FD, last], [os.fsencode(tmp_path / "a")], [dir_fd])
    worker.submit(2, [later], [os.fsencode(tmp_path / "b")], [])
    assert wait_done(worker, 2) == [(1, errno.EBADF), (2, errno.EBADF)]
    os.close(good)
    assert not any(is_open(fd) for fd in (first, last, later, dir_fd))
    assert (tmp_path / "a").exists() and (tmp_path / "b").exists()


def test_a_jobs_writes_go_first_in_order_and_its_buffers_may_change_only_after(worker, tmp_path):
    """The broker hands over a sync's buffers (QueueStore.sync_begin(defer_writes=True)): each
    written whole on its own descriptor, which is closed, before the job's fsyncs; a second job's
    writes follow the first's in the file. A bytearray the job holds cannot be resized until
    ``completed`` reported it (the compiled worker holds its buffer; the twin only a reference)."""
    path = tmp_path / "msgs.1"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    first, second = bytearray(b"a" * 70000), bytearray(b"b" * 3)
    w1, w2, w3, f1 = os.dup(fd), os.dup(fd), os.dup(fd), os.dup(fd)
    worker.submit(1, [f1], [], [], [(w1, first), (w2, b"-")])
    worker.submit(2, [], [], [], [(w3, second)])
    assert wait_done(worker, 2) == [(1, 0), (2, 0)]
    assert path.read_bytes() == b"a" * 70000 + b"-" + b"bbb"
    assert not any(is_open(x) for x in (w1, w2, w3, f1))
    first.extend(b"free again")  # released by completed()
    bad = os.dup(fd)
    worker.submit(3, [], [], [], [(UNUSED_FD, b"lost"), (bad, b"not written")])
    assert wait_done(worker, 1) == [(3, errno.EBADF)]
    assert not is_open(bad) and path.read_bytes().endswith(b"bbb")
    os.close(fd)


def test_bad_arguments_are_refused_and_leave_the_descriptors_to_the_caller(worker, tmp_path):
    fd = os.open(tmp_path / "f", os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        with pytest.raises(TypeError):
            worker.submit(1, [fd], ["not bytes"], [])
        with pytest.raises(TypeError):
            worker.submit(1, (fd,), [], [])
        with pytest.raises((TypeError, ValueError)):
            worker.submit(1, [-1], [], [])
        with pytest.raises(TypeError):
            worker.submit(1, [], [], [], [fd])
        with pytest.raises(TypeError):
            worker.submit(1, [], [], [], [(fd, "text")])
        os.fstat(fd)  # still open: a refused job owns nothing
        worker.wait_idle()
        assert worker.completed() == []
    finally:
        os.close(fd)


def test_a_closed_worker_takes_no_job_and_closing_finishes_the_queue(tmp_path):
    for twin in [p.values[0] for p in TWINS]:
        w = twin()
        fds = [os.open(tmp_path / f"{twin.__name__}{i}", os.O_WRONLY | os.O_CREAT, 0o644) for i in range(10)]
        for i, fd in enumerate(fds):
            w.submit(i, [fd], [], [])
        w.close()  # the queued jobs run first
        assert len(w.completed()) == 10
        assert not any(is_open(fd) for fd in fds)
        with pytest.raises(ValueError):
            w.submit(99, [], [], [])


@pytest.mark.parametrize("twin", [p.values[0] for p in TWINS], ids=[p.id for p in TWINS])
def test_a_writer_passes_each_job_on_after_its_writes_and_a_failed_write_fails_it_there(twin, tmp_path):
    """``FsyncWorker(then=fsyncs)``: the writer does a job's writes and reports it; the other
    worker does the rest (fsyncs, unlinks, the directory) and reports it too, in order. After a
    failed write the other worker closes that job's descriptors and fails it and every later
    one, unlinking nothing (the broker chains them so: Server._start_sync)."""
    fsyncs = twin()
    writer = twin(then=fsyncs)
    try:
        path = tmp_path / "msgs.1"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        (tmp_path / "acked").write_bytes(b"")
        dir_fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
        writer.submit(1, [os.dup(fd)], [os.fsencode(tmp_path / "acked")], [dir_fd], [(os.dup(fd), b"one")])
        writer.submit(-1, [], [], [], [(os.dup(fd), b"-two")])  # a flush: nothing to fsync
        # the writer reported each job before passing it on: once the other worker reported it,
        # the writer's report is there to take (the server takes the writer's first)
        assert wait_done(fsyncs, 2) == [(1, 0), (-1, 0)]
        assert writer.completed() == [(1, 0), (-1, 0)]
        assert path.read_bytes() == b"one-two" and not (tmp_path / "acked").exists() and not is_open(dir_fd)
        (tmp_path / "kept").write_bytes(b"")
        later = os.dup(fd)
        writer.submit(2, [os.dup(fd)], [os.fsencode(tmp_path / "kept")], [], [(UNUSED_FD, b"lost")])
        writer.submit(3, [later], [], [], [])
        assert wait_done(writer, 2) == [(2, errno.EBADF), (3, errno.EBADF)]
        assert wait_done(fsyncs, 2) == [(2, errno.EBADF), (3, errno.EBADF)]
        assert (tmp_path / "kept").exists() and not is_open(later)
        os.close(fd)
        with pytest.raises(TypeError):
            twin(then="not a worker")
    finally:
        writer.close()
        fsyncs.close()
