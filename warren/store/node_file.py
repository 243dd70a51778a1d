"""Small JSON files that every process of a node may read and change: ``access.json`` (users,
vhosts, permissions), ``policies.json``, and with ``--workers`` ``global_parameters.json``.

What they share, in one place:

* ``file_stamp(path)``: what tells a process that another one replaced the file (inode,
  mtime, size; None while it does not exist), a stat per look;
* ``locked(path)``: an exclusive ``flock`` on ``<path>.lock`` for a read-modify-write: read
  the file again inside it, so two processes changing it at the same moment both keep their
  change (without it, the later rename would drop the other's);
* ``replace_durably(path, data)``: a temporary file, fsync, rename, fsync of the folder, so
  that a change answered to a client survives kill -9 and a power cut.
"""

from __future__ import annotations

import fcntl
import os
from contextlib import contextmanager
from pathlib import Path

__all__ = ["file_stamp", "locked", "replace_durably"]


def file_stamp(path) -> tuple | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size)


@contextmanager
def locked(path):
    """Exclusive among the processes sharing ``path`` (and among threads: one open file each);
    ``None`` (state kept in memory only) locks nothing."""
    if path is None:
        yield
        return
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(str(path) + ".lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def replace_durably(path, data: bytes, mode: int = 0o644, fsync: bool = True) -> None:
    """``path`` holds ``data`` whole or its old content, never a part (``fsync=False``: not
    after a power cut, for tests)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, mode)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        if fsync:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    if fsync:
        dfd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
