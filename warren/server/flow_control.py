"""Resource alarms: stop publishers before the disk or the memory runs out.

As RabbitMQ does (INVENTORY.md §10.4): while any alarm is raised, connections that publish
are blocked: they get connection.blocked (if their client announced the capability) and we
stop reading from their sockets, so TCP pushes back on the publisher. Consumers on
connections that never published keep draining queues, which is how alarms clear. One
connection.unblocked is sent when the last alarm clears.

The alarms are the last line. Before them, a queue whose consumers fall behind pauses its own
publishers (flow control: ``Queue.congested``, ``AMQPConnection.throttle``), and a queue
without consumers pages to disk past the memory budget (``warren/broker/memory.py``).
"""

from __future__ import annotations

import logging
import os

__all__ = ["ResourceAlarms", "DISK_FREE_LIMIT_DEFAULT"]

log = logging.getLogger("warren.alarms")

DISK_FREE_LIMIT_DEFAULT = 50 * 1024 * 1024  # RabbitMQ's default disk_free_limit (50 MB)
MEMORY_HIGH_WATERMARK_DEFAULT = 0.4  # RabbitMQ's vm_memory_high_watermark: 40 % of RAM
CHECK_INTERVAL_S = 1.0


class ResourceAlarms:
    def __init__(self, server, data_dir, disk_free_limit: int, memory_limit: int = 0) -> None:
        self.server = server
        self.data_dir = data_dir
        self.disk_free_limit = disk_free_limit
        self.memory_limit = memory_limit  # octets of resident memory (0 = no memory alarm)
        self.raised: set[str] = set()
        self._timer = None

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

    def check(self) -> None:
        if self.memory_limit:
            rss = self.rss()
            self.set_alarm("memory", rss > self.memory_limit,
                           f"resident memory {rss} is above the limit {self.memory_limit}")
        if self.disk_free_limit:
            free = self.disk_free()
            self.set_alarm("disk", free < self.disk_free_limit,
                           f"free disk space {free} is below the limit {self.disk_free_limit}")
        self._timer = self.server.loop.call_later(CHECK_INTERVAL_S, self.check)

    def set_alarm(self, name: str, on: bool, detail: str = "") -> None:
        was_blocked = bool(self.raised)
        if on and name not in self.raised:
            log.warning("%s alarm raised: %s; publishers are blocked", name, detail)
            self.raised.add(name)
        elif not on and name in self.raised:
            log.warning("%s alarm cleared", name)
            self.raised.discard(name)
        blocked = bool(self.raised)
        if blocked != was_blocked:
            for conn in list(self.server.connections):
                conn.set_blocked(blocked, self.reason())

    @property
    def blocked(self) -> bool:
        return bool(self.raised)

    def reason(self) -> str:
        return "low on " + " and ".join(sorted(self.raised)) if self.raised else ""
