"""Limits of the AMQP listener: sockets not yet past the handshake, the open-file limit, and
the output a client leaves unread.

* **Unauthenticated connections at once** (``max_unauthenticated_connections``; RabbitMQ has
  no such limit). A socket counts from accept until connection.open-ok; past the limit a new
  socket is closed at accept, before anything is read or allocated for it. Default: a quarter
  of the open-file limit, at most 4096, so sockets that connect and send nothing (slowloris)
  reach this limit, not the process's descriptors, and each lasts at most the handshake
  timeout. Refusals are logged at most once a second, with a count (a flood must not flood
  the log as well).
* **The open-file limit**: the server raises its soft ``RLIMIT_NOFILE`` to the hard limit at
  start-up (as RabbitMQ's packages set ``ulimit -n`` for it); every connection is a descriptor.
* **Unread output** (``max_output_buffer``): deliveries stop while the socket's buffer is full
  (``pause_writing``), but replies the client provokes (basic.get-ok, basic.return of its own
  mandatory publishes, method replies) are still written. A client that sends and never
  reads would grow our buffer without end; past the bound (never less than one message of
  ``max_message_size`` plus 1 MiB) it is closed, with a log line that says why.
"""

from __future__ import annotations

import logging
import resource
import time

__all__ = ["HandshakeGate", "raise_open_file_limit", "default_unauthenticated_limit", "output_bound"]

log = logging.getLogger("warren.limits")

UNAUTHENTICATED_CAP = 4096
REFUSAL_LOG_INTERVAL_S = 1.0


def raise_open_file_limit() -> int:
    """Raise the soft open-file limit to the hard one; the soft limit in force after."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard > soft:
        target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError) as e:
            log.warning("could not raise the open-file limit from %d to %d: %s", soft, target, e)
    return soft


def default_unauthenticated_limit(open_files: int) -> int:
    return max(64, min(UNAUTHENTICATED_CAP, open_files // 4))


def output_bound(config) -> int:
    """Octets of unread output after which a client is closed."""
    return max(config.max_output_buffer, config.max_message_size + (1 << 20))


class HandshakeGate:
    """Counts sockets that have not reached connection.open-ok; refuses new ones past ``limit``
    (0 = no limit)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.pending = 0
        self.refused = 0  # since start (for tests and the log)
        self._unlogged = 0
        self._last_log = 0.0

    @classmethod
    def for_config(cls, config, open_files: int) -> "HandshakeGate":
        limit = config.max_unauthenticated_connections
        return cls(default_unauthenticated_limit(open_files) if limit is None else limit)

    def admit(self, peer: str) -> bool:
        """A socket was accepted: True to serve it (counted until ``done``), False to close it."""
        if self.limit and self.pending >= self.limit:
            self.refused += 1
            self._unlogged += 1
            now = time.monotonic()
            if now - self._last_log >= REFUSAL_LOG_INTERVAL_S:
                log.warning("refused %d connection(s) at accept (latest from %s): %d connections have not "
                            "completed the handshake (limit %d, --max-unauthenticated-connections)",
                            self._unlogged, peer, self.pending, self.limit)
                self._unlogged = 0
                self._last_log = now
            return False
        self.pending += 1
        return True

    def done(self) -> None:
        """A counted socket reached open-ok or closed."""
        self.pending -= 1
