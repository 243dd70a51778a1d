"""The 0-10 server state machine (warren.protocol.amqp0_10.connection): handshake, negotiation,
completion and execution.sync, and every fault of the peer answered as 0-10 says (exception
and detach, detached not-attached, connection.close framing-error), with the other sessions
still served. A hypothesis fuzz feeds it garbage after a valid open: it never raises."""

from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from tests.protocol.amqp0_10.pair import Pair, octets
from warren.codec.amqp0_10.frames import (
    FIRST_FRAME, FIRST_SEGMENT, LAST_FRAME, LAST_SEGMENT, SEGMENT_BODY, SEGMENT_COMMAND, SEGMENT_CONTROL,
    SEGMENT_HEADER, Assembler, FrameReader, assembly_frames, encode_frame,
)
from warren.codec.amqp0_10.sets import SequenceSet
from warren.codec.amqp0_10.types import decode_command, decode_control, encode_command, encode_control
from warren.protocol.amqp0_10 import events as ev
from warren.protocol.amqp0_10.client import ClientConnection
from warren.protocol.amqp0_10.connection import ServerConnection
from warren.protocol.amqp0_10.session import error_code_for
from warren.spec import amqp0_10 as spec

ALL = FIRST_SEGMENT | LAST_SEGMENT | FIRST_FRAME | LAST_FRAME
E = spec.ExecutionErrorCode


def decoded(data: bytes) -> list:
    """Controls and commands in octets the server sent (its header skipped when present)."""
    if data.startswith(b"AMQP"):
        data = data[8:]
    reader, assembler = FrameReader(), Assembler()
    reader.feed(data)
    out = []
    while (f := reader.next_frame()) is not None:
        a = assembler.add(f[0], f[1], f[2], f[3], bytes(reader.buf[f[4]:f[5]]))
        if a is not None:
            payload = a.segments[0][1]
            out.append((a.channel, decode_control(payload) if a.track == 0 else decode_command(payload)[0]))
    return out


def opened(**server_options) -> Pair:
    pair = Pair(server=ServerConnection({"product": "warren"}, **server_options), auto_complete=False)
    pair.open()
    pair.take("server")
    pair.take("client")
    return pair


def attached(channel: int = 1, **server_options) -> Pair:
    pair = opened(**server_options)
    pair.client.attach(channel, b"s%d" % channel)
    pair.pump()
    pair.take("server")
    pair.take("client")
    return pair


def sent_by_server(pair: Pair, start: int) -> list:
    return decoded(pair.wire_to_client[start:])


# --- handshake ---------------------------------------------------------------------------------

def test_the_server_sends_its_header_then_connection_start():
    conn = ServerConnection({"product": "warren"})
    data = octets(conn.data_to_send())
    assert data[:8] == b"AMQP\x01\x01\x00\x0a"
    [(channel, start)] = decoded(data)
    assert channel == 0 and list(start.mechanisms) == ["PLAIN", "AMQPLAIN"] and list(start.locales) == ["en_US"]
    assert start.server_properties == {"product": "warren"}


def test_anonymous_is_offered_only_when_allowed_and_refused_otherwise():
    assert "ANONYMOUS" in decoded(octets(ServerConnection(allow_anonymous=True).data_to_send()))[0][1].mechanisms
    pair = Pair(client=ClientConnection(mechanism="ANONYMOUS"))
    pair.pump()
    [err] = pair.take("server", ev.PeerError)
    assert err.answer == "close" and err.code == 320 and "ANONYMOUS" in err.text
    assert not pair.take("server", ev.LoginRequested)
    assert pair.server.is_closed and pair.client.closed


def test_a_refused_login_closes_with_320():
    pair = Pair()
    pair.on_server_event = lambda e: pair.server.refuse_login() if isinstance(e, ev.LoginRequested) else None
    pair.pump()
    [closed] = pair.take("client", ev.ConnectionClosed)
    assert closed.code == 320 and closed.text == "Authentication failed" and closed.by_peer


