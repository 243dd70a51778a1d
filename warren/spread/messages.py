"""Messages across workers: what is routed to another worker's queue, and its confirms.

Routing stays on the worker the publisher is connected to; a message for a remote queue is sent
to its owner in order, batched per loop turn (a request or message to that worker flushes the
batch first, so a basic.get after publishes finds them): one ``warren/codec/handover.py`` batch
per owner, in which a message crosses once for all the owner's queues it goes to and which the
owner reads with one compiled call into ready ``Message`` objects; what that format does not
carry crosses as tuples (``Outgoing``). A publisher's confirm of a persistent
message routed to a durable remote queue waits for the owner's group commit that covers it: the
forward joins the local group commit as one more store (``RemoteSync``), whose sync is a round
trip to the owner. Flow control crosses too: the owner tells a publishing worker that its queue
is congested (``RemoteQueue.congested`` holds the publishers there) and when it drained, and
that an x-overflow reject-publish queue is full (``RemoteQueue.full``: its publishers are
nacked there; what was forwarded before is taken). Direct reply-to addresses name the worker of
their reply consumer (``RemoteReply``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging

from warren.broker.message import Message, shared_name
from warren.broker.queues.length_limits import REFUSED, REJECT_PUBLISH_DLX
from warren.codec.handover import encode_batch, take_batch
from warren.errors import AMQPError
from warren.protocol.amqp0_10.channel import PublishedMessage
from warren.protocol.amqp0_10.delivery import NO_BODY
from warren.spread.remote_queue import RemoteQueue

__all__ = ["Forwarding", "RemoteSync", "RemoteReply", "SpreadFlow", "Outgoing"]

log = logging.getLogger("warren.spread")

NoBody = type(NO_BODY)  # a 0-10 transfer without a body segment: crosses as a tuple, which says so
HANDOVER_BATCH_MAX = 8192  # messages per batch: well inside the format's 65,535-entry tables
_MESSAGE_DEFAULTS = (("_decoded", None), ("_record", None))  # the Message slots a batch does not carry


def _resolve_name(shortstr) -> tuple:
    """A name of a batch as the broker shares it (``shared_name``): equal names, one object."""
    return shared_name(str(shortstr[1:], "utf-8", "surrogateescape"))


def _as_tuple(vhost: str, queue: str, msg, past_limit: bool) -> tuple:
    """A message as it crosses outside a batch (``Forwarding._take_publishes``): its 0-10
    connection and whether it had a body at all; ``past_limit``: a reject-publish limit does
    not turn it away there (``Queue.publish_past_limit``)."""
    body = msg.body
    return (vhost, queue, msg.exchange, msg.routing_key, bytes(msg.properties),
            None if body is NO_BODY else bytes(body), msg.publisher, past_limit)


class Outgoing:
    """What this loop turn routed to one owner: plain messages, each with the owner's queues it
    goes to (sent as one ``handover`` batch), and tuples for what that format does not carry."""

    __slots__ = ("messages", "destinations", "tuples", "tuple_messages")

    def __init__(self) -> None:
        self.messages: list = []
        self.destinations: list = []  # (vhost, [queue name, ...]) per message
        self.tuples: list = []
        self.tuple_messages: list = []  # the message of each tuple (``send_forward``'s positions)


REMOTE_SYNC_TIMEOUT_S = 60.0  # an owner that does not answer a sync: the group commit fails


class RemoteSync:
    """A remote owner as one more store of this worker's group commit (``durability.py``): a
    persistent message forwarded to a durable queue there marks it dirty, and its ``sync`` (on
    the server's sync pool thread, as a stream store's) asks the owner to answer once its own
    group commit covers everything this worker sent it so far."""

    ack_sync_interval = 0  # Durability.end_sync asks every synced store this
    _closed = False
    _failed = None
    failed = None

    def __init__(self, spread: "Forwarding", owner: int) -> None:
        self.spread = spread
        self.owner = owner
        self.directory = f"worker {owner}"  # for Durability's log lines

    def sync(self) -> None:
        """On a pool thread: wait for the owner's answer (raises if it never comes)."""
        fut = concurrent.futures.Future()
        self.spread.loop.call_soon_threadsafe(self.spread._ask_sync, self.owner, fut)
        fut.result(REMOTE_SYNC_TIMEOUT_S)

    def close(self) -> None:
        pass


