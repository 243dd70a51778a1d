"""A tiny raw-socket AMQP 0-9-1 client for end-to-end tests.

Written with `struct` only and deliberately independent of Warren's own codec, so that the
tests can send things a well-behaved client library never would (bad frame ends, oversize
frames, unknown methods, content without a method, ...) and look at the exact bytes the
server answers with (reply codes, class and method ids).

Every socket operation is bounded by a timeout; nothing here can hang a test forever.
"""

from __future__ import annotations

import socket
import struct
import time
from dataclasses import dataclass
from typing import Any

PROTOCOL_HEADER = b"AMQP\x00\x00\x09\x01"

FRAME_METHOD = 1
FRAME_HEADER = 2
FRAME_BODY = 3
FRAME_HEARTBEAT = 8
FRAME_END = 0xCE

DEFAULT_TIMEOUT = 5.0

# (class id, method id) pairs used by the tests.
CONNECTION_START = (10, 10)
CONNECTION_START_OK = (10, 11)
CONNECTION_TUNE = (10, 30)
CONNECTION_TUNE_OK = (10, 31)
CONNECTION_OPEN = (10, 40)
CONNECTION_OPEN_OK = (10, 41)
CONNECTION_CLOSE = (10, 50)
CONNECTION_CLOSE_OK = (10, 51)
CHANNEL_OPEN = (20, 10)
CHANNEL_OPEN_OK = (20, 11)
CHANNEL_FLOW = (20, 20)
CHANNEL_FLOW_OK = (20, 21)
CHANNEL_CLOSE = (20, 40)
CHANNEL_CLOSE_OK = (20, 41)
EXCHANGE_DECLARE = (40, 10)
EXCHANGE_DECLARE_OK = (40, 11)
EXCHANGE_DELETE = (40, 20)
EXCHANGE_DELETE_OK = (40, 21)
QUEUE_DECLARE = (50, 10)
QUEUE_DECLARE_OK = (50, 11)
QUEUE_BIND = (50, 20)
QUEUE_BIND_OK = (50, 21)
QUEUE_DELETE = (50, 40)
QUEUE_DELETE_OK = (50, 41)
BASIC_CONSUME = (60, 20)
BASIC_CONSUME_OK = (60, 21)
BASIC_PUBLISH = (60, 40)
BASIC_GET = (60, 70)
BASIC_GET_OK = (60, 71)
BASIC_GET_EMPTY = (60, 72)
BASIC_DELIVER = (60, 60)
BASIC_ACK = (60, 80)


class ConnectionLost(Exception):
    """The server closed the TCP connection (EOF or reset)."""


# --------------------------------------------------------------------------- encoding


def shortstr(s: str | bytes) -> bytes:
    b = s.encode() if isinstance(s, str) else s
    assert len(b) < 256
    return struct.pack(">B", len(b)) + b


def longstr(s: str | bytes) -> bytes:
    b = s.encode() if isinstance(s, str) else s
    return struct.pack(">I", len(b)) + b


def _field_value(v: Any) -> bytes:
    if isinstance(v, bool):
        return b"t" + struct.pack(">B", int(v))
    if isinstance(v, int):
        if -(2**31) <= v < 2**31:
            return b"I" + struct.pack(">i", v)
        return b"l" + struct.pack(">q", v)
    if isinstance(v, (str, bytes)):
        return b"S" + longstr(v)
    if isinstance(v, dict):
        return b"F" + table(v)
    if v is None:
        return b"V"
    raise TypeError(f"cannot encode {v!r}")


def table(d: dict[str, Any] | None = None) -> bytes:
    body = b"".join(shortstr(k) + _field_value(v) for k, v in (d or {}).items())
    return struct.pack(">I", len(body)) + body


def bits(*flags: bool) -> bytes:
    """Pack up to 8 consecutive bit arguments into one octet (first flag = lowest bit)."""
    assert len(flags) <= 8
    return struct.pack(">B", sum(1 << i for i, f in enumerate(flags) if f))


def frame(frame_type: int, channel: int, payload: bytes, end: int = FRAME_END) -> bytes:
    return struct.pack(">BHI", frame_type, channel, len(payload)) + payload + bytes([end])


def method_payload(class_id: int, method_id: int, args: bytes = b"") -> bytes:
    return struct.pack(">HH", class_id, method_id) + args


def method_frame(channel: int, class_id: int, method_id: int, args: bytes = b"") -> bytes:
    return frame(FRAME_METHOD, channel, method_payload(class_id, method_id, args))