def test_tune_offers_our_limits_and_takes_the_lower_of_both():
    pair = Pair(server=ServerConnection(channel_max=100), client=ClientConnection(max_frame_size=8192, heartbeat=30))
    pair.open()
    tune = next(c for _, c in decoded(pair.wire_to_client) if type(c) is spec.ConnectionTune)
    assert (tune.channel_max, tune.max_frame_size) == (100, 65535)
    assert (pair.server.channel_max, pair.server.frame_max, pair.server.heartbeat) == (100, 8192, 30)


def test_a_session_control_before_open_closes_the_connection():
    pair = Pair()
    pair.on_server_event = lambda e: pair.server.accept_login() if isinstance(e, ev.LoginRequested) else None
    pair.pump()  # no open-ok: the client sent open, the server holds it
    pair.client.send_raw(encode_frame(ALL, SEGMENT_CONTROL, 1, encode_control(spec.SessionAttach(name=b"x"))))
    pair.pump()
    [err] = pair.take("server", ev.PeerError)
    assert err.answer == "close" and err.code == 501 and "before the connection is open" in err.text


def test_a_connection_control_off_channel_0_closes_the_connection():
    pair = opened()
    pair.client.send_raw(encode_frame(ALL, SEGMENT_CONTROL, 3, encode_control(spec.ConnectionHeartbeat())))
    pair.pump()
    [err] = pair.take("server", ev.PeerError)
    assert err.code == 501 and "channel 3" in err.text
    assert pair.server.is_closed  # the client answered with close-ok


def test_a_session_above_channel_max_closes_the_connection():
    pair = opened(channel_max=10)
    pair.client.attach(11, b"s")
    pair.pump()
    [err] = pair.take("server", ev.PeerError)
    assert err.code == 501 and "channel-max 10" in err.text


def test_heartbeats_pass_silently():
    pair = opened()
    pair.client.send_heartbeat()
    pair.pump()
    assert pair.take("server") == []


# --- completion ---------------------------------------------------------------------------------

def test_completion_is_reported_cumulatively_and_execution_sync_waits_for_earlier_commands():
    pair = attached()
    for q in ("a", "b", "c"):
        pair.client.send_command(1, spec.QueueDeclare(queue=q))
    pair.client.send_command(1, spec.ExecutionSync(), sync=True)
    pair.pump()
    a, b, c = pair.take("server", ev.Command)
    start = len(pair.wire_to_client)
    pair.server.complete(1, c.command_id)  # out of order: a durable write may finish first
    pair.server.complete(1, a.command_id)
    pair.pump()
    completed = [ctl.commands for _, ctl in sent_by_server(pair, start)]
    assert completed == [SequenceSet([(0, 0), (2, 2)])]  # the sync (3) still waits for 1
    start = len(pair.wire_to_client)
    pair.server.complete(1, b.command_id)
    pair.pump()
    assert [ctl.commands for _, ctl in sent_by_server(pair, start)] == [SequenceSet([(0, 3)])]
    assert [i for e in pair.take("client", ev.Completed) for i in e.ids] == [0, 2, 1, 3]


def test_known_completed_shrinks_what_is_reported_and_flush_answers_per_flag():
    pair = attached()
    pair.client.send_command(1, spec.TxSelect())
    pair.client.send_command(1, spec.TxCommit())
    pair.pump()
    for c in pair.take("server", ev.Command):
        pair.server.complete(1, c.command_id)
    pair.pump()
    pair.client._send_control(1, spec.SessionKnownCompleted(commands=SequenceSet([(0, 0)])))
    pair.client.flush(1, expected=True, confirmed=True, completed=True)
    start = len(pair.wire_to_client)
    pair.pump()
    answers = [ctl for _, ctl in sent_by_server(pair, start)]
    assert [type(a).__name__ for a in answers] == ["SessionExpected", "SessionConfirmed", "SessionCompleted"]
    assert answers[0].commands == SequenceSet([(2, 2)])  # the next id we expect
    assert answers[2].commands == SequenceSet([(1, 1)])  # 0 is known-completed


