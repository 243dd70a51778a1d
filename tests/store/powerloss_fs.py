"""A FUSE file system for tests that forgets, on command, every write not yet made durable.

A power cut loses what the operating system had not written out; kill -9 does not (the page
cache survives the process). This layer keeps everything in memory twice: what programs see
(``data``, ``entries``) and what would survive a power cut (``durable``, ``durable_entries``):

* a file's writes and truncations become durable at its ``fsync`` or ``fdatasync``;
* a directory's creates, renames, unlinks, mkdirs and rmdirs become durable at the directory's
  own ``fsync`` (POSIX promises nothing more, and ext4's habit of carrying a new name along with
  the file's fsync is not something to rely on);
* ``sync`` on the control socket makes everything durable (what ``syncfs`` would; the kernel only
  sends FUSE a syncfs on a file system that opts in, and Warren calls neither).

``drop`` puts every file and directory back to its durable state; with ``tear`` the last write
not yet durable is kept in part, cut at a random octet (a torn sector), at its own offset: lost
writes before it in that file leave zeros, as a file system that wrote the size before the data
(ext4 ``data=writeback``, XFS). A crash in the tests is
kill -9 of the broker and then ``drop``.

Failing disks go through the same layer (``fault``): ``EIO`` or ``ENOSPC`` on write, ``EIO`` on
fsync, an fsync that stalls for some seconds, each for paths containing a given string, a given
number of times or until cleared, and ``capacity``: past that many octets of file data every
write that grows the total fails with ``ENOSPC``. A failed fsync behaves as Linux's does since
4.13 ("fsyncgate"): the writes it should have made durable are dropped from the durable state
(the pages are marked clean although they never reached the disk, while programs still read
them) and the error is reported once; the next fsync succeeds, having nothing left to write.
A program that retries the fsync and carries on is told its data is safe, and loses it at the
next power cut.

Run as a program: ``powerloss_fs.py MOUNTPOINT CONTROL_SOCKET`` mounts and serves until told
``exit`` (or SIGTERM); the control socket takes one JSON object per line and answers one
(``PowerLossFS`` below is the client the tests use). Built on pyfuse3 (libfuse 3): pyfuse3 is
installed by the ``test`` extra, libfuse 3 and ``fusermount3`` by tools/install-test-deps.
Files are served with ``direct_io`` and every attribute and name with a timeout of 0, so the
kernel caches nothing that a ``drop`` could make stale.
"""

from __future__ import annotations

import errno
import json
import os
import random
import shutil
import signal
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

__all__ = ["PowerLossFS", "unavailable_reason"]

BLOCK = 4096


def unavailable_reason() -> str | None:
    """Why a FUSE mount cannot be made here, or None when it can."""
    if not os.path.exists("/dev/fuse"):
        return "no /dev/fuse on this machine"
    if not os.access("/dev/fuse", os.R_OK | os.W_OK):
        return "/dev/fuse is not readable and writable by this user"
    if os.geteuid() != 0 and shutil.which("fusermount3") is None:
        return "not root and no fusermount3 (Debian's fuse3 package; tools/install-test-deps installs it)"
    try:
        import pyfuse3  # noqa: F401
        import trio  # noqa: F401
    except ImportError as e:
        return f"pyfuse3 is not installed ({e}; the test extra installs it, with Debian's libfuse3-dev to build it)"
    return None


# --- the file system (runs in its own process) ---------------------------------------------


