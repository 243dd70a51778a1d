"""A blocking AMQP 0-9-1 connection for Spark tasks, on Warren's own sans-IO client.

Spark runs ``write()`` and ``read()`` in plain Python worker processes, one task at a time, so
the writer and the drain reader need a small blocking client, not an event loop. pika's
BlockingConnection waits for each publisher confirm before the next publish (about 2k
messages/s); this link instead leaves the pacing to its callers: ``send`` only buffers frames,
``pump`` moves bytes both ways for a bounded time and turns what arrived into events, so a
publisher can keep a window of publishes in flight (``publisher.py``).

The protocol work (handshake, frame parsing, content assembly, answering the server's close)
is ``warren.protocol.client.ClientConnection``; this module owns the socket, the time-outs and
the translation of the broker's closes into ``BrokerClosed`` with the broker's reply code and
text. Every wait is bounded: a silent broker surfaces as ``LinkTimeout``.
"""

from __future__ import annotations

import selectors
import socket
import time
from collections import deque
from dataclasses import dataclass
from urllib.parse import quote, unquote, urlparse

from warren.protocol.client import ClientConnection, Closed, Heartbeat, Opened
from warren.protocol.events import Content, Method
from warren.spec import amqp0_9_1 as spec

__all__ = ["AmqpAddress", "AmqpLink", "LinkError", "BrokerClosed", "LinkTimeout", "parse_url", "DEFAULT_URL"]

DEFAULT_URL = "amqp://guest:guest@127.0.0.1:5672/%2F"
RECV_SIZE = 1 << 18
SEND_SLICE = 1 << 20  # largest send() per call: keeps reads of confirms interleaved with writes
CLIENT_PROPERTIES = {
    "product": "warren spark",
    # the server only sends basic.nack and connection.blocked to clients that say they know them
    "capabilities": {"publisher_confirms": True, "basic.nack": True, "connection.blocked": True,
                     "consumer_cancel_notify": True},
}


class LinkError(Exception):
    """The connection to the broker failed or cannot be used any more."""


class BrokerClosed(LinkError):
    """The broker closed the connection or a channel (reply code and text as it sent them)."""

    def __init__(self, what: str, reply_code: int, reply_text: str) -> None:
        super().__init__(f"the broker closed the {what}: {reply_code} {reply_text}")
        self.what, self.reply_code, self.reply_text = what, reply_code, reply_text


class LinkTimeout(LinkError):
    """An answer the link waited for did not come in time."""


@dataclass(frozen=True)
class AmqpAddress:
    host: str
    port: int
    username: str
    password: str
    virtual_host: str

    def __str__(self) -> str:  # never the password: this text ends up in Spark's error messages
        return f"amqp://{self.username}@{self.host}:{self.port}/{quote(self.virtual_host, safe='')}"


def parse_url(url: str) -> AmqpAddress:
    """An ``amqp://user:pass@host:port/vhost`` URL (vhost percent-encoded; ``%2F`` is "/")."""
    u = urlparse(url)
    if u.scheme != "amqp":
        raise ValueError(f"only amqp:// URLs are supported (no TLS yet), got {url!r}")
    path = u.path[1:] if u.path.startswith("/") else u.path
    return AmqpAddress(
        host=u.hostname or "127.0.0.1",
        port=u.port or 5672,
        username=unquote(u.username) if u.username else "guest",
        password=unquote(u.password) if u.password else "guest",
        # the URL convention (RabbitMQ's URI spec): an empty path is the default vhost "/"
        virtual_host=unquote(path) if u.path not in ("", "/") else "/",
    )


