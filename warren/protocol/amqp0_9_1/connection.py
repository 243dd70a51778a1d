"""Sans-IO server side of an AMQP 0-9-1 connection: bytes in, events out, bytes to send.

The same class serves 0-8, 0-9 and Qpid's 0-91 through a ``Dialect``
(``warren.protocol.dialects``): methods are decoded straight into their 0-9-1 equivalents and
the broker's 0-9-1 methods are encoded in the version's form, so everything below and above
this layer sees 0-9-1 only. With the 0-9-1 dialect (the default) nothing is translated: the
translating variants of ``_decode_method``, ``send_method`` and ``send_content`` are bound to
the instance only for the other dialects.

No sockets and no asyncio here. The caller (``warren.server.connection``) does::

    conn = ServerConnection(server_properties, dialect=dialect)   # queues connection.start
    conn.receive_data(data)                      # after the 8-octet protocol header
    while (event := conn.next_event()) is not None:
        ...hand the event to the broker, which may call send_* / close_* / accept_*...
    transport.writelines(conn.data_to_send())

``next_event`` raises an ``AMQPError`` for anything the peer got wrong; a ``SoftError`` carries
the channel in ``.channel`` and the caller answers it with ``close_channel``, a ``HardError``
with ``close_connection``. After ``close_connection`` the connection discards input until the
peer's close-ok (or close) arrives; after a framing error (501) it discards everything, since
frame boundaries can no longer be trusted. Once the close handshake is over (``is_closed``) the
peer may still have frames in flight behind its close (a client's buffered publishes): they
are read and discarded, a connection.close among them answered with close-ok again, as
RabbitMQ does; ``sent_close_ok`` tells the caller whether the peer (which then closes the
socket) or we (on its close-ok) end the connection.

What this layer does on its own, because no broker decision is involved: it answers
connection.close, channel.open and channel.close; enforces frame-max, channel-max and the
channel states; negotiates tune-ok (RabbitMQ's rules; for 0-8/0-9 their spec's); and assembles
content (method → header → body frames) into one ``Content`` event, after checking the header's
property list (``warren/codec/properties.py``; one that does not decode is refused 501 or 502 by
``warren/codec/refusals.py``'s table, in the compiled fast path too, so nothing malformed is ever
stored). Every decode failure here is answered from that table; 541 is never the client's.
"""

from __future__ import annotations

import struct

from warren.codec.frames import (
    FRAME_BODY, FRAME_HEADER, FRAME_HEARTBEAT, FRAME_METHOD, FRAME_MIN_SIZE, HEARTBEAT_FRAME,
    FrameBuffer, content_frames, method_frame,
)
from warren.codec.properties import properties_error, properties_failure
from warren.codec.refusals import (
    DECODE_FAILURES, MALFORMED, TRUNCATED, amqp0_9_1_refusal, failure_kind,
)
from warren.errors import (
    AMQPError, ChannelError, CommandInvalid, FrameError, NotAllowed, NotImplemented_,
    PreconditionFailed, UnexpectedFrame,
)
from warren.protocol.amqp0_9_1.state import HANDSHAKE_WAITING, ConnectionState, State
from warren.protocol.dialects import DIALECT_0_9_1, Dialect
from warren.protocol.events import Acks, ChannelClosed, ChannelOpened, Content, ConnectionClosed, Method, Publishes
from warren.spec import amqp0_9_1 as spec

try:  # the compiled fast paths (setup.py); _publish and send_deliver below are their Python twins
    # (next_event calls take_publishes; take_publish, its answer for one publish, stays for tests)
    from warren.codec._speedups import deliver_frames as _deliver_frames, take_publish as _take_publish
    from warren.codec._speedups import properties_error as _properties_error, take_publishes as _take_publishes
except ImportError:
    _take_publish = _take_publishes = _deliver_frames = None
    _properties_error = properties_error
from warren.codec.acks import take_acks as _take_acks  # None without the extension

# the most basic.ack frames one Acks event carries (a consumer's prefetch is often 100-1000)
ACK_RUN_MAX = 256

__all__ = ["ServerConnection", "FRAME_MAX_DEFAULT", "CHANNEL_MAX_DEFAULT", "MAX_MESSAGE_SIZE", "PUBLISH_RUN_MAX"]