def test_timely_reply_is_answered_with_known_completed_and_request_timeout_with_timeout_0():
    pair = attached()
    pair.server.send_transfer(1, "d", b"x")
    pair.pump()
    start = len(pair.wire_to_client)
    pair.client._send_control(1, spec.SessionCompleted(commands=SequenceSet([(0, 0)]), timely_reply=True))
    pair.client._send_control(1, spec.SessionRequestTimeout(timeout=60))
    pair.pump()
    answers = [ctl for _, ctl in sent_by_server(pair, start)]
    assert [type(a).__name__ for a in answers] == ["SessionKnownCompleted", "SessionTimeout"]
    assert answers[1].timeout == 0


def test_a_gap_skips_commands_that_will_never_come():
    pair = attached()
    pair.client._send_control(1, spec.SessionGap(commands=SequenceSet([(0, 1)])))
    pair.client.sessions[1].out_next = 2
    pair.client.send_command(1, spec.TxSelect())
    pair.pump()
    [cmd] = pair.take("server", ev.Command)
    assert cmd.command_id == 2


def test_command_ids_wrap_past_2_to_the_32():
    pair = attached()
    pair.client._send_control(1, spec.SessionCommandPoint(command_id=0xFFFFFFFF, command_offset=0))
    pair.client.sessions[1].out_next = 0xFFFFFFFF
    pair.client.send_command(1, spec.TxSelect())
    pair.client.send_command(1, spec.TxCommit())
    pair.pump()
    a, b = pair.take("server", ev.Command)
    assert (a.command_id, b.command_id) == (0xFFFFFFFF, 0)
    start = len(pair.wire_to_client)
    pair.server.complete(1, a.command_id)
    pair.server.complete(1, b.command_id)
    pair.pump()
    assert [ctl.commands for _, ctl in sent_by_server(pair, start)] == [SequenceSet([(0xFFFFFFFF, 0)])]


# --- faults -------------------------------------------------------------------------------------

def test_an_unknown_command_gets_not_implemented_then_detach_and_the_other_session_goes_on():
    pair = attached(1)
    pair.client.attach(2, b"other")
    pair.pump()
    pair.take("server")
    start = len(pair.wire_to_client)
    bogus = b"\x04\x7f\x01\x00\x00\x00"
    pair.client.send_raw(encode_frame(ALL, SEGMENT_COMMAND, 1, bogus), command_on=1)
    pair.client.send_command(1, spec.TxSelect())  # pipelined behind it: dropped
    pair.client.send_command(2, spec.TxSelect())
    pair.pump()
    [err] = pair.take("server", ev.PeerError)
    assert err.answer == "exception" and err.code == E.NOT_IMPLEMENTED and "0x04:0x7f" in err.text
    sent = sent_by_server(pair, start)
    exc = next(c for ch, c in sent if type(c) is spec.ExecutionException)
    assert (exc.error_code, exc.command_id, exc.class_code, exc.command_code) == (540, 0, 4, 0x7F)
    assert any(type(c) is spec.SessionDetach and ch == 1 for ch, c in sent)
    cmds = pair.take("server", ev.Command)
    assert [(c.channel, c.name) for c in cmds] == [(2, "tx.select")]
    [gone] = pair.take("server", ev.SessionDetached)
    assert gone.channel == 1 and not gone.by_peer  # the client answered our detach


def test_a_command_whose_fields_do_not_decode_gets_illegal_argument():
    pair = attached()
    bad = encode_command(spec.QueueDeclare(queue="q"))[:-1]  # the str8 cut short
    pair.client.send_raw(encode_frame(ALL, SEGMENT_COMMAND, 1, bad), command_on=1)
    pair.pump()
    [err] = pair.take("server", ev.PeerError)
    assert err.code == E.ILLEGAL_ARGUMENT and err.answer == "exception"
    [exc] = pair.take("client", ev.ExecutionException)
    assert (exc.exception.class_code, exc.exception.command_code) == (8, 1)


