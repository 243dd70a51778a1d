"""Client mode of the sans-IO codec: the other end of ``ServerConnection``, in any dialect.

No client library installable here sends the 0-8, 0-9 or Qpid 0-91 headers, so the tests speak
those versions through this class, over real sockets (tests/e2e/clientmode.py drives it). It
reuses the same frames, field codecs, generated tables and ``Dialect`` translation as the
server, in the opposite direction: methods the caller sends are 0-9-1 method objects encoded in
the dialect's form (or native objects of the dialect's own tables, sent as they are), and
methods received are decoded into 0-9-1 objects (or native ones when 0-9-1 has no equivalent).

    conn = ClientConnection(get_dialect("0-8"), "guest", "guest")
    sock.sendall(conn.data_to_send())           # the protocol header
    conn.receive_data(sock.recv(65536))
    while (event := conn.next_event()) is not None: ...
    sock.sendall(conn.data_to_send())           # start-ok, tune-ok + open, ... as they are due

What it does on its own: answers connection.start (PLAIN or AMQPLAIN), connection.tune (tune-ok
with the lower of both limits, then connection.open), a server's connection.close or
channel.close (close-ok), and assembles deliver/get-ok/return with their content into one
``Content`` event. Every received method is also handed out as an event.
"""

from __future__ import annotations

import struct
from collections import deque

from warren.spec.fields import encode_shortstr, encode_table, encode_value
from warren.codec.frames import (
    FRAME_BODY, FRAME_HEADER, FRAME_HEARTBEAT, FRAME_METHOD, HEARTBEAT_FRAME, FrameBuffer, content_frames,
    method_frame,
)
from warren.errors import ChannelError, FrameError, NotImplemented_, UnexpectedFrame
from warren.protocol.dialects import Dialect, get_dialect
from warren.protocol.events import Content, Method
from warren.spec import amqp0_9_1 as spec

__all__ = ["ClientConnection", "Heartbeat", "Opened", "Closed"]

_u32 = struct.Struct(">I")
_header_fields = struct.Struct(">HHQ")


