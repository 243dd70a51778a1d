"""Resource alarms: stop publishers before the disk or the memory runs out.

As RabbitMQ does (INVENTORY.md §10.4): while any alarm is raised, connections that publish
are blocked: they get connection.blocked (if their client announced the capability) and we
stop reading from their sockets, so TCP pushes back on the publisher. Consumers on
connections that never published keep draining queues, which is how alarms clear. One
connection.unblocked is sent when the last alarm clears.

The alarms are the last line. Before them, a queue whose consumers fall behind pauses its own
publishers (flow control: ``Queue.congested``, ``AMQPConnection.throttle``), and a queue
without consumers pages to disk past the memory budget (``warren/broker/memory.py``).

The memory alarm (docs/flow-control.md) is decided by the broker's ``MemoryBudget``, where
messages are queued, so it fires within a flood; once a second this module gives it what only
the process can measure: the connections' buffers and the resident size (after handing free
heap back to the OS with ``malloc_trim``, so allocator retention is not mistaken for use).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os

__all__ = ["ResourceAlarms", "DISK_FREE_LIMIT_DEFAULT"]

log = logging.getLogger("warren.alarms")

DISK_FREE_LIMIT_DEFAULT = 50 * 1024 * 1024  # RabbitMQ's default disk_free_limit (50 MB)
MEMORY_HIGH_WATERMARK_DEFAULT = 0.4  # RabbitMQ's vm_memory_high_watermark: 40 % of RAM
CHECK_INTERVAL_S = 1.0
TRIM_RATIO = 0.8  # resident size above this share of the watermark: give free heap back first


def _malloc_trim():
    """glibc's malloc_trim, or None (another libc: resident size is read as it is)."""
    try:
        trim = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim


_trim = _malloc_trim()


class ResourceAlarms:
    def __init__(self, server, data_dir, disk_free_limit: int, memory_limit: int = 0) -> None:
        self.server = server
        self.data_dir = data_dir
        self.disk_free_limit = disk_free_limit
        self.memory_limit = memory_limit  # octets (0 = no memory alarm)
        self.raised: set[str] = set()
        # --worker-mode queues: told of a change of this worker's own alarms (Spread.alarm_changed)
        self.on_local_change = None
        self._timer = None
        self.memory = server.broker.memory  # the accounting and the alarm's decisions (memory.py)
        self.memory.set_watermark(memory_limit, on_alarm=self._memory_alarm)
        self.resident = 0  # the process's resident size at the last check

    def start(self) -> None:
        self.check()

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()

    def disk_free(self) -> int:
        st = os.statvfs(self.data_dir)
        return st.f_bavail * st.f_frsize

    @staticmethod
    def rss() -> int:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

    def buffers(self) -> int:
        """Octets in the connections' output buffers and unparsed input, and the message
        stores' buffers not written yet (a stalled disk holds them: warren/store/queue_store.py)."""
        total = self.server.durability.unwritten()
        for c in self.server.connections:
            if c.transport is not None:
                total += c.transport.get_write_buffer_size()
            if c.conn is not None:
                frames = c.conn.frames
                total += len(frames.buf) - frames.pos
        return total

    def check(self) -> None:
        if self.memory_limit:
            memory = self.memory
            memory.buffers = self.buffers()
            rss = self.rss()
            if rss > self.memory_limit * TRIM_RATIO and _trim is not None:
                _trim(0)
                rss = self.rss()
            memory.note_resident(rss)
            memory.check()
            self.resident = rss
        if self.disk_free_limit:
            free = self.disk_free()
            self.set_alarm("disk", free < self.disk_free_limit,
                           f"free disk space {free} is below the limit {self.disk_free_limit}")
        self._timer = self.server.loop.call_later(CHECK_INTERVAL_S, self.check)

    def _memory_alarm(self, raised: bool, detail: str) -> None:
        """MemoryBudget.check decided (in a publish, or in ``check``)."""
        self.set_alarm("memory", raised, detail)

    def set_alarm(self, name: str, on: bool, detail: str = "", local: bool = True) -> None:
        """Raise or clear alarm ``name``; ``local`` False for another worker's (``--worker-mode
        queues``: its publishers may be ours, so its alarm blocks ours too, as a RabbitMQ
        cluster's does on every node) or another node's of a cluster (``"memory (node c)"``,
        warren/cluster/alarms.py), which is not told on."""
        was_blocked = bool(self.raised)
        changed = on != (name in self.raised)
        if on and name not in self.raised:
            log.warning("%s alarm raised: %s; publishers are blocked", name, detail)
            self.raised.add(name)
        elif not on and name in self.raised:
            log.warning("%s alarm cleared", name)
            self.raised.discard(name)
        blocked = bool(self.raised)
        if changed and local and self.on_local_change is not None:
            self.on_local_change(name, on, detail)
        if blocked != was_blocked:
            for conn in list(self.server.connections):
                conn.set_blocked(blocked, self.reason())

    @property
    def blocked(self) -> bool:
        return bool(self.raised)

    def resources(self) -> set[str]:
        """The resources alarmed on the node: ours and, with --worker-mode queues, the other
        workers' ("memory (worker 1)" is "memory"); not other nodes' (``elsewhere``)."""
        return {name.split(" (worker ")[0] for name in self.raised if " (node " not in name}

    def elsewhere(self) -> list[tuple[str, str]]:
        """(node, resource) of the alarms other nodes of a cluster raised, which block ours too."""
        out = []
        for name in self.raised:
            resource, sep, node = name.partition(" (node ")
            if sep:
                out.append((node.removesuffix(")"), resource))
        return sorted(out)

    def reason(self) -> str:
        return "low on " + " and ".join(sorted(self.raised)) if self.raised else ""