class Node:
    """One file or directory: what programs see, and what a power cut would leave."""

    __slots__ = ("ino", "mode", "data", "durable", "pending", "entries", "durable_entries",
                 "parent", "name", "mtime_ns", "opens")

    def __init__(self, ino: int, mode: int, parent: "Node | None", name: bytes) -> None:
        self.ino = ino
        self.mode = mode
        self.parent = parent
        self.name = name
        self.mtime_ns = time.time_ns()
        self.opens = 0
        if stat.S_ISDIR(mode):
            self.entries: dict[bytes, Node] | None = {}
            self.durable_entries: dict[bytes, Node] | None = {}
            self.data = self.durable = None
            self.pending = None
        else:
            self.entries = self.durable_entries = None
            self.data = bytearray()       # what reads return
            self.durable = bytearray()    # what a power cut leaves
            self.pending: list | None = []  # ("w", offset, octets) / ("t", size) since the last fsync

    @property
    def is_dir(self) -> bool:
        return self.entries is not None

    def path(self) -> str:
        parts = []
        node = self
        while node.parent is not None:
            parts.append(node.name.decode("utf-8", "surrogateescape"))
            node = node.parent
        return "/" + "/".join(reversed(parts))

    def make_durable(self) -> None:
        """What fsync does: the pending writes reach the durable copy."""
        for op in self.pending:
            _apply(self.durable, op)
        self.pending.clear()


def _apply(buf: bytearray, op: tuple) -> None:
    if op[0] == "w":
        offset, octets = op[1], op[2]
        if offset > len(buf):
            buf.extend(bytes(offset - len(buf)))
        buf[offset:offset + len(octets)] = octets
    else:
        size = op[1]
        if size < len(buf):
            del buf[size:]
        else:
            buf.extend(bytes(size - len(buf)))


class Fault:
    """One injected failure: ``op`` (write, fsync, create) on paths containing ``path``."""

    def __init__(self, op: str, path: str, error: int = 0, stall: float = 0.0, times: int | None = None,
                 exact: bool = False) -> None:
        self.op, self.path, self.error, self.stall, self.times, self.exact = op, path, error, stall, times, exact
        self.hits = 0

    def matches(self, op: str, path: str) -> bool:
        return (self.op == op and (path == self.path if self.exact else self.path in path)
                and (self.times is None or self.hits < self.times))