def heartbeat_frame() -> bytes:
    return frame(FRAME_HEARTBEAT, 0, b"")


# Builders for the methods the tests send -------------------------------------------


def start_ok(user: str = "guest", password: str = "guest", mechanism: str = "PLAIN",
             client_properties: dict[str, Any] | None = None) -> bytes:
    props = client_properties if client_properties is not None else {
        "product": "warren-rawamqp",
        "capabilities": {"authentication_failure_close": True},
    }
    response = b"\0" + user.encode() + b"\0" + password.encode()
    args = table(props) + shortstr(mechanism) + longstr(response) + shortstr("en_US")
    return method_frame(0, *CONNECTION_START_OK, args)


def tune_ok(channel_max: int, frame_max: int, heartbeat: int) -> bytes:
    return method_frame(0, *CONNECTION_TUNE_OK, struct.pack(">HIH", channel_max, frame_max, heartbeat))


def connection_open(vhost: str = "/") -> bytes:
    return method_frame(0, *CONNECTION_OPEN, shortstr(vhost) + shortstr("") + bits(False))


def connection_close(reply_code: int = 200, reply_text: str = "bye", class_id: int = 0,
                     method_id: int = 0) -> bytes:
    args = struct.pack(">H", reply_code) + shortstr(reply_text) + struct.pack(">HH", class_id, method_id)
    return method_frame(0, *CONNECTION_CLOSE, args)


def connection_close_ok() -> bytes:
    return method_frame(0, *CONNECTION_CLOSE_OK)


def channel_open(channel: int) -> bytes:
    return method_frame(channel, *CHANNEL_OPEN, shortstr(""))


def channel_close(channel: int, reply_code: int = 200, reply_text: str = "bye") -> bytes:
    args = struct.pack(">H", reply_code) + shortstr(reply_text) + struct.pack(">HH", 0, 0)
    return method_frame(channel, *CHANNEL_CLOSE, args)


def channel_close_ok(channel: int) -> bytes:
    return method_frame(channel, *CHANNEL_CLOSE_OK)


def channel_flow(channel: int, active: bool) -> bytes:
    return method_frame(channel, *CHANNEL_FLOW, bits(active))


def exchange_declare(channel: int, exchange: str, type_: str = "direct", passive: bool = False,
                     durable: bool = False, auto_delete: bool = False, internal: bool = False,
                     nowait: bool = False, arguments: dict | None = None) -> bytes:
    args = (struct.pack(">H", 0) + shortstr(exchange) + shortstr(type_)
            + bits(passive, durable, auto_delete, internal, nowait) + table(arguments))
    return method_frame(channel, *EXCHANGE_DECLARE, args)


def exchange_delete(channel: int, exchange: str, if_unused: bool = False, nowait: bool = False) -> bytes:
    return method_frame(channel, *EXCHANGE_DELETE,
                        struct.pack(">H", 0) + shortstr(exchange) + bits(if_unused, nowait))


def queue_declare(channel: int, queue: str = "", passive: bool = False, durable: bool = False,
                  exclusive: bool = False, auto_delete: bool = False, nowait: bool = False,
                  arguments: dict | None = None) -> bytes:
    args = (struct.pack(">H", 0) + shortstr(queue)
            + bits(passive, durable, exclusive, auto_delete, nowait) + table(arguments))
    return method_frame(channel, *QUEUE_DECLARE, args)


def queue_bind(channel: int, queue: str, exchange: str, routing_key: str = "",
               nowait: bool = False, arguments: dict | None = None) -> bytes:
    args = (struct.pack(">H", 0) + shortstr(queue) + shortstr(exchange) + shortstr(routing_key)
            + bits(nowait) + table(arguments))
    return method_frame(channel, *QUEUE_BIND, args)


def queue_delete(channel: int, queue: str, if_unused: bool = False, if_empty: bool = False,
                 nowait: bool = False) -> bytes:
    return method_frame(channel, *QUEUE_DELETE,
                        struct.pack(">H", 0) + shortstr(queue) + bits(if_unused, if_empty, nowait))


def basic_consume(channel: int, queue: str, consumer_tag: str = "", no_local: bool = False,
                  no_ack: bool = True, exclusive: bool = False, nowait: bool = False,
                  arguments: dict | None = None) -> bytes:
    args = (struct.pack(">H", 0) + shortstr(queue) + shortstr(consumer_tag)
            + bits(no_local, no_ack, exclusive, nowait) + table(arguments))
    return method_frame(channel, *BASIC_CONSUME, args)