class AmqpLink:
    """One connection with one channel (number 1), driven by blocking, bounded calls."""

    CHANNEL = 1

    def __init__(self, url: str, connect_timeout: float = 10.0, heartbeat: int = 0) -> None:
        self.address = parse_url(url)
        self.timeout = connect_timeout
        # heartbeats off by default: a task may sit between two Arrow batches for minutes while
        # Spark computes upstream, and nothing would pump the socket then; a dead broker still
        # surfaces through the time-outs of every wait
        self.conn = ClientConnection("0-9-1", self.address.username, self.address.password,
                                     self.address.virtual_host, client_properties=CLIENT_PROPERTIES,
                                     heartbeat=heartbeat)
        self.events: deque = deque()
        self.out = bytearray()  # bytes to send; the publisher appends its frames here directly
        self.blocked: str | None = None  # connection.blocked's reason while the broker blocks us
        self.closed_by: BrokerClosed | None = None
        self._last_sent = time.monotonic()
        self.sock: socket.socket | None = None
        self._selector: selectors.BaseSelector | None = None
        self._interest = 0

    # --- opening and closing -----------------------------------------------------------------

    def open(self) -> AmqpLink:
        """Connect, authenticate, open channel 1; raises LinkError (never hangs past the time-out)."""
        try:
            self.sock = socket.create_connection((self.address.host, self.address.port), timeout=self.timeout)
        except OSError as e:
            raise LinkError(f"cannot connect to {self.address}: {e}") from e
        try:
            self._handshake()
        except BaseException:
            self.close()
            raise
        return self

    def _handshake(self) -> None:
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock.setblocking(False)
        # a selector, not select(): a worker process may hold more than 1024 descriptors
        self._selector = selectors.DefaultSelector()
        self._selector.register(self.sock, selectors.EVENT_READ)
        self._interest = selectors.EVENT_READ
        self._queue_output()
        try:
            self.wait_for(lambda e: isinstance(e, Opened), self.timeout, "connection.open-ok")
        except BrokerClosed as e:
            raise LinkError(f"{self.address} refused the connection: {e.reply_code} {e.reply_text}") from e
        except LinkError as e:
            if self.conn.state in ("start", "tune"):  # RabbitMQ and Warren drop the socket on bad credentials
                raise LinkError(f"{self.address} closed the connection during the handshake "
                                f"(wrong user name or password, or no access to the virtual host?)") from e
            raise
        self.conn.open_channel(self.CHANNEL)
        self._queue_output()
        self.call(None, spec.ChannelOpenOk)

    def close(self) -> None:
        """Close politely when possible (bounded), then drop the socket; never raises."""
        if self.sock is None:
            return
        try:
            if self.conn.is_open:
                self.conn.close()
                self._queue_output()
                self.wait_for(lambda e: isinstance(e, Closed), min(self.timeout, 2.0), "connection.close-ok")
        except (LinkError, OSError):
            pass
        finally:
            if self._selector is not None:
                self._selector.close()
            self.sock.close()
            self.sock = None

    def __enter__(self) -> AmqpLink:
        return self.open()

    def __exit__(self, *exc) -> None:
        self.close()

    # --- sending -----------------------------------------------------------------------------

    def send(self, method) -> None:
        """Buffer a method on channel 1 (sent by the next ``pump``)."""
        self.conn.send_method(self.CHANNEL, method)
        self._queue_output()

    def _queue_output(self) -> None:
        data = self.conn.data_to_send()
        if data:
            self.out += data

    # --- receiving ---------------------------------------------------------------------------

    def pump(self, timeout: float) -> bool:
        """Send buffered bytes and read what arrived, waiting at most ``timeout`` for anything.

        Returns whether any bytes moved. New events go to ``self.events``; the broker closing the
        channel or the connection raises ``BrokerClosed`` (after the events before it were kept).
        """
        sock = self.sock
        if sock is None:
            raise LinkError("the connection is closed")
        interest = selectors.EVENT_READ | (selectors.EVENT_WRITE if self.out else 0)
        if interest != self._interest:
            self._selector.modify(sock, interest)
            self._interest = interest
        ready = 0
        for _key, mask in self._selector.select(max(timeout, 0.0)):
            ready |= mask
        readable, writable = ready & selectors.EVENT_READ, ready & selectors.EVENT_WRITE
        moved = False
        if writable:
            try:
                sent = sock.send(memoryview(self.out)[:SEND_SLICE])
            except (BlockingIOError, InterruptedError):
                sent = 0
            except OSError as e:
                raise LinkError(f"connection to {self.address} lost: {e}") from e
            if sent:
                del self.out[:sent]
                self._last_sent = time.monotonic()
                moved = True
        if readable:
            try:
                data = sock.recv(RECV_SIZE)
            except (BlockingIOError, InterruptedError):
                data = None
            except OSError as e:
                raise LinkError(f"connection to {self.address} lost: {e}") from e
            if data == b"":
                raise self.closed_by or LinkError(f"{self.address} closed the connection without a close method")
            if data:
                moved = True
                self._receive(data)
        self._heartbeat()
        return moved

    def _receive(self, data: bytes) -> None:
        self.conn.receive_data(data)
        while (event := self._next_event()) is not None:
            if isinstance(event, Heartbeat):
                continue
            if isinstance(event, Method):
                kind = type(event.method)
                if kind is spec.ConnectionBlocked:
                    self.blocked = event.method.reason or "blocked"
                    continue
                if kind is spec.ConnectionUnblocked:
                    self.blocked = None
                    continue
                if kind is spec.ChannelClose:
                    self._queue_output()  # the close-ok ClientConnection queued
                    self.closed_by = BrokerClosed("channel", event.method.reply_code, event.method.reply_text)
            elif isinstance(event, Closed) and event.by_server:
                self._queue_output()
                self.closed_by = BrokerClosed("connection", event.reply_code, event.reply_text)
            self.events.append(event)
        self._queue_output()  # the handshake's automatic answers
        if self.closed_by is not None:
            self._flush_quietly()
            raise self.closed_by

    def _next_event(self):
        try:
            return self.conn.next_event()
        except Exception as e:  # a frame the codec cannot parse: the connection is unusable
            raise LinkError(f"cannot parse what {self.address} sent: {e}") from e

    def _flush_quietly(self) -> None:
        try:
            if self.out and self.sock is not None:
                self.sock.send(bytes(self.out))
                self.out.clear()
        except OSError:
            pass

    def _heartbeat(self) -> None:
        interval = self.conn.heartbeat if self.conn.is_open else 0
        if interval and time.monotonic() - self._last_sent > interval / 2 and not self.out:
            self.conn.send_heartbeat()
            self._queue_output()

    def wait_for(self, predicate, timeout: float, what: str):
        """Pump until an event matching ``predicate`` arrives (taken out of ``events``)."""
        deadline = time.monotonic() + timeout
        while True:
            for i, event in enumerate(self.events):
                if predicate(event):
                    del self.events[i]
                    return event
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise LinkTimeout(f"no {what} from {self.address} within {timeout:g}s")
            self.pump(min(remaining, 1.0))

    def call(self, method, reply_class, timeout: float | None = None):
        """Send a synchronous method on channel 1 (None: already queued) and wait for its reply."""
        if method is not None:
            self.send(method)

        def is_reply(e) -> bool:
            return isinstance(e, (Method, Content)) and e.channel == self.CHANNEL and isinstance(e.method, reply_class)

        event = self.wait_for(is_reply, self.timeout if timeout is None else timeout, reply_class.NAME)
        return event.method
