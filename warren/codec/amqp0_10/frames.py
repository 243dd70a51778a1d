"""AMQP 0-10 frames, segments and assemblies (INVENTORY.md §11.2, P010 §4).

A frame is a 12-octet header and a payload, no frame-end octet::

    octet 0     flags: version (bits 7-6, 00), B first-segment (0x08), E last-segment (0x04),
                b first-frame (0x02), e last-frame (0x01)
    octet 1     segment type: 0 control, 1 command, 2 header, 3 body
    octets 2-3  frame size, header included (so 12 .. 65535)
    octet 5     track (low 4 bits): 0 controls, 1 commands
    octets 6-7  channel

A segment (a control, a command, a header or a body) may span frames (b on its first, e on its
last); an assembly is one control, or one command followed by an optional header segment and
an optional body segment (B on the frames of its first segment, E on those of its last). Frames
of different channels interleave, and on one channel a control (track 0) may come between the
frames of a command's assembly (track 1), so assemblies are put together per (channel, track).

``FrameReader`` yields frames as offsets into its buffer (no copy before decoding, like the 0-9-1
``FrameBuffer``); ``Assembler`` checks the order of frames and segments and returns complete
``Assembly`` objects; ``assembly_frames`` splits an outgoing assembly into frames of at most
``max_frame_size`` octets. They raise ``FramingError`` for a broken order (the connection can no
longer trust the stream) and ``AssemblyTooLarge`` (a ``DecodeError``, not a framing error: the
rest of that assembly is read and dropped) for a segment past its limit.
"""

from __future__ import annotations

import struct

from warren.codec.amqp0_10.errors import DecodeError, FramingError

__all__ = [
    "FRAME_HEADER_SIZE", "FRAME_SIZE_MAX", "FIRST_SEGMENT", "LAST_SEGMENT", "FIRST_FRAME", "LAST_FRAME",
    "SEGMENT_CONTROL", "SEGMENT_COMMAND", "SEGMENT_HEADER", "SEGMENT_BODY", "TRACK_CONTROL", "TRACK_COMMAND",
    "FrameReader", "Assembler", "Assembly", "AssemblyTooLarge", "encode_frame", "assembly_frames", "transfer_frames",
]

FRAME_HEADER_SIZE = 12
FRAME_SIZE_MAX = 0xFFFF  # the size field is 16 bits and counts the header
FIRST_SEGMENT, LAST_SEGMENT, FIRST_FRAME, LAST_FRAME = 0x08, 0x04, 0x02, 0x01
SEGMENT_CONTROL, SEGMENT_COMMAND, SEGMENT_HEADER, SEGMENT_BODY = 0, 1, 2, 3
TRACK_CONTROL, TRACK_COMMAND = 0, 1
_SEGMENT_NAMES = ("control", "command", "header", "body")
_TRACK_OF = (TRACK_CONTROL, TRACK_COMMAND, TRACK_COMMAND, TRACK_COMMAND)
# what may follow each segment type within one assembly
_NEXT = {SEGMENT_COMMAND: (SEGMENT_HEADER, SEGMENT_BODY), SEGMENT_HEADER: (SEGMENT_BODY,)}

_header = struct.Struct(">BBHxBH4x")


class AssemblyTooLarge(DecodeError):
    """A segment past its limit; the rest of its assembly is dropped as it arrives."""

    def __init__(self, text: str, channel: int, segment_type: int) -> None:
        super().__init__(text)
        self.channel, self.segment_type = channel, segment_type


class FrameReader:
    """Receive buffer yielding complete frames as offsets (see module docstring)."""

    __slots__ = ("buf", "pos")

    def __init__(self) -> None:
        self.buf = bytearray()
        self.pos = 0

    def feed(self, data) -> None:
        self.buf += data

    def compact(self) -> None:
        """Drop consumed octets; call when no offsets into ``buf`` are held any more."""
        if self.pos:
            del self.buf[:self.pos]
            self.pos = 0

    def next_frame(self):
        """(flags, segment type, track, channel, payload start, payload end), or None for "need
        more octets". Raises FramingError for a header no peer may send."""
        buf, pos = self.buf, self.pos
        if len(buf) - pos < FRAME_HEADER_SIZE:
            return None
        flags, seg_type, size, track, channel = _header.unpack_from(buf, pos)
        if size < FRAME_HEADER_SIZE:
            raise FramingError(f"frame size {size} is less than its 12-octet header")
        if flags & 0xC0:
            raise FramingError(f"frame format version {flags >> 6} (only 0 exists)")
        if seg_type > SEGMENT_BODY:
            raise FramingError(f"segment type {seg_type} does not exist")
        track &= 0x0F
        if track != _TRACK_OF[seg_type]:
            raise FramingError(f"{_SEGMENT_NAMES[seg_type]} segment on track {track}")
        end = pos + size
        if len(buf) < end:
            return None
        self.pos = end
        return flags, seg_type, track, channel, pos + FRAME_HEADER_SIZE, end