def basic_ack(channel: int, delivery_tag: int, multiple: bool = False) -> bytes:
    return method_frame(channel, *BASIC_ACK, struct.pack(">Q", delivery_tag) + bits(multiple))


def basic_publish(channel: int, exchange: str = "", routing_key: str = "", mandatory: bool = False,
                  immediate: bool = False) -> bytes:
    args = struct.pack(">H", 0) + shortstr(exchange) + shortstr(routing_key) + bits(mandatory, immediate)
    return method_frame(channel, *BASIC_PUBLISH, args)


def basic_get(channel: int, queue: str, no_ack: bool = True) -> bytes:
    return method_frame(channel, *BASIC_GET, struct.pack(">H", 0) + shortstr(queue) + bits(no_ack))


def content_header(channel: int, body_size: int, class_id: int = 60) -> bytes:
    """A content header with no properties (property flags 0)."""
    return frame(FRAME_HEADER, channel, struct.pack(">HHQH", class_id, 0, body_size, 0))


def body_frame(channel: int, body: bytes) -> bytes:
    return frame(FRAME_BODY, channel, body)


def publish_frames(channel: int, exchange: str, routing_key: str, body: bytes, **kw: bool) -> bytes:
    """basic.publish + content header + one body frame (if the body is not empty)."""
    out = basic_publish(channel, exchange, routing_key, **kw) + content_header(channel, len(body))
    return out + (body_frame(channel, body) if body else b"")


# --------------------------------------------------------------------------- decoding


class Reader:
    def __init__(self, data: bytes, pos: int = 0):
        self.data, self.pos = data, pos

    def take(self, n: int) -> bytes:
        if self.pos + n > len(self.data):
            raise ValueError("truncated")
        b = self.data[self.pos:self.pos + n]
        self.pos += n
        return b

    def unpack(self, fmt: str) -> Any:
        size = struct.calcsize(fmt)
        vals = struct.unpack(fmt, self.take(size))
        return vals[0] if len(vals) == 1 else vals

    def shortstr(self) -> str:
        return self.take(self.unpack(">B")).decode("utf-8", "replace")

    def longstr(self) -> bytes:
        return self.take(self.unpack(">I"))

    def table(self) -> dict[str, Any]:
        sub = Reader(self.longstr())
        out: dict[str, Any] = {}
        while sub.pos < len(sub.data):
            key = sub.shortstr()
            out[key] = sub.value()
        return out

    def value(self) -> Any:
        t = self.take(1)
        simple = {b"b": ">b", b"B": ">B", b"s": ">h", b"u": ">H", b"I": ">i", b"i": ">I",
                  b"l": ">q", b"L": ">Q", b"f": ">f", b"d": ">d", b"T": ">Q"}
        if t in simple:
            return self.unpack(simple[t])
        if t == b"t":
            return bool(self.unpack(">B"))
        if t == b"S":
            return self.longstr().decode("utf-8", "replace")
        if t == b"x":
            return self.longstr()
        if t == b"F":
            return self.table()
        if t == b"A":
            sub = Reader(self.longstr())
            items = []
            while sub.pos < len(sub.data):
                items.append(sub.value())
            return items
        if t == b"D":
            scale, val = self.unpack(">BI")
            return val / (10 ** scale)
        if t == b"V":
            return None
        raise ValueError(f"unknown field type {t!r}")


@dataclass
class Frame:
    type: int
    channel: int
    payload: bytes

    @property
    def is_method(self) -> bool:
        return self.type == FRAME_METHOD

    @property
    def method(self) -> tuple[int, int]:
        assert self.is_method and len(self.payload) >= 4, self
        return struct.unpack(">HH", self.payload[:4])

    @property
    def args(self) -> bytes:
        return self.payload[4:]


@dataclass
class Close:
    """Arguments of connection.close or channel.close."""

    channel: int
    reply_code: int
    reply_text: str
    class_id: int
    method_id: int

    @property
    def failing_method(self) -> tuple[int, int]:
        return (self.class_id, self.method_id)


def parse_close(f: Frame) -> Close:
    assert f.is_method and f.method in (CONNECTION_CLOSE, CHANNEL_CLOSE), f
    r = Reader(f.args)
    code = r.unpack(">H")
    text = r.shortstr()
    class_id, method_id = r.unpack(">HH")
    return Close(f.channel, code, text, class_id, method_id)


@dataclass
class Start:
    version_major: int
    version_minor: int
    server_properties: dict[str, Any]
    mechanisms: list[str]
    locales: list[str]


