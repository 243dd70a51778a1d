"""One client connection on the broker side, whatever its protocol.

``BrokerConnection`` holds what the broker knows of a connection: who logged in, the virtual
host it opened (with the node, user and vhost limits that admitted it), its channels
(``BrokerChannel``, ``channel.py``), its exclusive queues, whether its transport can take more
deliveries, and why it ends (its one close line in the log). Each protocol's connection
handler subclasses it (0-9-1 and the 0-8 family: ``warren/protocol/amqp0_9_1/adapter.py``)
and adds what is protocol business: reading events, the login exchange, answering refusals,
writing frames. The asyncio glue (``warren/server/connection.py``) calls back into it through
``io`` and the methods below; the broker never sees a socket.

(This was ``warren.broker.session.Session``, then ``warren.broker.client.ClientConnection``: 0-10
uses "session" for its own layer, and the protocols' client modes are the ``ClientConnection``s.)
"""

from __future__ import annotations

import logging

from warren.access.login import log_in, unknown_vhost

__all__ = ["BrokerConnection", "client_name"]

log = logging.getLogger("warren.session")


def client_name(properties: dict) -> str:
    """What a client calls itself, for its log lines: its client properties' connection_name,
    else its product, else "-" (also the --workers supervisor's, warren/server/workers.py)."""
    name = properties.get("connection_name") or properties.get("product")
    if isinstance(name, (bytes, bytearray)):
        name = bytes(name).decode("utf-8", "replace")
    return str(name) if name else "-"


class BrokerConnection:
    # the number an AMQP 0-10 connection stamps on what it publishes, for Qpid's no-local
    # queues (warren/protocol/amqp0_10/channel.py ``no_local``); None: other protocols stamp none
    publisher_id = None
    # --worker-mode queues (warren/server/placement.py): replaying what another worker answered
    # before the connection moved here; something the connection did cannot be replayed there
    # (a refusal closed a channel, a server-named queue's name is not in the client's octets)
    replaying = False
    unmovable = False

    def __init__(self, broker, peer: tuple, io) -> None:
        self.broker = broker
        self.durability = broker.durability
        self.peer = peer
        self.io = io
        self.vhost = None
        self.username = ""
        self.mechanism = ""  # the SASL mechanism of the login (PLAIN, AMQPLAIN, EXTERNAL ...): the HTTP API's
        self.access = None  # the connection's ConnectionAccess (warren/access), once a vhost is open
        self.capabilities: dict = {}
        self.client_properties: dict = {}
        self.channels: dict = {}  # channel number -> the protocol's BrokerChannel
        self._exclusive_queues: set | None = None  # made on first use (exclusive_queues)
        self.held_cancels: list | None = None  # a queue delete of ours holds its consumers' cancels (channel.py)
        self.writable = True
        self.published = False  # resource alarms block only connections that publish
        self.closed = False
        # why the connection ends, for its one close line in the log (connection.py); the
        # first cause wins: an error we answered, the client's close, a shutdown
        self.close_reason: str | None = None
        # node and user limits (warren/broker/limits.py); the server sets broker.limits
        self.limits = broker.limits

    @property
    def exclusive_queues(self) -> set:
        """The exclusive queues this connection declared (deleted when it ends). The set is
        made on first use: an empty set was 216 B of every idle connection."""
        queues = self._exclusive_queues
        if queues is None:
            queues = self._exclusive_queues = set()
        return queues

    def holds_exclusive_queues(self) -> bool:
        """Whether the connection declared exclusive queues (without making the set)."""
        return bool(self._exclusive_queues)

    def __str__(self) -> str:
        host, port = self.peer[:2] if self.peer else ("?", 0)
        return f"{host}:{port} user={self.username or '-'} vhost={self.vhost.name if self.vhost else '-'}"

    @property
    def client_name(self) -> str:
        """What the client calls itself (``client_name``)."""
        return client_name(self.client_properties)

    def note_close(self, reason: str) -> None:
        """Record why the connection ends (the first cause is kept)."""
        if self.close_reason is None:
            self.close_reason = reason

    # --- login (every protocol's mechanisms) ----------------------------------------------------

    def login(self, mechanism: str, response: bytes, offered=None, anonymous_user: str | None = None,
              start_offer: bytes | None = None) -> str:
        """The user this connection's login names, else ``ConnectionAccessRefused``: the one
        login step of every protocol and of the ``--workers`` supervisor (``warren/access/login.py``
        ``log_in``: PLAIN, AMQPLAIN, EXTERNAL on verified TLS, ANONYMOUS with ``offered`` and
        ``anonymous_user``; 0-9-1's ``start_offer``, what its connection.start offered), with the
        broker's user store and failed-login throttle."""
        return log_in(self.broker.users, self.broker.login_throttle, mechanism, response,
                      self.peer[0] if self.peer else None, certificate=self.io.certificate_login,
                      offered=offered, anonymous_user=anonymous_user, start_offer=start_offer)

    # --- the virtual host ----------------------------------------------------------------------

    def open_vhost(self, name: str) -> None:
        """Open virtual host ``name`` for the logged-in user: 530 NOT_ALLOWED when it does not
        exist, the node, user or vhost connection limits refuse, or the user has no permission."""
        vhost = self.broker.vhosts.get(name)
        if vhost is None:
            raise unknown_vhost(name, self.username)
        self.limits.admit(self, self.broker.access)  # node and user connection limits: 530
        try:
            self.access = self.broker.admit(self, vhost)  # max-connections, permission in the vhost: 530
        except BaseException:
            self.limits.release(self)
            raise
        self.vhost = vhost

    def admit_channel(self) -> None:
        """A new channel: the user's max-channels over all its connections (530)."""
        self.limits.admit_channel(self, self.broker.access)

    # --- flow ----------------------------------------------------------------------------------

    def throttled_by(self, queue) -> None:
        """We published to a congested queue (flow control, queues/flow_marks.py): the glue stops reading
        from this connection until the queue drains. Not when this connection consumes from
        that queue itself: pausing it would also stop the acks that drain the queue."""
        for c in queue.consumers:
            if c.channel.session is self:
                return
        if not queue.is_here:  # a queue of another process: our channels' consumers of it are there
            for ch in self.channels.values():
                remote = ch.remote
                if remote is not None and any(rc.queue_name == queue.name for rc in remote.consumers.values()):
                    return
        self.io.throttle(queue)

    def set_writable(self, writable: bool) -> None:
        self.writable = writable
        if writable:
            self.resume_delivery()

    def resume_delivery(self) -> None:
        for ch in list(self.channels.values()):
            ch.resume_delivery()

    # --- end of life ---------------------------------------------------------------------------

    def shutdown(self, reply_text: str = "broker shutdown") -> None:
        """Server-initiated close (320 CONNECTION_FORCED), e.g. on SIGTERM or a vhost deleted:
        the protocol's handler tells the client."""
        raise NotImplementedError

    def connection_lost(self) -> None:
        self._release()

    def _release(self) -> None:
        """Close every channel (requeueing their unacked messages) and drop exclusive queues."""
        if self.closed:
            return
        self.closed = True
        if self.access is not None:
            self.broker.release(self)
        self.limits.release(self)
        for ch in list(self.channels.values()):
            ch.close()
        self.channels.clear()
        if self._exclusive_queues:
            for q in list(self._exclusive_queues):
                if self.vhost is not None:
                    self.vhost.delete_queue(q)
            self._exclusive_queues.clear()
