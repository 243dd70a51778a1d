"""Time and size limits of the HTTP port, so that no client holds a connection or memory for free.

aiohttp on its own waits for a request's headers and body as long as the client keeps the socket
open (its idle keep-alive timer only runs between requests, and defaults to an hour), accepts up
to 128 header lines of 8 KiB each, and logs a traceback for a request it cannot parse. Anyone
who could reach the port, without logging in, could hold sockets open by trickling header
octets or by sending half a request and going silent. Here:

* **Header time**: a request's line and headers must arrive within ``header_timeout`` seconds
  (10 s) of its first octet, or of the accept for a new connection that sends nothing. Past it
  the client gets ``408`` (if it sent anything) and the socket is closed.
* **Header size**: request line plus headers above ``max_header_size`` octets (16 KiB) get
  ``431`` and a close, before aiohttp's parser ever sees them (its per-line limits are raised to
  the same figure so the total is the one that applies).
* **Body**: ``limits_middleware`` reads every request body before any route runs (routes then
  get it from ``request.read()``/``json()`` at no cost): a declared ``Content-Length`` over
  ``max_body_size`` (RabbitMQ's ``management.http.max_body_size``, 20 MiB) is answered ``413``
  at once, a chunked body that grows past it ``413`` too, and a body that does not arrive
  within ``body_timeout`` seconds ``408``; each with a JSON error body and a close.
* **Idle keep-alive** connections are closed after ``keepalive_timeout`` seconds.
* A request aiohttp still refuses as malformed is logged as one line, without a traceback.

``HttpGuard`` is a protocol placed between the socket and aiohttp's request handler: it sees
every octet first, so it can count header octets and time them without touching aiohttp's
internals; the middleware tells it where a request starts and ends.
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError

__all__ = ["HttpLimits", "HttpGuard", "limits_middleware", "quiet_parse_errors"]

log = logging.getLogger("warren.management")

_END_OF_HEADERS = b"\r\n\r\n"


@dataclass(frozen=True)
class HttpLimits:
    header_timeout: float = 10.0  # seconds for a request line and headers
    body_timeout: float = 30.0  # seconds for a request body, from the end of its headers
    max_header_size: int = 16 * 1024  # octets of request line + headers
    max_body_size: int = 20 * 1024 * 1024  # octets of request body (RabbitMQ's default)
    keepalive_timeout: float = 60.0  # seconds an idle kept-alive connection stays open


def _peer(transport) -> str:
    peer = transport.get_extra_info("peername") if transport is not None else None
    if isinstance(peer, tuple) and len(peer) >= 2:
        return f"{peer[0]}:{peer[1]}"
    return str(peer)


def _json_response(status: int, error: str, reason: str) -> web.Response:
    """A JSON error (RabbitMQ's ``{"error", "reason"}`` shape) that closes the connection."""
    resp = web.json_response({"error": error, "reason": reason}, status=status)
    resp.force_close()  # the rest of the request may still be on its way: never read as the next one
    return resp


def _raw_response(status: int, phrase: str, error: str, reason: str) -> bytes:
    """The same error written straight to the socket, for requests aiohttp never saw."""
    body = json.dumps({"error": error, "reason": reason}).encode()
    return (f"HTTP/1.1 {status} {phrase}\r\nContent-Type: application/json; charset=utf-8\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode() + body


class HttpGuard(asyncio.Protocol):
    """Wraps one aiohttp request handler (``inner``): times and sizes each request's headers."""

    def __init__(self, inner: asyncio.Protocol, limits: HttpLimits, loop: asyncio.AbstractEventLoop) -> None:
        self.inner = inner
        self.limits = limits
        self.loop = loop
        self.transport: asyncio.Transport | None = None
        self._awaiting_headers = True  # between requests, or reading one's line and headers
        self._in_request = False  # a request's body is read and a route handles it (limits_middleware)
        self._header_octets = 0  # octets of the current request's line and headers so far
        self._tail = b""  # the last 3 octets read, to find a CRLFCRLF split between reads
        self._read_meanwhile = False  # octets came while a request was being handled (pipelining)
        self._timer: asyncio.TimerHandle | None = None
        self._refused = False

    # --- asyncio.Protocol, forwarded to aiohttp --------------------------------------------

    def connection_made(self, transport) -> None:
        self.transport = transport
        self._arm()  # a new connection that sends nothing is held to the header time too
        self.inner.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return
        if self._awaiting_headers:
            if self._timer is None:
                self._arm()  # the first octet of the next request on a kept-alive connection
            window = self._tail + data
            end = window.find(_END_OF_HEADERS)
            if end < 0:
                self._header_octets += len(data)
                self._tail = window[-3:]
            else:
                self._header_octets += end + len(_END_OF_HEADERS) - len(self._tail)
            if self._header_octets > self.limits.max_header_size:
                self._refuse_headers()
                return
            if end >= 0:
                self._headers_complete()
        elif self._in_request:
            self._read_meanwhile = True
        self.inner.data_received(data)

    def eof_received(self):
        return self.inner.eof_received()

    def connection_lost(self, exc) -> None:
        self._disarm()
        self.inner.connection_lost(exc)

    def pause_writing(self) -> None:
        self.inner.pause_writing()

    def resume_writing(self) -> None:
        self.inner.resume_writing()

    # --- request boundaries (limits_middleware) --------------------------------------------

    def request_started(self) -> None:
        """aiohttp parsed a request's headers (what follows is its body, if it has one)."""
        self._headers_complete()

    def body_done(self) -> None:
        """The request's body is read: octets from now on belong to a pipelined next request."""
        self._in_request = True

    def request_done(self) -> None:
        self._in_request = False
        self._awaiting_headers = True
        if self._read_meanwhile:  # part of a pipelined request is waiting already: time it
            self._read_meanwhile = False
            self._arm()

    # --- internals -------------------------------------------------------------------------

    def _headers_complete(self) -> None:
        self._awaiting_headers = False
        self._header_octets = 0
        self._tail = b""
        self._disarm()

    def _arm(self) -> None:
        self._disarm()
        self._timer = self.loop.call_later(self.limits.header_timeout, self._header_timeout)

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _header_timeout(self) -> None:
        self._timer = None
        t = self.transport
        if t is None or t.is_closing() or not self._awaiting_headers:
            return
        log.warning("closing HTTP connection from %s: request headers not received in %gs (%d octets so far)",
                    _peer(t), self.limits.header_timeout, self._header_octets)
        if self._header_octets:
            t.write(_raw_response(408, "Request Timeout", "request_timeout",
                                  f"request headers not received in {self.limits.header_timeout:g}s"))
        self._refused = True
        t.close()

    def _refuse_headers(self) -> None:
        t = self.transport
        log.warning("closing HTTP connection from %s: request headers larger than %d octets",
                    _peer(t), self.limits.max_header_size)
        t.write(_raw_response(431, "Request Header Fields Too Large", "request_header_fields_too_large",
                              f"request line and headers are limited to {self.limits.max_header_size} octets"))
        self._refused = True
        self._disarm()
        t.close()


def limits_middleware(limits: HttpLimits):
    """The body limits, and the request boundaries for the connection's ``HttpGuard``."""

    @web.middleware
    async def bounded(request: web.Request, handler):
        guard = request.transport.get_protocol() if request.transport is not None else None
        if not isinstance(guard, HttpGuard):
            guard = None  # served some other way (a test client): only the body limits apply
        if guard is not None:
            guard.request_started()
        try:
            if request.body_exists:
                length = request.content_length
                if length is not None and length > limits.max_body_size:
                    log.warning("HTTP request %s %s from %s refused: body of %d octets, over the limit of %d",
                                request.method, request.path, request.remote, length, limits.max_body_size)
                    return _json_response(413, "request_entity_too_large",
                                          f"request body limited to {limits.max_body_size} octets")
                bounded_request = request.clone(client_max_size=limits.max_body_size)
                try:
                    await asyncio.wait_for(bounded_request.read(), limits.body_timeout)
                except web.HTTPRequestEntityTooLarge:
                    log.warning("HTTP request %s %s from %s refused: body over the limit of %d octets",
                                request.method, request.path, request.remote, limits.max_body_size)
                    return _json_response(413, "request_entity_too_large",
                                          f"request body limited to {limits.max_body_size} octets")
                except asyncio.TimeoutError:
                    log.warning("HTTP request %s %s from %s refused: body not received in %gs",
                                request.method, request.path, request.remote, limits.body_timeout)
                    return _json_response(408, "request_timeout",
                                          f"request body not received in {limits.body_timeout:g}s")
                request = bounded_request  # its body is read: routes get it from read()/json()
            if guard is not None:
                guard.body_done()
            return await handler(request)
        finally:
            if guard is not None:
                guard.request_done()

    return bounded


class _OneLineParseErrors(logging.Filter):
    """aiohttp logs a request it cannot parse with a traceback: keep the line, drop the traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, HttpProcessingError):
            record.msg = f"{record.getMessage()}: {exc.code} {exc.message}"
            record.args = ()
            record.exc_info = None
            record.exc_text = None
        return True


_FILTER = _OneLineParseErrors()


def quiet_parse_errors() -> None:
    """Install the filter on aiohttp's server logger (idempotent)."""
    logger = logging.getLogger("aiohttp.server")
    if _FILTER not in logger.filters:
        logger.addFilter(_FILTER)
