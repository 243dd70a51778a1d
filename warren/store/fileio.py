"""A group commit's writes in one call that lets the GIL go once.

``write_and_dup(writes, dup_fds)``: every ``(fd, octets)`` written whole, in order (a short write
or EINTR writes the rest), then each of ``dup_fds`` duplicated; returns the duplicates. On an
error nothing more is written, the duplicates already made are closed, OSError.

It runs on the event loop's thread (``QueueStore.sync_begin``: the writes only reach the page
cache) and, for a flush past the buffer threshold, wherever the store is appended to; the
fsyncs that follow are an ``FsyncWorker``'s (fsync_worker.py). Compiled in
warren/store/_fsync.c, beside the worker; ``write_and_dup_py`` is the same steps one system call at a time,
used without the extension and compared with it in tests/protocol/test_speedups.py.
"""

from __future__ import annotations

import errno
import os

__all__ = ["write_and_dup", "write_and_dup_py", "make_dirs", "make_dirs_durable", "fsync_ancestors", "fsync_dir"]


def write_and_dup_py(writes: list, dup_fds: list) -> list[int]:
    for fd, data in writes:
        mv = memoryview(data)
        while mv:
            mv = mv[os.write(fd, mv):]  # os.write retries EINTR itself (PEP 475)
    duplicates: list[int] = []
    try:
        for fd in dup_fds:
            duplicates.append(os.dup(fd))
    except BaseException:
        for fd in duplicates:
            os.close(fd)
        raise
    return duplicates


def make_dirs_durable(path: str, fsync: bool = True) -> None:
    """``os.makedirs(path, exist_ok=True)``, and each folder it creates survives a power cut:
    a new name is durable only once the folder holding it is fsynced, so without this a store
    folder (``queues/<digest>``, created with the first durable queue) could vanish with every
    message fsynced inside it (found by tests/store/test_powerloss_fs.py's layer)."""
    for folder in make_dirs(path):
        if fsync:
            fsync_dir(os.path.dirname(folder))


def make_dirs(path: str) -> list[str]:
    """``os.makedirs(path, exist_ok=True)``; returns the folders it created, outermost first.
    Their names are durable only once each one's parent is fsynced, which the caller owes
    (``make_dirs_durable`` does it at once; a store does it in its first sync, off the event
    loop: group_commit.py)."""
    path = os.path.abspath(path)
    missing = []
    while not os.path.isdir(path):
        missing.append(path)
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    created = []
    for folder in reversed(missing):
        try:
            os.mkdir(folder)
        except FileExistsError:
            if not os.path.isdir(folder):
                raise
            continue  # made meanwhile by someone else, who makes it durable
        created.append(folder)
    return created


def fsync_ancestors(path: str) -> None:
    """Fsync every folder above ``path`` up to the root: its name, and theirs, survive a power
    cut whoever created them (the data folder is made by ``mkdir -p`` before any store opens).
    A folder this user may not open, or whose file system takes no fsync of a folder (read-only,
    or one that answers EINVAL), is passed over: its names are not ours to make durable."""
    path = os.path.abspath(path)
    while True:
        parent = os.path.dirname(path)
        if parent == path:
            return
        try:
            fsync_dir(parent)
        except OSError as e:
            if e.errno not in (errno.EACCES, errno.EPERM, errno.EINVAL, errno.EROFS, errno.ENOTSUP):
                raise
        path = parent


def fsync_dir(path: str) -> None:
    """Make the names in folder ``path`` (creates, renames, unlinks) durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


try:
    from warren.store._fsync import write_and_dup
except ImportError:
    write_and_dup = write_and_dup_py