def parse_start(f: Frame) -> Start:
    assert f.is_method and f.method == CONNECTION_START, f
    r = Reader(f.args)
    major, minor = r.unpack(">BB")
    props = r.table()
    mechs = r.longstr().decode().split()
    locales = r.longstr().decode().split()
    return Start(major, minor, props, mechs, locales)


@dataclass
class Tune:
    channel_max: int
    frame_max: int
    heartbeat: int


def parse_tune(f: Frame) -> Tune:
    assert f.is_method and f.method == CONNECTION_TUNE, f
    return Tune(*struct.unpack(">HIH", f.args[:8]))


# --------------------------------------------------------------------------- connection


class RawConnection:
    """A blocking socket speaking raw AMQP frames. Use as a context manager."""

    def __init__(self, host: str, port: int, timeout: float = DEFAULT_TIMEOUT):
        self.timeout = timeout
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.settimeout(timeout)
        self.buf = b""
        self.start: Start | None = None  # what the server sent in connection.start
        self.server_tune: Tune | None = None  # what the server proposed in connection.tune
        self.tune: Tune | None = None  # what this client answered in tune-ok

    def __enter__(self) -> "RawConnection":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass

    # -- bytes

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def try_send(self, data: bytes) -> bool:
        """Send, returning False instead of raising if the server already hung up."""
        try:
            self.sock.sendall(data)
            return True
        except OSError:
            return False

    def _fill(self, n: int, deadline: float) -> None:
        while len(self.buf) < n:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"timed out waiting for {n - len(self.buf)} more bytes")
            self.sock.settimeout(remaining)
            try:
                chunk = self.sock.recv(65536)
            except socket.timeout as e:
                raise TimeoutError("timed out reading from server") from e
            except (ConnectionResetError, BrokenPipeError) as e:
                raise ConnectionLost(str(e)) from e
            if not chunk:
                raise ConnectionLost("server closed the connection")
            self.buf += chunk

    def read_exactly(self, n: int, timeout: float | None = None) -> bytes:
        self._fill(n, time.monotonic() + (timeout if timeout is not None else self.timeout))
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def read_until_eof(self, timeout: float | None = None, limit: int = 1 << 20) -> bytes:
        """Everything the server sends until it closes the socket (TimeoutError if it does not)."""
        deadline = time.monotonic() + (timeout if timeout is not None else self.timeout)
        try:
            self._fill(limit, deadline)
        except ConnectionLost:
            pass
        out, self.buf = self.buf, b""
        return out

    # -- frames

    def send_frame(self, frame_type: int, channel: int, payload: bytes) -> None:
        self.send(frame(frame_type, channel, payload))

    def send_method(self, channel: int, class_id: int, method_id: int, args: bytes = b"") -> None:
        self.send(method_frame(channel, class_id, method_id, args))

    def read_frame(self, timeout: float | None = None) -> Frame:
        deadline = time.monotonic() + (timeout if timeout is not None else self.timeout)
        self._fill(7, deadline)
        ftype, channel, size = struct.unpack(">BHI", self.buf[:7])
        if size > 64 * 1024 * 1024:
            raise ValueError(f"absurd frame size {size}")
        self._fill(7 + size + 1, deadline)
        payload = self.buf[7:7 + size]
        end = self.buf[7 + size]
        self.buf = self.buf[7 + size + 1:]
        if end != FRAME_END:
            raise ValueError(f"bad frame end {end:#x} from server")
        return Frame(ftype, channel, payload)

    def read_method(self, timeout: float | None = None) -> Frame:
        """The next method frame, skipping heartbeats (content frames are an error)."""
        deadline = time.monotonic() + (timeout if timeout is not None else self.timeout)
        while True:
            f = self.read_frame(max(0.0, deadline - time.monotonic()))
            if f.type == FRAME_HEARTBEAT:
                continue
            assert f.is_method, f"expected a method frame, got {f}"
            return f

    def expect(self, method: tuple[int, int], channel: int | None = None,
               timeout: float | None = None) -> Frame:
        f = self.read_method(timeout)
        if f.method != method:
            detail = ""
            if f.method in (CONNECTION_CLOSE, CHANNEL_CLOSE):
                detail = f" {parse_close(f)}"
            raise AssertionError(f"expected method {method}, got {f.method} on channel {f.channel}{detail}")
        if channel is not None:
            assert f.channel == channel, f"expected channel {channel}, got {f}"
        return f

    def expect_connection_close(self, timeout: float | None = None, reply: bool = True) -> Close:
        """Wait for connection.close (skipping anything else on the way), answer close-ok.

        Raises AssertionError if the server drops the socket without sending connection.close.
        """
        deadline = time.monotonic() + (timeout if timeout is not None else self.timeout)
        while True:
            try:
                f = self.read_frame(max(0.0, deadline - time.monotonic()))
            except ConnectionLost as e:
                raise AssertionError("server closed the socket without connection.close") from e
            if f.is_method and f.method == CONNECTION_CLOSE:
                if reply:
                    self.try_send(connection_close_ok())
                return parse_close(f)

    def expect_channel_close(self, channel: int, timeout: float | None = None,
                             reply: bool = True) -> Close:
        f = self.read_method(timeout)
        if f.method == CONNECTION_CLOSE:
            raise AssertionError(f"expected channel.close, got connection.close {parse_close(f)}")
        assert f.method == CHANNEL_CLOSE and f.channel == channel, f"expected channel.close, got {f}"
        if reply:
            self.send(channel_close_ok(channel))
        return parse_close(f)

    def assert_closed_by_server(self, timeout: float | None = None) -> None:
        """After connection.close/close-ok the server must drop the socket (no hang)."""
        try:
            self.read_until_eof(timeout if timeout is not None else self.timeout)
        except TimeoutError as e:
            raise AssertionError("server did not close the socket") from e

    # -- handshake

    def handshake(self, user: str = "guest", password: str = "guest", vhost: str = "/",
                  channel_max: int | None = None, frame_max: int | None = None,
                  heartbeat: int | None = None, mechanism: str = "PLAIN",
                  open_vhost: bool = True) -> Tune:
        """Protocol header, start/start-ok, tune/tune-ok, open/open-ok.

        channel_max / frame_max / heartbeat default to the server's proposals. Returns the
        server's proposal (connection.tune).
        """
        self.send(PROTOCOL_HEADER)
        self.start = parse_start(self.expect(CONNECTION_START, 0))
        self.send(start_ok(user, password, mechanism))
        server = parse_tune(self.expect(CONNECTION_TUNE, 0))
        self.tune = Tune(
            server.channel_max if channel_max is None else channel_max,
            server.frame_max if frame_max is None else frame_max,
            server.heartbeat if heartbeat is None else heartbeat,
        )
        self.server_tune = server
        self.send(tune_ok(self.tune.channel_max, self.tune.frame_max, self.tune.heartbeat))
        if open_vhost:
            self.send(connection_open(vhost))
            self.expect(CONNECTION_OPEN_OK, 0)
        return server

    def open_channel(self, channel: int) -> None:
        self.send(channel_open(channel))
        self.expect(CHANNEL_OPEN_OK, channel)

    def declare_queue(self, channel: int, queue: str, **kw: bool) -> tuple[str, int, int]:
        """queue.declare and wait for declare-ok; returns (name, message count, consumer count)."""
        self.send(queue_declare(channel, queue, **kw))
        r = Reader(self.expect(QUEUE_DECLARE_OK, channel).args)
        name = r.shortstr()
        return name, *r.unpack(">II")

    def close_connection(self) -> None:
        """Client-initiated close: connection.close, wait for close-ok."""
        self.send(connection_close())
        self.expect(CONNECTION_CLOSE_OK, 0)


