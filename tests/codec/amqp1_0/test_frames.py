"""AMQP 1.0 frames: whole, byte by byte, with trailing octets, and the framing errors."""

import pytest

from warren.codec.amqp1_0.frames import EMPTY_FRAME, FrameReader, FramingError, encode_frame, split_body
from warren.codec.amqp1_0.types import DecodeError
from warren.spec import amqp1_0 as spec


def frames_of(data: bytes, chunk: int | None) -> list:
    reader, out = FrameReader(4096), []
    pieces = [data] if chunk is None else [data[i:i + chunk] for i in range(0, len(data), chunk)]
    for piece in pieces:
        reader.feed(piece)
        while (f := reader.maybe_frame()) is not None:
            out.append(f)
    return out


@pytest.mark.parametrize("chunk", [None, 1, 3])
def test_frames_come_out_whole_whatever_the_reads(chunk):
    data = encode_frame(0, spec.Open(container_id="x")) + EMPTY_FRAME + encode_frame(5, spec.Transfer(handle=1), b"body")
    frames = frames_of(data + b"\x00\x00", chunk)  # two octets of the next frame stay buffered
    assert [(f.type, f.channel) for f in frames] == [(0, 0), (0, 0), (0, 5)]
    assert frames[1].body == b""
    performative, payload = split_body(frames[2].body)
    assert type(performative) is spec.Transfer and performative.handle == 1 and payload == b"body"


def test_a_sasl_frame_has_type_1_and_an_extended_header_is_skipped():
    sasl = encode_frame(0, spec.SaslOutcome(code=0), frame_type=1)
    assert sasl[4:6] == b"\x02\x01"
    extended = b"\x00\x00\x00\x0d\x03\x00\x00\x07" + b"\xee\xee\xee\xee" + b"\x45"[:0] + b"\x40"
    (frame,) = frames_of(extended, None)
    assert frame.channel == 7 and frame.body == b"\x40"


@pytest.mark.parametrize("header, reason", [
    (b"\x00\x00\x00\x07\x02\x00\x00\x00", "below the 8 octets"),
    (b"\x00\x00\x00\x08\x01\x00\x00\x00", "data offset 1"),
    (b"\x00\x00\x00\x08\x03\x00\x00\x00", "data offset 3"),
    (b"\x00\x00\x10\x01\x02\x00\x00\x00", "larger than the max-frame-size 4096"),
])
def test_a_broken_frame_header_is_a_framing_error_before_its_body_arrives(header, reason):
    reader = FrameReader(4096)
    reader.feed(header)
    with pytest.raises(FramingError, match=reason):
        reader.maybe_frame()


def test_a_body_that_is_no_performative_is_a_decode_error():
    with pytest.raises(DecodeError, match="performative"):
        split_body(b"\x41")
