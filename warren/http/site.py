"""Serve any aiohttp application on the running loop, every connection behind ``HttpGuard`` and
every request through ``limits_middleware`` (limits.py). The HTTP API (warren/management) and the
Prometheus endpoint (warren/metrics) both listen through ``GuardedSite``.
"""

from __future__ import annotations

import asyncio

from aiohttp import web

from warren.http.limits import HttpGuard, HttpLimits, quiet_parse_errors

__all__ = ["GuardedSite", "SHUTDOWN_TIMEOUT_S"]

SHUTDOWN_TIMEOUT_S = 2.0  # requests still running at shutdown get this long to finish


class GuardedSite:
    """An aiohttp application served on the running loop, every connection behind ``HttpGuard``.

    The caller puts ``limits_middleware(limits)`` in the application (outermost); this sets
    aiohttp's own limits from the same ``limits`` and owns the listening socket.
    """

    def __init__(self, app: web.Application, limits: HttpLimits) -> None:
        self.app = app
        self.limits = limits
        self.port: int | None = None
        self._runner: web.AppRunner | None = None
        self._listener: asyncio.AbstractServer | None = None

    async def start(self, host: str, port: int, ssl_context=None, **runner_options) -> int:
        """Listen on host:port (0 = ephemeral), over TLS with ``ssl_context``; ``runner_options``
        go to aiohttp's AppRunner (``lingering_time``). Returns the port bound."""
        limits = self.limits
        quiet_parse_errors()
        # aiohttp's own line limits at the guard's total, so the total is the one that applies
        runner = web.AppRunner(self.app, handle_signals=False, access_log=None,
                               shutdown_timeout=SHUTDOWN_TIMEOUT_S, keepalive_timeout=limits.keepalive_timeout,
                               max_line_size=limits.max_header_size, max_field_size=limits.max_header_size,
                               **runner_options)
        await runner.setup()
        loop = asyncio.get_running_loop()
        handlers = runner.server  # aiohttp's protocol factory: one request handler per connection
        try:
            # HTTPS: the TLS handshake gets the header time limit too (asyncio's default is 60 s)
            tls = {"ssl": ssl_context, "ssl_handshake_timeout": limits.header_timeout} if ssl_context else {}
            self._listener = await loop.create_server(lambda: HttpGuard(handlers(), limits, loop), host, port,
                                                      reuse_address=True, backlog=128, **tls)
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        self.port = self._listener.sockets[0].getsockname()[1]
        return self.port

    async def stop(self) -> None:
        """Stop listening and close every HTTP connection (idempotent)."""
        listener, self._listener = self._listener, None
        if listener is not None:
            listener.close()  # no new connections; runner.cleanup closes the open ones
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()
        if listener is not None:
            await listener.wait_closed()