# --------------------------------------------------------------------------- bulk publishing


def publish_frames_with_mode(channel: int, exchange: str, routing_key: str, body: bytes,
                             delivery_mode: int) -> bytes:
    """basic.publish + a content header whose only property is delivery-mode (1 transient,
    2 persistent) + one body frame (if the body is not empty)."""
    header = frame(FRAME_HEADER, channel, struct.pack(">HHQHB", 60, 0, len(body), 0x1000, delivery_mode))
    return basic_publish(channel, exchange, routing_key) + header + (body_frame(channel, body) if body else b"")


def publish_bulk(host: str, port: int, frames, chunk: int = 2000, timeout: float = 60.0) -> None:
    """Send pre-built publish frames (an iterable of bytes, channel 1) on a fresh connection,
    thousands per write: about ten times pika's publish rate, for tests that only need a queue
    filled with many messages. Ends with a connection.close handshake, so every message has
    been routed (the server handles a connection's frames in order) when it returns."""
    with RawConnection(host, port, timeout=timeout) as conn:
        conn.handshake(heartbeat=0)
        conn.open_channel(1)
        batch: list[bytes] = []
        for f in frames:
            batch.append(f)
            if len(batch) >= chunk:
                conn.send(b"".join(batch))
                batch.clear()
        if batch:
            conn.send(b"".join(batch))
        conn.close_connection()