def test_a_body_on_a_command_without_one_is_command_invalid():
    pair = attached()
    frames = assembly_frames(1, [(SEGMENT_COMMAND, encode_command(spec.TxSelect())), (SEGMENT_BODY, b"x")])
    pair.client.send_raw(octets(frames), command_on=1)
    pair.pump()
    [err] = pair.take("server", ev.PeerError)
    assert err.code == E.COMMAND_INVALID and "tx.select takes no body" in err.text


def test_a_malformed_header_segment_is_illegal_argument():
    pair = attached()
    frames = assembly_frames(1, [(SEGMENT_COMMAND, encode_command(spec.MessageTransfer(destination=""))),
                                 (SEGMENT_HEADER, b"\x00\x00\x00\x09\x04\x01"), (SEGMENT_BODY, b"x")])
    pair.client.send_raw(octets(frames), command_on=1)
    pair.pump()
    [err] = pair.take("server", ev.PeerError)
    assert err.code == E.ILLEGAL_ARGUMENT and "header" in err.text


def test_commands_on_a_channel_without_a_session_get_one_detached_not_attached():
    pair = opened()
    start = len(pair.wire_to_client)
    for _ in range(3):
        pair.client.send_raw(encode_frame(ALL, SEGMENT_COMMAND, 4, encode_command(spec.TxSelect())))
    pair.pump()
    [err] = pair.take("server", ev.PeerError)
    assert err.answer == "detached" and err.code == spec.SessionDetachCode.NOT_ATTACHED
    assert [(ch, type(c).__name__, c.code) for ch, c in sent_by_server(pair, start)] == [
        (4, "SessionDetached", spec.SessionDetachCode.NOT_ATTACHED)]


def test_segments_out_of_order_close_the_connection_with_framing_error():
    pair = attached()
    pair.client.send_raw(encode_frame(ALL, SEGMENT_BODY, 1, b"body first"))
    pair.pump()
    [err] = pair.take("server", ev.PeerError)
    assert err.answer == "close" and err.code == 501 and "body" in err.text
    assert not pair.server.reads_input
    [closed] = pair.take("client", ev.ConnectionClosed)
    assert closed.code == 501


def test_a_malformed_frame_header_closes_the_connection():
    pair = attached()
    pair.client.send_raw(struct.pack(">BBHxBH4x", 0x0F, 1, 5, 1, 1))
    pair.pump()
    [err] = pair.take("server", ev.PeerError)
    assert err.code == 501 and "less than its 12-octet header" in err.text


def test_an_unknown_control_closes_the_connection():
    pair = attached()
    pair.client.send_raw(encode_frame(ALL, SEGMENT_CONTROL, 1, b"\x02\x44\x00\x00"))
    pair.pump()
    [err] = pair.take("server", ev.PeerError)
    assert err.code == 501 and "unknown control" in err.text


def test_a_message_past_the_size_limit_gets_resource_limit_exceeded_and_the_connection_lives():
    pair = attached(max_message_size=1000)
    pair.client.attach(2, b"other")
    pair.client.send_transfer(1, "", b"x" * 5000)
    pair.client.send_command(2, spec.TxSelect())
    pair.pump()
    [err] = pair.take("server", ev.PeerError)
    assert err.code == E.RESOURCE_LIMIT_EXCEEDED and err.channel == 1
    assert [c.name for c in pair.take("server", ev.Command)] == ["tx.select"]
    assert pair.server.is_open


def test_attaching_a_busy_name_or_a_busy_channel_is_refused_and_force_moves_the_session():
    pair = attached(1)
    start = len(pair.wire_to_client)
    pair.client._send_control(2, spec.SessionAttach(name=b"s1"))  # s1 is on channel 1
    pair.client._send_control(1, spec.SessionAttach(name=b"new"))  # channel 1 holds s1
    pair.pump()
    codes = [(ch, c.code) for ch, c in sent_by_server(pair, start) if type(c) is spec.SessionDetached]
    assert codes == [(2, spec.SessionDetachCode.SESSION_BUSY), (1, spec.SessionDetachCode.TRANSPORT_BUSY)]
    pair.client.attach(3, b"s1", force=True)
    pair.pump()
    [moved] = pair.take("server", ev.SessionDetached)
    assert moved.channel == 1
    assert pair.take("server", ev.SessionAttached)[0].channel == 3


