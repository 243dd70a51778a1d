"""Small JSON files that every process of a node may read and change: ``access.json`` (users,
vhosts, permissions), ``policies.json``, and with ``--workers`` ``global_parameters.json``.

What they share, in one place:

* ``file_stamp(path)``: what tells a process that another one replaced the file (inode,
  mtime, size; None while it does not exist), a stat per look;
* ``locked(path)``: an exclusive ``flock`` on ``<path>.lock`` for a read-modify-write: read
  the file again inside it, so two processes changing it at the same moment both keep their
  change (without it, the later rename would drop the other's);
* ``replace_durably(path, data)``: a temporary file, fsync, rename, fsync of the folder, so
  that a change answered to a client survives kill -9 and a power cut;
* ``check_node_files(data_dir)``: at start, each of them that exists must read as JSON, or the
  broker does not start (``DamagedFile``, one line naming the file and the way out): starting
  without them would drop every user, permission or policy without anyone deciding to. These
  files carry no checksum: damage that leaves valid JSON (a flipped bit inside a name) is not
  seen here.
"""

from __future__ import annotations

import fcntl
import json
import os
from contextlib import contextmanager
from pathlib import Path

from warren.store.damage import DamagedFile

__all__ = ["file_stamp", "locked", "replace_durably", "check_node_files", "NODE_FILES"]

# the node's JSON files in its data folder, and what a start without them would lose
NODE_FILES = {
    "access.json": "users, virtual hosts and permissions",
    "policies.json": "policies",
    "parameters.json": "runtime parameters",
    "global_parameters.json": "global runtime parameters",
}


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


def check_node_file(path) -> str | None:
    """Why the node file ``path`` cannot be read as JSON, or None (also when it does not exist)."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        return None
    except OSError as e:
        return e.strerror or str(e)
    if not raw.strip() and os.path.basename(path) == "policies.json":
        return None  # written empty by hand: no policies (broker/policies.py)
    try:
        json.loads(raw)
    except ValueError as e:
        return f"not valid JSON: {e}"
    return None


def check_node_files(data_dir) -> None:
    """Raise DamagedFile for the first node file of ``data_dir`` that cannot be read (module doc)."""
    for name, what in NODE_FILES.items():
        path = os.path.join(data_dir, name)
        problem = check_node_file(path)
        if problem is not None:
            raise DamagedFile(f"{path} is damaged ({problem}): its {what} would be lost, so Warren does not "
                              f"start. Restore the file from a backup or mend it by hand "
                              f"(`warren store check {data_dir}` lists every damaged file)")
