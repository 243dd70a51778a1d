"""The group commit's fsyncs on a thread of their own, reported to the loop through an eventfd.

The event loop hands a worker what may block: write the buffers a job carries (``writes``),
fsync and close the descriptors, unlink fully acked segments, fsync and close the directory.
The loop writes a store file itself only while no fsync is under way (QueueStore.sync_begin):
a write can wait for the file's inode lock while its fsync stalls (FUSE), or for dirty-page
throttling on a stalled disk, and the loop would stop with it (tests/store/
test_powerloss_disks.py). Jobs run one at a time in the order they came, so each
starts after every earlier one ended, which is the store's ordering rule (unlinks and the
directory only after every earlier sync; queue_store.py, "Ordering rules"). A finished job
makes the eventfd readable; the loop then takes ``completed()``: ``[(job, errno), ...]``, 0 for
success. After a failed job every later one fails with the same errno and only closes its
descriptors: after a failed fsync the kernel may have dropped dirty pages, nothing is safe.

``FsyncWorker(then=other)`` only writes, and passes each job on to ``other`` for the rest (with
the error of a failed write, to fail there); both report it. The broker chains two this way
(Server._start_sync): its writes go on while an fsync stalls, so a stall keeps confirms waiting
and not the buffers in memory (a store's flush past its threshold goes through the writer too).

``FsyncWorker`` is compiled (warren/store/_fsync.c): its thread never takes the GIL, which a
busy loop holds nearly all the time, so a sync no longer waits for it at its start, after each
system call and at its hand-back (docs/performance.md, session 8). ``FsyncWorkerPy`` below is
the same steps on a ``threading.Thread``, used without the extension and compared with it in
tests/store/test_fsync_worker.py.
"""

from __future__ import annotations

import collections
import os
import threading

__all__ = ["FsyncWorker", "FsyncWorkerPy", "run_job"]


def run_job(fds: list, unlinks: list, dir_fds: list, writes: list = ()) -> int:
    """One job's steps, synchronously: the first error's errno, or 0. Every descriptor is
    closed whatever happens; nothing is written, fsynced or unlinked after a failure."""
    err = 0
    for fd, data in writes:
        if not err:
            try:
                mv = memoryview(data)
                while mv:
                    mv = mv[os.write(fd, mv):]
            except OSError as e:
                err = e.errno or 1
        err = _close(fd, err)
    for fd in fds:
        err = _fsync_close(fd, err)
    if not err:
        for path in unlinks:
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
            except OSError as e:
                err = e.errno or 1
                break
    for fd in dir_fds:
        err = _fsync_close(fd, err)
    return err


def _fsync_close(fd: int, err: int) -> int:
    if not err:
        try:
            os.fsync(fd)
        except OSError as e:
            err = e.errno or 1
    return _close(fd, err)


def _close(fd: int, err: int) -> int:
    """Close ``fd``; the job's first error (``err``, or this close's)."""
    try:
        os.close(fd)
    except OSError as e:
        if not err and not isinstance(e, InterruptedError):
            err = e.errno or 1
    return err


class FsyncWorkerPy:
    """The compiled worker's twin (module doc): the same methods and answers."""

    def __init__(self, then: "FsyncWorkerPy | None" = None) -> None:
        if then is not None and not isinstance(then, FsyncWorkerPy):
            raise TypeError("FsyncWorker(then=...): another FsyncWorker, or None")
        self._then = then  # writes here, the rest of each job there (module doc)
        self._efd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        self._cond = threading.Condition()
        self._todo: collections.deque = collections.deque()
        self._done: list = []
        self._busy = False
        self._stop = False
        self._failed = 0  # the first job's error: every later job fails with it (module doc)
        self._thread = threading.Thread(target=self._run, name="warren-fsync", daemon=True)
        self._thread.start()

    def fileno(self) -> int:
        return self._efd

    def submit(self, job: int, fds: list, unlinks: list, dir_fds: list, writes: list | None = None) -> None:
        writes = [] if writes is None else writes
        if not (type(fds) is list and type(unlinks) is list and type(dir_fds) is list and type(writes) is list):
            raise TypeError("submit expects (job, list of fds, list of bytes paths, list of fds[, list of (fd, octets)])")
        if not all(type(w) is tuple and len(w) == 2 for w in writes):
            raise TypeError("submit: each write is a (fd, octets) pair")
        for _, data in writes:
            memoryview(data)  # a TypeError for what holds no octets, as the compiled worker's
        for fd in fds + dir_fds + [w[0] for w in writes]:
            if not 0 <= fd < 2**31:  # a TypeError for what is not a number
                raise ValueError("not a file descriptor")
        if not all(isinstance(p, bytes) for p in unlinks):
            raise TypeError("submit: each path to unlink is bytes")
        with self._cond:
            if self._stop:
                raise ValueError("the fsync worker is closed")
            self._todo.append((job, list(fds), list(unlinks), list(dir_fds), list(writes), 0))
            self._cond.notify_all()

    def _pass_on(self, job: int, fds: list, unlinks: list, dir_fds: list, err: int) -> None:
        with self._cond:
            if self._stop:  # a stopped worker runs nothing more (the compiled one's enqueue)
                for fd in fds + dir_fds:
                    os.close(fd)
                return
            self._todo.append((job, fds, unlinks, dir_fds, [], err))
            self._cond.notify_all()

    def completed(self) -> list:
        try:
            os.eventfd_read(self._efd)
        except BlockingIOError:
            pass
        with self._cond:
            done, self._done = self._done, []
        return done

    def wait_idle(self) -> None:
        with self._cond:
            while self._todo or self._busy:
                self._cond.wait()

    def close(self) -> None:
        with self._cond:
            self._stop = True
            self._cond.notify_all()
        self._thread.join()

    def _run(self) -> None:
        cond = self._cond
        while True:
            with cond:
                while not self._todo and not self._stop:
                    cond.wait()
                if not self._todo:
                    cond.notify_all()
                    return
                job, fds, unlinks, dir_fds, writes, err = self._todo.popleft()
                self._busy = True
            then = self._then
            rest = (fds, unlinks, dir_fds)
            if then is not None:
                fds, unlinks, dir_fds = [], [], []
            if self._failed or err:  # failed here before, or its writes failed on the worker before
                for fd in [w[0] for w in writes] + fds + dir_fds:
                    try:
                        os.close(fd)
                    except OSError:
                        pass
                err = self._failed = self._failed or err
            else:
                err = self._failed = run_job(fds, unlinks, dir_fds, writes)
            with cond:  # reported here before ``then`` can report it: the loop hears of the writes first
                self._done.append((job, err))
            os.eventfd_write(self._efd, 1)
            if then is not None:  # still busy: wait_idle returns once ``then`` holds it
                then._pass_on(job, *rest, err)
            with cond:
                self._busy = False
                cond.notify_all()

    def __del__(self) -> None:
        try:
            os.close(self._efd)
        except (OSError, AttributeError):
            pass


try:
    from warren.store._fsync import FsyncWorker
except ImportError:  # built without the extension (setup.py): the same steps with the GIL
    FsyncWorker = FsyncWorkerPy
