"""Start and stop the HTTP API on the running event loop (the broker's, uvloop or asyncio).

The API shares the broker's loop and thread, so its handlers read the broker's objects without
locks, as the AMQP connections do; the only blocking work, reading stream segments, goes to
the loop's default executor (app.py).

Every connection goes through ``HttpGuard`` and every request through ``limits_middleware``
(warren/http/limits.py): time and size limits on request headers and bodies, and no traceback
for a request aiohttp cannot parse. ``GuardedSite`` (warren/http/site.py) does that serving, for
the Prometheus endpoint (warren/metrics/server.py) too.
"""

from __future__ import annotations

import logging


from warren.http.limits import HttpLimits, limits_middleware
from warren.http.site import GuardedSite
from warren.management.app import build_app

__all__ = ["HttpServer"]

log = logging.getLogger("warren.management")

LINGER_S = 1.0  # how long the unread rest of a refused request body is drained before closing


class HttpServer:
    """The HTTP API of ``broker``; ``info`` and ``server`` as for ``build_app``."""

    def __init__(self, broker, info=None, limits: HttpLimits | None = None, server=None) -> None:
        self.limits = limits or HttpLimits()
        self.app = build_app(broker, info, server)
        self.app.middlewares.insert(0, limits_middleware(self.limits))  # outermost: before any route reads
        self.port: int | None = None
        self._site = GuardedSite(self.app, self.limits)

    async def start(self, host: str, port: int, ssl_context=None) -> int:
        """Listen on host:port (0 = ephemeral), over TLS with ``ssl_context`` (HTTPS, --http-tls);
        returns the port bound."""
        # after a refused body, the rest of it is read and dropped for LINGER_S at most (so the
        # client reads our answer instead of a reset), not aiohttp's 10 s
        self.port = await self._site.start(host, port, ssl_context, lingering_time=LINGER_S)
        log.info("HTTP API listening on %s:%d%s", host, self.port, " (HTTPS)" if ssl_context else "")
        return self.port

    async def stop(self) -> None:
        """Stop listening and close every HTTP connection (idempotent)."""
        await self._site.stop()
