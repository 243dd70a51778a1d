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
* ``on_loop(fn)``: the HTTP API changes these files on a thread of its own (warren/management/
  api/common.py ``off_loop``), so that an fsync that stalls holds that request only, never the
  broker's loop; what a change then does to the running broker (a vhost made, policies
  applied) runs on the loop through ``on_loop``, which the changes call, and the thread waits
  for it. Called on the loop, or anywhere else, it runs ``fn`` at once;
* ``check_node_files(data_dir)``: at start, each of them that exists must read as JSON and
  match its checksum, or the broker does not start (``DamagedFile``, one line naming the file
  and the way out): starting without them, or with a flipped bit in a user's name, would drop
  users, permissions or policies without anyone deciding to;
* ``share(path, hook)``: with ``--cluster-etcd`` the files are the cluster's, kept in etcd
  (warren/cluster/shared_files.py registers a hook per file): ``locked(path)`` (waiting) then
  also takes the cluster-wide lock and brings the cluster's latest content into the file before
  the caller reads it, and ``replace_durably(path, ...)`` writes to etcd before the file (an
  exception, and nothing written, when etcd cannot commit it). ``apply_shared`` is how the
  cluster's watcher writes another node's change into the file (no echo). Without a cluster
  nothing is registered and each of these costs one look at an empty dict.

The checksum: ``replace_durably`` writes ``.<name>.sum`` beside the file (JSON: the SHA-256 of
the new content and of the content it replaces, so a crash between the two renames leaves a
file the checksum accepts, and a CRC of those, so damage to the checksum file itself reads as
no checksum), before the file's own rename. A file whose content matches neither
is damaged if it is not newer than its checksum: damage on the disk does not change a file's
modification time, an edit by hand does (an edited file is accepted, and its next write by the
broker checksums it again). A file restored from a backup with its old time kept (``cp -p``)
looks damaged: the message says to remove the checksum file then.
"""

from __future__ import annotations

import concurrent.futures
import fcntl
import hashlib
import json
import os
import threading
import zlib
from contextlib import contextmanager
from pathlib import Path

from warren.store.damage import DamagedFile

__all__ = ["file_stamp", "locked", "replace_durably", "on_loop", "writer_loop", "check_node_file", "check_node_files",
           "checksum_path", "NODE_FILES", "share", "unshare", "apply_shared", "replace_locally"]

# the node's JSON files in its data folder, and what a start without them would lose
NODE_FILES = {
    "access.json": "users, virtual hosts and permissions",
    "policies.json": "policies",
    "parameters.json": "runtime parameters",
    "global_parameters.json": "global runtime parameters",
}


# --cluster-etcd: absolute path -> the hook that keeps it in etcd (module doc; an object with
# ``acquire()``, ``release()`` and ``publish(data)``); empty on a single node
_shared: dict[str, object] = {}


def share(path, hook) -> None:
    """Keep ``path`` in the cluster through ``hook`` from now on (module doc)."""
    _shared[os.path.abspath(path)] = hook


def unshare(path) -> None:
    _shared.pop(os.path.abspath(path), None)


def _hook(path):
    return _shared.get(os.path.abspath(path)) if _shared else None


# on the HTTP API's writer thread: ``writer_loop.loop`` is the loop that handed it the change
writer_loop = threading.local()


def on_loop(fn, *args):
    """``fn(*args)`` on the broker's loop, its result (or exception) back: handed over and
    waited for on the HTTP API's writer thread, at once anywhere else (module doc)."""
    loop = getattr(writer_loop, "loop", None)
    if loop is None:
        return fn(*args)
    done: concurrent.futures.Future = concurrent.futures.Future()

    def run() -> None:
        try:
            done.set_result(fn(*args))
        except BaseException as e:  # handed back to the writer thread, which raises it
            done.set_exception(e)

    loop.call_soon_threadsafe(run)
    return done.result()


def file_stamp(path) -> tuple | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size)


