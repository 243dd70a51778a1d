"""A ServerConnection and a ClientConnection piped together in memory (no sockets): the
server side's decisions are taken by a small scripted "broker" that records the events."""

from __future__ import annotations

from warren.protocol.amqp0_10 import events as ev
from warren.protocol.amqp0_10.client import ClientConnection
from warren.protocol.amqp0_10.connection import ServerConnection


def octets(parts) -> bytes:
    return b"".join(bytes(p) for p in parts)


class Pair:
    """``pump()`` moves octets both ways until neither side has anything to say; the server's
    events are answered by ``on_server_event`` (accept logins and opens, complete commands)."""

    def __init__(self, server: ServerConnection | None = None, client: ClientConnection | None = None,
                 auto_complete: bool = True) -> None:
        self.server = server or ServerConnection({"product": "warren"})
        self.client = client or ClientConnection("guest", "guest")
        self.server_events: list = []
        self.client_events: list = []
        self.wire_to_server = b""  # everything the client sent (its header included)
        self.wire_to_client = b""
        self.auto_complete = auto_complete
        self.results: dict[str, object] = {}  # command NAME -> the result struct to answer with
        self._header_read = False

    def on_server_event(self, e) -> None:
        if isinstance(e, ev.LoginRequested):
            self.server.accept_login()
        elif isinstance(e, ev.OpenRequested):
            self.server.accept_open()
        elif isinstance(e, ev.Command) and self.auto_complete:
            result = self.results.get(e.name)
            if result is not None:
                self.server.send_result(e.channel, e.command_id, result)
            else:
                self.server.complete(e.channel, e.command_id)

    def pump(self, rounds: int = 50) -> None:
        for _ in range(rounds):
            moved = False
            data = octets(self.client.data_to_send())
            if data:
                moved = True
                self.wire_to_server += data
                if not self._header_read:  # the server side's caller reads the 8-octet header
                    assert data[:8] == b"AMQP\x01\x01\x00\x0a"
                    data = data[8:]
                    self._header_read = True
                self.server.receive_data(data)
            while (e := self.server.next_event()) is not None:
                self.server_events.append(e)
                self.on_server_event(e)
            data = octets(self.server.data_to_send())
            if data:
                moved = True
                self.wire_to_client += data
                self.client.receive_data(data)
            while (e := self.client.next_event()) is not None:
                self.client_events.append(e)
            if not moved:
                return
        raise AssertionError("the two sides kept talking")

    def take(self, side: str, kind=None) -> list:
        """The events of one side so far (of one class), and forget them."""
        events = self.server_events if side == "server" else self.client_events
        got = [e for e in events if kind is None or isinstance(e, kind)]
        events[:] = [e for e in events if not (kind is None or isinstance(e, kind))]
        return got

    def open(self) -> None:
        self.pump()
        assert self.server.is_open and self.client.is_open
