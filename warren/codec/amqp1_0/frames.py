"""AMQP 1.0 frames (part 2 §2.3): an 8-octet header, extended header, body.

    SIZE (4 octets, the whole frame) | DOFF (1, data offset in 4-octet words, at least 2)
    | TYPE (1: 0x00 AMQP, 0x01 SASL) | type-specific (2: the channel of an AMQP frame)

The body of an AMQP frame is a performative (a described list) and, for a transfer, the payload
after it; a frame without a body is an empty frame (a heartbeat, §2.4.5). ``FrameReader`` takes the
octets of a connection and hands out whole frames and the protocol headers that come between its
layers (the SASL layer is followed by another header, §5.3.1). Its limit is the frame size we
announced (``max_frame_size``): a larger SIZE is refused from the header, before its octets are
buffered (``FramingError``, answered with ``amqp:connection:framing-error``).
"""

from __future__ import annotations

import struct

from warren.codec.amqp1_0.types import DecodeError, decode_value, encode
from warren.spec.base1_0 import Composite

__all__ = ["FRAME_AMQP", "FRAME_SASL", "FRAME_HEADER_SIZE", "Frame", "FrameReader", "FramingError",
           "encode_frame", "split_body", "EMPTY_FRAME"]

FRAME_AMQP = 0x00
FRAME_SASL = 0x01
FRAME_HEADER_SIZE = 8
EMPTY_FRAME = b"\x00\x00\x00\x08\x02\x00\x00\x00"  # a heartbeat on channel 0
_HEADER = struct.Struct(">IBBH")


class FramingError(Exception):
    """The frame layer itself is broken (a size below 8, a data offset below 2, a frame larger
    than announced): no frame after it can be found, so the connection closes."""


class Frame:
    __slots__ = ("type", "channel", "body")

    def __init__(self, type_: int, channel: int, body: bytes) -> None:
        self.type = type_
        self.channel = channel
        self.body = body  # after the extended header; b"" for an empty frame

    def __repr__(self) -> str:
        return f"<Frame type={self.type} channel={self.channel} {len(self.body)} octets>"


def encode_frame(channel: int, performative: Composite | None, payload: bytes = b"",
                 frame_type: int = FRAME_AMQP) -> bytes:
    """One frame: the performative's encoding and ``payload`` after it (None: an empty frame)."""
    body = (encode(performative) if performative is not None else b"") + payload
    return _HEADER.pack(FRAME_HEADER_SIZE + len(body), 2, frame_type, channel) + body


def split_body(body) -> tuple[Composite, bytes]:
    """(performative, payload) of a frame body; DecodeError when it does not begin with a
    performative (a composite of the spec)."""
    value, off = decode_value(body, 0, len(body))
    if not isinstance(value, Composite):
        raise DecodeError(f"frame body does not begin with a performative ({type(value).__name__})")
    return value, bytes(body[off:])


class FrameReader:
    """Frames from a byte stream (``feed``, then ``maybe_frame`` or ``maybe_header`` until None)."""

    __slots__ = ("buf", "pos", "max_frame_size")

    def __init__(self, max_frame_size: int) -> None:
        self.buf = bytearray()
        self.pos = 0
        self.max_frame_size = max_frame_size

    def feed(self, data) -> None:
        if self.pos:
            if self.pos >= len(self.buf):
                self.buf.clear()
            else:
                del self.buf[:self.pos]
            self.pos = 0
        self.buf += data

    @property
    def buffered(self) -> int:
        return len(self.buf) - self.pos

    def maybe_header(self) -> bytes | None:
        """The next 8 octets (a protocol header), or None until they are all here."""
        if len(self.buf) - self.pos < 8:
            return None
        header = bytes(self.buf[self.pos:self.pos + 8])
        self.pos += 8
        return header

    def maybe_frame(self) -> Frame | None:
        buf, pos = self.buf, self.pos
        if len(buf) - pos < FRAME_HEADER_SIZE:
            return None
        size, doff, type_, channel = _HEADER.unpack_from(buf, pos)
        if size < FRAME_HEADER_SIZE:
            raise FramingError(f"frame size {size} is below the 8 octets of its header")
        if doff < 2 or doff * 4 > size:
            raise FramingError(f"frame data offset {doff} (x4 octets) is outside its frame of {size} octets")
        if size > self.max_frame_size:
            raise FramingError(f"frame of {size} octets is larger than the max-frame-size {self.max_frame_size}")
        if len(buf) - pos < size:
            return None
        body = bytes(buf[pos + doff * 4:pos + size])
        self.pos = pos + size
        return Frame(type_, channel, body)
