"""AMQP over TLS with ``--workers``: the supervisor ends the TLS session and relays plaintext.

Why this way. A plain connection is handed to a worker as its socket (handoff.py), but a TLS
session's keys and record sequence numbers live in the supervisor's OpenSSL objects, and
Python's ``ssl`` cannot export them (kernel TLS offload would be the only way, and ``ssl`` has
no call for it). So the supervisor keeps a TLS connection, as a TLS-terminating proxy in front
of a broker would (stunnel, HAProxy): after the TLS handshake and the AMQP handshake to
connection.open, exactly as for a plain connection, it hands the worker one end of a Unix socket
pair (``pack_relayed``: with the client's address and the TLS session) and copies octets between
the client's TLS transport and the other end. The worker serves it as any connection.

What it costs: the supervisor encrypts, decrypts and copies every octet of TLS connections; the
broker's work stays on the workers. Connections that TLS would make too slow this way are what
the plain port (or one process, which ends TLS itself) is for: docs/security.md.

Flow control, both ways: when one side's transport cannot write as fast as the other side
reads, it pauses reading the other side until it drains (asyncio's pause_writing and
resume_writing). Closing: either side closing (or failing) closes the other once what is
pending for it is written, so a connection.close-ok and a broker's last words get through.
"""

from __future__ import annotations

import asyncio
import logging
import socket

__all__ = ["Relay"]

log = logging.getLogger("warren.relay")


class Relay:
    """One TLS connection's plaintext between its client (``client``: the TLS transport the
    supervisor's ``Greeter`` protocol reads) and its worker (``start``: our end of the pair)."""

    __slots__ = ("loop", "client", "worker", "pending", "client_gone", "worker_paused")

    def __init__(self, loop: asyncio.AbstractEventLoop, client: asyncio.Transport) -> None:
        self.loop = loop
        self.client = client
        self.worker: asyncio.Transport | None = None  # our end of the pair, once connected
        self.pending: list[bytes] = []  # the client's octets before that
        self.client_gone = False
        self.worker_paused = False  # the client's side cannot take more: the worker's reads wait

    def start(self, sock: socket.socket) -> None:
        """Serve our end ``sock`` of the pair (its other end went to the worker)."""
        sock.setblocking(False)
        task = self.loop.create_task(self.loop.connect_accepted_socket(lambda: _WorkerSide(self), sock))
        task.add_done_callback(self._connected)

    def _connected(self, task: asyncio.Task) -> None:
        if task.cancelled() or task.exception() is not None:
            if not task.cancelled():
                log.error("relaying a TLS connection to its worker failed: %r", task.exception())
            self.client.abort()

    # --- the client's side (the Greeter forwards its protocol callbacks) ----------------------

    def from_client(self, data: bytes) -> None:
        if self.worker is None:
            self.pending.append(data)
        else:
            self.worker.write(data)

    def client_cannot_take_more(self) -> None:
        """The client's TLS transport has much unsent: stop reading what the worker writes."""
        self.worker_paused = True
        if self.worker is not None:
            self.worker.pause_reading()

    def client_drained(self) -> None:
        self.worker_paused = False
        if self.worker is not None and not self.worker.is_closing():
            self.worker.resume_reading()

    def client_closed(self) -> None:
        """The client's connection ended: the worker reads EOF after what was sent before."""
        self.client_gone = True
        if self.worker is not None:
            self.worker.close()

    # --- the worker's side --------------------------------------------------------------------

    def worker_connected(self, transport: asyncio.Transport) -> None:
        self.worker = transport
        if self.pending:
            transport.write(b"".join(self.pending))
            self.pending.clear()
        if self.worker_paused:
            transport.pause_reading()
        if self.client_gone:
            transport.close()

    def from_worker(self, data: bytes) -> None:
        if not self.client.is_closing():
            self.client.write(data)

    def worker_closed(self) -> None:
        """The worker closed the connection (or its process ended): the client's goes too,
        after what the worker wrote last."""
        self.worker = None
        if not self.client.is_closing():
            self.client.close()


class _WorkerSide(asyncio.Protocol):
    """Our end of the socket pair: what the worker writes goes to the client."""

    def __init__(self, relay: Relay) -> None:
        self.relay = relay

    def connection_made(self, transport) -> None:
        self.relay.worker_connected(transport)

    def data_received(self, data: bytes) -> None:
        self.relay.from_worker(data)

    def eof_received(self) -> None:
        return None  # the transport closes itself; connection_lost closes the client's side

    def pause_writing(self) -> None:  # the worker is slower than the client: stop reading the client
        self.relay.client.pause_reading()

    def resume_writing(self) -> None:
        if not self.relay.client.is_closing():
            self.relay.client.resume_reading()

    def connection_lost(self, exc) -> None:
        self.relay.worker_closed()