@contextmanager
def locked(path, wait: bool = True):
    """Exclusive among the processes sharing ``path`` (and among threads: one open file each);
    ``None`` (state kept in memory only) locks nothing. Yields True; with ``wait`` False, False
    at once (nothing locked) while someone else holds it: the loop's looks for other
    processes' changes must not wait for a change being written, whose fsync may stall."""
    if path is None:
        yield True
        return
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(str(path) + ".lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        hook = _hook(path) if wait else None  # the loop's looks (wait False) never wait on etcd
        if hook is None:
            yield True
            return
        hook.acquire()  # the cluster-wide lock, and the cluster's latest content in the file
        try:
            yield True
        finally:
            hook.release()
    finally:
        os.close(fd)  # releases the lock


def replace_durably(path, data: bytes, mode: int = 0o644, fsync: bool = True) -> None:
    """``path`` holds ``data`` whole or its old content, never a part (``fsync=False``: not
    after a power cut, for tests). A file shared with the cluster goes to etcd first (module doc)."""
    hook = _hook(path)
    if hook is not None:
        hook.publish(data)  # raises when etcd did not commit it: the file is left as it was
    _replace(Path(path), data, mode, fsync)


def apply_shared(path, data: bytes, mode: int = 0o644, still_new=None) -> bool:
    """Write another node's change (from etcd) into the shared file ``path``, under its flock,
    without sending it back to etcd; ``still_new()`` (if given) is asked inside the lock and a
    False skips the write. True if the file was written (it did not hold ``data`` already)."""
    with _flock_only(path):
        if still_new is not None and not still_new():
            return False
        try:
            with open(path, "rb") as f:
                if f.read() == data:
                    return False
        except FileNotFoundError:
            pass
        _replace(Path(path), data, mode, True)
        return True


def replace_locally(path, data: bytes, mode: int = 0o644) -> None:
    """``replace_durably`` without the cluster's part, for a caller that holds the file's lock
    and writes what etcd already holds (warren/cluster/shared_files.py)."""
    _replace(Path(path), data, mode, True)


@contextmanager
def _flock_only(path):
    """``locked`` without the cluster's part (the watcher writing what the cluster has)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(str(path) + ".lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield True
    finally:
        os.close(fd)


def _replace(path: Path, data: bytes, mode: int, fsync: bool) -> None:
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
    _write_checksum(path, data, fsync)
    os.replace(tmp, path)
    if fsync:
        dfd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)


def checksum_path(path) -> Path:
    """Where the checksum of the node file ``path`` is kept (module doc)."""
    path = Path(path)
    return path.with_name(f".{path.name}.sum")


def _digest(data) -> str:
    return hashlib.sha256(data).hexdigest()


def _write_checksum(path: Path, data, fsync: bool) -> None:
    """The checksum file for ``data`` about to replace ``path``: the new digest and the current one."""
    digests = [_digest(data)]
    try:
        with open(path, "rb") as f:
            digests.append(_digest(f.read()))
    except FileNotFoundError:
        pass
    target = checksum_path(path)
    tmp = target.with_name(f"{target.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
    try:
        # a CRC of the digests: a flipped bit in this file reads as no checksum, never as damage of the file
        os.write(fd, json.dumps({"sha256": digests, "crc32": zlib.crc32(" ".join(digests).encode())}).encode())
        if fsync:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, target)


def _checksum_problem(path, raw: bytes, st) -> str | None:
    """Why ``raw`` (read from ``path``, stat ``st``) fails its checksum, or None (module doc)."""
    try:
        sums = checksum_path(path)
        sum_st = os.stat(sums)
        with open(sums, "rb") as f:
            doc = json.loads(f.read())
        digests = doc["sha256"]
        if zlib.crc32(" ".join(digests).encode()) != doc["crc32"]:
            return None  # the checksum file itself is damaged: nothing to compare against
    except (OSError, ValueError, KeyError, TypeError):
        return None  # no checksum (written before there were checksums, or by hand): nothing to compare
    if _digest(raw) in digests or st.st_mtime_ns > sum_st.st_mtime_ns:
        return None  # intact, or edited by hand after the broker last wrote it
    return (f"its content does not match the checksum written with it ({sums}) and it was not changed "
            f"since: damage on the disk. If you restored or edited it on purpose, remove {sums}")


def check_node_file(path) -> str | None:
    """Why the node file ``path`` cannot be read as JSON or fails its checksum, or None (also
    when it does not exist)."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
            st = os.fstat(f.fileno())
    except FileNotFoundError:
        return None
    except OSError as e:
        return e.strerror or str(e)
    problem = _checksum_problem(path, raw, st)
    if problem is not None:
        return problem
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
