"""A part of a file as an HTTP response's body, copied by the kernel (``sendfile``).

Why: the stream records endpoint answers ranges of segment files as they lie on disk; read into
the broker and written to the socket, a Spark read of a large stream cost the broker 0.11 s of
CPU a job for its two copies (docs/spark.md). ``sendfile`` copies from the page cache to the
socket without either.

How: the broker's loop is uvloop's, which has no ``loop.sendfile``. So the response's headers
go out through aiohttp, the transport's buffer is let drain, and a thread of the default
executor sends the part on a duplicate of the socket's descriptor (a duplicate, so that a
connection closed meanwhile cannot have its number reused under the thread). The socket is
non-blocking (the duplicate shares that), so the thread waits for room with ``poll``; a
client that takes nothing for ``STALL_S`` is given up on. Nothing else writes to the socket
meanwhile: aiohttp handles one request of a connection at a time. Over TLS (the kernel cannot
encrypt) the part is read and written as any body.
"""

from __future__ import annotations

import asyncio
import os
import select

from aiohttp import web

__all__ = ["send_file_part"]

STALL_S = 60.0  # seconds a client may take nothing before the response is given up
READ_CHUNK = 1 << 20  # octets read at a time over TLS


async def send_file_part(request: web.Request, response: web.StreamResponse, fd: int, position: int,
                         length: int) -> web.StreamResponse:
    """Send ``length`` octets of the file ``fd`` from ``position`` as ``response``'s body (its
    headers set by the caller); ``fd`` is closed, whatever happens."""
    loop = asyncio.get_running_loop()
    try:
        response.content_length = length
        await response.prepare(request)
        transport = request.transport
        if transport is None:
            raise ConnectionResetError("connection lost")
        sock = transport.get_extra_info("socket")
        if sock is None or transport.get_extra_info("sslcontext") is not None or not await _drained(transport, response):
            done = 0
            while done < length:
                chunk = await loop.run_in_executor(None, os.pread, fd, min(READ_CHUNK, length - done),
                                                   position + done)
                if not chunk:
                    raise OSError(f"the file ended {length - done} octets early")
                await response.write(chunk)
                done += len(chunk)
        else:
            out = os.dup(sock.fileno())
            try:
                await loop.run_in_executor(None, _send, out, fd, position, length)
            finally:
                os.close(out)
        await response.write_eof()
        return response
    finally:
        os.close(fd)


async def _drained(transport, response: web.StreamResponse) -> bool:
    """Whether the transport's buffer (the headers, at least) is all on the socket, waiting for
    it: the protocol is paused above a high-water mark of 0 and resumed once it is empty, which
    drain waits for. False if it is not empty all the same (then the body goes through it)."""
    if transport.get_write_buffer_size():
        low, high = transport.get_write_buffer_limits()
        transport.set_write_buffer_limits(high=0)
        try:
            await response.drain()
        finally:
            transport.set_write_buffer_limits(high=high, low=low)
    return not transport.get_write_buffer_size()


def _send(out: int, fd: int, position: int, length: int) -> None:
    """On an executor thread: every octet sent, waiting for room on the socket as needed."""
    poll = select.poll()
    poll.register(out, select.POLLOUT)
    while length:
        try:
            sent = os.sendfile(out, fd, position, length)
        except BlockingIOError:
            if not poll.poll(STALL_S * 1000):
                raise TimeoutError(f"the client took nothing for {STALL_S:.0f} s") from None
            continue
        if sent == 0:
            raise OSError(f"the file ended {length} octets early")
        position += sent
        length -= sent
