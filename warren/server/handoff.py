"""Connections handed over between processes: the wire format both sides share, and the
worker's receiving end (the supervisor's sending end is in workers.py).

A hand-over is one SOCK_SEQPACKET record (its formats: handoff_records.py) on a Unix socket from the supervisor to a worker,
carrying the client's TCP socket as an SCM_RIGHTS descriptor and, as data, every octet the
client has sent so far (protocol header included). The worker replays those octets through
a fresh ``AMQPConnection``: login, tune and open run again in the worker (with the same
users and settings, they come out the same), everything the replay would send before
connection.open-ok is dropped because the supervisor sent it already, and open-ok and all
after it go to the client. Whatever the client sent after connection.open is in the record
or still in the socket, and is read by the worker in order.

The record also names the vhost the supervisor resolved connection.open to: an AMQP 0-10
client may name none (qpid.messaging does not), and the worker's replay must then open the
vhost the supervisor chose a worker for, whatever the worker's own default would be.

A TLS connection stays with the supervisor, which relays its plaintext (relay.py): its record
(``pack_relayed``) carries one end of a socket pair instead of the client's socket, and says
what that socket cannot: the client's address and ours, and the TLS session (``TlsSession``:
the EXTERNAL login's user, the HTTP API's ssl columns).

The channel carries one more record, both ways and without a descriptor: a failed login
(``pack_failed_login``), so that every process of the node counts it in its login throttle
(warren/access/login_throttle.py): the supervisor tells the workers of failed AMQP logins, a
worker tells the supervisor of a failed HTTP API login, and the supervisor passes that on.
"""

from __future__ import annotations

import logging
import os
import socket
import struct

from warren.codec.frames import method_frame
from warren.server.connection import AMQPConnection
from warren.server.handoff_records import (
    FAILED_LOGIN, RECORD_MAX, RELAYED, Relayed, pack_failed_login, unpack_failed_login, unpack_handoff, unpack_relayed,
)
from warren.server.placement import is_move, unpack_move
from warren.spec.amqp0_9_1 import ConnectionClose

__all__ = ["HandedOverConnection", "HandoffReceiver"]

log = logging.getLogger("warren.handoff")

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
        self._listener.listen(128)  # the supervisor, and (--worker-mode queues) workers moving connections here
        self._listener.setblocking(False)
        self.loop.add_reader(self._listener.fileno(), self._accept)

    def _accept(self) -> None:
        try:
            channel, _ = self._listener.accept()
        except BlockingIOError:
            return
        if self._channel is not None:
            # another worker moving a connection here (--worker-mode queues: one record, then it
            # closes; warren/server/placement.py); without spread, nobody but the supervisor may
            if self.server.broker.directory.index is None:
                channel.close()
                return
            channel.setblocking(False)
            self.loop.add_reader(channel.fileno(), self._receive_move, channel)
            return
        channel.setblocking(False)
        self._channel = channel
        self.loop.add_reader(channel.fileno(), self._receive)
        throttle = self.server.broker.login_throttle
        if throttle is not None:  # our HTTP API's failed logins count at the supervisor's AMQP login too
            throttle.on_failure = self._tell_failed_login

    def _tell_failed_login(self, host: str) -> None:
        if self._channel is None:
            return
        try:
            self._channel.send(pack_failed_login(host))
        except OSError as e:  # the supervisor is gone or far behind: it stops us, or counts one fewer
            log.warning("could not tell the supervisor of a failed login from %s: %s", host, e)

    def _receive_move(self, channel: socket.socket) -> None:
        try:
            record, fds, _flags, _addr = socket.recv_fds(channel, RECORD_MAX, 1)
        except BlockingIOError:
            return
        except OSError as e:
            record, fds = b"", []
            log.error("a connection moved from another worker failed: %s", e)
        self.loop.remove_reader(channel.fileno())
        channel.close()
        if len(fds) != 1 or not is_move(record):
            for fd in fds:
                os.close(fd)
            if record or fds:
                log.error("malformed move record from another worker; ignored")
            return
        answered, inner = unpack_move(record)
        self._adopt(inner, fds[0], answered)

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
            if not fds and record[:1] == FAILED_LOGIN:  # in another process of the node
                throttle = self.server.broker.login_throttle
                if throttle is not None:
                    throttle.count_elsewhere(unpack_failed_login(record))
                continue
            if len(fds) != 1:
                for fd in fds:
                    os.close(fd)
                log.error("hand-over record without a socket; ignored")
                continue
            self._adopt(record, fds[0])

    def _adopt(self, record: bytes, fd: int, answered: int = 0) -> None:
        try:
            relayed = None
            if record[:1] == RELAYED:  # a TLS connection the supervisor relays (relay.py), or its move
                relayed, record = unpack_relayed(record)
            peer, vhost, received = unpack_handoff(record)
            sock = socket.socket(fileno=fd)
        except (ValueError, KeyError, IndexError, TypeError, UnicodeDecodeError, struct.error, OSError) as e:
            os.close(fd)
            log.error("malformed hand-over record: %s", e)
            return
        # the supervisor checked this login against access.json as it is now; the replay checks
        # it again here, so first take in what other processes changed since our last look
        # (a user made through another worker's HTTP API): a stat when nothing changed
        self.server.broker.access.refresh()
        task = self.loop.create_task(self.loop.connect_accepted_socket(
            lambda: HandedOverConnection(self.server, received, vhost, answered, relayed), sock))
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


