"""Runs of basic.ack frames, taken at once (the compiled ``take_acks`` and its Python twin).

A consumer that acks every message on its own (the shared matrix's persistent rows, most
clients' default) sends one 21-octet basic.ack frame per message, and they arrive together:
taken frame by frame, each paid for the frame parser, the method decoder, a ``Method`` event
and the channel's dispatch (py-spy: a fifth of a persistent message's CPU). ``take_acks``
recognises a whole basic.ack at the buffer position and the ones without ``multiple`` that
follow it on the same channel, so the connection hands them over as one ``Acks`` event.

Anything that is not exactly a basic.ack frame with its 13-octet payload (class 60, method 80,
uint64 delivery tag, the bits octet) within frame-max gives None, and the frame-by-frame path
takes it (and reports what is wrong with it). The connection only calls the compiled function
(``warren/protocol/amqp0_9_1/connection.py``); this twin states what it does and is compared
with it (tests/protocol/test_speedups.py).
"""

from __future__ import annotations

import struct

__all__ = ["take_acks", "take_acks_py"]

_ACK_FRAME = struct.Struct(">BHIIQBB")  # type, channel, size, class+method, tag, bits, frame-end
_ACK_IDS = (60 << 16) | 80
_FRAME_END = 0xCE


def _ack_at(buf, pos: int, frame_max: int):
    """(channel, tag, multiple, next_pos) of a whole basic.ack frame at pos, or None."""
    if pos < 0 or len(buf) - pos < _ACK_FRAME.size:
        return None
    ftype, channel, size, ids, tag, bits, end = _ACK_FRAME.unpack_from(buf, pos)
    if ftype != 1 or size != 13 or ids != _ACK_IDS or end != _FRAME_END or (frame_max and size + 8 > frame_max):
        return None
    return channel, tag, bool(bits & 1), pos + _ACK_FRAME.size


def take_acks_py(buf, pos: int, frame_max: int, limit: int):
    """None | (channel, tag, multiple, next_pos) | (channel, [tag, ...], False, next_pos) (module doc)."""
    first = _ack_at(buf, pos, frame_max)
    if first is None:
        return None
    channel, tag, multiple, after = first
    if multiple or limit < 2:
        return first
    tags = [tag]
    while len(tags) < limit:
        more = _ack_at(buf, after, frame_max)
        if more is None or more[0] != channel or more[2]:
            break
        tags.append(more[1])
        after = more[3]
    return first if len(tags) == 1 else (channel, tags, False, after)


try:
    from warren.codec._speedups import take_acks
except ImportError:  # no compiler where it was installed: the connection takes acks frame by frame
    take_acks = None
