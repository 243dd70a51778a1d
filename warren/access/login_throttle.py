"""Failed logins slow down, then are refused, per source address (brute-force protection).

RabbitMQ has nothing of the kind (it answers every wrong password at once, forever); Warren
keeps, per source address, the failed logins of a window of ``block_time`` seconds:

* the first ``FREE_FAILURES`` failures are answered at once (a person mistyping);
* each further failure is answered after ``delay`` seconds (the connection waits; nothing
  else does, and no other address is slowed);
* at ``limit`` failures within the window the address is refused for ``block_time``
  seconds: every login from it gets the usual 403 at once, whatever the password, without a
  password check (so a flood costs no hashing).

The client only ever sees RabbitMQ's generic 403 ACCESS_REFUSED; the reason (throttled,
blocked, how many failures) goes to the log. Successful logins are never delayed, and do not
clear an address's failures (an attacker with one valid account could otherwise reset his
count between guesses). Loopback addresses are exempt unless ``include_loopback`` (as
fail2ban's default ``ignoreip``): local clients and test suites share 127.0.0.1.

The table is bounded (``MAX_ADDRESSES``): past it, entries that no longer count anything
are dropped, then the oldest; a flood of spoofed-looking sources cannot grow it. Addresses
are compared exactly (an IPv6 attacker with a /64 has many; docs/security.md says so).
Sans-IO: the caller passes the clock's time in; no timers.

Several processes (``--workers``): each keeps its own table, and every failure one of them
counts is told to the others (``on_failure``; they take it in with ``count_elsewhere``:
warren/server/workers.py carries it), so that an address blocked through one worker's HTTP
API is blocked at the supervisor's AMQP login too, as in one process.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from warren.access.users import is_loopback

__all__ = ["LoginThrottle", "Verdict", "FREE_FAILURES", "MAX_ADDRESSES"]

FREE_FAILURES = 3  # failures per window answered without delay
MAX_ADDRESSES = 100_000  # addresses remembered at most


@dataclass
class _Record:
    window_start: float
    failures: int = 0
    blocked_until: float = 0.0


@dataclass(frozen=True)
class Verdict:
    """What happens to a failed login: wait ``delay`` seconds before the 403; ``failures``
    in the window so far; ``blocked`` if this failure started a block."""

    delay: float
    failures: int
    blocked: bool = False


class LoginThrottle:
    def __init__(self, delay: float = 1.0, limit: int = 10, block_time: float = 60.0, *,
                 include_loopback: bool = False, free_failures: int = FREE_FAILURES,
                 max_addresses: int = MAX_ADDRESSES, clock=time.monotonic) -> None:
        self.delay = delay
        self.limit = limit
        self.block_time = block_time
        self.include_loopback = include_loopback
        self.free_failures = free_failures
        self.max_addresses = max_addresses
        self.clock = clock
        self._records: dict[str, _Record] = {}
        # --workers: told of each failure counted here, to tell the node's other processes
        self.on_failure: Callable[[str], None] | None = None

    @classmethod
    def for_config(cls, config) -> "LoginThrottle":
        return cls(config.login_failure_delay, config.login_failure_limit, config.login_block_time,
                   include_loopback=config.login_throttle_loopback)

    @property
    def enabled(self) -> bool:
        return bool(self.delay or (self.limit and self.block_time))

    def _applies(self, host: str | None) -> bool:
        return bool(host) and self.enabled and (self.include_loopback or not is_loopback(host))

    def blocked_for(self, host: str | None) -> float:
        """Seconds this address is still refused (0.0: not blocked). Checked before the password."""
        if not self._applies(host):
            return 0.0
        record = self._records.get(host)
        if record is None:
            return 0.0
        left = record.blocked_until - self.clock()
        return left if left > 0 else 0.0

    def failed(self, host: str | None) -> Verdict:
        """A login from ``host`` failed: count it; how long to wait before answering."""
        if not self._applies(host):
            return Verdict(0.0, 0)
        verdict = self._count(host)
        if self.on_failure is not None:
            self.on_failure(host)
        return verdict

    def count_elsewhere(self, host: str) -> None:
        """A login from ``host`` failed in another process of the node: it counts here too."""
        if self._applies(host):
            self._count(host)

    def _count(self, host: str) -> Verdict:
        now = self.clock()
        record = self._records.get(host)
        window = self.block_time or 60.0
        if record is None:
            if len(self._records) >= self.max_addresses:
                self._prune(now)
            record = self._records[host] = _Record(now)
        elif now - record.window_start > window and record.blocked_until <= now:
            record.window_start, record.failures = now, 0
        record.failures += 1
        if self.limit and self.block_time and record.failures >= self.limit and record.blocked_until <= now:
            record.blocked_until = now + self.block_time
            record.window_start, record.failures = now, 0  # a new window once the block ends
            return Verdict(0.0, self.limit, blocked=True)
        delay = self.delay if record.failures > self.free_failures else 0.0
        return Verdict(delay, record.failures)

    def _prune(self, now: float) -> None:
        window = self.block_time or 60.0
        for host in [h for h, r in self._records.items()
                     if r.blocked_until <= now and now - r.window_start > window]:
            del self._records[host]
        while len(self._records) >= self.max_addresses:  # still full: forget the oldest
            del self._records[next(iter(self._records))]

    def __len__(self) -> int:
        return len(self._records)
