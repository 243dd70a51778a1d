"""Connections handed over between processes: the wire format both sides share, and the
worker's receiving end (the supervisor's sending end is in workers.py).

A hand-over is one SOCK_SEQPACKET record on a Unix socket from the supervisor to a worker,
carrying the client's TCP socket as an SCM_RIGHTS descriptor and, as data, every octet the
client has sent so far (protocol header included). The worker replays those octets through
a fresh ``AMQPConnection``: login, tune and open run again in the worker (with the same
users and settings, they come out the same), everything the replay would send before
connection.open-ok is dropped because the supervisor sent it already, and open-ok and all
after it go to the client. Whatever the client sent after connection.open is in the record
or still in the socket, and is read by the worker in order.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import struct

__all__ = ["HandoffReceiver", "pack_handoff", "unpack_handoff", "RECORD_MAX"]

log = logging.getLogger("warren.handoff")

RECORD_MAX = 1 << 20  # the handshake octets a hand-over carries at most (start-ok is ~frame-max)
_PEER = struct.Struct(">H")


def pack_handoff(peer_host: str, peer_port: int, received: bytes) -> bytes:
    host = peer_host.encode()
    return _PEER.pack(len(host)) + host + _PEER.pack(peer_port) + received


def unpack_handoff(record: bytes) -> tuple[tuple[str, int], bytes]:
    (n,) = _PEER.unpack_from(record, 0)
    host = record[2:2 + n].decode()
    (port,) = _PEER.unpack_from(record, 2 + n)
    return (host, port), record[4 + n:]


class HandoffReceiver:
    """A worker's end: accepts the supervisor on ``path`` and adopts every connection it sends."""

    def __init__(self, server) -> None:
        self.server = server
        self.loop = server.loop
        self._listener: socket.socket | None = None
        self._channel: socket.socket | None = None

    async def start(self, path) -> None:
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._listener.bind(os.fspath(path))
        self._listener.listen(1)
        self._listener.setblocking(False)
        self.loop.add_reader(self._listener.fileno(), self._accept)

    def _accept(self) -> None:
        try:
            channel, _ = self._listener.accept()
        except BlockingIOError:
            return
        if self._channel is not None:  # one supervisor only
            channel.close()
            return
        channel.setblocking(False)
        self._channel = channel
        self.loop.add_reader(channel.fileno(), self._receive)

    def _receive(self) -> None:
        while True:
            try:
                record, fds, _flags, _addr = socket.recv_fds(self._channel, RECORD_MAX, 1)
            except BlockingIOError:
                return
            except OSError as e:
                log.error("hand-over channel failed: %s", e)
                self._supervisor_gone()
                return
            if not record and not fds:
                self._supervisor_gone()
                return
            if len(fds) != 1:
                for fd in fds:
                    os.close(fd)
                log.error("hand-over record without a socket; ignored")
                continue
            self._adopt(record, fds[0])

    def _adopt(self, record: bytes, fd: int) -> None:
        from warren.server.connection import AMQPConnection

        try:
            peer, received = unpack_handoff(record)
            sock = socket.socket(fileno=fd)
        except (ValueError, UnicodeDecodeError, struct.error, OSError) as e:
            os.close(fd)
            log.error("malformed hand-over record: %s", e)
            return
        # the supervisor checked this login against access.json as it is now; the replay checks
        # it again here, so first take in what other processes changed since our last look
        # (a user made through another worker's HTTP API): a stat when nothing changed
        self.server.broker.access.refresh()
        task = self.loop.create_task(self.loop.connect_accepted_socket(
            lambda: AMQPConnection(self.server, replay=received), sock))
        task.add_done_callback(lambda t: t.cancelled() or t.exception() is None
                               or log.error("adopting a connection from %s failed: %r", peer, t.exception()))

    def _supervisor_gone(self) -> None:
        """The supervisor closed our channel (it stopped, or died): stop as on SIGTERM."""
        if self._channel is not None:
            self.loop.remove_reader(self._channel.fileno())
            self._channel.close()
            self._channel = None
        log.warning("the supervisor has gone; shutting down")
        self.server.request_stop()

    def close(self) -> None:
        for s in (self._listener, self._channel):
            if s is not None:
                try:
                    self.loop.remove_reader(s.fileno())
                except (ValueError, OSError):
                    pass
                s.close()
        self._listener = self._channel = None
