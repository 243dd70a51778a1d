"""What Qpid's own Python client, qpid.messaging (qpid-python 1.36, Python 2.7), sends, and the
server state machine serving it.

``qpid_messaging_session.bin`` holds every octet qpid.messaging sent in one session against
``ScriptedServer`` (scripted.py, ``QPID_SCRIPT``): connect, sender to ``warren-q; {create:
always}``, a durable message with a subject, a property and a correlation id, a receiver, fetch,
acknowledge, close. It was captured on this machine (``capture_fixture``) and is decoded here
without Python 2.7; the live test runs the same script against the state machine over a socket
and skips, with the reason, where no Python 2.7 / qpid-python can be had (tests/qpid_python.py).
"""

from __future__ import annotations

from pathlib import Path

from tests.protocol.amqp0_10.scripted import QPID_SCRIPT, ScriptedBroker, ScriptedServer
from tests.qpid_python import require_qpid_python
from warren.codec.amqp0_10.frames import Assembler, FrameReader
from warren.codec.amqp0_10.types import decode_command, decode_control
from warren.protocol.amqp0_10 import events as ev
from warren.protocol.amqp0_10.connection import ServerConnection
from warren.spec import amqp0_10 as spec

FIXTURE = (Path(__file__).parent / "qpid_messaging_session.bin").read_bytes()


def assemblies(data: bytes):
    reader, assembler = FrameReader(), Assembler()
    reader.feed(data)
    out = []
    while (f := reader.next_frame()) is not None:
        got = assembler.add(f[0], f[1], f[2], f[3], bytes(reader.buf[f[4]:f[5]]))
        if got is not None:
            out.append(got)
    return out


def test_the_client_sends_the_0_10_header_then_what_inventory_12_1_says():
    assert FIXTURE[:8] == b"AMQP\x01\x01\x00\x0a"
    asms = assemblies(FIXTURE[8:])
    controls = [decode_control(a.segments[0][1]) for a in asms if a.track == 0]
    start_ok, tune_ok, open_, attach, point = controls[:5]
    assert start_ok.mechanism == "PLAIN" and start_ok.response == b"\0guest\0guest"
    assert start_ok.locale is None  # omitted although required (§12.1 step 3)
    assert start_ok.client_properties["product"] == "qpid python client"
    assert tune_ok.max_frame_size is None and tune_ok.channel_max == 2047  # echoes our channel-max
    assert open_.virtual_host is None  # connection.open without fields (§12.1 step 5)
    assert type(attach) is spec.SessionAttach and attach.name.endswith(b":0")
    assert (point.command_id, point.command_offset) == (0, 0)
    assert [type(c).__name__ for c in controls[5:]] == [
        "SessionCompleted", "SessionDetach", "ConnectionClose"]  # never known-completed
    commands = [decode_command(a.segments[0][1]) for a in asms if a.track == 1]
    assert [(c.NAME, sync) for c, sync in commands] == [
        ("exchange.query", True), ("queue.query", True), ("queue.declare", True), ("message.transfer", True),
        ("message.subscribe", False), ("message.set-flow-mode", True), ("message.flow", False),
        ("message.flow", False), ("execution.sync", True), ("message.accept", True), ("message.cancel", True)]
    transfer = commands[3][0]
    assert transfer.accept_mode is None and transfer.acquire_mode is None  # omitted (§12.1 step 10)
    flows = [c for c, _ in commands if c.NAME == "message.flow"]
    assert [(f.unit, f.value) for f in flows] == [(1, 0xFFFFFFFF), (0, 1)]


def test_the_server_state_machine_serves_the_captured_session():
    conn = ServerConnection({"product": "warren"})
    broker = ScriptedBroker()
    conn.receive_data(FIXTURE[8:])
    while (e := conn.next_event()) is not None:
        broker.handle(conn, e)
    kinds = [type(e).__name__ for e in broker.log]
    assert kinds[:3] == ["LoginRequested", "OpenRequested", "SessionAttached"]
    assert kinds[-2:] == ["SessionDetached", "ConnectionClosed"]
    assert not [e for e in broker.log if isinstance(e, ev.PeerError)]
    assert broker.log[1].virtual_host == "/"  # the default: the client named none
    transfer = next(e for e in broker.log if isinstance(e, ev.Command) and e.name == "message.transfer")
    dp = transfer.header_struct(spec.MessageDeliveryProperties)
    mp = transfer.header_struct(spec.MessageMessageProperties)
    assert transfer.body == b"hello" and dp.routing_key == "warren-q"
    assert dp.delivery_mode == spec.MessageDeliveryMode.PERSISTENT and dp.priority is None
    assert mp.correlation_id == b"c-1" and mp.content_type == "text/plain"
    assert mp.application_headers == {"k": 1, "qpid.subject": "greeting"}
    accept = next(e for e in broker.log if isinstance(e, ev.Command) and e.name == "message.accept")
    assert list(accept.command.transfers) == [2]  # our ids: two results, then the transfer
    assert conn.is_closed


def test_qpid_messaging_sends_and_receives_through_the_state_machine():
    qp = require_qpid_python()
    server = ScriptedServer()
    try:
        result = qp.run(QPID_SCRIPT, timeout=60, args=[str(server.port)])
    finally:
        server.close()
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "u'hello' u'greeting' 1 'c-1' True"
    assert not server.errors
    log = server.brokers[0].log
    assert not [e for e in log if isinstance(e, ev.PeerError)]
    assert isinstance(log[-1], ev.ConnectionClosed) and log[-1].by_peer
