"""Sans-IO server side of an AMQP 0-10 connection: bytes in, events out, bytes to send.

No sockets and no asyncio. The caller has read the client's 8-octet header ``AMQP 1 1 0 10``
(``warren.protocol.header``), then::

    conn = ServerConnection(server_properties)     # queues our header and connection.start
    conn.receive_data(data)                          # everything after the client's header
    while (event := conn.next_event()) is not None:
        ...act on the event; call accept_login / accept_open / complete / send_result /
        send_exception / send_transfer / detach / close_connection...
    transport.writelines(conn.data_to_send())

Events (``warren.protocol.amqp0_10.events``), in the order a broker adapter meets them:

* ``LoginRequested(mechanism, response, client_properties)``: check the credentials (PLAIN,
  AMQPLAIN; ANONYMOUS only when offered, ``allow_anonymous``), then ``accept_login()`` (sends
  connection.tune) or ``refuse_login(text)`` (connection.close 320, as Qpid's broker).
* ``OpenRequested(virtual_host)``: the vhost of connection.open, or ``default_vhost`` when the
  client named none (qpid.messaging sends connection.open without fields); ``accept_open()``
  (open-ok) or ``close_connection(402, text)``.
* ``SessionAttached(channel, name)``: already answered (attached + command-point).
* ``Command(channel, session, command_id, command, sync, header, body)``: one per command the
  client sends (``command.NAME`` is ``"queue.declare"``, ``"message.transfer"``, ...; a transfer
  carries its header structs and body). The adapter executes it and calls
  ``complete(channel, command_id)``, ``send_result(channel, command_id, struct)`` for commands
  with a result (``queue.query`` -> ``QueueQueueQueryResult``, ...) or
  ``send_exception(channel, command_id, error_code, text)`` (``error_code_for`` maps the reply
  codes of ``warren.errors``). Completion may come later (after a durable write), in any order;
  ``execution.sync`` and the ``session.completed`` reports are handled here.
* ``Completed(channel, ids)``: the client completed transfers we sent (window-mode credit).
* ``SessionDetached(channel, name, code, by_peer)``: the session is gone; release its
  subscriptions and unsettled transfers.
* ``PeerError(channel, text, answer, code)``: the client broke the protocol and was answered
  here (exception + detach, detached, or connection.close): log it.
* ``ConnectionClosed(code, text, by_peer)``: the close handshake is over.

``send_transfer(channel, destination, body, delivery_properties, message_properties, ...)``
delivers a message (returns its command id, which ``message.accept``/``release``/``reject``
name later); bodies are split into frames of the negotiated ``max-frame-size``.

Limits: a control or command segment up to 1 MiB, a header 1 MiB, a body ``max_message_size``
(past it: execution.exception resource-limit-exceeded); frames up to 65535 octets whatever
``max-frame-size`` says (qpid.messaging ignores it, §12.3).
"""

from __future__ import annotations

import enum

from warren.protocol.amqp0_10.events import LoginRequested, OpenRequested, PeerError
from warren.protocol.amqp0_10.session import CLOSE, HEADER, Endpoint
from warren.spec import amqp0_10 as spec

__all__ = ["ServerConnection", "State", "HEADER"]


class State(enum.Enum):
    AWAIT_START_OK = "await-start-ok"
    LOGIN = "login"  # the adapter checks the credentials
    AWAIT_SECURE_OK = "await-secure-ok"
    AWAIT_TUNE_OK = "await-tune-ok"
    AWAIT_OPEN = "await-open"
    OPENING = "opening"  # the adapter checks the virtual host
    OPEN = "open"


class _Protocol:
    """What the HTTP API and the logs call this protocol (the 0-9-1 side's ``dialect.title``)."""

    title = "AMQP 0-10"
    key = "0-10"


