"""Client mode of the 0-10 protocol layer: the other end of ``ServerConnection``, sans-IO.

No 0-10 client runs on Python 3 (qpid-python is Python 2 only), so the suite speaks 0-10 through
this class over real sockets, as ``warren.protocol.client`` does for 0-8/0-9. It sends what
qpid.messaging sends (INVENTORY.md §12.1): the header, start-ok (PLAIN, AMQPLAIN or ANONYMOUS),
tune-ok and connection.open together (the vhost only when one is given: qpid.messaging names
none), session.attach + command-point(0, 0); it answers the server's controls (close, detach,
flush, request-timeout) and hands everything else out as events.

    conn = ClientConnection("guest", "guest")
    sock.sendall(b"".join(conn.data_to_send()))      # our header
    conn.receive_data(sock.recv(65536))
    while (event := conn.next_event()) is not None: ...   # Opened once open-ok came
    conn.attach(1, b"my-session")
    conn.send_command(1, QueueDeclare(queue="q"), sync=True)

Commands the server sends (``message.transfer``) come out as ``Command`` events; the caller
completes them (``complete``), which reports ``session.completed`` with the next
``data_to_send``. ``Completed`` events say which of our commands the server completed;
``ExecutionResult``/``ExecutionException`` carry its results and refusals. ``ServerVersion`` is
raised when the server's header is not 0-10.
"""

from __future__ import annotations

from warren.spec.fields import encode_shortstr, encode_value
from warren.protocol.amqp0_10.events import Opened, PeerError, SessionAttached
from warren.protocol.amqp0_10.session import CLOSE, HEADER, Endpoint
from warren.spec import amqp0_10 as spec

__all__ = ["ClientConnection", "ServerVersion"]


class ServerVersion(Exception):
    """The server answered our header with another protocol's header."""

    def __init__(self, header: bytes) -> None:
        super().__init__(f"server answered with header {header!r}, not AMQP 0-10")
        self.header = header


class ClientConnection(Endpoint):
    """One client-side 0-10 connection (see module docstring)."""

    role = "client"

    def __init__(self, username: str = "guest", password: str = "guest", virtual_host: str | None = None,
                 mechanism: str = "PLAIN", client_properties: dict | None = None, heartbeat: int | None = None,
                 max_frame_size: int = 0xFFFF) -> None:
        super().__init__(max_frame_size)
        self.username, self.password, self.virtual_host = username, password, virtual_host
        self.mechanism = mechanism
        self.client_properties = {"product": "warren 0-10 client mode"} if client_properties is None \
            else client_properties
        self.heartbeat = heartbeat
        self.state = "header"  # header, start, tune, open-sent, open
        self.start = None  # the connection.start received
        self.tune = None
        self._header = b""
        self._awaiting_attached: set[int] = set()  # channels whose attach is not answered yet
        self._out.append(HEADER)

    def receive_data(self, data) -> None:
        if self.state == "header":
            need = 8 - len(self._header)
            self._header += bytes(data[:need])
            data = data[need:]
            if len(self._header) < 8:
                return
            if self._header != HEADER:
                raise ServerVersion(self._header)
            self.state = "start"
        super().receive_data(data)

    def _sessions_allowed(self) -> bool:
        return self.state == "open" and not self.closing

    def _connection_control(self, channel: int, ctl) -> None:
        kind = type(ctl)
        if kind is spec.ConnectionStart:
            self.start = ctl
            self._send_control(0, spec.ConnectionStartOk(client_properties=self.client_properties,
                                                         mechanism=self.mechanism, response=self._response(),
                                                         locale="en_US"))
            self.state = "tune"
        elif kind is spec.ConnectionSecure:
            self._events.append(PeerError(0, "connection.secure: no mechanism here takes a challenge", "close",
                                          CLOSE.CONNECTION_FORCED))
            self.close_connection(CLOSE.CONNECTION_FORCED, "unexpected challenge")
        elif kind is spec.ConnectionTune:
            self.tune = ctl
            if ctl.max_frame_size:
                self.frame_max = min(self.frame_max, ctl.max_frame_size)
            # as qpid.messaging: tune-ok with heartbeat and channel-max, and open right behind it
            self._send_control(0, spec.ConnectionTuneOk(channel_max=ctl.channel_max or 0xFFFF,
                                                        max_frame_size=self.frame_max, heartbeat=self.heartbeat))
            self._send_control(0, spec.ConnectionOpen(virtual_host=self.virtual_host))
            self.state = "open-sent"
        elif kind is spec.ConnectionOpenOk:
            self.state = "open"
            self._events.append(Opened(ctl.known_hosts))
        elif kind is spec.ConnectionClose:
            self._send_control(0, spec.ConnectionCloseOk())
            self._closed(ctl.reply_code or CLOSE.NORMAL, ctl.reply_text or "", True)
        elif kind is spec.ConnectionCloseOk:
            self._closed(CLOSE.NORMAL, "", False)
        # heartbeat, redirect: nothing to do here

    def _response(self) -> bytes:
        if self.mechanism == "PLAIN":
            return b"\0" + self.username.encode() + b"\0" + self.password.encode()
        if self.mechanism == "AMQPLAIN":
            # a 0-8 field table's entries (warren.spec.fields), as the broker parses it for 0-9-1
            return b"".join((encode_shortstr("LOGIN"), encode_value(self.username),
                             encode_shortstr("PASSWORD"), encode_value(self.password)))
        return b""  # ANONYMOUS

    def _on_attached(self, channel: int, ctl) -> None:
        session = self.sessions.get(channel)
        if session is not None and session.name == (ctl.name or b"") and channel in self._awaiting_attached:
            self._awaiting_attached.discard(channel)
            self._events.append(SessionAttached(channel, session.name))

    def attach(self, channel: int, name: bytes, force: bool = False) -> None:
        """session.attach then command-point(0, 0), as qpid.messaging sends them (without waiting
        for attached: commands may follow at once)."""
        self._new_session(channel, name)
        self._awaiting_attached.add(channel)
        self._send_control(channel, spec.SessionAttach(name=name, force=force))
        self._send_control(channel, spec.SessionCommandPoint(command_id=0, command_offset=0))

    def flush(self, channel: int, expected: bool = False, confirmed: bool = False, completed: bool = True) -> None:
        self._send_control(channel, spec.SessionFlush(expected=expected, confirmed=confirmed, completed=completed))

    def send_raw(self, data: bytes, command_on: int | None = None) -> None:
        """Octets as they are (frames a well-behaved client would not send). ``command_on``: the
        channel whose session counts them as one command (so our numbering stays in step)."""
        self._out.append(data)
        if command_on is not None:
            self.sessions[command_on].out_next += 1

    def close(self, code: int = CLOSE.NORMAL, text: str = "") -> None:
        self.close_connection(code, text)

    @property
    def is_open(self) -> bool:
        return self.state == "open" and not self.closing and not self.closed

