"""0-10 frames, segments and assemblies (warren.codec.amqp0_10.frames)."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings, strategies as st

from warren.codec.amqp0_10.errors import DecodeError, FramingError
from warren.codec.amqp0_10.frames import (
    FIRST_FRAME, FIRST_SEGMENT, LAST_FRAME, LAST_SEGMENT, SEGMENT_BODY, SEGMENT_COMMAND, SEGMENT_CONTROL,
    SEGMENT_HEADER, Assembler, AssemblyTooLarge, FrameReader, assembly_frames, encode_frame, transfer_frames,
)

ALL = FIRST_SEGMENT | LAST_SEGMENT | FIRST_FRAME | LAST_FRAME


def read_all(data: bytes, assembler: Assembler | None = None, chunk: int | None = None):
    reader, assembler = FrameReader(), assembler or Assembler()
    out = []
    pieces = [data] if chunk is None else [data[i:i + chunk] for i in range(0, len(data), chunk)]
    for piece in pieces:
        reader.compact()
        reader.feed(piece)
        while (frame := reader.next_frame()) is not None:
            flags, seg_type, track, channel, start, end = frame
            got = assembler.add(flags, seg_type, track, channel, bytes(reader.buf[start:end]))
            if got is not None:
                out.append(got)
    return out


def test_the_frame_header_is_12_octets_with_the_size_counting_it():
    frame = encode_frame(ALL, SEGMENT_COMMAND, 7, b"abc")
    assert frame == struct.pack(">BBHxBH4x", 0x0F, 1, 15, 1, 7) + b"abc"


@settings(max_examples=100)
@given(st.binary(max_size=300), st.binary(max_size=300), st.booleans(), st.integers(13, 200),
       st.integers(0, 65535), st.integers(1, 50))
def test_an_assembly_split_into_frames_comes_back_whole(command, body, with_header, max_frame, channel, chunk):
    segments = [(SEGMENT_COMMAND, command)] + ([(SEGMENT_HEADER, b"hdr")] if with_header else []) + \
        [(SEGMENT_BODY, body)]
    data = b"".join(bytes(p) for p in assembly_frames(channel, segments, max_frame))
    got = read_all(data, chunk=chunk)
    assert len(got) == 1 and got[0].channel == channel and got[0].track == 1
    assert got[0].segments == segments


def test_frames_respect_the_max_frame_size_and_carry_the_flags():
    parts = assembly_frames(1, [(SEGMENT_COMMAND, b"c"), (SEGMENT_BODY, b"x" * 25)], 22)
    data = b"".join(bytes(p) for p in parts)
    reader = FrameReader()
    reader.feed(data)
    frames = []
    while (f := reader.next_frame()) is not None:
        frames.append((f[0], f[1], f[5] - f[4]))
    assert frames == [
        (FIRST_SEGMENT | FIRST_FRAME | LAST_FRAME, SEGMENT_COMMAND, 1),
        (LAST_SEGMENT | FIRST_FRAME, SEGMENT_BODY, 10),
        (LAST_SEGMENT, SEGMENT_BODY, 10),
        (LAST_SEGMENT | LAST_FRAME, SEGMENT_BODY, 5),
    ]


def test_a_control_may_come_between_the_frames_of_a_command_on_the_same_channel():
    command = assembly_frames(0, [(SEGMENT_COMMAND, b"c" * 30), (SEGMENT_BODY, b"b")], 22)
    control = encode_frame(ALL, SEGMENT_CONTROL, 0, b"ctl")
    data = b"".join([bytes(command[0]), bytes(command[1]), control] + [bytes(p) for p in command[2:]])
    got = read_all(data)
    assert [a.segments for a in got] == [[(SEGMENT_CONTROL, b"ctl")],
                                         [(SEGMENT_COMMAND, b"c" * 30), (SEGMENT_BODY, b"b")]]


def test_an_empty_body_is_one_frame_of_12_octets():
    parts = assembly_frames(2, [(SEGMENT_COMMAND, b"c"), (SEGMENT_BODY, b"")])
    assert len(parts[-1]) == 12
    assert read_all(b"".join(bytes(p) for p in parts))[0].segment(SEGMENT_BODY) == b""


@pytest.mark.parametrize("frames, why", [
    ([(FIRST_FRAME | LAST_FRAME | LAST_SEGMENT, SEGMENT_COMMAND)], "does not start an assembly"),
    ([(ALL, SEGMENT_BODY)], "starts with a body"),
    ([(FIRST_SEGMENT | FIRST_FRAME | LAST_FRAME, SEGMENT_CONTROL)], "not the last segment"),
    ([(FIRST_SEGMENT | FIRST_FRAME | LAST_FRAME, SEGMENT_COMMAND),
      (FIRST_FRAME | LAST_FRAME | LAST_SEGMENT, SEGMENT_BODY),
      ], None),
    ([(FIRST_SEGMENT | FIRST_FRAME | LAST_FRAME, SEGMENT_COMMAND),
      (FIRST_FRAME | LAST_FRAME, SEGMENT_BODY), (FIRST_FRAME | LAST_FRAME | LAST_SEGMENT, SEGMENT_HEADER)],
     "header segment after a body"),
    ([(FIRST_SEGMENT | FIRST_FRAME | LAST_FRAME, SEGMENT_COMMAND), (ALL, SEGMENT_COMMAND)], "command segment after"),
    ([(FIRST_SEGMENT | FIRST_FRAME, SEGMENT_COMMAND), (FIRST_SEGMENT | FIRST_FRAME, SEGMENT_COMMAND)],
     "inside another"),
    ([(FIRST_SEGMENT | FIRST_FRAME, SEGMENT_COMMAND), (LAST_SEGMENT | LAST_FRAME, SEGMENT_COMMAND)], "other flags"),
    ([(FIRST_SEGMENT | FIRST_FRAME | LAST_FRAME, SEGMENT_COMMAND), (LAST_FRAME | LAST_SEGMENT, SEGMENT_BODY)],
     "does not start its segment"),
])
def test_segments_out_of_order_are_framing_errors(frames, why):
    data = b"".join(encode_frame(flags, seg_type, 1, b"x") for flags, seg_type in frames)
    if why is None:
        assert len(read_all(data)) == 1
        return
    with pytest.raises(FramingError, match=why):
        read_all(data)


@pytest.mark.parametrize("header, why", [
    (struct.pack(">BBHxBH4x", 0x0F, 1, 11, 1, 0), "less than its 12-octet header"),
    (struct.pack(">BBHxBH4x", 0x4F, 1, 12, 1, 0), "version"),
    (struct.pack(">BBHxBH4x", 0x0F, 4, 12, 1, 0), "segment type 4"),
    (struct.pack(">BBHxBH4x", 0x0F, 1, 12, 0, 0), "command segment on track 0"),
])
def test_malformed_frame_headers_are_framing_errors(header, why):
    with pytest.raises(FramingError, match=why):
        read_all(header)


def test_a_body_past_the_limit_is_refused_once_and_the_rest_of_its_assembly_dropped():
    assembler = Assembler(max_body=10)
    big = b"".join(bytes(p) for p in assembly_frames(1, [(SEGMENT_COMMAND, b"c"), (SEGMENT_BODY, b"x" * 40)], 20))
    after = b"".join(bytes(p) for p in assembly_frames(1, [(SEGMENT_COMMAND, b"next")]))
    reader = FrameReader()
    reader.feed(big + after)
    errors, got = [], []
    while (f := reader.next_frame()) is not None:
        try:
            a = assembler.add(f[0], f[1], f[2], f[3], bytes(reader.buf[f[4]:f[5]]))
        except AssemblyTooLarge as e:
            errors.append((e.channel, e.segment_type))
            continue
        if a is not None:
            got.append(a.segments)
    assert errors == [(1, SEGMENT_BODY)]
    assert got == [[(SEGMENT_COMMAND, b"next")]]


@settings(max_examples=400)
@given(st.binary(max_size=400))
def test_fuzz_the_frame_layer_raises_only_decode_error(data):
    try:
        read_all(data)
    except DecodeError:
        pass


@settings(max_examples=200)
@given(st.lists(st.tuples(st.integers(0, 15), st.integers(0, 3), st.integers(0, 2), st.binary(max_size=5)),
                max_size=12))
def test_fuzz_well_formed_frames_in_any_order_raise_only_framing_errors(frames):
    data = b"".join(encode_frame(flags, seg_type, ch, payload) for flags, seg_type, ch, payload in frames)
    try:
        read_all(data)
    except FramingError:
        pass


@given(channel=st.integers(0, 0xFFFF), command=st.binary(min_size=1, max_size=64),
       header=st.binary(max_size=64), body=st.none() | st.binary(max_size=40000),
       max_frame=st.sampled_from([64, 1024, 0xFFFF]))
def test_transfer_frames_are_the_octets_of_assembly_frames(channel, command, header, body, max_frame):
    segments = [(SEGMENT_COMMAND, command), (SEGMENT_HEADER, header)]
    if body is not None:
        segments.append((SEGMENT_BODY, body))
    expected = b"".join(bytes(p) for p in assembly_frames(channel, segments, max_frame))
    assert b"".join(bytes(p) for p in transfer_frames(channel, command, header, body, max_frame)) == expected
