"""The client mode of the sans-IO codec (warren.protocol.client).

First against the server side in memory (the codec is symmetric: client bytes feed a
ServerConnection and back), then over a real TCP socket to a broker from the `broker` fixture.
"""

from __future__ import annotations

import pytest

from warren.access.login import parse_response
from warren.errors import ChannelError, NotImplemented_
from warren.protocol.amqp0_9_1.connection import ServerConnection
from warren.protocol.client import ClientConnection, Closed, Heartbeat, Opened
from warren.protocol.dialects import DIALECTS, get_dialect
from warren.protocol.events import ChannelOpened, Content, ConnectionClosed, Method
from warren.spec import amqp0_8 as x08
from warren.spec import amqp0_9_1 as spec

from tests.e2e.clientmode import SocketClient, properties_of


class Pair:
    """A ClientConnection wired to a ServerConnection, with the broker's decisions made here."""

    def __init__(self, key: str, **client_kw) -> None:
        d = get_dialect(key)
        self.client = ClientConnection(d, **client_kw)
        self.server = ServerConnection({"product": "warren", "capabilities": {"basic.nack": True}}, dialect=d,
                                       frame_max=4096 * 4, channel_max=64)
        self.header = self.client.data_to_send()[:8]
        self.server_events: list = []
        self.client_events: list = []

    def pump(self) -> None:
        for _ in range(20):
            moved = False
            data = b"".join(bytes(p) for p in self.server.data_to_send())
            if data:
                moved = True
                self.client.receive_data(data)
                while (e := self.client.next_event()) is not None:
                    self.client_events.append(e)
            out = self.client.data_to_send()
            if out:
                moved = True
                self.server.receive_data(out)
                while (e := self.server.next_event()) is not None:
                    self.server_events.append(e)
                    if isinstance(e, Method) and isinstance(e.method, spec.ConnectionStartOk):
                        self.login = parse_response(e.method.mechanism, e.method.response)
                        self.server.accept_login()
                    elif isinstance(e, Method) and isinstance(e.method, spec.ConnectionOpen):
                        self.server.accept_open()
            if not moved:
                return

    def take(self, side: str) -> list:
        events = getattr(self, side + "_events")
        out = list(events)
        events.clear()
        return out


@pytest.mark.parametrize("key", DIALECTS)
def test_client_and_server_shake_hands_in_every_dialect(key):
    p = Pair(key)
    assert p.header == get_dialect(key).header
    p.pump()
    events = p.take("client")
    assert isinstance(events[0].method, spec.ConnectionStart)
    assert isinstance(events[1].method, spec.ConnectionTune)
    assert isinstance(events[2], Opened)
    assert p.client.is_open and p.server.is_open
    assert p.login == ("guest", "guest")
    assert (p.client.frame_max, p.client.channel_max) == (4096 * 4, 64)


@pytest.mark.parametrize("key", DIALECTS)
def test_publish_and_deliver_cross_the_pair_as_0_9_1_events(key):
    p = Pair(key)
    p.pump()
    p.client.open_channel(1)
    p.pump()
    assert isinstance(p.take("server")[-1], ChannelOpened) and 1 in p.client.channels
    assert isinstance(p.take("client")[-1].method, spec.ChannelOpenOk)
    props = spec.BasicProperties(content_type="text/plain", headers={"a": 1})
    body = b"x" * 20000  # several body frames at frame-max 16 KiB
    p.client.send_content(1, spec.BasicPublish(0, "ex", "rk"), props, body)
    p.pump()
    [content] = p.take("server")
    assert isinstance(content, Content) and type(content.method) is spec.BasicPublish
    assert content.body == body and spec.BasicProperties.decode(content.properties, 0)[0] == props
    p.server.send_deliver(1, b"\x03tag", 7, True, b"\x02ex", b"\x02rk", content.properties, body)
    p.pump()
    [deliver] = p.take("client")
    assert isinstance(deliver, Content) and deliver.method == spec.BasicDeliver("tag", 7, True, "ex", "rk")
    assert deliver.body == body and properties_of(deliver) == props


def test_server_close_is_answered_with_close_ok_in_0_8_form():
    p = Pair("0-8")
    p.pump()
    p.take("client")
    p.server.close_connection(320, "CONNECTION_FORCED - bye", 0, 0)
    p.pump()
    [closed] = p.take("client")
    assert isinstance(closed, Closed) and closed.by_server and closed.reply_code == 320
    assert p.client.trace[-1] == (0, (10, 60))
    assert isinstance(p.take("server")[-1], ConnectionClosed) and p.server.is_closed


def test_channel_close_from_the_server_is_answered():
    p = Pair("0-9")
    p.pump()
    p.client.open_channel(2)
    p.pump()
    p.server.close_channel(2, ChannelError("x"))
    p.pump()
    assert 2 not in p.client.channels and 2 not in p.server.channels


def test_amqplain_and_a_client_chosen_heartbeat():
    p = Pair("0-8", mechanism="AMQPLAIN", username="u", password="pw", heartbeat=7, frame_max=8192)
    p.pump()
    assert p.login == ("u", "pw")
    assert (p.server.heartbeat, p.server.frame_max) == (7, 8192)
    p.server.send_heartbeat()
    p.pump()
    assert isinstance(p.take("client")[-1], Heartbeat)


def test_client_refuses_methods_the_dialect_does_not_have_and_closed_channels():
    p = Pair("0-8")
    p.pump()
    with pytest.raises(NotImplemented_, match="confirm.select"):
        p.client.send_method(0, spec.ConfirmSelect())
    with pytest.raises(ChannelError):
        p.client.send_method(5, spec.BasicQos())


def test_client_sends_native_methods_of_its_dialect_as_they_are():
    p = Pair("0-8")
    p.pump()
    p.client.open_channel(1)
    p.pump()
    p.take("server")
    p.client.send_method(1, x08.BasicRecover(True))
    p.pump()
    [ev] = p.take("server")
    assert type(ev.method) is spec.BasicRecoverAsync


# --- over TCP ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("key", ["0-9-1", "0-8"])
def test_client_mode_over_a_socket_declares_publishes_and_gets(broker, uid, key):
    with SocketClient(broker, key) as c:
        assert c.conn.is_open
        c.channel(1)
        q = f"cm-{key}-{uid}"
        c.call(1, spec.QueueDeclare(0, q, auto_delete=False), spec.QueueDeclareOk)
        c.publish(1, "", q, b"hello", spec.BasicProperties(message_id="m"))
        got = c.get(1, q)
        assert got.body == b"hello" and properties_of(got).message_id == "m"
        assert c.get(1, q) is None
        c.call(1, spec.QueueDelete(0, q), spec.QueueDeleteOk)


def test_client_mode_sees_a_refused_login_as_a_server_close(broker):
    c = SocketClient(broker, "0-9-1", password="wrong", handshake=False)
    try:
        closed = c.wait_closed()
        assert closed.by_server and closed.reply_code == 403
    finally:
        c.close_socket()