def _serve(mountpoint: str, control_path: str) -> None:
    import pyfuse3
    import trio
    from pyfuse3 import FUSEError

    class PowerLossOps(pyfuse3.Operations):
        def __init__(self) -> None:
            super().__init__()
            self.next_ino = pyfuse3.ROOT_INODE + 1
            self.root = Node(pyfuse3.ROOT_INODE, stat.S_IFDIR | 0o755, None, b"")
            self.nodes: dict[int, Node] = {self.root.ino: self.root}
            self.handles: dict[int, Node] = {}
            self.next_fh = 1
            self.faults: list[Fault] = []
            self.capacity: int | None = None
            self.used = 0  # octets of file data, as programs see it
            self.counts = {"writes": 0, "fsyncs": 0, "fsyncdirs": 0, "dropped_writes": 0, "dropped_octets": 0,
                           "dropped_names": 0, "torn": 0, "failed_fsyncs": 0, "failed_writes": 0, "stalls": 0,
                           "stalls_ended": 0}
            self.write_seq = 0  # writes so far
            self.generation = 0  # drops and wakes so far: a stalled fsync from before one ends in EIO
            self.woken = trio.Event()

        # -- helpers
        def _attr(self, node: Node):
            a = pyfuse3.EntryAttributes()
            a.st_ino = node.ino
            a.generation = 0
            a.entry_timeout = 0
            a.attr_timeout = 0
            a.st_mode = node.mode
            a.st_nlink = 2 if node.is_dir else 1
            a.st_uid = os.getuid()
            a.st_gid = os.getgid()
            a.st_rdev = 0
            size = 0 if node.is_dir else len(node.data)
            a.st_size = size
            a.st_blksize = BLOCK
            a.st_blocks = (size + 511) // 512
            a.st_atime_ns = a.st_ctime_ns = a.st_mtime_ns = node.mtime_ns
            return a

        def _node(self, ino: int) -> Node:
            try:
                return self.nodes[ino]
            except KeyError:
                raise FUSEError(errno.ENOENT) from None

        def _dir(self, ino: int) -> Node:
            node = self._node(ino)
            if not node.is_dir:
                raise FUSEError(errno.ENOTDIR)
            return node

        def _fault(self, op: str, node: Node) -> Fault | None:
            if not self.faults:
                return None
            path = node.path()
            for f in self.faults:
                if f.matches(op, path):
                    f.hits += 1
                    return f
            return None

        def _new(self, parent: Node, name: bytes, mode: int) -> Node:
            if name in parent.entries:
                raise FUSEError(errno.EEXIST)
            f = self._fault("create", parent)
            if f is not None and f.error:
                raise FUSEError(f.error)
            node = Node(self.next_ino, mode, parent, name)
            self.next_ino += 1
            self.nodes[node.ino] = node
            parent.entries[name] = node
            parent.mtime_ns = time.time_ns()
            return node

        def _resize(self, node: Node, size: int) -> None:
            grow = size - len(node.data)
            if grow > 0 and self.capacity is not None and self.used + grow > self.capacity:
                raise FUSEError(errno.ENOSPC)
            op = ("t", size)
            _apply(node.data, op)
            node.pending.append(op)
            self.used += grow

        # -- names
        async def lookup(self, parent_inode, name, ctx=None):
            parent = self._dir(parent_inode)
            if name == b".":
                return self._attr(parent)
            if name == b"..":
                return self._attr(parent.parent or parent)
            node = parent.entries.get(name)
            if node is None:
                raise FUSEError(errno.ENOENT)
            return self._attr(node)

        async def getattr(self, inode, ctx=None):
            return self._attr(self._node(inode))

        async def setattr(self, inode, attr, fields, fh, ctx):
            node = self._node(inode)
            if fields.update_size:
                if node.is_dir:
                    raise FUSEError(errno.EISDIR)
                self._resize(node, attr.st_size)
            if fields.update_mode:
                node.mode = (node.mode & ~0o7777) | (attr.st_mode & 0o7777)
            if fields.update_mtime:
                node.mtime_ns = attr.st_mtime_ns
            return self._attr(node)

        async def forget(self, inode_list):
            pass  # nodes are freed by _collect, once no name (live or durable) and no handle holds them

        async def mkdir(self, parent_inode, name, mode, ctx):
            return self._attr(self._new(self._dir(parent_inode), name, stat.S_IFDIR | (mode & 0o7777)))

        async def mknod(self, parent_inode, name, mode, rdev, ctx):
            if not stat.S_ISREG(mode):
                raise FUSEError(errno.EPERM)
            return self._attr(self._new(self._dir(parent_inode), name, mode))

        async def create(self, parent_inode, name, mode, flags, ctx):
            node = self._new(self._dir(parent_inode), name, stat.S_IFREG | (mode & 0o7777))
            return self._open_handle(node), self._attr(node)

        async def unlink(self, parent_inode, name, ctx):
            parent = self._dir(parent_inode)
            node = parent.entries.get(name)
            if node is None:
                raise FUSEError(errno.ENOENT)
            if node.is_dir:
                raise FUSEError(errno.EISDIR)
            del parent.entries[name]
            parent.mtime_ns = time.time_ns()

        async def rmdir(self, parent_inode, name, ctx):
            parent = self._dir(parent_inode)
            node = parent.entries.get(name)
            if node is None:
                raise FUSEError(errno.ENOENT)
            if not node.is_dir:
                raise FUSEError(errno.ENOTDIR)
            if node.entries:
                raise FUSEError(errno.ENOTEMPTY)
            del parent.entries[name]
            parent.mtime_ns = time.time_ns()

        async def rename(self, parent_inode_old, name_old, parent_inode_new, name_new, flags, ctx):
            old_dir, new_dir = self._dir(parent_inode_old), self._dir(parent_inode_new)
            node = old_dir.entries.get(name_old)
            if node is None:
                raise FUSEError(errno.ENOENT)
            if flags & ~pyfuse3.RENAME_NOREPLACE:
                raise FUSEError(errno.EINVAL)
            target = new_dir.entries.get(name_new)
            if target is not None:
                if flags & pyfuse3.RENAME_NOREPLACE:
                    raise FUSEError(errno.EEXIST)
                if target.is_dir and (not node.is_dir or target.entries):
                    raise FUSEError(errno.ENOTEMPTY if node.is_dir else errno.EISDIR)
                if node.is_dir and not target.is_dir:
                    raise FUSEError(errno.ENOTDIR)
            del old_dir.entries[name_old]
            new_dir.entries[name_new] = node
            node.parent, node.name = new_dir, name_new
            old_dir.mtime_ns = new_dir.mtime_ns = time.time_ns()

        async def link(self, inode, new_parent_inode, new_name, ctx):
            raise FUSEError(errno.EPERM)  # one name per file keeps the model simple; Warren makes no links

        async def symlink(self, parent_inode, name, target, ctx):
            raise FUSEError(errno.EPERM)

        # -- directories
        async def opendir(self, inode, ctx):
            self._dir(inode)
            return inode

        async def readdir(self, fh, start_id, token):
            node = self._dir(fh)
            names = sorted(node.entries)
            for i in range(start_id, len(names)):
                if not pyfuse3.readdir_reply(token, names[i], self._attr(node.entries[names[i]]), i + 1):
                    break

        async def releasedir(self, fh):
            pass

        async def fsyncdir(self, fh, datasync):
            node = self._dir(fh)
            self.counts["fsyncdirs"] += 1
            f = self._fault("fsyncdir", node)
            if f is not None:
                if f.stall:
                    await self._stall(f.stall)
                if f.error:
                    raise FUSEError(f.error)
            node.durable_entries = dict(node.entries)

        async def _stall(self, seconds: float) -> None:
            """A stalled fsync. The kernel holds the file's inode lock meanwhile (a reader of that
            file waits too), and a process killed in it does not die until it is answered: ``wake``
            (or ``drop``) answers every stalled call with EIO, making nothing durable."""
            self.counts["stalls"] += 1
            generation = self.generation
            with trio.move_on_after(seconds):
                await self.woken.wait()
            self.counts["stalls_ended"] += 1  # what overtook a stall happened while it lasted
            if generation != self.generation:
                raise FUSEError(errno.EIO)  # the power was cut meanwhile: it made nothing durable

        # -- files
        def _open_handle(self, node: Node):
            fh = self.next_fh
            self.next_fh += 1
            self.handles[fh] = node
            node.opens += 1
            return pyfuse3.FileInfo(fh=fh, direct_io=True, keep_cache=False)

        async def open(self, inode, flags, ctx):
            node = self._node(inode)
            if node.is_dir:
                raise FUSEError(errno.EISDIR)
            if flags & os.O_TRUNC:
                self._resize(node, 0)
            return self._open_handle(node)

        async def read(self, fh, off, size):
            node = self.handles[fh]
            return bytes(node.data[off:off + size])

        async def write(self, fh, off, buf):
            node = self.handles[fh]
            f = self._fault("write", node)
            if f is not None and f.error:
                self.counts["failed_writes"] += 1
                raise FUSEError(f.error)
            end = off + len(buf)
            grow = end - len(node.data)
            if grow > 0 and self.capacity is not None and self.used + grow > self.capacity:
                self.counts["failed_writes"] += 1
                raise FUSEError(errno.ENOSPC)
            self.write_seq += 1
            op = ("w", off, bytes(buf), self.write_seq)  # the number orders writes across files (drop's tear)
            _apply(node.data, op)
            node.pending.append(op)
            self.used += max(grow, 0)
            node.mtime_ns = time.time_ns()
            self.counts["writes"] += 1
            return len(buf)

        async def flush(self, fh):
            pass

        async def release(self, fh):
            node = self.handles.pop(fh, None)
            if node is not None:
                node.opens -= 1

        async def fsync(self, fh, datasync):
            node = self.handles[fh]
            self.counts["fsyncs"] += 1
            f = self._fault("fsync", node)
            if f is not None:
                if f.stall:
                    await self._stall(f.stall)
                if f.error:
                    # Linux since 4.13: the pages that failed are marked clean all the same, so
                    # what this fsync should have made durable is gone at the next power cut
                    self.counts["failed_fsyncs"] += 1
                    self.counts["dropped_writes"] += len(node.pending)
                    node.pending.clear()
                    raise FUSEError(f.error)
            node.make_durable()

        async def statfs(self, ctx):
            s = pyfuse3.StatvfsData()
            total = (self.capacity if self.capacity is not None else 1 << 40) // BLOCK
            s.f_bsize = s.f_frsize = BLOCK
            s.f_blocks = total
            s.f_bfree = s.f_bavail = max(total - self.used // BLOCK, 0)
            s.f_files = s.f_ffree = s.f_favail = 1 << 20
            s.f_namemax = 255
            return s

        # -- control
        def wake(self) -> None:
            """Every stalled fsync returns EIO now, having made nothing durable."""
            self.generation += 1
            self.woken.set()
            self.woken = trio.Event()

        def end_stalls(self) -> None:
            """Every stalled fsync goes on now, as if its stall had run out (it does its work)."""
            self.woken.set()
            self.woken = trio.Event()

        def sync_all(self) -> None:
            for node in self.nodes.values():
                if node.is_dir:
                    node.durable_entries = dict(node.entries)
                else:
                    node.make_durable()

        def drop(self, tear: bool, seed: int | None) -> dict:
            """Every file and directory back to its durable state (module doc)."""
            rng = random.Random(seed)
            self.wake()
            torn = None
            if tear:  # the newest write not yet durable, in whichever file
                newest = max(((op, node) for node in self.nodes.values() if not node.is_dir
                              for op in node.pending if op[0] == "w" and len(op[2]) > 1),
                             key=lambda pair: pair[0][3], default=None)
                if newest is not None:
                    op, node = newest
                    torn = (node, op[1], op[2][:rng.randrange(1, len(op[2]))])
            dropped = dropped_octets = names = 0
            changed_names: list[str] = []  # the first few names the drop took away or brought back
            for node in self.nodes.values():
                if node.is_dir:
                    changed = set(node.entries.items()) ^ set(node.durable_entries.items())
                    names += len(changed)
                    if changed and len(changed_names) < 20:
                        changed_names += [node.path().rstrip("/") + "/" + name.decode("utf-8", "surrogateescape")
                                          for name, _ in changed]
                    node.entries = dict(node.durable_entries)
                else:
                    dropped += len(node.pending)
                    dropped_octets += sum(len(op[2]) for op in node.pending if op[0] == "w")
                    node.pending.clear()
                    node.data = bytearray(node.durable)
            torn_report = None
            if torn is not None:
                node, offset, part = torn
                op = ("w", offset, part)
                _apply(node.durable, op)
                _apply(node.data, op)
                torn_report = {"path": node.path(), "offset": offset, "kept": len(part)}
                self.counts["torn"] += 1
            # a name restored by the drop takes its file back to where it was
            for node in list(self.nodes.values()):
                if node.is_dir:
                    for name, child in node.entries.items():
                        child.parent, child.name = node, name
            self._collect()
            self.counts["dropped_writes"] += dropped
            self.counts["dropped_octets"] += dropped_octets
            self.counts["dropped_names"] += names
            return {"dropped_writes": dropped, "dropped_octets": dropped_octets, "dropped_names": names,
                    "names": sorted(set(changed_names)), "torn": torn_report}

        def _collect(self) -> None:
            """Free the nodes no name (live or durable) and no open handle can reach."""
            keep = set()
            stack = [self.root] + [n for n in self.nodes.values() if n.opens]
            while stack:
                node = stack.pop()
                if node.ino in keep:
                    continue
                keep.add(node.ino)
                if node.is_dir:
                    stack.extend(node.entries.values())
                    stack.extend(node.durable_entries.values())
            for ino in [i for i in self.nodes if i not in keep]:
                del self.nodes[ino]
            self.used = sum(len(n.data) for n in self.nodes.values() if not n.is_dir)

        def control(self, request: dict) -> dict:
            cmd = request.get("cmd")
            if cmd == "drop":
                return self.drop(bool(request.get("tear")), request.get("seed"))
            if cmd == "sync":
                self.sync_all()
                return {}
            if cmd == "wake":
                self.wake()
                return {}
            if cmd == "end_stalls":
                self.end_stalls()
                return {}
            if cmd == "fault":
                err = request.get("errno")
                self.faults.append(Fault(request["op"], request.get("path", ""),
                                         getattr(errno, err) if err else 0, float(request.get("stall", 0)),
                                         request.get("times"), bool(request.get("exact"))))
                return {}
            if cmd == "clear":
                self.faults.clear()
                self.capacity = None
                return {}
            if cmd == "capacity":
                self.capacity = request.get("octets")
                return {"used": self.used}
            if cmd == "stats":
                pending = sum(len(n.pending) for n in self.nodes.values() if not n.is_dir)
                return dict(self.counts, pending_writes=pending, used=self.used, nodes=len(self.nodes),
                            fault_hits=[f.hits for f in self.faults])
            if cmd == "tree":  # every folder's names, live and durable (for a failing test's message)
                return {"tree": {n.path(): {"live": sorted(k.decode("utf-8", "surrogateescape") for k in n.entries),
                                            "durable": sorted(k.decode("utf-8", "surrogateescape")
                                                              for k in n.durable_entries)}
                                 for n in self.nodes.values() if n.is_dir}}
            if cmd == "reset":
                # files still open (the kernel releases a dead process's files a moment later)
                # keep their nodes until released, reachable by no name
                self.root.entries.clear()
                self.root.durable_entries.clear()
                self.faults.clear()
                self.capacity = None
                self._collect()
                return {}
            raise ValueError(f"unknown command {cmd!r}")

    ops = PowerLossOps()
    options = set(pyfuse3.default_options)
    options.add("fsname=warren-powerloss")
    options.discard("default_permissions")  # root runs everything here; one less lookup per call
    pyfuse3.init(ops, mountpoint, options)

    async def handle(stream) -> None:
        buf = b""
        async with stream:
            while True:
                chunk = await stream.receive_some(65536)
                if not chunk:
                    return
                buf += chunk
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    request = json.loads(line)
                    if request.get("cmd") == "exit":
                        await stream.send_all(b"{}\n")
                        nursery.cancel_scope.cancel()
                        return
                    try:
                        reply = {"ok": True, **ops.control(request)}
                    except Exception as e:  # a bad command is answered, never fatal
                        reply = {"ok": False, "error": repr(e)}
                    await stream.send_all(json.dumps(reply).encode() + b"\n")

    async def main() -> None:
        nonlocal nursery
        sock = trio.socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        await sock.bind(control_path)
        sock.listen(8)
        listener = trio.SocketListener(sock)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(pyfuse3.main)
            nursery.start_soon(trio.serve_listeners, handle, [listener])
            # tell the starter the mount is up (it waits for this line)
            print("ready", flush=True)

    nursery = None
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    try:
        trio.run(main)
    except KeyboardInterrupt:
        pass
    finally:
        pyfuse3.close(unmount=True)


# --- the client the tests use ----------------------------------------------------------------


class PowerLossFS:
    """A mounted power-loss file system: ``start()``, then ``drop()``, ``fault()``... ``stop()``."""

    def __init__(self, mountpoint, workdir) -> None:
        self.mountpoint = Path(mountpoint)
        self.control_path = str(Path(workdir) / "powerloss.sock")
        self.log_path = Path(workdir) / "powerloss.log"
        self.proc: subprocess.Popen | None = None
        self._sock: socket.socket | None = None
        self._file = None

    def start(self, timeout: float = 20.0) -> "PowerLossFS":
        self.mountpoint.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "wb")
        self.proc = subprocess.Popen([sys.executable, __file__, str(self.mountpoint), self.control_path],
                                     stdout=subprocess.PIPE, stderr=log, stdin=subprocess.DEVNULL)
        log.close()
        line = self.proc.stdout.readline()  # "ready" once mounted, or EOF when it failed
        if line.strip() != b"ready":
            self.proc.wait(timeout)
            raise RuntimeError(f"the power-loss file system did not start: {self.log_path.read_text()[-2000:]}")
        deadline = time.monotonic() + timeout
        while not os.path.ismount(self.mountpoint):  # the mount is made before pyfuse3.main runs
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.mountpoint} is not mounted")
            time.sleep(0.01)
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.settimeout(timeout)
        self._sock.connect(self.control_path)
        self._file = self._sock.makefile("rb")
        return self

    @classmethod
    def start_or_skip(cls, mountpoint, workdir) -> "PowerLossFS":
        """``start()``, or skip the calling test with the reason when no FUSE mount can be made
        here (a container without the right to mount, say) although /dev/fuse is there."""
        import pytest

        reason = unavailable_reason()
        if reason is not None:
            pytest.skip(f"no FUSE here: {reason}")
        fs = cls(mountpoint, workdir)
        try:
            return fs.start()
        except RuntimeError as e:
            fs.stop()
            pytest.skip(f"no FUSE mount here: {e}")

    @classmethod
    def mounted(cls, workdir: Path):
        """A fixture's body: yield a started layer under ``workdir`` (or skip), stop it after."""
        fs = cls.start_or_skip(workdir / "mnt", workdir)
        try:
            yield fs
        finally:
            fs.stop()

    def call(self, cmd: str, **args) -> dict:
        self._sock.sendall(json.dumps({"cmd": cmd, **args}).encode() + b"\n")
        reply = json.loads(self._file.readline())
        if not reply.pop("ok", True):
            raise RuntimeError(f"power-loss fs: {cmd}: {reply['error']}")
        return reply

    def drop(self, tear: bool = False, seed: int | None = None) -> dict:
        """Forget what was not durable (the power cut); call only with nothing running on it."""
        return self.call("drop", tear=tear, seed=seed)

    def sync(self) -> None:
        self.call("sync")

    def crash(self, proc, tear: bool = False, seed: int | None = None) -> dict:
        """The power cut under a running process: kill -9, then ``drop``. A process killed in a
        stalled fsync lives on until the layer answers it (FUSE), so stalled calls are answered
        with EIO first (``wake``), making nothing durable."""
        proc.kill()
        try:
            proc.wait(2)
        except subprocess.TimeoutExpired:
            self.call("wake")
            proc.wait(30)
        return self.drop(tear=tear, seed=seed)

    def fault(self, op: str, path: str = "", errno_name: str | None = None, stall: float = 0.0,
              times: int | None = None, exact: bool = False) -> None:
        """``op``: write, fsync, fsyncdir or create; on paths containing ``path`` (equal to it
        with ``exact``); ``errno_name``: "EIO", "ENOSPC"...; ``stall``: seconds the call waits
        first; ``times``: how often (None: until cleared)."""
        self.call("fault", op=op, path=path, errno=errno_name, stall=stall, times=times, exact=exact)

    def end_stalls(self) -> None:
        """End the stalls under way now, the fsyncs then doing their work (``wake`` fails them)."""
        self.call("end_stalls")

    def capacity(self, octets: int | None) -> dict:
        return self.call("capacity", octets=octets)

    def clear(self) -> None:
        self.call("clear")

    def stats(self) -> dict:
        return self.call("stats")

    def tree(self) -> dict:
        """{folder: {"live": [names], "durable": [names]}}, for messages and debugging."""
        return self.call("tree")["tree"]

    def reset(self) -> None:
        self.call("reset")

    def stop(self) -> None:
        if self.proc is None:
            return
        try:
            if self._sock is not None:
                self.call("exit")
        except (OSError, ValueError):
            pass
        finally:
            if self._sock is not None:
                self._sock.close()
                self._sock = None
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        if os.path.ismount(self.mountpoint):  # the daemon died without unmounting
            subprocess.run(["umount", "-l", str(self.mountpoint)], check=False)
        self.proc.stdout.close()
        self.proc = None


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: powerloss_fs.py MOUNTPOINT CONTROL_SOCKET")
    _serve(sys.argv[1], sys.argv[2])
