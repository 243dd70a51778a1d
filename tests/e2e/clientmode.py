"""Drive Warren's own sans-IO client mode (warren.protocol.client) over a real TCP socket.

The test client for AMQP 0-8, 0-9 and Qpid's 0-91, which no installable client library speaks
(docs/versions.md). Blocking, every wait bounded by a timeout; events that a wait does not ask
for are kept for the next one.
"""

from __future__ import annotations

import socket
import time
from collections import deque

from warren.protocol.client import ClientConnection, Closed, Heartbeat, Opened
from warren.protocol.events import Content, Method
from warren.spec import amqp0_9_1 as spec

TIMEOUT = 5.0


class ConnectionLost(Exception):
    pass


class SocketClient:
    def __init__(self, broker, dialect: str = "0-9-1", *, handshake: bool = True, **kw) -> None:
        self.conn = ClientConnection(dialect, **kw)
        self.sock = socket.create_connection((broker.host, broker.port), timeout=TIMEOUT)
        self.events: deque = deque()
        self.eof = False
        self.raw = bytearray()  # everything received, for tests that look at bytes
        self.flush()
        if handshake:
            self.wait(Opened)

    # --- plumbing --------------------------------------------------------------------------

    def flush(self) -> None:
        data = self.conn.data_to_send()
        if data:
            self.sock.sendall(data)

    def _pump(self, deadline: float) -> None:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError("no event in time; pending: %r" % list(self.events))
        self.sock.settimeout(remaining)
        try:
            data = self.sock.recv(1 << 16)
        except socket.timeout:
            raise TimeoutError("no event in time; pending: %r" % list(self.events)) from None
        except ConnectionResetError:
            data = b""
        if not data:
            self.eof = True
            raise ConnectionLost("the server closed the socket")
        self.raw += data
        self.conn.receive_data(data)
        while (event := self.conn.next_event()) is not None:
            self.events.append(event)
        self.flush()  # automatic answers (start-ok, tune-ok + open, close-ok)

    def wait(self, want, channel: int | None = None, timeout: float = TIMEOUT):
        """The first event (kept or new) of type `want` (an event class or a 0-9-1 method class)."""
        deadline = time.monotonic() + timeout
        while True:
            for i, e in enumerate(self.events):
                if _matches(e, want, channel):
                    del self.events[i]
                    return e
            self._pump(deadline)

    def wait_closed(self, timeout: float = TIMEOUT) -> Closed:
        return self.wait(Closed, timeout=timeout)

    def received(self, channel: int, class_id: int, method_id: int) -> bool:
        """Whether a method with these wire ids arrived on the channel."""
        return (channel, (class_id, method_id)) in self.conn.trace

    def read_until_eof(self, timeout: float = TIMEOUT) -> bytes:
        deadline = time.monotonic() + timeout
        while not self.eof:
            try:
                self._pump(deadline)
            except ConnectionLost:
                break
        return bytes(self.raw)

    def close_socket(self) -> None:
        self.sock.close()

    # --- AMQP ------------------------------------------------------------------------------

    def call(self, channel: int, method, reply, timeout: float = TIMEOUT):
        """Send a method (0-9-1 object or native) and wait for `reply` on the channel."""
        self.conn.send_method(channel, method)
        self.flush()
        event = self.wait(reply, channel, timeout)
        return event.method if isinstance(event, (Method, Content)) else event

    def channel(self, number: int = 1) -> int:
        self.conn.open_channel(number)
        self.flush()
        self.wait(spec.ChannelOpenOk, number)
        return number

    def send(self, channel: int, method) -> None:
        self.conn.send_method(channel, method)
        self.flush()

    def publish(self, channel: int, exchange: str, routing_key: str, body: bytes,
                properties: spec.BasicProperties | None = None, mandatory: bool = False) -> None:
        self.conn.send_content(channel, spec.BasicPublish(0, exchange, routing_key, mandatory, False),
                               properties or spec.BasicProperties(), body)
        self.flush()

    def get(self, channel: int, queue: str, no_ack: bool = True):
        """basic.get: the Content event, or None for get-empty."""
        self.conn.send_method(channel, spec.BasicGet(0, queue, no_ack))
        self.flush()
        event = self.wait(lambda e: (isinstance(e, Content) and isinstance(e.method, spec.BasicGetOk))
                          or (isinstance(e, Method) and isinstance(e.method, spec.BasicGetEmpty)), channel)
        return event if isinstance(event, Content) else None

    def declare_queue(self, channel: int, name: str, **kw) -> spec.QueueDeclareOk:
        return self.call(channel, spec.QueueDeclare(0, name, **kw), spec.QueueDeclareOk)

    def close(self) -> Closed:
        self.conn.close()
        self.flush()
        closed = self.wait(Closed)
        self.sock.close()
        return closed

    def __enter__(self) -> "SocketClient":
        return self

    def __exit__(self, *exc) -> None:
        try:
            if not self.eof and not self.conn.is_closed and self.conn.state != "closing":
                self.close()
        except Exception:
            pass
        self.sock.close()


def _matches(event, want, channel) -> bool:
    if channel is not None and getattr(event, "channel", channel) != channel:
        return False
    if isinstance(want, type):
        if want in (Opened, Closed, Heartbeat, Content, Method):
            return isinstance(event, want)
        return isinstance(event, (Method, Content)) and isinstance(event.method, want)
    return bool(want(event))


def properties_of(content: Content) -> spec.BasicProperties:
    props, _ = spec.BasicProperties.decode(content.properties, 0)
    return props