FRAME_MAX_DEFAULT = 131_072  # RabbitMQ's default frame_max
CHANNEL_MAX_DEFAULT = 2047  # RabbitMQ's default channel_max
MAX_MESSAGE_SIZE = 128 * 1024 * 1024  # RabbitMQ 3.8+'s default max_message_size
# Publishes taken as one ``Publishes`` event at most (``publish_run_max``): enough that the
# event's own cost is spread thin, few enough that a run is a small part of a server turn
PUBLISH_RUN_MAX = 50
# A read at least this long means the broker is behind this publisher (the transport's buffer,
# 256 KiB in uvloop and asyncio, came back full or nearly). When it is behind BACKLOG_PEERS
# connections at once (``backlogged``), the publishes of such a read are taken as runs whatever
# ``publish_run_max`` says: each message taken cheaper is CPU for the others. Behind one
# publisher alone it keeps lone publishes: a broker that drains a lone flooding publisher's
# socket makes each of its writes a TCP segment of its own, and the publisher then sends less
# (docs/performance.md, "Runs of publishes" and "The two-publisher rows").
BACKLOG_READ = 65536
BACKLOG_PEERS = 2
# Before tune-ok we accept frames up to our own frame-max: the spec's 4096 is a floor, and
# some clients send a start-ok with large client properties.

_OPEN, _CLOSING = 1, 2
_u32 = struct.Struct(">I")
_header_fields = struct.Struct(">HHQ")
_frame_header = struct.Struct(">BHI")
_deliver_fixed = struct.Struct(">QB")
_deliver_header = struct.Struct(">BBHIHHQ")  # end of the method frame, header frame up to the properties
_deliver_body = struct.Struct(">BBHI")  # end of the header frame, body frame header
_JOIN_BODY_MAX = 16384  # larger bodies are not copied into the frames around them
_METHODS = spec.METHODS
_CHANNEL_OPEN = spec.ChannelOpen.INDEX
_CHANNEL_CLOSE = spec.ChannelClose.INDEX
_CHANNEL_CLOSE_OK = spec.ChannelCloseOk.INDEX
_DELIVER_PREFIX = b"\x00\x3c\x00\x3c"  # basic.deliver, 60.60, with the same fields in 0-8, 0-9 and 0-9-1
_RESERVED_FRAMES = {4: "oob-method", 5: "oob-header", 6: "oob-body", 7: "trace"}
# Enum members read once: ``State.OPEN`` is a class attribute lookup through the enum
# machinery, about 0.2 µs on Python 3.11, and the frame loop asked for two per frame.
_ST_OPEN, _ST_CLOSED = State.OPEN, State.CLOSED
_ST_ENDING = (State.CLOSING, State.CLOSED)
_PUBLISH_IDS = b"\x00\x3c\x00\x28"  # basic.publish, 60.40
_BasicPublish = spec.BasicPublish
_BasicAck = spec.BasicAck


class _Assembly:
    """A content being received on one channel: method, then header, then body frames."""

    __slots__ = ("method", "properties", "body", "size")

    def __init__(self, method) -> None:
        self.method = method
        self.properties: bytes | None = None  # None until the header frame arrived
        self.body = bytearray()
        self.size = 0


