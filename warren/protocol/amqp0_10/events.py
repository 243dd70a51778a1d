"""Events an AMQP 0-10 connection (``warren.protocol.amqp0_10``) hands to its user.

Protocol-neutral on purpose: a broker adapter maps them onto broker operations without knowing
0-10's frames, segments, packing flags or session controls. Command ids are the wire ids
(32-bit serial numbers); the adapter passes them back to ``complete``/``send_result``/
``send_exception``.
"""

from __future__ import annotations

__all__ = [
    "LoginRequested", "OpenRequested", "Opened", "SessionAttached", "SessionDetached", "Command", "Completed",
    "ExecutionResult", "ExecutionException", "PeerError", "ConnectionClosed",
]


class LoginRequested:
    """connection.start-ok (or secure-ok) arrived: check the credentials, then ``accept_login()``
    or ``refuse_login(text)``. ``response`` is the SASL response as sent (PLAIN:
    ``authzid\\0user\\0password``; AMQPLAIN: a field table's entries; ANONYMOUS: anything)."""

    __slots__ = ("mechanism", "response", "client_properties", "locale")

    def __init__(self, mechanism: str, response: bytes, client_properties: dict, locale: str | None) -> None:
        self.mechanism, self.response = mechanism, response
        self.client_properties, self.locale = client_properties, locale

    def __repr__(self) -> str:
        return f"LoginRequested({self.mechanism!r})"


class OpenRequested:
    """connection.open arrived: ``virtual_host`` is the one asked for, or the default when the
    client sent none (qpid.messaging never does). Answer ``accept_open()`` or ``close_connection``."""

    __slots__ = ("virtual_host", "capabilities")

    def __init__(self, virtual_host: str, capabilities: list) -> None:
        self.virtual_host, self.capabilities = virtual_host, capabilities

    def __repr__(self) -> str:
        return f"OpenRequested({self.virtual_host!r})"


class Opened:
    """Client mode: connection.open-ok arrived."""

    __slots__ = ("known_hosts",)

    def __init__(self, known_hosts) -> None:
        self.known_hosts = known_hosts


class SessionAttached:
    """A session is attached to ``channel`` (server: the peer's attach was answered; client: the
    server's attached arrived). Commands on the channel belong to it from now on."""

    __slots__ = ("channel", "name")

    def __init__(self, channel: int, name: bytes) -> None:
        self.channel, self.name = channel, name

    def __repr__(self) -> str:
        return f"SessionAttached({self.channel}, {self.name!r})"


class SessionDetached:
    """The session on ``channel`` is gone (the peer detached it, or answered our detach): drop
    what belongs to it (subscriptions, unsettled transfers go back to their queues)."""

    __slots__ = ("channel", "name", "code", "by_peer")

    def __init__(self, channel: int, name: bytes, code: int, by_peer: bool) -> None:
        self.channel, self.name, self.code, self.by_peer = channel, name, code, by_peer

    def __repr__(self) -> str:
        return f"SessionDetached({self.channel}, {self.name!r}, code={self.code}, by_peer={self.by_peer})"


class Command:
    """A command of the peer: ``command`` is the decoded object (``warren.spec.amqp0_10``; its
    ``NAME`` is e.g. ``"queue.declare"``), ``header`` the structs of its header segment (or
    None), ``body`` its body (or None). Execute it, then ``complete(channel, command_id)``
    (``send_result`` first for a command with a result) or ``send_exception``. ``sync``: the
    peer waits for its completion."""

    __slots__ = ("channel", "session", "command_id", "command", "sync", "header", "body")

    def __init__(self, channel: int, session: bytes, command_id: int, command, sync: bool, header, body) -> None:
        self.channel, self.session, self.command_id = channel, session, command_id
        self.command, self.sync, self.header, self.body = command, sync, header, body

    @property
    def name(self) -> str:
        return self.command.NAME

    def header_struct(self, cls):
        """The struct of this class in the header segment, or None."""
        for s in self.header or ():
            if type(s) is cls:
                return s
        return None

    def __repr__(self) -> str:
        body = "" if self.body is None else f", {len(self.body)} octets"
        return f"Command({self.channel}, #{self.command_id}, {self.command!r}{body})"


class Completed:
    """The peer completed commands we sent (``ids``: their wire ids, newly completed only):
    for transfers, the window of a subscription in window mode moves on."""

    __slots__ = ("channel", "ids")

    def __init__(self, channel: int, ids: list) -> None:
        self.channel, self.ids = channel, ids

    def __repr__(self) -> str:
        return f"Completed({self.channel}, {self.ids!r})"


class ExecutionResult:
    """The peer's ``execution.result`` for our command ``command_id``."""

    __slots__ = ("channel", "command_id", "value")

    def __init__(self, channel: int, command_id: int, value) -> None:
        self.channel, self.command_id, self.value = channel, command_id, value

    def __repr__(self) -> str:
        return f"ExecutionResult({self.channel}, #{self.command_id}, {self.value!r})"


class ExecutionException:
    """The peer's ``execution.exception`` (the object, with ``error_code``, ``command_id``,
    ``description``); the peer detaches the session next."""

    __slots__ = ("channel", "exception")

    def __init__(self, channel: int, exception) -> None:
        self.channel, self.exception = channel, exception

    def __repr__(self) -> str:
        return f"ExecutionException({self.channel}, {self.exception!r})"


class PeerError:
    """The peer broke the protocol and this layer answered by itself (``answer``: "exception",
    "detached" or "close", with ``code``): for the log line. After "close" the connection is
    closing; after "exception" the session is being detached."""

    __slots__ = ("channel", "text", "answer", "code")

    def __init__(self, channel: int | None, text: str, answer: str, code: int) -> None:
        self.channel, self.text, self.answer, self.code = channel, text, answer, code

    def __repr__(self) -> str:
        return f"PeerError(channel={self.channel}, {self.text!r}, {self.answer} {self.code})"


class ConnectionClosed:
    """The close handshake is over (either side started it): flush output, close the socket."""

    __slots__ = ("code", "text", "by_peer")

    def __init__(self, code: int, text: str, by_peer: bool) -> None:
        self.code, self.text, self.by_peer = code, text, by_peer

    def __repr__(self) -> str:
        return f"ConnectionClosed({self.code}, {self.text!r}, by_peer={self.by_peer})"