class Heartbeat:
    """A heartbeat frame arrived."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "Heartbeat()"


class Opened:
    """connection.open-ok arrived: the connection is usable."""

    __slots__ = ("known_hosts",)

    def __init__(self, known_hosts: str) -> None:
        self.known_hosts = known_hosts


class Closed:
    """The connection is closed: by the server's connection.close (answered) or our close's close-ok."""

    __slots__ = ("reply_code", "reply_text", "class_id", "method_id", "by_server")

    def __init__(self, reply_code: int, reply_text: str, class_id: int, method_id: int, by_server: bool) -> None:
        self.reply_code, self.reply_text = reply_code, reply_text
        self.class_id, self.method_id = class_id, method_id
        self.by_server = by_server

    def __repr__(self) -> str:
        who = "server" if self.by_server else "client"
        return f"Closed({self.reply_code}, {self.reply_text!r}, {self.class_id}.{self.method_id}, by {who})"


class _Assembly:
    __slots__ = ("method", "properties", "body", "size")

    def __init__(self, method) -> None:
        self.method = method
        self.properties: bytes | None = None
        self.body = bytearray()
        self.size = 0


class ClientConnection:
    """One client-side AMQP connection in a dialect (see module docstring)."""

    def __init__(self, dialect: Dialect | str = "0-9-1", username: str = "guest", password: str = "guest",
                 virtual_host: str = "/", client_properties: dict | None = None, mechanism: str = "PLAIN",
                 frame_max: int = 0, channel_max: int = 0, heartbeat: int | None = 0,
                 header: bytes | None = None, insist: bool = False, negotiate: bool = True,
                 plain_table: bool = False) -> None:
        self.dialect = get_dialect(dialect) if isinstance(dialect, str) else dialect
        self.username, self.password, self.virtual_host = username, password, virtual_host
        self.client_properties = {"product": "warren client mode", "capabilities": {}} \
            if client_properties is None else client_properties
        self.mechanism = mechanism
        self.plain_table = plain_table  # PLAIN's response as 0-8's LOGIN/PASSWORD table (X08)
        # our limits for tune-ok: 0 = take the server's; heartbeat None = take the server's
        self.frame_max, self.channel_max, self.heartbeat = frame_max, channel_max, heartbeat
        self.insist = insist
        self.negotiate = negotiate  # False: tune-ok sends our three values as they are (tests)
        self.frames = FrameBuffer(0)
        self.state = "start"  # start, tune, open-sent, open, closing, closed
        self.server_properties: dict = {}
        self.start = None  # the connection.start received
        self.tune = None  # the connection.tune received
        self.channels: set[int] = set()
        self._assembling: dict[int, _Assembly] = {}
        self._out: list = [header or self.dialect.header]
        # for tests: (channel, wire class-id.method-id) of received methods, largest frame payload
        self.trace: deque[tuple[int, tuple[int, int]]] = deque(maxlen=1000)
        self.largest_frame = 0

    # --- input ---------------------------------------------------------------------------

    def receive_data(self, data: bytes) -> None:
        self.frames.compact()
        self.frames.feed(data)

    def next_event(self):
        """The next event, or None when more bytes are needed. Raises AMQPError on a bad frame."""
        while True:
            frame = self.frames.next_frame()
            if frame is None:
                return None
            ftype, channel, start, end = frame
            self.largest_frame = max(self.largest_frame, end - start)
            if ftype == FRAME_METHOD:
                event = self._method_frame(channel, start, end)
            elif ftype == FRAME_HEADER:
                event = self._header_frame(channel, start, end)
            elif ftype == FRAME_BODY:
                event = self._body_frame(channel, start, end)
            elif ftype == FRAME_HEARTBEAT:
                event = Heartbeat()
            else:
                raise FrameError(f"unknown frame type {ftype}")
            if event is not None:
                return event

    def _decode(self, channel: int, start: int, end: int):
        buf = self.frames.buf
        (index,) = _u32.unpack_from(buf, start)
        self.trace.append((channel, (index >> 16, index & 0xFFFF)))
        cls = self.dialect.decoder(index)
        if cls is None:
            raise NotImplemented_(f"unknown method {index >> 16}.{index & 0xFFFF} in {self.dialect.title}",
                                  index >> 16, index & 0xFFFF)
        method, off = cls.decode(buf, start + 4)
        if off > end:
            raise FrameError(f"cannot decode {cls.NAME}: arguments run past the end of the frame")
        if off < end and index in self.dialect.tails:
            method, off = self.dialect.tails[index].decode(buf, start + 4)
        return method

    def _method_frame(self, channel: int, start: int, end: int):
        method = self._decode(channel, start, end)
        if channel in self._assembling:
            raise UnexpectedFrame(f"{method.NAME} on channel {channel} while a content is incomplete")
        if method.CONTENT:
            self._assembling[channel] = _Assembly(method)
            return None
        kind = type(method)
        if channel == 0:
            if kind is spec.ConnectionStart:
                self._on_start(method)
            elif kind is spec.ConnectionTune:
                self._on_tune(method)
            elif kind is spec.ConnectionOpenOk:
                self.state = "open"
                return Opened(method.known_hosts)
            elif kind is spec.ConnectionClose:
                self.state = "closed"
                self.channels.clear()
                self._send(0, spec.ConnectionCloseOk())
                return Closed(method.reply_code, method.reply_text, method.class_id, method.method_id, True)
            elif kind is spec.ConnectionCloseOk:
                self.state = "closed"
                return Closed(200, "", 0, 0, False)
        elif kind is spec.ChannelOpenOk:
            self.channels.add(channel)
        elif kind is spec.ChannelClose:
            self.channels.discard(channel)
            self._send(channel, spec.ChannelCloseOk())
        elif kind is spec.ChannelCloseOk:
            self.channels.discard(channel)
        return Method(channel, method)

    def _on_start(self, start) -> None:
        self.start = start
        self.server_properties = start.server_properties
        if self.mechanism == "AMQPLAIN":
            # the 0-8 table form: entries without the table's own length (INVENTORY.md §3.5)
            response = b"".join((encode_shortstr("LOGIN"), encode_value(self.username),
                                 encode_shortstr("PASSWORD"), encode_value(self.password)))
        elif self.plain_table:
            response = encode_table({"LOGIN": self.username, "PASSWORD": self.password})
        else:
            response = b"\0" + self.username.encode() + b"\0" + self.password.encode()
        self._send(0, spec.ConnectionStartOk(self.client_properties, self.mechanism, response, "en_US"))
        self.state = "tune"

    def _on_tune(self, tune) -> None:
        self.tune = tune
        if self.negotiate:
            frame_max = _lower(self.frame_max, tune.frame_max)
            channel_max = _lower(self.channel_max, tune.channel_max)
            heartbeat = tune.heartbeat if self.heartbeat is None else self.heartbeat
        else:
            frame_max, channel_max, heartbeat = self.frame_max, self.channel_max, self.heartbeat or 0
        self.frame_max, self.channel_max, self.heartbeat = frame_max, channel_max, heartbeat
        self._send(0, spec.ConnectionTuneOk(channel_max, frame_max, heartbeat))
        self._send(0, spec.ConnectionOpen(self.virtual_host, "", self.insist))
        self.state = "open-sent"

    def _header_frame(self, channel: int, start: int, end: int):
        asm = self._assembling.get(channel)
        if asm is None or asm.properties is not None:
            raise UnexpectedFrame(f"content header on channel {channel} without a content method")
        class_id, _weight, size = _header_fields.unpack_from(self.frames.buf, start)
        asm.properties = bytes(self.frames.buf[start + 12:end])
        asm.size = size
        if size == 0:
            del self._assembling[channel]
            return Content(channel, asm.method, asm.properties, b"")
        return None

    def _body_frame(self, channel: int, start: int, end: int):
        asm = self._assembling.get(channel)
        if asm is None or asm.properties is None:
            raise UnexpectedFrame(f"content body on channel {channel} without a content header")
        asm.body += self.frames.buf[start:end]
        if len(asm.body) < asm.size:
            return None
        if len(asm.body) > asm.size:
            raise FrameError(f"content body of {len(asm.body)} octets exceeds the declared {asm.size}")
        del self._assembling[channel]
        return Content(channel, asm.method, asm.properties, bytes(asm.body))

    # --- output --------------------------------------------------------------------------

    def _send(self, channel: int, method) -> None:
        payload = self.dialect.encode(method)
        if payload is None:
            raise NotImplemented_(f"{method.NAME} has no form in {self.dialect.title}",
                                  method.CLASS_ID, method.METHOD_ID)
        self._out.append(method_frame(channel, payload))

    def send_method(self, channel: int, method) -> None:
        """Send a 0-9-1 method (translated to the dialect) or a native method of the dialect."""
        if channel and channel not in self.channels and not isinstance(method, spec.ChannelOpen):
            raise ChannelError(f"channel {channel} is not open")
        self._send(channel, method)

    def send_raw_method(self, channel: int, payload: bytes) -> None:
        """A method frame with this exact payload (class id, method id, arguments)."""
        self._out.append(method_frame(channel, payload))

    def send_raw(self, data: bytes) -> None:
        """Bytes as they are (frames a well-behaved client would not send)."""
        self._out.append(data)

    def send_content(self, channel: int, method, properties=b"\x00\x00", body: bytes = b"") -> None:
        """A content-bearing method (basic.publish), its header and body frames.

        ``properties`` is a ``BasicProperties`` object or its encoding (flags + list).
        """
        if not isinstance(properties, (bytes, bytearray)):
            properties = properties.encode()
        self.send_method(channel, method)
        frame_max = self.frame_max if self.state == "open" else 4096
        self._out.extend(content_frames(channel, method.CLASS_ID, bytes(properties), body, frame_max))

    def open_channel(self, channel: int) -> None:
        self._send(channel, spec.ChannelOpen())

    def close_channel(self, channel: int, reply_code: int = 200, reply_text: str = "") -> None:
        self._send(channel, spec.ChannelClose(reply_code, reply_text, 0, 0))

    def close(self, reply_code: int = 200, reply_text: str = "bye") -> None:
        self._send(0, spec.ConnectionClose(reply_code, reply_text, 0, 0))
        self.state = "closing"

    def send_heartbeat(self) -> None:
        self._out.append(HEARTBEAT_FRAME)

    def data_to_send(self) -> bytes:
        out = b"".join(bytes(p) for p in self._out)
        self._out = []
        return out

    @property
    def is_open(self) -> bool:
        return self.state == "open"

    @property
    def is_closed(self) -> bool:
        return self.state == "closed"


def _lower(ours: int, theirs: int) -> int:
    """The lower of two limits where 0 means none."""
    if not ours:
        return theirs
    if not theirs:
        return ours
    return min(ours, theirs)