class Assembly:
    """A complete control, or a command with its header and body segments (payload bytes)."""

    __slots__ = ("channel", "track", "segments")

    def __init__(self, channel: int, track: int, segments: list) -> None:
        self.channel, self.track = channel, track
        self.segments = segments  # [(segment type, payload), ...] in order

    def segment(self, seg_type: int):
        for t, payload in self.segments:
            if t == seg_type:
                return payload
        return None

    def __repr__(self) -> str:
        parts = ", ".join(f"{_SEGMENT_NAMES[t]}:{len(p)}" for t, p in self.segments)
        return f"Assembly(channel={self.channel}, track={self.track}, {parts})"


class _Partial:
    __slots__ = ("segments", "seg_type", "seg_flags", "data", "open", "dropping")

    def __init__(self) -> None:
        self.segments: list = []
        self.seg_type = -1
        self.seg_flags = 0  # the B/E flags of the segment being read
        self.data: list = []  # frame payloads of the segment being read
        self.open = False  # a segment is being read (its last frame has not come)
        self.dropping = False  # over a limit: read to the end and drop


class Assembler:
    """Frames in, complete assemblies out, with the segment order checked (module docstring).

    Limits (octets): a control or command segment ``max_command``, a header segment
    ``max_header``, a body ``max_body`` (the largest message)."""

    __slots__ = ("_partials", "max_command", "max_header", "max_body", "_sizes")

    def __init__(self, max_command: int = 1 << 20, max_header: int = 1 << 20, max_body: int = 128 << 20) -> None:
        self._partials: dict[tuple[int, int], _Partial] = {}
        self.max_command, self.max_header, self.max_body = max_command, max_header, max_body
        self._sizes: dict[tuple[int, int], int] = {}

    def add(self, flags: int, seg_type: int, track: int, channel: int, payload) -> Assembly | None:
        key = (channel, track)
        part = self._partials.get(key)
        seg_flags = flags & (FIRST_SEGMENT | LAST_SEGMENT)
        first_frame = flags & FIRST_FRAME
        name = _SEGMENT_NAMES[seg_type]
        if part is None:
            if not first_frame or not flags & FIRST_SEGMENT:
                raise FramingError(f"{name} frame on channel {channel} does not start an assembly "
                                   f"(flags 0x{flags:02x})")
            if seg_type not in (SEGMENT_CONTROL, SEGMENT_COMMAND):
                raise FramingError(f"assembly on channel {channel} starts with a {name} segment")
            if seg_type == SEGMENT_CONTROL and not flags & LAST_SEGMENT:
                raise FramingError(f"control on channel {channel} is not the last segment of its assembly")
            part = self._partials[key] = _Partial()
        if part.open:
            if first_frame:
                raise FramingError(f"{name} frame on channel {channel} starts a segment inside another")
            if seg_type != part.seg_type or seg_flags != part.seg_flags:
                raise FramingError(f"{name} frame on channel {channel} continues a "
                                   f"{_SEGMENT_NAMES[part.seg_type]} segment with other flags")
        else:
            if not first_frame:
                raise FramingError(f"{name} frame on channel {channel} does not start its segment")
            if part.segments or part.seg_type >= 0:
                if flags & FIRST_SEGMENT or seg_type not in _NEXT.get(part.seg_type, ()):
                    raise FramingError(f"{name} segment after a {_SEGMENT_NAMES[part.seg_type]} segment on "
                                       f"channel {channel}")
            part.open = True
            part.seg_type = seg_type
            part.seg_flags = seg_flags
            self._sizes[key] = 0
        size = self._sizes[key] + len(payload)
        self._sizes[key] = size
        if not part.dropping:
            limit = self.max_body if seg_type == SEGMENT_BODY else \
                self.max_header if seg_type == SEGMENT_HEADER else self.max_command
            if size > limit:
                part.dropping = True
                part.data = []
                if flags & LAST_FRAME and flags & LAST_SEGMENT:
                    del self._partials[key]
                raise AssemblyTooLarge(f"{name} segment on channel {channel} is larger than {limit} octets",
                                       channel, seg_type)
            part.data.append(payload)
        if not flags & LAST_FRAME:
            return None
        part.open = False
        if not part.dropping:
            data = part.data
            part.segments.append((seg_type, bytes(data[0]) if len(data) == 1 else b"".join(data)))
            part.data = []
        if not flags & LAST_SEGMENT:
            return None
        del self._partials[key]
        if part.dropping:
            return None
        return Assembly(channel, track, part.segments)

    def drop_channel(self, channel: int) -> None:
        """Forget partial assemblies of a channel (its session is gone)."""
        for track in (TRACK_CONTROL, TRACK_COMMAND):
            self._partials.pop((channel, track), None)

    def busy(self, channel: int, track: int) -> bool:
        """An assembly is partly read on this channel and track."""
        return (channel, track) in self._partials