def test_input_after_our_connection_close_is_dropped_until_close_ok():
    pair = attached()
    pair.server.close_connection(320, "shutting down")
    pair.client.send_command(1, spec.TxSelect())  # crosses our close
    pair.pump()
    assert pair.take("server", ev.Command) == []
    [closed] = pair.take("server", ev.ConnectionClosed)
    assert not closed.by_peer and pair.server.is_closed


def test_error_codes_of_the_broker_map_onto_0_10():
    assert error_code_for(404) == E.NOT_FOUND and error_code_for(406) == E.PRECONDITION_FAILED
    assert error_code_for(403) == E.UNAUTHORIZED_ACCESS and error_code_for(540) == E.NOT_IMPLEMENTED
    assert error_code_for(311) == E.RESOURCE_LIMIT_EXCEEDED and error_code_for(502) == E.ILLEGAL_ARGUMENT
    assert error_code_for(999) == E.INTERNAL_ERROR


# --- fuzz ---------------------------------------------------------------------------------------

@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.lists(st.one_of(
    st.binary(max_size=40),
    st.builds(lambda f, t, ch, p: encode_frame(f, t, ch, p), st.integers(0, 15), st.integers(0, 3),
              st.integers(0, 3), st.binary(max_size=30)),
    st.builds(lambda ch, p: encode_frame(ALL, SEGMENT_COMMAND, ch, p), st.integers(0, 3),
              st.sampled_from([encode_command(spec.QueueDeclare(queue="q")), b"\x04\x01\x01\x00\xff\xff",
                               encode_command(spec.ExecutionSync(), True), b"\x03\x02\x01\x00\x03\x00"])),
    st.builds(lambda ch, p: encode_frame(ALL, SEGMENT_CONTROL, ch, p), st.integers(0, 3),
              st.sampled_from([encode_control(spec.SessionAttach(name=b"z")), encode_control(spec.SessionDetach()),
                               encode_control(spec.SessionFlush(expected=True, completed=True)),
                               encode_control(spec.SessionGap(commands=SequenceSet([(0, 0xFFFFFFFF)]))),
                               encode_control(spec.SessionCompleted(commands=SequenceSet([(0, 0xFFFFFFFF)]))),
                               encode_control(spec.ConnectionClose(reply_code=200))])),
), max_size=10))
def test_fuzz_the_server_never_raises_whatever_follows_a_valid_open(chunks):
    pair = attached(1)
    for chunk in chunks:
        pair.server.receive_data(chunk)
        while (e := pair.server.next_event()) is not None:
            if isinstance(e, ev.Command):
                pair.server.complete(e.channel, e.command_id)
        pair.server.data_to_send()


@pytest.mark.parametrize("headers", ["nested 101 deep", "unknown type code"])
def test_application_headers_nested_too_deep_or_of_an_unknown_type_are_the_clients_fault(headers):
    """0-10's twin of a 0-9-1 publish with poisoned headers (issue 29): illegal-argument from
    warren/codec/refusals.py's table, never internal-error."""
    from warren.codec.amqp0_10.types import encode_header
    deep: dict = {}
    for _ in range(101):
        deep = {"a": deep}
    header = encode_header([spec.MessageMessageProperties(application_headers=deep if headers.startswith("nested")
                                                          else {"k": 1})])
    if headers == "unknown type code":
        at = header.rindex(b"\x01k") + 2
        header = header[:at] + b"\xfe" + header[at + 1:]  # the value's type code: none of 0-10's
    pair = attached()
    frames = assembly_frames(1, [(SEGMENT_COMMAND, encode_command(spec.MessageTransfer(destination=""))),
                                 (SEGMENT_HEADER, header), (SEGMENT_BODY, b"x")])
    pair.client.send_raw(octets(frames), command_on=1)
    pair.pump()
    [err] = pair.take("server", ev.PeerError)
    assert err.code == E.ILLEGAL_ARGUMENT != E.INTERNAL_ERROR and err.answer == "exception"
