"""Client mode (warren.protocol.amqp0_10.client) against the server state machine, in memory:
open, session attach, commands with completion and results, transfers both ways with a header
and a body of many frames, detach, close."""

from __future__ import annotations

import pytest

from tests.protocol.amqp0_10.pair import Pair
from warren.codec.amqp0_10.frames import FrameReader
from warren.protocol.amqp0_10 import events as ev
from warren.protocol.amqp0_10.client import ClientConnection, ServerVersion
from warren.protocol.amqp0_10.connection import ServerConnection
from warren.spec import amqp0_10 as spec


def test_open_attach_commands_transfer_detach_close():
    pair = Pair()
    pair.open()
    assert [type(e) for e in pair.take("server")] == [ev.LoginRequested, ev.OpenRequested]
    assert [type(e) for e in pair.take("client")] == [ev.Opened]

    pair.client.attach(1, b"s-1")
    pair.results["queue.query"] = spec.QueueQueueQueryResult(queue="q", message_count=3, subscriber_count=0)
    declare = pair.client.send_command(1, spec.QueueDeclare(queue="q", durable=True))
    query = pair.client.send_command(1, spec.QueueQuery(queue="q"), sync=True)
    body = bytes(range(256)) * 1000  # 256,000 octets: five frames of at most 65535
    transfer = pair.client.send_transfer(1, "", body, spec.MessageDeliveryProperties(routing_key="q", delivery_mode=2),
                                         spec.MessageMessageProperties(content_type="application/octet-stream",
                                                                       application_headers={"k": "v"}))
    pair.pump()
    assert (declare, query, transfer) == (0, 1, 2)
    [attached] = pair.take("server", ev.SessionAttached)
    assert attached.name == b"s-1"
    commands = pair.take("server", ev.Command)
    assert [(c.name, c.command_id, c.sync) for c in commands] == [
        ("queue.declare", 0, False), ("queue.query", 1, True), ("message.transfer", 2, False)]
    assert commands[0].command.durable is True
    xfr = commands[2]
    assert xfr.body == body
    assert xfr.header_struct(spec.MessageDeliveryProperties).routing_key == "q"
    assert xfr.header_struct(spec.MessageMessageProperties).application_headers == {"k": "v"}
    # the client got the result before the completion of the query, and all three completed
    client_events = pair.take("client")
    assert [type(e) for e in client_events] == [ev.SessionAttached, ev.ExecutionResult, ev.Completed]
    assert client_events[1].command_id == 1 and client_events[1].value.message_count == 3
    assert client_events[2].ids == [0, 1, 2]

    # the server delivers a message of many frames; the client completes it, the server hears it
    out = pair.server.send_transfer(1, "sub-1", body, spec.MessageDeliveryProperties(routing_key="q"),
                                    spec.MessageMessageProperties(message_id=None, content_type="text/plain"))
    assert out == 1  # 0 was the execution.result
    pair.pump()
    [delivery] = pair.take("client", ev.Command)
    assert delivery.name == "message.transfer" and delivery.command.destination == "sub-1"
    assert delivery.body == body and delivery.command_id == 1
    pair.client.complete(1, delivery.command_id)
    pair.pump()
    # the execution.result (our command 0) and the transfer (1), completed by the client
    assert [i for e in pair.take("server", ev.Completed) for i in e.ids] == [0, 1]

    pair.client.detach(1)
    pair.pump()
    [gone] = pair.take("server", ev.SessionDetached)
    assert (gone.channel, gone.name, gone.by_peer) == (1, b"s-1", True)
    [ours] = pair.take("client", ev.SessionDetached)
    assert ours.by_peer is False and ours.code == spec.SessionDetachCode.NORMAL

    pair.client.close()
    pair.pump()
    assert pair.server.is_closed and pair.client.closed
    [closed] = pair.take("server", ev.ConnectionClosed)
    assert closed.by_peer and closed.code == 200


def test_frames_of_the_server_respect_the_max_frame_size_the_client_asked():
    pair = Pair(client=ClientConnection(max_frame_size=4096))
    pair.open()
    pair.client.attach(0, b"s")
    pair.pump()
    before = len(pair.wire_to_client)
    pair.server.send_transfer(0, "d", b"x" * 20000)
    pair.pump()
    reader = FrameReader()
    reader.feed(pair.wire_to_client[before:])
    sizes = []
    while (f := reader.next_frame()) is not None:
        sizes.append(f[5] - f[4] + 12)
    assert max(sizes) == 4096 and len(sizes) >= 6
    [delivery] = pair.take("client", ev.Command)
    assert delivery.body == b"x" * 20000


def test_sessions_on_several_channels_number_their_commands_apart():
    pair = Pair()
    pair.open()
    pair.client.attach(0, b"a")  # qpid.messaging uses channel 0 for its first session
    pair.client.attach(5, b"b")
    pair.client.send_command(0, spec.ExchangeDeclare(exchange="x", type="topic"))
    pair.client.send_command(5, spec.ExchangeDeclare(exchange="y", type="topic"))
    pair.client.send_command(0, spec.ExchangeDelete(exchange="x"))
    pair.pump()
    cmds = pair.take("server", ev.Command)
    assert [(c.channel, c.command_id, c.name) for c in cmds] == [
        (0, 0, "exchange.declare"), (5, 0, "exchange.declare"), (0, 1, "exchange.delete")]


def test_an_exception_reaches_the_client_and_the_session_is_detached():
    pair = Pair(auto_complete=False)
    pair.open()
    pair.client.attach(1, b"s")
    pair.client.send_command(1, spec.QueueDeclare(queue="missing", passive=True), sync=True)
    pair.client.send_command(1, spec.QueueDelete(queue="other"))
    pair.pump()
    first, second = pair.take("server", ev.Command)
    pair.server.send_exception(1, first.command_id, spec.ExecutionErrorCode.NOT_FOUND, "no queue 'missing'")
    pair.pump()
    [exc] = pair.take("client", ev.ExecutionException)
    assert exc.exception.error_code == 404 and exc.exception.command_id == 0
    assert (exc.exception.class_code, exc.exception.command_code) == (8, 1)  # queue.declare
    [detached] = pair.take("server", ev.SessionDetached)
    assert detached.by_peer is False
    assert 1 not in pair.server.sessions and 1 not in pair.client.sessions
    pair.server.complete(1, second.command_id)  # too late: the session is gone, nothing breaks
    assert pair.server.data_to_send() == []


def test_a_server_speaking_another_version_is_reported():
    client = ClientConnection()
    with pytest.raises(ServerVersion):
        client.receive_data(b"AMQP\x00\x00\x09\x01")


def test_amqplain_and_anonymous_logins_carry_their_mechanism():
    server = ServerConnection(allow_anonymous=True)
    pair = Pair(server=server, client=ClientConnection("u", "p", mechanism="AMQPLAIN"))
    pair.open()
    login = pair.take("server", ev.LoginRequested)[0]
    assert login.mechanism == "AMQPLAIN" and b"LOGIN" in login.response
    pair = Pair(server=ServerConnection(allow_anonymous=True), client=ClientConnection(mechanism="ANONYMOUS"))
    pair.open()
    assert pair.take("server", ev.LoginRequested)[0].mechanism == "ANONYMOUS"


def test_the_vhost_named_by_the_client_is_asked_for():
    pair = Pair(client=ClientConnection(virtual_host="prod"))
    pair.open()
    assert pair.take("server", ev.OpenRequested)[0].virtual_host == "prod"
