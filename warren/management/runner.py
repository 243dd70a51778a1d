"""Start and stop the HTTP API on the running event loop (the broker's, uvloop or asyncio).

The API shares the broker's loop and thread, so its handlers read the broker's objects without
locks, as the AMQP connections do; the only blocking work, reading stream segments, goes to
the loop's default executor (app.py).
"""

from __future__ import annotations

import logging

from aiohttp import web

from warren.management.app import build_app

__all__ = ["HttpServer", "SHUTDOWN_TIMEOUT_S"]

log = logging.getLogger("warren.management")

SHUTDOWN_TIMEOUT_S = 2.0  # requests still running at shutdown get this long to finish


class HttpServer:
    """The HTTP API of ``broker``; ``info`` as for ``build_app``."""

    def __init__(self, broker, info=None) -> None:
        self.app = build_app(broker, info)
        self.port: int | None = None
        self._runner: web.AppRunner | None = None

    async def start(self, host: str, port: int) -> int:
        """Listen on host:port (0 = ephemeral); returns the port bound."""
        runner = web.AppRunner(self.app, handle_signals=False, access_log=None,
                               shutdown_timeout=SHUTDOWN_TIMEOUT_S)
        await runner.setup()
        try:
            site = web.TCPSite(runner, host, port, reuse_address=True, backlog=128)
            await site.start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        self.port = runner.addresses[0][1]
        log.info("HTTP API listening on %s:%d", host, self.port)
        return self.port

    async def stop(self) -> None:
        """Stop listening and close every HTTP connection (idempotent)."""
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()