def encode_frame(flags: int, seg_type: int, channel: int, payload) -> bytes:
    return _header.pack(flags, seg_type, FRAME_HEADER_SIZE + len(payload), _TRACK_OF[seg_type], channel) + \
        bytes(payload)


def assembly_frames(channel: int, segments, max_frame_size: int = FRAME_SIZE_MAX) -> list:
    """The frames of one assembly: ``segments`` is ``[(segment type, payload), ...]`` in order
    (a control; or a command, then header and body when present). Each frame is at most
    ``max_frame_size`` octets; a payload is sliced through a memoryview (a large body is not
    copied here). Returns a list of bytes-like parts for ``writelines``."""
    chunk = min(max_frame_size, FRAME_SIZE_MAX) - FRAME_HEADER_SIZE
    if chunk <= 0:
        raise ValueError(f"max frame size {max_frame_size} leaves no room for a payload")
    out = []
    last = len(segments) - 1
    for i, (seg_type, payload) in enumerate(segments):
        seg_flags = (FIRST_SEGMENT if i == 0 else 0) | (LAST_SEGMENT if i == last else 0)
        track = _TRACK_OF[seg_type]
        size = len(payload)
        if size <= chunk:
            out.append(_header.pack(seg_flags | FIRST_FRAME | LAST_FRAME, seg_type, FRAME_HEADER_SIZE + size,
                                    track, channel))
            if size:
                out.append(payload)
            continue
        view = memoryview(payload)
        for start in range(0, size, chunk):
            piece = view[start:start + chunk]
            flags = seg_flags | (FIRST_FRAME if start == 0 else 0) | (LAST_FRAME if start + chunk >= size else 0)
            out.append(_header.pack(flags, seg_type, FRAME_HEADER_SIZE + len(piece), track, channel))
            out.append(piece)
    return out


_SMALL_TRANSFER = 16 << 10  # bodies up to this size are copied into one part with their frames


def transfer_frames(channel: int, command: bytes, header: bytes, body, max_frame_size: int = FRAME_SIZE_MAX) -> list:
    """``assembly_frames`` of a message transfer (command, header, then the body unless it is
    None), for the delivery path: when every segment fits one frame and the body is small, the
    whole assembly is one bytes object (one part to write instead of six)."""
    chunk = min(max_frame_size, FRAME_SIZE_MAX) - FRAME_HEADER_SIZE
    if body is None:
        return assembly_frames(channel, ((SEGMENT_COMMAND, command), (SEGMENT_HEADER, header)), max_frame_size)
    size = len(body)
    if size > _SMALL_TRANSFER or size > chunk or len(command) > chunk or len(header) > chunk:
        return assembly_frames(channel, ((SEGMENT_COMMAND, command), (SEGMENT_HEADER, header),
                                         (SEGMENT_BODY, body)), max_frame_size)
    pack = _header.pack
    return [b"".join((
        pack(FIRST_SEGMENT | FIRST_FRAME | LAST_FRAME, SEGMENT_COMMAND, FRAME_HEADER_SIZE + len(command),
             TRACK_COMMAND, channel), command,
        pack(FIRST_FRAME | LAST_FRAME, SEGMENT_HEADER, FRAME_HEADER_SIZE + len(header), TRACK_COMMAND, channel),
        header,
        pack(LAST_SEGMENT | FIRST_FRAME | LAST_FRAME, SEGMENT_BODY, FRAME_HEADER_SIZE + size, TRACK_COMMAND, channel),
        body))]
