"""What shovels and federation links share: connecting to the first reachable of several URIs,
the back-off between attempts, the status record and its timestamps.

Several URIs are tried in turn, starting after the one that served last, so a link whose peer
went away moves on to the next; when a whole round fails the link waits (``Backoff``) and starts
again. The wait starts at the definition's ``reconnect-delay`` and doubles on each failed round
up to ``MAX_BACKOFF_S`` (or the delay itself if it is longer), with ±20 % jitter so that many
links do not reconnect in step; a link that ran for a while starts again from the short delay.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time

from warren.federation.client import Client, LinkError, connect
from warren.federation.uri import Endpoint

__all__ = ["Backoff", "Credentials", "connect_any", "status_time", "ensure_queue", "MAX_BACKOFF_S"]

log = logging.getLogger("warren.federation")

MAX_BACKOFF_S = 30.0
STABLE_S = 10.0  # a session this long resets the back-off


class Backoff:
    def __init__(self, base: float) -> None:
        self.base = max(0.0, float(base))
        self.failures = 0

    def next_delay(self) -> float:
        delay = min(self.base * (2 ** self.failures), max(MAX_BACKOFF_S, self.base))
        self.failures += 1
        return delay * random.uniform(0.8, 1.2)

    def reset(self) -> None:
        self.failures = 0


class Credentials:
    """Who a link logs in as: the URI's user, else guest (remote) or the node's default user
    (the local broker, RabbitMQ's direct connection)."""

    def __init__(self, local_port: int | None, default_user: str, default_pass: str) -> None:
        self.local_port = local_port
        self.default_user, self.default_pass = default_user, default_pass

    def for_endpoint(self, ep: Endpoint) -> tuple[str, str]:
        if ep.username is not None:
            return ep.username, ep.password or ""
        if ep.local:
            return self.default_user, self.default_pass
        return "guest", "guest"


async def connect_any(endpoints: list[Endpoint], start: int, creds: Credentials, name: str) -> tuple[Client, int]:
    """The first endpoint (from index ``start``, wrapping) that connects; LinkError with every
    failure's reason when none does."""
    reasons = []
    n = len(endpoints)
    for k in range(n):
        i = (start + k) % n
        ep = endpoints[i]
        user, password = creds.for_endpoint(ep)
        try:
            return await connect(ep, user, password, name, creds.local_port), i
        except LinkError as e:
            reasons.append(str(e))
    raise LinkError("; ".join(reasons))


async def ensure_queue(client: Client, name: str, arguments: dict | None = None) -> int:
    """Make sure queue ``name`` exists (a passive declare; a durable declare if it is missing,
    as RabbitMQ's shovel does); its message count."""
    ch = await client.channel()
    try:
        ok = await ch.declare_queue(name, passive=True)
        await ch.close()
        return ok.message_count
    except LinkError as e:
        if getattr(e, "reply_code", None) != 404:
            raise
    ch = await client.channel()
    ok = await ch.declare_queue(name, durable=True, arguments=arguments)
    await ch.close()
    return ok.message_count


def status_time(wall: float | None = None) -> str:
    """RabbitMQ 3.10's shovel/federation status timestamp, local time, the hour unpadded as it
    prints it: ``2024-01-31 4:05:06``."""
    t = time.localtime(time.time() if wall is None else wall)
    return time.strftime("%Y-%m-%d ", t) + f"{t.tm_hour}:" + time.strftime("%M:%S", t)


async def sleep_or_stop(stop: asyncio.Event, delay: float) -> bool:
    """Sleep ``delay`` seconds; True if ``stop`` was set meanwhile."""
    try:
        await asyncio.wait_for(stop.wait(), delay)
        return True
    except asyncio.TimeoutError:
        return False