class ServerConnection(Endpoint):
    """One server-side 0-10 connection (see module docstring)."""

    role = "server"
    dialect = _Protocol()

    def __init__(self, server_properties: dict | None = None, mechanisms=("PLAIN", "AMQPLAIN"),
                 allow_anonymous: bool = False, default_vhost: str = "/", channel_max: int = 2047,
                 max_frame_size: int = 0xFFFF, heartbeat_min: int = 0, heartbeat_max: int = 600,
                 max_message_size: int = 128 << 20) -> None:
        super().__init__(max_frame_size, max_message_size)
        # in the order given (the node's auth-mechanisms); ANONYMOUS only when allowed, last if not named
        self.mechanisms = [m for m in mechanisms if m != "ANONYMOUS" or allow_anonymous]
        if allow_anonymous and "ANONYMOUS" not in self.mechanisms:
            self.mechanisms.append("ANONYMOUS")
        self.default_vhost = default_vhost
        self.channel_max = channel_max
        self.heartbeat = 0  # negotiated (seconds; 0 = none)
        self.heartbeat_min, self.heartbeat_max = heartbeat_min, heartbeat_max
        self.state = State.AWAIT_START_OK
        self.client_properties: dict = {}
        self.mechanism: str | None = None
        self.virtual_host: str | None = None
        self._out.append(HEADER)
        self._send_control(0, spec.ConnectionStart(server_properties=server_properties or {},
                                                   mechanisms=list(self.mechanisms), locales=["en_US"]))

    def _sessions_allowed(self) -> bool:
        return self.state is State.OPEN and not self.closing

    def _connection_control(self, channel: int, ctl) -> None:
        kind, state = type(ctl), self.state
        if kind is spec.ConnectionClose:
            self._send_control(0, spec.ConnectionCloseOk())
            self._closed(ctl.reply_code or CLOSE.NORMAL, ctl.reply_text or "", True)
            return
        if kind is spec.ConnectionCloseOk:
            if self.closing:
                self._closed(CLOSE.NORMAL, "", False)
            return
        if kind is spec.ConnectionHeartbeat:
            return  # its arrival is what counts (the caller sees the octets)
        if self.closing:
            return
        if kind is spec.ConnectionStartOk and state is State.AWAIT_START_OK:
            mechanism = ctl.mechanism or ""
            if mechanism not in self.mechanisms:
                self._refuse_connection(CLOSE.CONNECTION_FORCED, f"unsupported mechanism {mechanism!r} "
                                        f"(offered: {' '.join(self.mechanisms)})")
                return
            self.mechanism = mechanism
            self.client_properties = ctl.client_properties or {}
            self.state = State.LOGIN
            # locale is omitted by qpid.messaging although marked required (§12.1)
            self._events.append(LoginRequested(mechanism, ctl.response or b"", self.client_properties, ctl.locale))
            return
        if kind is spec.ConnectionSecureOk and state is State.AWAIT_SECURE_OK:
            self.state = State.LOGIN
            self._events.append(LoginRequested(self.mechanism or "", ctl.response or b"", self.client_properties,
                                               None))
            return
        if kind is spec.ConnectionTuneOk and state is State.AWAIT_TUNE_OK:
            self._negotiate(ctl)
            self.state = State.AWAIT_OPEN
            return
        if kind is spec.ConnectionOpen and state is State.AWAIT_OPEN:
            self.virtual_host = ctl.virtual_host or self.default_vhost
            self.state = State.OPENING
            self._events.append(OpenRequested(self.virtual_host, list(ctl.capabilities or ())))
            return
        self._refuse_connection(CLOSE.FRAMING_ERROR, f"unexpected {ctl.NAME} in state {state.value}")

    def _refuse_connection(self, code: int, text: str) -> None:
        self.close_connection(code, text)
        self._events.append(PeerError(None, text, "close", code))

    def _negotiate(self, tune_ok) -> None:
        # Lenient where the spec says "must not exceed": the lower of both values is used
        # (qpid.messaging echoes our channel-max and sends no max-frame-size at all).
        channel_max = tune_ok.channel_max
        if channel_max:
            self.channel_max = min(channel_max, self.channel_max) if self.channel_max else channel_max
        frame = tune_ok.max_frame_size
        if frame:
            self.frame_max = max(spec.MIN_MAX_FRAME_SIZE, min(frame, self.frame_max))
        self.heartbeat = tune_ok.heartbeat or 0

    # --- the adapter's decisions ---------------------------------------------------------------

    def accept_login(self) -> None:
        """The credentials are good: offer our limits with connection.tune."""
        if self.state is not State.LOGIN:
            return
        self.state = State.AWAIT_TUNE_OK
        self._send_control(0, spec.ConnectionTune(channel_max=self.channel_max, max_frame_size=self.frame_max,
                                                  heartbeat_min=self.heartbeat_min, heartbeat_max=self.heartbeat_max))

    def challenge(self, data: bytes) -> None:
        """A SASL challenge (connection.secure); the answer comes as another LoginRequested."""
        if self.state is State.LOGIN:
            self.state = State.AWAIT_SECURE_OK
            self._send_control(0, spec.ConnectionSecure(challenge=data))

    def refuse_login(self, text: str = "Authentication failed") -> None:
        self.close_connection(CLOSE.CONNECTION_FORCED, text)

    def accept_open(self) -> None:
        """The virtual host is good: the connection is open."""
        if self.state is not State.OPENING:
            return
        self.state = State.OPEN
        self._send_control(0, spec.ConnectionOpenOk(known_hosts=[]))

    @property
    def frames(self):
        """The frame reader (its unparsed input counts toward the memory alarm's buffers)."""
        return self.reader

    @property
    def handshake_pending(self) -> bool:
        """open-ok not sent yet (the glue's handshake deadline, warren/server/handshake.py)."""
        return self.state is not State.OPEN and not self.closed

    @property
    def handshake_stage(self) -> str:
        return {State.AWAIT_START_OK: "sent connection.start, waiting for start-ok",
                State.LOGIN: "checking the login", State.AWAIT_SECURE_OK: "sent connection.secure, waiting",
                State.AWAIT_TUNE_OK: "sent connection.tune, waiting for tune-ok",
                State.AWAIT_OPEN: "got tune-ok, waiting for connection.open",
                State.OPENING: "opening the virtual host"}.get(self.state, self.state.value) + " (AMQP 0-10)"

    @property
    def is_open(self) -> bool:
        return self.state is State.OPEN and not self.closing and not self.closed

    @property
    def is_closed(self) -> bool:
        return self.closed