class HandedOverConnection(AMQPConnection):
    """The worker's connection for a hand-over: an ``AMQPConnection`` replaying what the client
    sent the supervisor, whose AMQP 0-10 default vhost is the one the supervisor resolved
    (a 0-9-1 connection.open always names its vhost)."""

    __slots__ = ("handoff_vhost", "answered")

    def __init__(self, server, received: bytes, vhost: str, answered: int = 0, relayed: Relayed | None = None) -> None:
        super().__init__(server, replay=received)
        self.handoff_vhost = vhost
        # a connection moved from another worker (--worker-mode queues): how many of the octets
        # received were answered there already (warren/server/placement.py); 0 from the supervisor
        self.answered = answered
        if relayed is not None:  # TLS the supervisor relays: who the client is (connection_made)
            self.peer, self.local, self.tls = relayed.peer, relayed.local, relayed.tls
        if server.broker.directory.index is not None and not answered:
            # it may move once (the replay is its beginning); a relayed TLS connection moves its
            # end of the socket pair, and the record carries who the client is (placement.py)
            self._history = bytearray()

    def connection_made(self, transport) -> None:
        if not self.answered:
            return super().connection_made(transport)
        # moved here: replay what was answered without a word, then go on as if we had read it
        replay, self._replay = self._replay, None
        super().connection_made(transport)
        if self.transport is None or self.transport.is_closing():
            return
        answered, pending = replay[:self.answered], replay[self.answered:]
        self.recv_oct += len(answered)
        data = self._protocol_header(answered)
        conn, session = self.conn, self.session
        conn.receive_data(data)
        session.replaying = True
        failed = False
        try:
            while (event := conn.next_event()) is not None:
                session.handle(event)
        except Exception:  # the worker it came from checked it replays (placement.clean): our bug
            log.exception("connection %s moved from another worker failed its replay", session)
            failed = True
        finally:
            session.replaying = False
        conn.data_to_send()  # the client had all of it from the worker it moved from
        self._replaying = False
        if failed or session.closed:
            if not failed and self.handoff_vhost not in self.server.broker.vhosts:
                # its vhost was deleted while it moved: closed as the worker it left would have
                text = f"vhost '{self.handoff_vhost}' is deleted"
                self._close_reason = f"{text} (320 connection-forced, while it moved here)"
                self.transport.write(method_frame(0, ConnectionClose(320, f"CONNECTION_FORCED - {text}", 0, 0)
                                                  .encode()))
                self.transport.close()
                return
            self._close_reason = "its replay after a move from another worker failed"
            self.transport.abort()
            return
        if pending:
            self.data_received(pending)

    def _start_0_10(self) -> None:
        super()._start_0_10()
        self.conn.default_vhost = self.handoff_vhost