class Forwarding:
    """``Spread``'s part that sends messages to their queues' owners and takes theirs (a mixin)."""

    # the owner's length limits: False, what another worker forwarded is taken past them (it
    # was confirmed as taken there, or will be); True (a cluster's nodes, whose confirms wait for
    # the owner's answer: warren/cluster/reach.py), the queue refuses it as one node would, and
    # ``refused_by(peer)`` tells the publishing side
    strict_limits = False

    def refused_by(self, peer, position: int | None = None) -> None:
        """A message from ``peer`` was refused by a full queue here (``strict_limits``), or found
        its queue gone (deleted, or a replicated queue another node leads now): the one at
        ``position`` in the record being taken in (None: which one is not known). Between
        workers nothing is said (a queue deleted meanwhile drops what was on its way, as one
        process does); between nodes the next sync's answer names it, and its confirm is a nack
        (reach.py): the sender routed to a queue it still saw, and a confirm would promise what
        nobody holds."""

    # --- messages to remote queues ------------------------------------------------------------

    def forward(self, q: RemoteQueue, msg) -> int:
        """Send ``msg`` to ``q``'s owner (batched per loop turn); the sync number a confirm of
        it waits for: the local group commit's, which waits for the owner's (RemoteSync)."""
        out = self._outgoing_to(q.owner)
        if msg.publisher is None and type(msg.body) is not NoBody and type(msg.properties) is bytes:
            msgs, dests = out.messages, out.destinations
            if msgs and msgs[-1] is msg and dests[-1][0] == q.vhost_name:
                dests[-1][1].append(q.name)  # routed to another of its queues: the message crosses once
            else:
                msgs.append(msg)
                dests.append((q.vhost_name, [q.name]))
        else:  # published over 0-10 (its connection for no-local queues, whether it had a body at
            # all), or properties edited into another type of buffer (the batch takes bytes)
            out.tuples.append(_as_tuple(q.vhost_name, q.name, msg, True))
            out.tuple_messages.append(msg)
        if msg.persistent and q.durable and self.broker.durability is not None:
            return self.broker.durability.wrote(self._remote_syncs[q.owner])
        return 0

    def refuse_forward(self, q: RemoteQueue, msg) -> int:
        """A publish to ``q`` while its owner says it is full (x-overflow reject-publish): refused
        here, a nack. With reject-publish-dlx it still goes to the owner, whose own check
        dead-letters it there (or takes it, if room came meanwhile: a nack may then be a
        message kept, never the other way round)."""
        if q.full == REJECT_PUBLISH_DLX:
            self._outgoing_to(q.owner).tuples.append(_as_tuple(q.vhost_name, q.name, msg, False))
        return REFUSED

    def _outgoing_to(self, worker: int) -> "Outgoing":
        """What this loop turn sends ``worker``; the flush at the turn's end is scheduled."""
        out = self._outgoing.get(worker)
        if out is None:
            out = self._outgoing[worker] = Outgoing()
        self._schedule_flush()
        return out

    def _schedule_flush(self) -> None:
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self.loop.call_soon(self._flush)

    def remote_reply(self, vhost: str, routing_key: str):
        """The destination of a direct reply-to address whose token names another worker
        (``reply_to.consume`` appends the worker's number), or None."""
        from warren.broker.reply_to import PREFIX
        if not routing_key.startswith(PREFIX):
            return None
        _, _, worker = routing_key.rpartition(".")
        if not worker.isdigit() or int(worker) == self.index or int(worker) >= self.count:
            return None
        key = (int(worker), vhost)
        reply = self._replies.get(key)
        if reply is None:
            reply = self._replies[key] = RemoteReply(self, *key)
        return reply

    def forward_reply(self, worker: int, vhost: str, msg) -> None:
        """A direct reply for a reply consumer on ``worker``: with the messages batched for it."""
        self._outgoing_to(worker).tuples.append(_as_tuple(vhost, msg.routing_key, msg, True))

    def _flush(self) -> None:
        self._flush_scheduled = False
        if self._outgoing:
            outgoing, self._outgoing = self._outgoing, {}
            for owner, out in outgoing.items():
                msgs = out.messages
                whole = len(msgs) <= HANDOVER_BATCH_MAX  # (one batch, the usual turn: no copy of the list)
                for start in range(0, len(msgs), HANDOVER_BATCH_MAX):
                    end = start + HANDOVER_BATCH_MAX
                    part = msgs if whole else msgs[start:end]
                    destinations = [(v, tuple(names)) for v, names in out.destinations[start:end]]
                    try:
                        batch = encode_batch(0, part, destinations)
                    except ValueError:  # a TTL past the format's 2**64 ms: this batch goes as tuples
                        pairs = [(m, v, q) for m, (v, names) in zip(part, destinations) for q in names]
                        self.send_forward(owner, "publish", [_as_tuple(v, q, m, True) for m, v, q in pairs],
                                          [m for m, _, _ in pairs])
                        continue
                    self.send_forward(owner, "handover", batch, part)
                if out.tuples:
                    self.send_forward(owner, "publish", out.tuples, out.tuple_messages)
        if self._deliveries:
            deliveries, self._deliveries = self._deliveries, {}
            for worker, items in deliveries.items():
                self.links.tell(worker, "deliver", items)

    def send_forward(self, owner, op: str, messages, positions: list) -> None:
        """One record of messages for ``owner``'s queues (a cluster's nodes number them: reach.py);
        ``positions``: the message at each position of the record (what ``refused_by`` names)."""
        self.links.tell(owner, op, messages)

    def send_delivery(self, worker: int, item: tuple) -> None:
        """A PeerSink's delivery to a consumer on ``worker`` (batched per loop turn)."""
        out = self._deliveries.get(worker)
        if out is None:
            out = self._deliveries[worker] = []
        out.append(item)
        self._schedule_flush()

    def _ask_sync(self, owner: int, fut: concurrent.futures.Future) -> None:
        """On the loop, for RemoteSync: everything sent to ``owner`` so far, then the question."""
        self._flush()
        answer = self.ask(owner, "sync")

        def done(a):
            if fut.done():
                return
            e = a.exception()
            if e is not None:
                fut.set_exception(e)
            else:
                fut.set_result(None)
        answer.add_done_callback(done)

    def _take_handover(self, peer: int, batch: bytes) -> None:
        """A batch of messages for our queues (``warren/codec/handover.py``): one compiled call
        gives the ``Message`` objects and, once per destination, our queues they go to."""
        v_cache: dict = {}

        def queues_of(vhost: str, names: tuple) -> list:
            v = v_cache.get(vhost)
            if v is None:
                v = v_cache[vhost] = self.broker.vhosts.get(vhost)
            found = [q for q in map(v.queues.get, names) if q is not None] if v is not None else []
            if len(found) < len(names):  # deleted meanwhile, or moved: dropped, and said (``refused_by``)
                self.refused_by(peer)
            return found

        msgs, destinations, _, _, _ = take_batch(batch, 0, Message, _MESSAGE_DEFAULTS, _resolve_name, queues_of, True)
        limited = None
        strict = self.strict_limits
        for position, (msg, queues) in enumerate(zip(msgs, destinations)):
            for q in queues:
                if strict and q.limited:
                    if q.publish(msg) == REFUSED:
                        self.refused_by(peer, position)
                else:
                    q.publish_past_limit(msg)  # the publishing worker counted it as taken
                if q.congested:
                    self._held_by(peer, q)
                if q.limited:
                    if limited is None:
                        limited = set()
                    limited.add(q)
            if msg.persistent:
                msg.routed()
        if limited and not self.strict_limits:  # (strict: the sync's answer says it, not a "full" message)
            self._check_full(peer, limited)

    def _take_publishes(self, peer: int, items: list) -> None:
        """Messages that cross as tuples: those published over 0-10 (their connection, whether
        they had a body) and direct replies to our reply consumers."""
        from warren.broker.reply_to import PREFIX as REPLY_PREFIX, lookup as reply_lookup
        vhosts = self.broker.vhosts
        limited = None
        for position, item in enumerate(items):
            vhost, name, exchange, routing_key, properties, body, publisher, past_limit = item
            if body is None:
                body = NO_BODY
            v = vhosts.get(vhost)
            q = v.queues.get(name) if v is not None else None
            if q is None:
                if v is not None and name.startswith(REPLY_PREFIX):  # a direct reply to one of ours
                    rc = reply_lookup(v, name)
                    if rc is not None:
                        rc.publish(Message(exchange, routing_key, properties, body))
                        continue
                self.refused_by(peer, position)  # deleted meanwhile, or moved: dropped, and said
                continue
            if publisher is None:
                msg = Message(exchange, routing_key, properties, body)
            else:
                msg = PublishedMessage(exchange, routing_key, properties, body)
                msg.publisher = publisher
            try:
                msg.check_expiration()
            except AMQPError:
                pass
            if self.strict_limits and q.limited:
                if q.publish(msg) == REFUSED:
                    self.refused_by(peer, position)
            elif past_limit:
                q.publish_past_limit(msg)  # the publishing worker counted it as taken
            else:
                q.publish(msg)  # refused there already (refuse_forward): dead-lettered if still full
            if msg.persistent:
                msg.routed()
            if q.congested:
                self._held_by(peer, q)
            if q.limited:
                if limited is None:
                    limited = set()
                limited.add(q)
        if limited and not self.strict_limits:  # (strict: the sync's answer says it, not a "full" message)
            self._check_full(peer, limited)

    # --- x-overflow reject-publish across workers ------------------------------------------------
    # The owner takes what another worker forwarded even past the limit (that worker confirmed
    # it as taken, or will), and tells that worker the queue is full: it refuses (nacks) its
    # publishers' messages to the queue from then on, until the owner says it has room again
    # (``check_full``, every GLOBAL_CHECK). So a confirmed message is never one the queue
    # dropped; the queue may hold a loop turn's messages more than its limit meanwhile.

    def _check_full(self, peer: int, queues) -> None:
        for q in queues:
            if q.refuses_publishes():
                told = self._full_told.get(q)
                if told is None:
                    told = self._full_told[q] = set()
                if peer not in told:
                    told.add(peer)
                    self.tell(peer, "full", q.vhost.name, q.name, q.overflow)

    def check_full(self) -> None:
        """The server's tick: the workers told of a full queue that has room again hear so."""
        for q, told in list(self._full_told.items()):
            if q.deleted or not q.refuses_publishes():
                del self._full_told[q]
                for peer in told:
                    self.tell(peer, "full", q.vhost.name, q.name, None)

    def _remote_full(self, vhost: str, name: str, overflow: str | None) -> None:
        v = self.broker.vhosts.get(vhost)
        q = v.remote_queues.get(name) if v is not None else None
        if q is not None:
            q.full = overflow

    def _held_by(self, peer: int, q) -> None:
        """Flow control: the publishing worker holds its publishers to our congested queue."""
        told = self.congested_told.get(q)
        if told is None:
            told = self.congested_told[q] = set()
        if peer not in told:
            told.add(peer)
            self.tell(peer, "congested", q.vhost.name, q.name, True)

    def queue_drained(self, q) -> None:
        """One of our queues drained (``_SpreadFlow``): the workers told it was congested resume."""
        told = self.congested_told.pop(q, None)
        if told:
            for peer in told:
                self.tell(peer, "congested", q.vhost.name, q.name, False)

    def _remote_congestion(self, vhost: str, name: str, congested: bool) -> None:
        v = self.broker.vhosts.get(vhost)
        q = v.remote_queues.get(name) if v is not None else None
        if q is None:
            return
        q.congested = congested
        if not congested:
            from warren.broker.queue import Queue
            Queue.flow.listener.drained(q)  # the publishers held for it resume

    def _sync_needed(self) -> int:
        """The number of the group commit that covers every append made so far."""
        d = self.broker.durability
        return d.next_sync if d.dirty else d.next_sync - 1

    def synced_future(self):
        """An awaitable done once this worker's group commit covers every append made so far."""
        d = self.broker.durability
        fut = self.loop.create_future()
        need = self._sync_needed()
        if need <= d.synced:
            fut.set_result(None)
            return fut
        d.waiting.add(_SyncWaiter(d, need, fut))
        return fut


