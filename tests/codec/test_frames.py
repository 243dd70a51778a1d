"""Frames (warren.codec.frames): FrameBuffer parsing, serialising, content splitting. INVENTORY.md §3."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings, strategies as st

from warren.codec.frames import (
    FRAME_BODY, FRAME_END, FRAME_HEADER, FRAME_HEARTBEAT, FRAME_METHOD, FRAME_OVERHEAD, HEARTBEAT_FRAME,
    FrameBuffer, content_frames, header_payload, method_frame,
)
from warren.errors import FrameError


def frame(ftype: int, channel: int, payload: bytes, end: int = FRAME_END) -> bytes:
    return struct.pack(">BHI", ftype, channel, len(payload)) + payload + bytes([end])


def drain(fb: FrameBuffer) -> list:
    """Every complete frame now in the buffer, as (type, channel, payload bytes)."""
    out = []
    while (f := fb.next_frame()) is not None:
        ftype, channel, start, end = f
        out.append((ftype, channel, bytes(fb.buf[start:end])))
    return out


def feed_whole(data: bytes, max_frame_size: int = 0) -> tuple[list, FrameBuffer]:
    fb = FrameBuffer(max_frame_size)
    fb.feed(data)
    return drain(fb), fb


def feed_bytewise(data: bytes, max_frame_size: int = 0) -> tuple[list, FrameBuffer]:
    fb = FrameBuffer(max_frame_size)
    out = []
    for i in range(len(data)):
        fb.compact()  # as ServerConnection.receive_data does before each feed
        fb.feed(data[i:i + 1])
        out += drain(fb)
    return out, fb


def remaining(fb: FrameBuffer) -> bytes:
    return bytes(fb.buf[fb.pos:])


frames_st = st.lists(
    st.tuples(st.sampled_from([FRAME_METHOD, FRAME_HEADER, FRAME_BODY, FRAME_HEARTBEAT]),
              st.integers(0, 65535), st.binary(max_size=64)),
    max_size=6,
)


# --- parsing ----------------------------------------------------------------------------------

@settings(max_examples=200)
@given(frames_st)
def test_frames_fed_whole_come_out_in_order(frames):
    data = b"".join(frame(*f) for f in frames)
    out, fb = feed_whole(data)
    assert out == frames
    assert remaining(fb) == b""


@settings(max_examples=100)
@given(frames_st)
def test_frames_fed_byte_by_byte_come_out_the_same(frames):
    data = b"".join(frame(*f) for f in frames)
    out, fb = feed_bytewise(data)
    assert out == frames
    assert remaining(fb) == b""


partial_frames = st.one_of(
    st.binary(max_size=6),  # part of a frame header
    # a whole header, then less than the payload and its frame-end
    st.tuples(st.binary(max_size=30), st.integers(1, 10)).map(
        lambda t: struct.pack(">BHI", FRAME_BODY, 1, len(t[0]) + t[1] - 1) + t[0]),
)


@settings(max_examples=200)
@given(frames_st, partial_frames)
def test_trailing_bytes_of_an_incomplete_frame_stay_in_the_buffer(frames, partial):
    data = b"".join(frame(*f) for f in frames) + partial
    for feed in (feed_whole, feed_bytewise):
        out, fb = feed(data)
        assert out == frames
        assert remaining(fb) == partial


@pytest.mark.parametrize("tail", [b"", b"\x01", b"\x01\x00\x01\x00\x00", b"\x03\x00\x01\x00\x00\x00\x05ab"])
def test_a_short_tail_after_a_frame_is_kept_until_it_completes(tail):
    first = frame(FRAME_METHOD, 1, b"abcd")
    for feed in (feed_whole, feed_bytewise):
        out, fb = feed(first + tail)
        assert out == [(FRAME_METHOD, 1, b"abcd")]
        assert remaining(fb) == tail


def test_a_frame_needs_its_frame_end_octet_before_it_is_returned():
    data = frame(FRAME_BODY, 3, b"xyz")
    fb = FrameBuffer(0)
    fb.feed(data[:-1])
    assert fb.next_frame() is None
    fb.feed(data[-1:])
    assert drain(fb) == [(FRAME_BODY, 3, b"xyz")]


def test_next_frame_returns_offsets_into_the_buffer():
    fb = FrameBuffer(0)
    fb.feed(frame(FRAME_METHOD, 7, b"hello") + frame(FRAME_BODY, 8, b"!"))
    assert fb.next_frame() == (FRAME_METHOD, 7, 7, 12)
    assert fb.next_frame() == (FRAME_BODY, 8, 20, 21)
    assert fb.next_frame() is None


def test_compact_drops_consumed_frames_only():
    fb = FrameBuffer(0)
    fb.feed(frame(FRAME_METHOD, 1, b"a") + b"\x08\x00")
    assert drain(fb) == [(FRAME_METHOD, 1, b"a")]
    fb.compact()
    assert fb.pos == 0 and bytes(fb.buf) == b"\x08\x00"
    fb.feed(HEARTBEAT_FRAME[2:])
    assert drain(fb) == [(FRAME_HEARTBEAT, 0, b"")]


def test_a_zero_length_payload_is_a_complete_frame():
    out, _ = feed_whole(frame(FRAME_BODY, 1, b""))
    assert out == [(FRAME_BODY, 1, b"")]


# --- frame size and frame-end ------------------------------------------------------------------

@pytest.mark.parametrize("feed", [feed_whole, feed_bytewise])
def test_a_frame_of_exactly_the_limit_is_accepted(feed):
    limit = 4096
    data = frame(FRAME_BODY, 1, b"x" * (limit - FRAME_OVERHEAD))
    assert len(data) == limit
    out, _ = feed(data, limit)
    assert out == [(FRAME_BODY, 1, b"x" * (limit - FRAME_OVERHEAD))]


@pytest.mark.parametrize("size", [4096 - FRAME_OVERHEAD + 1, 2**32 - 1])
def test_an_oversize_frame_is_refused_from_its_header_alone(size):
    fb = FrameBuffer(4096)
    fb.feed(struct.pack(">BHI", FRAME_BODY, 1, size))  # not one payload octet
    with pytest.raises(FrameError):
        fb.next_frame()


def test_an_oversize_frame_is_refused_as_soon_as_its_header_arrives_byte_by_byte():
    fb = FrameBuffer(4096)
    header = struct.pack(">BHI", FRAME_METHOD, 0, 5000)
    for b in header[:-1]:
        fb.feed(bytes([b]))
        assert fb.next_frame() is None
    fb.feed(header[-1:])
    with pytest.raises(FrameError):
        fb.next_frame()


def test_a_limit_of_zero_means_no_limit():
    out, _ = feed_whole(frame(FRAME_BODY, 1, b"y" * 70000), 0)
    assert out == [(FRAME_BODY, 1, b"y" * 70000)]


@pytest.mark.parametrize("end", [0x00, 0xCD, 0xCF, 0xFF])
@pytest.mark.parametrize("feed", [feed_whole, feed_bytewise])
def test_a_wrong_frame_end_octet_is_a_frame_error(feed, end):
    data = frame(FRAME_METHOD, 1, b"abc") + frame(FRAME_METHOD, 1, b"abc", end=end)
    with pytest.raises(FrameError):
        feed(data)


def test_a_wrong_frame_end_does_not_consume_the_frame():
    fb = FrameBuffer(0)
    fb.feed(frame(FRAME_METHOD, 1, b"abc", end=0))
    with pytest.raises(FrameError):
        fb.next_frame()
    assert fb.pos == 0


# --- serialising -------------------------------------------------------------------------------

def test_the_heartbeat_frame_is_type_8_on_channel_0_with_no_payload():
    assert HEARTBEAT_FRAME == b"\x08\x00\x00\x00\x00\x00\x00\xce"
    assert HEARTBEAT_FRAME == frame(FRAME_HEARTBEAT, 0, b"")
    assert feed_whole(HEARTBEAT_FRAME)[0] == [(8, 0, b"")]


@given(st.integers(0, 65535), st.binary(max_size=100))
def test_method_frame_wraps_a_payload_in_header_and_frame_end(channel, payload):
    data = method_frame(channel, payload)
    assert data == frame(FRAME_METHOD, channel, payload)
    assert feed_whole(data)[0] == [(FRAME_METHOD, channel, payload)]


def test_header_payload_is_class_weight_size_then_properties():
    assert header_payload(60, 5, b"\x80\x00") == b"\x00\x3c\x00\x00" + b"\x00" * 7 + b"\x05" + b"\x80\x00"


def parse_content(parts: list) -> list:
    data = b"".join(bytes(p) for p in parts)
    out, fb = feed_whole(data)
    assert remaining(fb) == b""
    return out


@settings(max_examples=200)
@given(st.binary(max_size=3000), st.integers(9, 600), st.integers(1, 65535), st.binary(max_size=20))
def test_content_frames_split_the_body_into_frame_max_minus_8_slices(body, frame_max, channel, props):
    frames = parse_content(content_frames(channel, 60, props, body, frame_max))
    (htype, hch, hpayload), bodies = frames[0], frames[1:]
    assert (htype, hch) == (FRAME_HEADER, channel)
    assert hpayload == header_payload(60, len(body), props)
    assert all(t == FRAME_BODY and ch == channel for t, ch, _ in bodies)
    assert b"".join(p for _, _, p in bodies) == body
    chunk = frame_max - FRAME_OVERHEAD
    assert all(len(p) == chunk for _, _, p in bodies[:-1])
    assert all(0 < len(p) <= chunk for _, _, p in bodies)
    assert len(bodies) == -(-len(body) // chunk)
    # every frame fits frame-max as a whole frame (header + payload + frame-end)
    assert all(7 + len(p) + 1 <= frame_max for _, _, p in bodies)


def test_an_empty_body_has_a_header_frame_and_no_body_frame():
    frames = parse_content(content_frames(1, 60, b"\x00\x00", b"", 4096))
    assert frames == [(FRAME_HEADER, 1, header_payload(60, 0, b"\x00\x00"))]


def test_a_body_of_exactly_one_slice_is_one_body_frame():
    frames = parse_content(content_frames(1, 60, b"\x00\x00", b"z" * 4088, 4096))
    assert [len(p) for t, _, p in frames if t == FRAME_BODY] == [4088]
    frames = parse_content(content_frames(1, 60, b"\x00\x00", b"z" * 4089, 4096))
    assert [len(p) for t, _, p in frames if t == FRAME_BODY] == [4088, 1]


def test_frame_max_zero_sends_the_body_in_one_frame():
    frames = parse_content(content_frames(2, 60, b"\x00\x00", b"q" * 100000, 0))
    assert [len(p) for t, _, p in frames if t == FRAME_BODY] == [100000]


def test_content_frames_accept_a_bytearray_or_memoryview_body():
    for body in (bytearray(b"abcdef"), memoryview(b"abcdef")):
        frames = parse_content(content_frames(1, 60, b"\x00\x00", body, 11))
        assert b"".join(p for t, _, p in frames if t == FRAME_BODY) == b"abcdef"
