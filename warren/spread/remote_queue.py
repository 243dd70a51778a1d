"""A queue that lives in another worker: what this worker knows of it, and where its messages go.

Every worker holds every exchange and binding of a vhost (``coordinator.py``); a binding to a
queue another worker owns points at a ``RemoteQueue``, so routing stays local and the message is
then sent to the owner (``Spread.forward``), in order, batched per loop turn. It quacks as much
of a ``Queue`` as bindings, equivalence checks and routing ask of one (name, durable,
auto_delete, arguments, bound_to, exclusive_owner, ``publish``), and answers what a channel asks
of a queue (``QueueBase.counts``, ``consume``, ``get``, ``acquire``, ``purge``) by asking the
owner: later.
"""

from __future__ import annotations

__all__ = ["RemoteQueue", "RemoteOwner"]


class RemoteOwner:
    """The exclusive owner of a queue as other workers see it: a connection on worker ``worker``.
    Never a local session, so the vhost's lock check (``VirtualHost.queue``) refuses it as 405."""

    __slots__ = ("worker", "session_id")

    def __init__(self, worker: int, session_id: int) -> None:
        self.worker = worker
        self.session_id = session_id

    def __eq__(self, other) -> bool:
        return isinstance(other, RemoteOwner) and (other.worker, other.session_id) == (self.worker, self.session_id)

    def __hash__(self) -> int:
        return hash((self.worker, self.session_id))


class RemoteQueue:
    is_here = False  # the handle of a queue that lives in another worker (broker/directory.py)
    on_this_node = True  # (a worker of this node: the x-local-random exchange routes to it)
    # its consumers are the owner's (``BrokerConnection.throttled_by`` asks whether the publisher
    # consumes from the congested queue itself: here it never does, as far as it can tell)
    consumers = ()
    routable = True  # the default exchange routes to it (a cluster's handle of a down node's queue: not)

    def __init__(self, spread, vhost: str, name: str, owner: int, durable: bool, auto_delete: bool,
                 arguments: dict, exclusive_owner: RemoteOwner | None) -> None:
        self.spread = spread
        self.vhost_name = vhost
        self.name = name
        self.owner = owner  # the worker whose Queue this is
        self.durable = durable
        self.auto_delete = auto_delete
        self.arguments = arguments
        # what RabbitMQ calls its type (QueueBase.queue_type), as its declare said: a stream or a
        # quorum queue is declared so, the classic queue is the default
        kind = arguments.get("x-queue-type")
        self.queue_type = kind if kind in ("stream", "quorum") else "classic"
        self.is_stream = kind == "stream"
        self.exclusive_owner = exclusive_owner
        self.bound_to: set = set()
        self.deleted = False
        # the owner said the queue is congested: publishers here are held (the channel's
        # ``throttled_by``) until it says the queue drained (``Spread._remote_congestion``)
        self.congested = False
        # the owner said the queue is full: its x-overflow (reject-publish or -dlx), until it
        # says there is room again (Spread.check_full); None meanwhile
        self.full: str | None = None

    def publish(self, msg) -> int:
        """Send the message to the owner; the sync number a confirm waits for (0: none), or
        REFUSED while the owner says the queue is full (x-overflow reject-publish)."""
        if self.full is not None:
            return self.spread.refuse_forward(self, msg)
        return self.spread.forward(self, msg)

    def dispatch(self) -> None:
        pass  # the owner dispatches (what a 0-10 message.flow asks of a subscription's queue)

    # --- what a channel asks of a queue (``QueueBase``'s questions), answered by the owner ------

    def touch(self) -> None:
        pass  # x-expires counts on the owner, which sees the uses that reach it

    def locked_against(self, session) -> bool:
        return self.exclusive_owner is not None and self.exclusive_owner != self.spread.session_ref(session)

    def relock(self, session):
        """Qpid's rule (``QueueBase.relock``), asked of the owner: an awaitable of whether
        ``session`` holds the queue now."""
        return self.spread.relock(self, session)

    def counts(self):
        """(ready messages, consumers), from the owner: an awaitable."""
        return self.spread.queue_counts(self)

    def purge(self):
        """The owner purges it: an awaitable of how many messages went."""
        return self.spread.purge(self)

    def reads_here(self):
        return None  # its owner serves every read (the HTTP API asks it)

    def consume(self, channel, tag: str, no_ack: bool, exclusive: bool, arguments: dict, credit=None):
        """A consumer of ``channel`` that the owner serves: an awaitable of its record (its
        ``credit``'s keeper is the owner's)."""
        return self.spread.reads_of(channel).consume(self, tag, no_ack, exclusive, arguments, credit)

    def acquire(self, channel, seqs: list):
        """0-10's message.acquire of browsed copies, asked of the owner: an awaitable."""
        return self.spread.reads_of(channel).acquire(self, seqs)

    def get(self, channel, no_ack: bool):
        """basic.get asked of the owner: an awaitable of what ``QueueBase.get`` returns, with
        the owner's settler in place of the queue."""
        return self.spread.reads_of(channel).get(self, no_ack)

    def takes_runs(self) -> bool:
        return False  # publish_run goes message by message: each is forwarded

    def __repr__(self) -> str:
        return f"RemoteQueue({self.vhost_name!r}, {self.name!r}, owner={self.owner})"