class RemoteReply:
    """A direct reply-to consumer on another worker, as a route destination: the reply is sent
    there (``Spread._take_publishes`` hands it to the reply consumer). Dropped, not returned,
    if that channel has gone meanwhile."""

    congested = False
    name = None
    queue = None

    def __init__(self, spread, worker: int, vhost: str) -> None:
        self.spread = spread
        self.owner = worker
        self.vhost_name = vhost

    def publish(self, msg) -> int:
        self.spread.forward_reply(self.owner, self.vhost_name, msg)
        return 0

class SpreadFlow:
    """The queues' flow listener on a spread worker: the server's QueueFlow first, then the
    workers whose publishers a drained queue of ours held."""

    def __init__(self, inner, spread) -> None:
        self.inner = inner
        self.spread = spread

    def drained(self, queue) -> None:
        self.inner.drained(queue)
        if queue in self.spread.congested_told:
            self.spread.queue_drained(queue)

class _SyncWaiter:
    """In Durability.waiting until its sync number is reached (``synced`` is called per sync)."""

    def __init__(self, durability, need: int, fut: asyncio.Future) -> None:
        self.durability = durability
        self.need = need
        self.fut = fut

    def synced(self, number: int) -> None:
        if number >= self.need:
            if not self.fut.done():
                self.fut.set_result(None)
        else:
            self.durability.waiting.add(self)