class ServerConnection:
    """One server-side AMQP connection, 0-9-1 or another ``dialect`` (see module docstring)."""

    publish_start = -1  # stream offset of the last basic.publish taken frame by frame (_publish)

    # A session that handles ``Publishes`` events sets this to the longest run it takes
    # (PUBLISH_RUN_MAX); 1: every publish is its own ``Content``. Runs are taken by the
    # compiled take_publishes only; without it every publish is a ``Content`` as before.
    publish_run_max = 1
    # a read of at least this many octets is taken in runs too (BACKLOG_READ); 0: never
    backlog_read = BACKLOG_READ
    # The connections the broker was behind lately: a set shared by the server's connections,
    # which it empties every BACKLOG_WINDOW seconds (server.py); a backlog read adds its own.
    # None: this one alone decides (driven without a server: the tests, bench/pipeline.py).
    backlogged: set | None = None
    _backlog_run_max = 0  # PUBLISH_RUN_MAX after a backlog read that takes runs, else 0

    def __init__(self, server_properties: dict, mechanisms: bytes = b"PLAIN AMQPLAIN",
                 frame_max: int = FRAME_MAX_DEFAULT, channel_max: int = CHANNEL_MAX_DEFAULT,
                 heartbeat: int = 60, max_message_size: int = MAX_MESSAGE_SIZE,
                 dialect: Dialect | None = None) -> None:
        # limits we offer in connection.tune; the negotiated values replace them on tune-ok
        self.frame_max = frame_max
        self.channel_max = channel_max
        self.heartbeat = heartbeat
        self.max_message_size = max_message_size
        self.mechanisms = mechanisms  # what connection.start offers: a start-ok naming another is refused
        self.state = ConnectionState()
        self.frames = FrameBuffer(frame_max)
        self.channels: dict[int, int] = {}
        # called with the channel number on channel.open before open-ok is queued; it raises an
        # AMQPError to refuse (the broker's per-user max-channels, warren/broker/limits.py)
        self.channel_admit = None
        self._assembling: dict[int, _Assembly] = {}
        # the property list of the last content header: a publisher usually sends the same one
        # every time, and its messages then share one bytes object (less memory per queued
        # message, and a compare in place costs less than a copy)
        self._last_properties = b""
        # the last basic.publish decoded here and its argument octets: most publishers send the
        # same exchange and routing key every time, and the method object is then reused
        self._last_publish_args: bytes | None = None
        self._last_publish = None
        self._out: list = []
        self.out_bytes = 0  # content octets queued since the last data_to_send
        self._broken = False  # after a framing error nothing more is parsed
        self.sent_close_ok = False  # we answered the peer's connection.close (the peer closes the socket)
        self.dropped = 0  # 0-9-1 methods that have no form in the dialect (never sent)
        self._use_dialect(dialect or DIALECT_0_9_1)
        major, minor = self.dialect.start_version
        self.send_method(0, spec.ConnectionStart(major, minor, self.dialect.server_properties(server_properties),
                                                 mechanisms, b"en_US"))

    def _use_dialect(self, dialect: Dialect) -> None:
        self.dialect = dialect
        self._methods = dialect.server_methods
        self._fast_publish = dialect.identity  # other versions' publish goes through the dialect
        if dialect.identity:
            for name in ("_decode_method", "send_method", "send_content"):
                self.__dict__.pop(name, None)
        else:
            self._replies: dict[tuple[int, int], object] = {}  # (channel, 0-9-1 reply index) -> encoder
            self._decode_method = self._decode_translated
            self.send_method = self._send_method_translated
            self.send_content = self._send_content_translated

    # --- input ---------------------------------------------------------------------------

    def receive_data(self, data: bytes) -> None:
        """Append received bytes (everything after the protocol header)."""
        self.frames.compact()
        if not self._broken:
            self.frames.feed(data)
        if len(data) >= self.backlog_read > 0:
            peers = self.backlogged
            if peers is not None:
                peers.add(self)
            self._backlog_run_max = PUBLISH_RUN_MAX if peers is None or len(peers) >= BACKLOG_PEERS else 0
        elif self._backlog_run_max:  # set only once needed: idle connections keep no such key
            self._backlog_run_max = 0

    def next_event(self):
        """The next event, or None when more bytes are needed. Raises AMQPError (module doc)."""
        frames = self.frames
        take = _take_publishes if self._fast_publish else None
        run_max = self._backlog_run_max or self.publish_run_max
        while True:
            if self._broken:
                return None
            if take is not None and self.state.state is _ST_OPEN:
                # a whole basic.publish content at once, in C (_speedups.c); None for anything
                # else or unusual, which the frame-by-frame path below takes (and reports).
                # With runs: the publishes that follow it with the same method too, as lists.
                got = take(frames.buf, frames.pos, frames.max_frame_size, self.max_message_size,
                           self._last_publish_args, self._last_properties, run_max)
                if got is not None:
                    channel, args, properties, body, after = got
                    if self.channels.get(channel) == _OPEN and channel not in self._assembling:
                        if args is self._last_publish_args:
                            method = self._last_publish
                        else:
                            try:
                                method = _BasicPublish.decode(args, 0)[0]
                            except DECODE_FAILURES:
                                method = None  # the frame-by-frame path reports it
                            if method is not None:
                                self._last_publish, self._last_publish_args = method, args
                        if method is not None:
                            frames.pos = after
                            if type(body) is list:  # a run: properties and bodies as lists
                                self._last_properties = properties[-1]
                                return Publishes(channel, method, properties, body)
                            self._last_properties = properties
                            return Content(channel, method, properties, body)
                if _take_acks is not None:
                    # basic.ack frames (a consumer acking one by one), a run of them as one event
                    got = _take_acks(frames.buf, frames.pos, frames.max_frame_size, ACK_RUN_MAX)
                    if got is not None and self.channels.get(got[0]) == _OPEN and got[0] not in self._assembling:
                        channel, tags, multiple, frames.pos = got
                        if type(tags) is list:
                            return Acks(channel, tags)
                        return Method(channel, _BasicAck(tags, multiple))
            try:
                frame = frames.next_frame()
            except FrameError:
                self._broken = True
                if self.state.state in _ST_ENDING:
                    return None  # closing anyway: the rest is discarded, not answered
                raise
            if frame is None:
                return None
            ftype, channel, start, end = frame
            if self.state.state in _ST_ENDING:
                event = self._while_closing(ftype, channel, start, end)
            elif ftype == FRAME_METHOD:
                if self._fast_publish and frames.buf.startswith(_PUBLISH_IDS, start):
                    event = self._publish(channel, start, end)
                else:
                    event = self._method_frame(channel, start, end)
            elif ftype == FRAME_BODY:
                event = self._body_frame(channel, start, end)
            elif ftype == FRAME_HEADER:
                event = self._header_frame(channel, start, end)
            elif ftype == FRAME_HEARTBEAT:
                if channel != 0:
                    # the spec asks for 501 (0-9-1 §4.2.7); RabbitMQ answers 505
                    raise FrameError(f"heartbeat frame on channel {channel}")
                event = None
            elif ftype in self.dialect.reserved_frame_types:
                # 0-8/0-9 out-of-band (4-6) and trace (7) frames: well-formed, but not implemented
                raise NotImplemented_(f"frame type {ftype} ({_RESERVED_FRAMES[ftype]}) is not implemented")
            else:
                self._broken = True
                raise FrameError(f"unknown frame type {ftype}")
            if event is not None:
                return event

    def _lookup(self, table: dict, start: int, end: int, where: str = ""):
        """(index, method class) of the method frame at start..end; 501/540 if unusable."""
        if end - start < 4:
            raise FrameError("method frame shorter than its class and method ids")
        (index,) = _u32.unpack_from(self.frames.buf, start)
        cls = table.get(index)
        if cls is None:
            raise NotImplemented_(f"unknown method {index >> 16}.{index & 0xFFFF}{where}", index >> 16, index & 0xFFFF)
        return index, cls

    def _decode_args(self, cls, decode, start: int, end: int):
        # Arguments that run out of octets are a frame error (501), as RabbitMQ answers; values
        # that cannot be what they claim (an unknown field-table type, say) are 502: the kinds
        # of warren/codec/refusals.py. The decoders read the receive buffer, which may hold the
        # next frames too: a failure is diagnosed again on the buffer cut at this frame's end,
        # so what follows cannot change the answer.
        buf = self.frames.buf
        try:
            method, off = decode(buf, start + 4)
            if off <= end:
                return method
        except DECODE_FAILURES:
            pass
        try:
            decode(bytes(buf[:end]), start + 4)
        except DECODE_FAILURES as e:
            raise amqp0_9_1_refusal(failure_kind(e), f"cannot decode {cls.NAME}: {e}",
                                    cls.CLASS_ID, cls.METHOD_ID) from None
        raise amqp0_9_1_refusal(TRUNCATED, f"cannot decode {cls.NAME}: arguments run past the end of the frame",
                                cls.CLASS_ID, cls.METHOD_ID)

    def _decode_method(self, start: int, end: int, channel: int = 0):
        _, cls = self._lookup(_METHODS, start, end)
        return self._decode_args(cls, cls.decode, start, end)

    def _decode_translated(self, start: int, end: int, channel: int = 0):
        """_decode_method for the other dialects: the dialect's decoders give 0-9-1 methods."""
        index, cls = self._lookup(self._methods, start, end, f" in {self.dialect.title}")
        tail = self.dialect.tails.get(index)
        decode = cls.decode
        if tail is not None:
            def decode(buf, off, _cls=cls, _tail=tail):
                method, after = _cls.decode(buf, off)
                if after < end:
                    # Qpid's 0-8 basic.consume carries a trailing arguments table (INVENTORY.md §9.3)
                    method, after = _tail.decode(buf, off)
                return method, after
        method = self._decode_args(cls, decode, start, end)
        reply = self.dialect.replies.get(index)
        if reply is not None:
            # answer this request in the form of the table it came from (basic.recover-ok 60.101/111)
            self._replies[(channel, reply[0])] = reply[1]
        return method

    def _method_frame(self, channel: int, start: int, end: int):
        method = self._decode_method(start, end, channel)
        if channel == 0:
            return self._connection_method(method)
        if self.state.state is not _ST_OPEN:
            raise ChannelError(f"{method.NAME} on channel {channel} before the connection is open",
                               method.CLASS_ID, method.METHOD_ID)
        cstate = self.channels.get(channel)
        index = method.INDEX
        if cstate == _OPEN:
            if channel in self._assembling:
                raise UnexpectedFrame(f"{method.NAME} on channel {channel} while a content is incomplete",
                                      method.CLASS_ID, method.METHOD_ID)
            if method.CLASS_ID == 10:
                raise CommandInvalid(f"{method.NAME} on channel {channel}", method.CLASS_ID, method.METHOD_ID)
            if method.CONTENT:
                self._assembling[channel] = _Assembly(method)
                return None
            if index == _CHANNEL_CLOSE:
                del self.channels[channel]
                self.send_method(channel, spec.ChannelCloseOk())
                return ChannelClosed(channel, method.reply_code, method.reply_text)
            if index == _CHANNEL_OPEN:
                raise ChannelError(f"second channel.open on channel {channel}", 20, 10)
            if index == _CHANNEL_CLOSE_OK:
                return None  # nothing to confirm; harmless
            return Method(channel, method)
        if cstate is None:
            if index == _CHANNEL_OPEN:
                # Any number 1..65535 may be opened; channel-max limits how many are open at
                # once (RabbitMQ, and 0-8/0-9's "maximum total number of channels"; 0-9-1's
                # D89 reads it as the highest number, which aiormq's channel 65535 breaks).
                # RabbitMQ's text, and no class or method ids (docs/compatibility.md).
                if self.channel_max and len(self.channels) >= self.channel_max:
                    raise NotAllowed(f"number of channels opened ({len(self.channels)}) has reached the "
                                     f"negotiated channel_max ({self.channel_max})")
                if self.channel_admit is not None:
                    self.channel_admit(channel)
                self.channels[channel] = _OPEN
                self.send_method(channel, spec.ChannelOpenOk())
                return ChannelOpened(channel)
            if index == _CHANNEL_CLOSE_OK:
                return None  # the close-ok of a close we answered already (both sides closed)
            raise ChannelError(f"{method.NAME} on channel {channel}, which is not open",
                               method.CLASS_ID, method.METHOD_ID)
        # CLOSING: we sent channel.close; only its close-ok (or the peer's own close) matters
        if index == _CHANNEL_CLOSE_OK:
            del self.channels[channel]
            return ChannelClosed(channel)
        if index == _CHANNEL_CLOSE:
            del self.channels[channel]
            self.send_method(channel, spec.ChannelCloseOk())
            return ChannelClosed(channel, method.reply_code, method.reply_text)
        return None

    def _connection_method(self, method):
        if method.CLASS_ID != 10:
            # RabbitMQ: 504 "unexpected method in connection state running"
            raise ChannelError(f"unexpected method {method.NAME} on channel 0", method.CLASS_ID, method.METHOD_ID)
        new = self.state.receive(method)
        if new is State.LOGIN and not self.dialect.identity:
            dialect = self.dialect.refine(method.client_properties)
            if dialect is not self.dialect:
                self._use_dialect(dialect)  # 0-8: a Qpid client gets Qpid's basic.recover
            method = dialect.start_ok(method)
        if new is State.CLOSED:
            if method.INDEX == spec.ConnectionClose.INDEX:
                self.send_method(0, spec.ConnectionCloseOk())
                self.sent_close_ok = True
                return ConnectionClosed(method.reply_code, method.reply_text)
            return ConnectionClosed()
        if new is State.AWAIT_OPEN:
            self._negotiate(method)
        return Method(0, method)

    def _negotiate(self, tune_ok) -> None:
        if not self.dialect.strict_tune:
            self._negotiate_0_8(tune_ok)
            return
        # RabbitMQ's rules (rabbit_reader): a non-zero client value below the floor, or above
        # our limit (0 = unlimited counts as above), is refused with 530.
        for name, ours, theirs, floor in (
            ("frame_max", self.frame_max, tune_ok.frame_max, FRAME_MIN_SIZE),
            ("channel_max", self.channel_max, tune_ok.channel_max, 0),
        ):
            if theirs and theirs < floor:
                raise NotAllowed(f"negotiated {name} = {theirs} is lower than the minimum allowed value ({floor})",
                                 10, 31)
            if ours and (theirs == 0 or theirs > ours):
                raise NotAllowed(f"negotiated {name} = {theirs} is higher than the maximum allowed value ({ours})",
                                 10, 31)
        self.frame_max = tune_ok.frame_max
        self.channel_max = tune_ok.channel_max or 65535
        self.heartbeat = tune_ok.heartbeat
        self.frames.max_frame_size = self.frame_max

    def _negotiate_0_8(self, tune_ok) -> None:
        # 0-8/0-9 tune-ok: "the client can negotiate a lower value"; 0 means "no specific limit"
        # (the client's), so a frame-max of 0 or above ours is capped to ours, not refused (that
        # refusal is a 0-9-1 clarification, D89). The minimum non-zero frame-max is 4096, and
        # channel-max "may not be higher than the value specified by the server" (XML assert).
        frame_max, channel_max = tune_ok.frame_max, tune_ok.channel_max
        if frame_max and frame_max < FRAME_MIN_SIZE:
            raise NotAllowed(f"negotiated frame_max = {frame_max} is lower than the minimum allowed value "
                             f"({FRAME_MIN_SIZE})", 10, 31)
        if self.channel_max and channel_max > self.channel_max:
            raise NotAllowed(f"negotiated channel_max = {channel_max} is higher than the maximum allowed value "
                             f"({self.channel_max})", 10, 31)
        if self.frame_max and (frame_max == 0 or frame_max > self.frame_max):
            frame_max = self.frame_max
        self.frame_max = frame_max
        self.channel_max = channel_max or self.channel_max or 65535
        self.heartbeat = tune_ok.heartbeat
        self.frames.max_frame_size = self.frame_max

    def _publish(self, channel: int, start: int, end: int):
        """basic.publish (0-9-1): when its header and body frames are in the buffer already,
        the usual case, the whole content is taken here in one go, checked as the general path
        would check it, instead of as three frames through the state machine (publish-only
        profile: frame parsing and content assembly were the largest part of a publish).
        Anything unusual (a missing frame, a body in several frames, a size over a limit)
        goes the general way, which reports errors."""
        if self.state.state is not _ST_OPEN or self.channels.get(channel) != _OPEN or channel in self._assembling:
            return self._method_frame(channel, start, end)
        frames = self.frames
        # where this publish began in the stream: a content taken frame by frame ends in a later
        # read (--worker-mode queues moves a connection from there: warren/server/placement.py)
        self.publish_start = frames.base + start - 7
        buf = frames.buf
        last = self._last_publish_args
        if last is not None and len(last) == end - start - 4 and buf.startswith(last, start + 4, end):
            method = self._last_publish
        else:
            method = self._decode_args(_BasicPublish, _BasicPublish.decode, start, end)
            self._last_publish = method
            self._last_publish_args = bytes(buf[start + 4:end])
        pos = frames.pos
        available = len(buf)
        limit = frames.max_frame_size
        if available - pos >= 21:  # a header frame's 7 octets and the fixed part of its payload
            ftype, ch, size = _frame_header.unpack_from(buf, pos)
            hend = pos + 7 + size
            if (ftype == FRAME_HEADER and ch == channel and size >= 14 and hend < available
                    and buf[hend] == 0xCE and not (limit and size + 8 > limit)):
                class_id, _weight, body_size = _header_fields.unpack_from(buf, pos + 7)
                if class_id == 60 and body_size <= self.max_message_size:
                    last = self._last_properties
                    if len(last) == size - 12 and buf.startswith(last, pos + 19, hend):
                        properties = last
                    else:
                        if _properties_error(buf, pos + 19, hend) is not None:
                            frames.pos = hend + 1
                            raise _malformed_properties(channel, method, buf, pos + 19, hend)
                        properties = self._last_properties = bytes(buf[pos + 19:hend])
                    if body_size == 0:
                        frames.pos = hend + 1
                        return Content(channel, method, properties, b"")
                    bpos = hend + 1
                    if available - bpos >= 7:
                        ftype, ch, size = _frame_header.unpack_from(buf, bpos)
                        bend = bpos + 7 + size
                        if (ftype == FRAME_BODY and ch == channel and size == body_size and bend < available
                                and buf[bend] == 0xCE and not (limit and size + 8 > limit)):
                            frames.pos = bend + 1
                            return Content(channel, method, properties, buf[bpos + 7:bend])
        self._assembling[channel] = _Assembly(method)  # the general path takes the next frames
        return None

    def _header_frame(self, channel: int, start: int, end: int):
        asm = self._assembling.get(channel)
        if asm is None or asm.properties is not None:
            return self._stray_content(channel, "content header")
        buf = self.frames.buf
        if end - start < 12:
            raise FrameError("content header shorter than 14 octets")
        class_id, _weight, size = _header_fields.unpack_from(buf, start)
        method = asm.method
        if class_id != method.CLASS_ID:
            # the spec asks for 501; RabbitMQ answers 505 naming the content's method, and so do we
            raise UnexpectedFrame(f"content header class {class_id} does not match {method.NAME}",
                                  method.CLASS_ID, method.METHOD_ID)
        if size > self.max_message_size:
            del self._assembling[channel]
            err = PreconditionFailed(f"message size {size} is larger than configured max size "
                                     f"{self.max_message_size}", method.CLASS_ID, method.METHOD_ID)
            err.channel = channel
            raise err
        last = self._last_properties  # b"" at first: never a valid list, always checked
        if last and len(last) == end - start - 12 and buf.startswith(last, start + 12, end):
            asm.properties = last
        else:
            if _properties_error(buf, start + 12, end) is not None:
                del self._assembling[channel]
                raise _malformed_properties(channel, method, buf, start + 12, end)
            asm.properties = self._last_properties = bytes(buf[start + 12:end])
        asm.size = size
        if size == 0:
            del self._assembling[channel]
            return Content(channel, method, asm.properties, b"")
        return None

    def _body_frame(self, channel: int, start: int, end: int):
        asm = self._assembling.get(channel)
        if asm is None or asm.properties is None:
            return self._stray_content(channel, "content body")
        body = asm.body
        if not body and end - start == asm.size:
            # the common case: the whole body in one frame, copied once
            del self._assembling[channel]
            return Content(channel, asm.method, asm.properties, self.frames.buf[start:end])
        with memoryview(self.frames.buf) as view:
            body += view[start:end]
        if len(body) < asm.size:
            return None
        if len(body) > asm.size:
            raise FrameError(f"content body of {len(body)} octets exceeds the declared {asm.size}")
        del self._assembling[channel]
        return Content(channel, asm.method, asm.properties, body)

    def _stray_content(self, channel: int, what: str):
        cstate = self.channels.get(channel)
        if cstate == _CLOSING:
            return None  # content still in flight on a channel we are closing
        if cstate is None:
            if channel == 0:
                raise UnexpectedFrame(f"{what} frame on channel 0")  # RabbitMQ: 505
            raise ChannelError(f"{what} frame on channel {channel}, which is not open")
        raise UnexpectedFrame(f"{what} frame on channel {channel} without a content-bearing method")

    def _while_closing(self, ftype: int, channel: int, start: int, end: int):
        # We sent connection.close (CLOSING), or the handshake is over (CLOSED): discard
        # everything but the peer's close-ok or close. A close is answered with close-ok in
        # both states, as RabbitMQ does; a close-ok ends only our own close.
        if ftype != FRAME_METHOD or channel != 0:
            return None
        try:
            method = self._decode_method(start, end, channel)
        except AMQPError:
            return None
        index = method.INDEX
        if index == spec.ConnectionClose.INDEX:
            self.send_method(0, spec.ConnectionCloseOk())
            self.sent_close_ok = True
        elif index != spec.ConnectionCloseOk.INDEX:
            return None
        if self.state.state is not _ST_CLOSED:
            self.state.closed()
            return ConnectionClosed()
        return None

    # --- broker decisions ----------------------------------------------------------------

    def accept_login(self) -> None:
        """Credentials are good: offer our limits with connection.tune."""
        self.state.advance("login-accepted")
        self.send_method(0, spec.ConnectionTune(self.channel_max, self.frame_max, self.heartbeat))

    def accept_open(self) -> None:
        """The virtual host is good: the connection is open."""
        self.state.advance("vhost-accepted")
        self.send_method(0, spec.ConnectionOpenOk())

    def unread(self, event) -> None:
        """Hand back the rest of a ``Publishes`` run the session could not take now (flow
        control paused it): the next ``next_event`` returns it first, as if its frames were
        still unread; dropped if its channel or the connection closed meanwhile. (An instance
        attribute over the method for one call: the usual path tests nothing for it.)"""
        def next_event():
            del self.next_event
            if self.state.state is _ST_OPEN and self.channels.get(event.channel) == _OPEN:
                return event
            return self.next_event()
        self.next_event = next_event

    # --- output --------------------------------------------------------------------------

    @property
    def is_open(self) -> bool:
        return self.state.state is _ST_OPEN

    @property
    def is_closed(self) -> bool:
        return self.state.state is _ST_CLOSED

    # the handshake deadline asks these of either protocol's connection (warren/server/handshake.py;
    # AMQP 0-10's ServerConnection has the same two)
    @property
    def handshake_pending(self) -> bool:
        """open-ok not sent yet, and the connection not closing or closed."""
        return self.state.state in HANDSHAKE_WAITING

    @property
    def handshake_stage(self) -> str:
        """What the broker waits for, for the log line of a handshake that timed out."""
        state = self.state.state
        return HANDSHAKE_WAITING.get(state, state.value)

    @property
    def reads_input(self) -> bool:
        """False after a framing error: nothing the peer sends (a close-ok, say) is seen any more."""
        return not self._broken

    def channel_is_open(self, channel: int) -> bool:
        return self.channels.get(channel) == _OPEN

    def send_method(self, channel: int, method) -> None:
        self._out.append(method_frame(channel, method.encode()))

    def send_content(self, channel: int, method, properties: bytes, body) -> None:
        """A content-bearing method followed by its header and body frames."""
        out = self._out
        out.append(method_frame(channel, method.encode()))
        out.extend(content_frames(channel, method.CLASS_ID, properties, body, self.frame_max))
        self.out_bytes += len(body) + 64

    def _encode_translated(self, channel: int, method):
        enc = self._replies.pop((channel, method.INDEX), None) if self._replies else None
        if enc is None:
            enc = self.dialect.encoders.get(type(method))
            if enc is None:
                self.dropped += 1  # no form in this version (docs/versions.md)
                return None
        return enc(method)

    def _send_method_translated(self, channel: int, method) -> None:
        payload = self._encode_translated(channel, method)
        if payload is not None:
            self._out.append(method_frame(channel, payload))

    def _send_content_translated(self, channel: int, method, properties: bytes, body) -> None:
        payload = self._encode_translated(channel, method)
        if payload is None:
            return
        out = self._out
        out.append(method_frame(channel, payload))
        out.extend(content_frames(channel, method.CLASS_ID, properties, body, self.frame_max))
        self.out_bytes += len(body) + 64

    def send_deliver(self, channel: int, consumer_tag: bytes, delivery_tag: int, redelivered: bool,
                     exchange: bytes, routing_key: bytes, properties: bytes, body) -> None:
        """basic.deliver + content, encoded by hand: the hottest path (bench/compare.py).

        ``consumer_tag``, ``exchange`` and ``routing_key`` are already shortstr-encoded
        (length octet included), so nothing is encoded per delivery but the tag. A body that
        fits one frame makes one bytes object with its method and header frames: four packs
        and one join instead of a dozen parts (a small body is copied once more here, which
        costs less than the parts did; a large one stays a part of its own).
        """
        size = len(body)
        frame_max = self.frame_max
        if not 0 < size <= (frame_max - 8 if frame_max else size):
            payload = b"".join((_DELIVER_PREFIX, consumer_tag, _deliver_fixed.pack(delivery_tag, redelivered),
                                exchange, routing_key))
            out = self._out
            out.append(_frame_header.pack(FRAME_METHOD, channel, len(payload)))
            out.append(payload)
            out.append(b"\xce")
            out.extend(content_frames(channel, 60, properties, body, frame_max))
            self.out_bytes += size + 64
            return
        if size <= _JOIN_BODY_MAX and _deliver_frames is not None:  # the same octets, in C (_speedups.c)
            self._out.append(_deliver_frames(channel, consumer_tag, delivery_tag, redelivered, exchange, routing_key,
                                             properties, body))
            self.out_bytes += size + 64
            return
        parts = (
            _frame_header.pack(FRAME_METHOD, channel, 13 + len(consumer_tag) + len(exchange) + len(routing_key)),
            _DELIVER_PREFIX, consumer_tag, _deliver_fixed.pack(delivery_tag, redelivered), exchange, routing_key,
            _deliver_header.pack(0xCE, FRAME_HEADER, channel, 12 + len(properties), 60, 0, size), properties,
            _deliver_body.pack(0xCE, FRAME_BODY, channel, size),
        )
        if size <= _JOIN_BODY_MAX:
            self._out.append(b"".join((*parts, body, b"\xce")))
        else:
            self._out.extend((b"".join(parts), body, b"\xce"))
        self.out_bytes += size + 64

    def send_heartbeat(self) -> None:
        self._out.append(HEARTBEAT_FRAME)

    def close_channel(self, channel: int, error: AMQPError) -> None:
        """Send channel.close for a soft error; input on the channel is discarded until close-ok."""
        if self.channels.get(channel) != _OPEN:
            return
        self.channels[channel] = _CLOSING
        self._assembling.pop(channel, None)
        code, text, class_id, method_id = error.reply_code, error.reply_text, error.class_id, error.method_id
        if not self.dialect.identity:
            code, text, class_id, method_id = self.dialect.reply(code, text, class_id, method_id)
        self.send_method(channel, spec.ChannelClose(code, _text(text), class_id, method_id))

    def close_connection(self, reply_code: int, reply_text: str, class_id: int = 0, method_id: int = 0) -> None:
        """Send connection.close; every channel is gone, input is discarded until close-ok."""
        if self.state.state in _ST_ENDING:
            return
        self.state.closing()
        self.channels.clear()
        self._assembling.clear()
        if not self.dialect.identity:
            reply_code, reply_text, class_id, method_id = self.dialect.reply(reply_code, reply_text, class_id,
                                                                             method_id)
        self.send_method(0, spec.ConnectionClose(reply_code, _text(reply_text), class_id, method_id))

    def data_to_send(self) -> list:
        """Everything queued for the peer since the last call, for one ``writelines``."""
        out = self._out
        self._out = []
        self.out_bytes = 0
        return out

    @property
    def has_output(self) -> bool:
        return bool(self._out)


def _malformed_properties(channel: int, method, buf, start: int, end: int) -> AMQPError:
    """The refusal of a content header whose property list does not decode, so nothing malformed
    is stored (warren/codec/properties.py): connection.close 501 (a property runs past the end
    of the list) or 502 (anything else), with the class and method of the content's method, from
    warren/codec/refusals.py's table. RabbitMQ answers 541 with class and method 0 (its channel
    process crashes decoding the list): the fault is the client's (docs/compatibility.md)."""
    # the compiled check gives the verdict; the Python twin words the reason and its kind
    kind, why = properties_failure(buf, start, end) or (MALFORMED, "malformed")
    return amqp0_9_1_refusal(kind, f"malformed property list in the content header on channel {channel}: {why}",
                             method.CLASS_ID, method.METHOD_ID)


def _text(text: str) -> str:
    b = text.encode("utf-8", "surrogateescape")
    return text if len(b) <= 255 else b[:255].decode("utf-8", "ignore")
