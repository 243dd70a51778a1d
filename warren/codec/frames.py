"""AMQP 0-8/0-9/0-9-1 frames: parsing from a growing buffer, and serialising.

General frame (INVENTORY.md §3.1, all three versions): a 7-octet header (type uint8,
channel uint16, payload size uint32), the payload, then the frame-end octet 0xCE. The 0-8 PDF's
extra `cycle` octet is sent by nobody and is not supported.

``FrameBuffer`` owns the receive buffer: ``feed`` appends, ``next_frame`` returns
``(type, channel, start, end)`` offsets into ``buf`` for one complete frame or None ("need more
bytes"), and ``compact`` drops consumed bytes once per batch, so a frame is never copied
before it is decoded. The size limit is checked from the header, before the payload arrives.
"""

from __future__ import annotations

import struct

from warren.errors import FrameError

__all__ = [
    "FRAME_METHOD", "FRAME_HEADER", "FRAME_BODY", "FRAME_HEARTBEAT", "FRAME_END",
    "FRAME_MIN_SIZE", "FRAME_OVERHEAD", "HEARTBEAT_FRAME", "FrameBuffer",
    "method_frame", "content_frames", "header_payload",
]

FRAME_METHOD = 1
FRAME_HEADER = 2
FRAME_BODY = 3
FRAME_HEARTBEAT = 8  # the 0-9-1 PDF says 4; the XML and every peer use 8 (ERR §29)
FRAME_END = 0xCE
FRAME_MIN_SIZE = 4096  # constant frame-min-size, all three versions
FRAME_OVERHEAD = 8  # header 7 + frame-end 1: the largest body slice is frame_max - 8 (D89)
HEARTBEAT_FRAME = b"\x08\x00\x00\x00\x00\x00\x00\xce"  # ERR §12

_frame_header = struct.Struct(">BHI")
_content_header = struct.Struct(">BHIHHQ")  # frame header + class-id, weight, body-size


class FrameBuffer:
    """Receive buffer that yields complete frames as offsets (see module docstring)."""

    __slots__ = ("buf", "pos", "max_frame_size", "base")

    def __init__(self, max_frame_size: int) -> None:
        self.buf = bytearray()
        self.pos = 0
        self.base = 0  # octets dropped by compact so far: buf[i] is octet base + i of the stream
        #: largest whole frame (header + payload + frame-end) accepted; 0 = no limit
        self.max_frame_size = max_frame_size

    def feed(self, data: bytes) -> None:
        self.buf += data

    def compact(self) -> None:
        """Drop consumed bytes; call when no offsets into ``buf`` are held any more."""
        if self.pos:
            del self.buf[: self.pos]
            self.base += self.pos
            self.pos = 0

    def next_frame(self):
        """One complete frame as (type, channel, payload_start, payload_end), or None.

        Raises FrameError for a frame larger than ``max_frame_size`` (checked from the header
        alone) or a wrong frame-end octet.
        """
        buf = self.buf
        pos = self.pos
        if len(buf) - pos < 7:
            return None
        ftype, channel, size = _frame_header.unpack_from(buf, pos)
        limit = self.max_frame_size
        if limit and size + FRAME_OVERHEAD > limit:
            raise FrameError(f"frame of {size + FRAME_OVERHEAD} octets exceeds frame-max {limit}")
        end = pos + 7 + size
        if len(buf) <= end:
            return None
        if buf[end] != FRAME_END:
            raise FrameError(f"frame-end octet is 0x{buf[end]:02x}, expected 0xce")
        self.pos = end + 1
        return ftype, channel, pos + 7, end


def method_frame(channel: int, payload: bytes) -> bytes:
    """A method frame around an encoded method (ids + arguments)."""
    return b"".join((_frame_header.pack(FRAME_METHOD, channel, len(payload)), payload, b"\xce"))


def header_payload(class_id: int, body_size: int, properties: bytes) -> bytes:
    """Content-header payload: class-id, weight 0, body-size, then the encoded property list."""
    return struct.pack(">HHQ", class_id, 0, body_size) + properties


def content_frames(channel: int, class_id: int, properties: bytes, body, frame_max: int) -> list:
    """Header frame and body frames for a content; body slices are at most frame_max - 8.

    Returns a list of byte strings for ``writelines``; the body is sliced through a memoryview
    so a large message is not copied here.
    """
    size = len(body)
    header = _content_header.pack(FRAME_HEADER, channel, 12 + len(properties), class_id, 0, size)
    parts = [header, properties, b"\xce"]
    if not size:
        return parts
    chunk = (frame_max - FRAME_OVERHEAD) if frame_max else size
    if size <= chunk:
        parts.append(_frame_header.pack(FRAME_BODY, channel, size))
        parts.append(body)
        parts.append(b"\xce")
        return parts
    view = memoryview(body)
    for start in range(0, size, chunk):
        piece = view[start:start + chunk]
        parts.append(_frame_header.pack(FRAME_BODY, channel, len(piece)))
        parts.append(piece)
        parts.append(b"\xce")
    return parts
