"""One worker's part of a node whose vhosts are spread over worker processes.

The rules (docs/performance.md, "One vhost over worker processes"):

* **Every worker holds every exchange and binding**, so the worker a publisher is connected to
  routes its messages itself. A queue lives in one worker, its *owner*; the others hold a
  ``RemoteQueue`` record of it, which bindings point at and which forwards what is routed to it.
* **Worker 0 puts every change of definitions in one order** (the *sequencer*): a declare,
  delete, bind or unbind on any worker is sent to worker 0, which checks it against what it
  holds (the same checks and refusals as one process), applies it, and broadcasts it to every
  other worker; the answer goes back only once every worker applied it, so when the client
  reads declare-ok, a publisher on any worker sees the exchange. The links keep each worker's
  records in the order sent (``links.py``), so every worker applies the changes in worker 0's
  order. Durable definitions are written by every worker to its own log before it answers, so
  an acknowledged change survives a kill -9 of the node.
* **The owner of a queue** is fixed by its name (``queue_owner``: a hash of vhost and name, so
  a restart finds each durable queue's store again), except an exclusive queue, which lives
  with its connection's worker, and a server-named queue, whose name is drawn until it hashes
  to the declaring worker: the usual ``queue_declare(exclusive=True)`` + consume stays local.
* **Messages to a remote queue** are sent to its owner in order, batched per loop turn. A
  publisher's confirm of a persistent message routed to a durable remote queue waits for the
  owner's group commit that covers it: the forward joins the local group commit as one more
  store (``RemoteSync``), whose sync is a round trip to the owner.

Not built yet (docs/performance.md says what each needs): consuming, basic.get and purging a
queue from a connection on another worker (refused with 540 NOT_IMPLEMENTED naming the owner),
flow control and reject-publish across workers, transactions holding remote publishes (they are
forwarded at commit like local ones, but commit-ok does not wait for the owner's disk), AMQP
0-10 definitions (0-10 clients see the local worker only), the HTTP API's view of other workers'
queues.
"""

from __future__ import annotations

import asyncio
import base64
import concurrent.futures
import logging
import os
import weakref
import zlib

from warren.errors import AMQPError, InternalError, NotFound, NotImplemented_
from warren.spread.links import PeerGone, PeerLinks
from warren.spread.proxy import PeerSink, ProxyChannel, ProxySession
from warren.spread.remote_queue import RemoteOwner, RemoteQueue

__all__ = ["Spread", "queue_owner", "SEQUENCER", "ADMIN"]

log = logging.getLogger("warren.spread")

SEQUENCER = 0  # the worker that orders every change of definitions
REMOTE_SYNC_TIMEOUT_S = 60.0  # an owner that does not answer a sync: the group commit fails
ADMIN = "http"  # who asks, for a delete through the HTTP API: it may delete an exclusive queue


def queue_owner(vhost: str, name: str, workers: int) -> int:
    """The worker that owns a named, non-exclusive queue: fixed by vhost and name."""
    return zlib.crc32(f"{vhost}\0{name}".encode("utf-8", "surrogateescape")) % workers


class RemoteSync:
    """A remote owner as one more store of this worker's group commit (``durability.py``): a
    persistent message forwarded to a durable queue there marks it dirty, and its ``sync`` (on
    the server's sync pool thread, as a stream store's) asks the owner to answer once its own
    group commit covers everything this worker sent it so far."""

    ack_sync_interval = 0  # Durability.end_sync asks every synced store this
    _closed = False
    _failed = None
    failed = None

    def __init__(self, spread: "Spread", owner: int) -> None:
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


class Spread:
    def __init__(self, broker, index: int, count: int, peer_fds: dict[int, int]) -> None:
        self.broker = broker
        self.index = index
        self.count = count
        self.links = PeerLinks(index, count, peer_fds)
        self.loop: asyncio.AbstractEventLoop | None = None
        # sessions that asked for something another worker may name back (an exclusive queue's)
        self._sessions: weakref.WeakValueDictionary = weakref.WeakValueDictionary()
        self._outgoing: dict[int, list] = {}  # owner -> messages routed to it this loop turn
        self._deliveries: dict[int, list] = {}  # consuming worker -> deliveries to it this loop turn
        # the owner's side of consumers on other workers: (worker, session id) -> its ProxySession
        self._proxy_sessions: dict[tuple[int, int], ProxySession] = {}
        self._flush_scheduled = False
        self._remote_syncs = {i: RemoteSync(self, i) for i in range(count) if i != index}
        self._replies: dict = {}  # (worker, vhost) -> RemoteReply: direct reply-to consumers there
        self.on_failure = None  # the server's: a link closed while the node runs
        self.api = None  # the server's: our queues as our HTTP API shows them (for the others' APIs)
        # stopping: this worker (``stop``), and the others that said so; a link that closes then
        # is the node stopping, not a worker dying
        self.stopping = False
        self._peers_stopping: set[int] = set()
        self._deleting = None  # the queue a delete asked through the sequencer is removing
        # flow control across workers: our congested queues -> the workers told so, which hold
        # their publishers to it (RemoteQueue.congested) until we tell them it drained
        self._congested_told: dict = {}
        # the other workers' connection counts, by (worker, key): ("node",), ("user", name),
        # ("vhost", name): the node's limits count every worker's connections
        self._counts: dict[tuple, int] = {}

    async def start(self) -> None:
        self.loop = asyncio.get_running_loop()
        from warren.broker.queue import Queue
        Queue.flow_listener = _SpreadFlow(Queue.flow_listener, self)  # drained queues tell publishers' workers
        await self.links.start(self)
        log.info("worker %d of %d: linked to workers %s", self.index, self.count,
                 ", ".join(map(str, self.links.peers)) or "-")

    def stop(self) -> None:
        """The node stops (SIGTERM reaches every worker): say so, so that the others take our
        links closing as that, not as a worker gone."""
        if not self.stopping:
            self.stopping = True
            for peer in self.links.peers:
                self.tell(peer, "stopping")

    def close(self) -> None:
        self.stop()
        self._flush()
        self.links.close()

    # --- the node's connection counts (a vhost's max-connections, Broker.admit) ---------------

    def counted_elsewhere(self, key: tuple) -> int:
        return sum(n for (_, k), n in self._counts.items() if k == key)

    def count_changed(self, key: tuple, count: int) -> None:
        if self.loop is None or self.stopping:
            return
        for peer in self.links.peers:
            self.tell(peer, "count", key, count)

    async def node_files_changed(self) -> None:
        """Policies or users changed through this worker's HTTP API: every other worker reads
        the shared files again before the change is answered (they would within 0.5 s anyway)."""
        try:
            await self.links.broadcast("reread")
        except PeerGone:
            pass  # the node is stopping

    # --- the HTTP API over every worker ------------------------------------------------------

    async def api_rows(self, vhosts: list, name: str | None = None, detailed: bool = False,
                       only: int | None = None) -> list[dict]:
        """The other workers' queues (of ``vhosts``; the one named) as their APIs show them."""
        peers = [only] if only is not None else self.links.peers
        answers = await asyncio.gather(*(self.ask(p, "api_queues", vhosts, name, detailed) for p in peers),
                                       return_exceptions=True)
        rows = []
        for a in answers:
            if isinstance(a, BaseException):
                log.warning("worker %d: another worker's queues are missing from the HTTP API: %s", self.index, a)
                continue
            rows.extend(a)
        return rows

    # --- who owns what ---------------------------------------------------------------------

    def owner_for_declare(self, vhost: str, name: str, exclusive: bool, origin: int) -> int:
        return origin if exclusive else queue_owner(vhost, name, self.count)

    def server_name(self, vhost: str, origin: int) -> str:
        """A server-named queue's name, drawn until it hashes to the declaring worker."""
        while True:
            name = "amq.gen-" + base64.urlsafe_b64encode(os.urandom(16)).rstrip(b"=").decode()
            if queue_owner(vhost, name, self.count) == origin:
                return name

    def owns_durable(self, vhost: str, name: str) -> bool:
        """Whether a durable queue of the definitions log is ours (durable queues are never
        exclusive; a server-named one was named to hash to its declaring worker)."""
        return queue_owner(vhost, name, self.count) == self.index

    def restore_record(self, v, d) -> None:
        """At start-up: another worker's durable queue, from our definitions log."""
        v.remote_queues[d.name] = RemoteQueue(self, v.name, d.name, queue_owner(v.name, d.name, self.count),
                                              True, d.auto_delete, d.arguments, None)

    def session_ref(self, session) -> RemoteOwner:
        self._sessions[id(session)] = session
        return RemoteOwner(self.index, id(session))

    def _session(self, ref: RemoteOwner | None):
        if ref is None:
            return None
        if ref.worker != self.index:
            return ref
        s = self._sessions.get(ref.session_id)
        if s is None:
            raise NotFound("the connection that asked has closed")
        return s

    def _vhost(self, name: str):
        v = self.broker.vhosts.get(name)
        if v is None:
            raise NotFound(f"no vhost '{name}' on worker {self.index}")
        return v

    def _find_queue(self, v, name: str):
        return v.queues.get(name) or v.remote_queues.get(name)

    # --- what a client's channel asks (SpreadChannel): awaitables ---------------------------

    async def define(self, vhost: str, op: str, args: tuple):
        """A change of definitions asked on this worker: ordered by the sequencer."""
        if self.index == SEQUENCER:
            return await self._sequence(self.index, vhost, op, args)
        try:
            return await self.ask(SEQUENCER, "define", vhost, op, args)
        except PeerGone:
            raise InternalError("worker 0, which orders the definitions, is gone") from None

    async def queue_counts(self, q) -> tuple[int, int]:
        """(ready messages, consumers) of a queue, asked of its owner when remote."""
        if not isinstance(q, RemoteQueue):
            return q.message_count, len(q.consumers)
        return tuple(await self.ask(q.owner, "counts", q.vhost_name, q.name))

    async def purge(self, q) -> int:
        return await self.ask(q.owner, "purge", q.vhost_name, q.name)

    def refuse_remote(self, q, what: str) -> AMQPError:
        return NotImplemented_(f"{what} queue '{q.name}' in vhost '{q.vhost_name}' from a connection to worker "
                               f"{self.index}: the queue lives on worker {q.owner}, and doing that across "
                               "workers is not built yet (--worker-mode queues is experimental)")

    # --- the sequencer ---------------------------------------------------------------------

    async def _sequence(self, origin: int, vhost: str, op: str, args: tuple):
        """On worker 0: check and apply a change here, have every other worker apply it, answer."""
        v = self._vhost(vhost)
        if op == "declare_queue":
            return await self._sequence_declare_queue(origin, v, *args)
        if op == "delete_queue":
            return await self._sequence_delete_queue(origin, v, *args)
        result = self._apply(v, op, args)  # raises the refusal, as one process would
        await self.links.broadcast("apply", vhost, op, args)
        return result

    async def _sequence_declare_queue(self, origin, v, name, durable, exclusive, auto_delete, arguments, ref):
        q = self._find_queue(v, name) if name else None
        if q is not None:
            self._check_lock(v, q, ref if exclusive else None, name)
            v._check_equivalent("queue", name, (
                ("durable", q.durable, durable and not exclusive), ("auto_delete", q.auto_delete, auto_delete),
            ), q.arguments, arguments)
            return (name, *(await self.queue_counts(q)))
        server_named = not name
        if server_named:
            name = self.server_name(v.name, origin)
        owner = self.owner_for_declare(v.name, name, exclusive, origin)
        if owner == self.index:
            made = self._create_queue(v, name, durable, exclusive, auto_delete, arguments, ref, server_named)
        else:
            made = await self.ask(owner, "create_queue", v.name, name, durable, exclusive, auto_delete,
                                            arguments, ref, server_named)
        record = (v.name, name, owner, made["durable"], auto_delete, arguments, ref if exclusive else None)
        if owner != self.index:
            self._add_record(*record)
        await self.links.broadcast("record", *record, skip=owner)
        return (name, made["messages"], made["consumers"])

    async def _sequence_delete_queue(self, origin, v, name, if_unused, if_empty, ref):
        q = self._find_queue(v, name)
        if q is None:
            return 0  # idempotent, as RabbitMQ 3.x
        if ref != ADMIN:
            self._check_lock(v, q, ref, name, only_if_exclusive=True)
        if isinstance(q, RemoteQueue):
            n = await self.ask(q.owner, "delete_queue", v.name, name, if_unused, if_empty)
            self._forget(v, name)
            await self.links.broadcast("forget", v.name, name, skip=q.owner)
        else:
            n = self._delete_local(v, q, if_unused, if_empty)
            await self.links.broadcast("forget", v.name, name)
        return n

    def _check_lock(self, v, q, ref, name: str, only_if_exclusive: bool = False) -> None:
        owner = q.exclusive_owner
        if owner is None and only_if_exclusive:
            return
        if isinstance(owner, RemoteOwner) or owner is None:
            same = owner == ref
        else:  # a local session's queue
            same = ref is not None and ref.worker == self.index and self._sessions.get(ref.session_id) is owner
        if not same:
            raise v._locked(name)

    # --- applying ---------------------------------------------------------------------------

    def _apply(self, v, op: str, args: tuple):
        if op == "declare_exchange":
            v.declare_exchange(*args)
        elif op == "delete_exchange":
            v.delete_exchange(*args)
        elif op == "bind_exchange":
            v.bind_exchange(*args)
        elif op == "unbind_exchange":
            v.unbind_exchange(*args)
        elif op == "bind_queue":
            name, exchange, routing_key, arguments, ref = args
            q = self._find_queue(v, name)
            if q is None:
                raise NotFound(f"no queue '{name}' in vhost '{v.name}'")
            if q.exclusive_owner is not None:
                self._check_lock(v, q, ref, name)
            v.bind_queue(q, exchange, routing_key, arguments)
        elif op == "unbind_queue":
            name, exchange, routing_key, arguments, ref = args
            q = self._find_queue(v, name)
            ex = v.exchanges.get(exchange)
            if exchange == "":
                from warren.errors import AccessRefused
                raise AccessRefused("operation not permitted on the default exchange")
            if q is None or ex is None:
                return None
            b = ex.bindings.get(_binding_key(ex, q, routing_key, arguments))
            if b is not None:
                if q.exclusive_owner is not None:
                    self._check_lock(v, q, ref, name)
                v._unbind(ex, b)
        else:
            raise InternalError(f"unknown definition change {op!r}")
        return None

    def _create_queue(self, v, name, durable, exclusive, auto_delete, arguments, ref, server_named) -> dict:
        session = self._session(ref) if exclusive else None
        q = v.declare_queue(session, name, False, durable, exclusive, auto_delete, arguments, server_named)
        if exclusive and session is not None and q.exclusive_owner is session:
            session.exclusive_queues.add(q)
        return {"durable": q.durable, "messages": q.message_count, "consumers": len(q.consumers)}

    def _add_record(self, vhost, name, owner, durable, auto_delete, arguments, ref) -> None:
        v = self._vhost(vhost)
        if name in v.remote_queues or name in v.queues:
            return
        v.remote_queues[name] = RemoteQueue(self, vhost, name, owner, durable, auto_delete, arguments, ref)
        if durable and v.durability is not None:  # so that bindings to it are restored (restore_queue)
            v.durability.definitions.declare_queue(vhost, name, durable, auto_delete, arguments)

    def _forget(self, v, name: str) -> None:
        q = v.remote_queues.pop(name, None)
        if q is None:
            return
        q.deleted = True
        for b in list(q.bound_to):
            v._unbind(b.source, b)
        if q.durable and v.durability is not None:
            v.durability.definitions.delete_queue(v.name, name)

    def _delete_local(self, v, q, if_unused: bool, if_empty: bool) -> int:
        from warren.errors import PreconditionFailed
        if if_unused and q.consumers:
            raise PreconditionFailed(f"queue '{q.name}' in vhost '{v.name}' in use")
        if if_empty and q.message_count:
            raise PreconditionFailed(f"queue '{q.name}' in vhost '{v.name}' is not empty")
        self._deleting = q  # queue_deleted: the sequencer tells the others itself
        try:
            return v.delete_queue(q)
        finally:
            self._deleting = None

    def queue_deleted(self, v, q) -> None:
        """A queue of ours went (exclusive connection closed, auto-delete, x-expires, the HTTP
        API): the others forget it, through the sequencer."""
        if q is self._deleting or self.stopping or self.links.closed:
            return  # (stopping: a queue that goes now is an exclusive one, which no restart keeps)
        if self.index == SEQUENCER:
            asyncio.ensure_future(self._tell_forget(v.name, q.name, skip=None))
        else:
            fut = self.ask(SEQUENCER, "forgotten", v.name, q.name)
            fut.add_done_callback(_log_failure)

    async def _tell_forget(self, vhost: str, name: str, skip):
        await self.links.broadcast("forget", vhost, name, skip=skip)

    # --- messages to remote queues ------------------------------------------------------------

    def forward(self, q: RemoteQueue, msg) -> int:
        """Send ``msg`` to ``q``'s owner (batched per loop turn); the sync number a confirm of
        it waits for: the local group commit's, which waits for the owner's (RemoteSync)."""
        out = self._outgoing.get(q.owner)
        if out is None:
            out = self._outgoing[q.owner] = []
        out.append((q.vhost_name, q.name, msg.exchange, msg.routing_key, bytes(msg.properties), bytes(msg.body)))
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self.loop.call_soon(self._flush)
        if msg.persistent and q.durable and self.broker.durability is not None:
            return self.broker.durability.wrote(self._remote_syncs[q.owner])
        return 0

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
        out = self._outgoing.get(worker)
        if out is None:
            out = self._outgoing[worker] = []
        out.append((vhost, msg.routing_key, msg.exchange, msg.routing_key, bytes(msg.properties),
                    bytes(msg.body)))
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self.loop.call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_scheduled = False
        if self._outgoing:
            outgoing, self._outgoing = self._outgoing, {}
            for owner, items in outgoing.items():
                self.links.tell(owner, "publish", items)
        if self._deliveries:
            deliveries, self._deliveries = self._deliveries, {}
            for worker, items in deliveries.items():
                self.links.tell(worker, "deliver", items)

    def ask(self, peer: int, op: str, *args) -> asyncio.Future:
        """``links.request`` after what is batched for ``peer``: a worker's records to another
        keep the order they were made in (a basic.get after publishes finds them)."""
        if peer in self._outgoing or peer in self._deliveries:
            self._flush()
        return self.links.request(peer, op, *args)

    def tell(self, peer: int, op: str, *args) -> None:
        """``links.tell`` after what is batched for ``peer`` (``ask``)."""
        if peer in self._outgoing or peer in self._deliveries:
            self._flush()
        self.links.tell(peer, op, *args)

    def send_delivery(self, worker: int, item: tuple) -> None:
        """A PeerSink's delivery to a consumer on ``worker`` (batched per loop turn)."""
        out = self._deliveries.get(worker)
        if out is None:
            out = self._deliveries[worker] = []
        out.append(item)
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self.loop.call_soon(self._flush)

    # --- consumers across workers: the owner's side (proxy.py) ---------------------------------

    def _proxy(self, peer: int, session_id: int, number: int, vhost: str) -> ProxyChannel:
        key = (peer, session_id)
        session = self._proxy_sessions.get(key)
        if session is None:
            session = self._proxy_sessions[key] = ProxySession(self, peer, session_id, self._vhost(vhost))
        ch = session.channels.get(number)
        if ch is None:
            sink = PeerSink(self, peer, session_id, number)
            ch = session.channels[number] = ProxyChannel(session, number, sink)
            sink.channel = ch
        return ch

    def _existing_proxy(self, peer: int, session_id: int, number: int) -> ProxyChannel | None:
        session = self._proxy_sessions.get((peer, session_id))
        return session.channels.get(number) if session is not None else None

    def _proxy_consume(self, peer: int, args: tuple) -> str:
        (vhost, name, session_id, number, tag, no_ack, exclusive, arguments,
         consumer_count, consumer_size, channel_count, channel_size) = args
        ch = self._proxy(peer, session_id, number, vhost)
        ch.consumer_prefetch_count, ch.consumer_prefetch_size = consumer_count, consumer_size
        ch.prefetch_count, ch.prefetch_size = channel_count, channel_size
        c = ch.consume(name, tag, no_ack, exclusive, arguments)
        self.loop.call_soon(ch.start_consumer, c)  # after the answer, which goes out first
        return c.tag

    def _proxy_get(self, peer: int, args: tuple):
        vhost, name, session_id, number, no_ack = args
        ch = self._proxy(peer, session_id, number, vhost)
        got = ch.get(name, no_ack)
        if got is None:
            return None
        tag, redelivered, msg, left = got
        return (tag, redelivered, msg.exchange, msg.routing_key, bytes(msg.properties), bytes(msg.body), left)

    def _proxy_message(self, peer: int, op: str, args: tuple) -> None:
        session_id, number = args[0], args[1]
        ch = self._existing_proxy(peer, session_id, number)
        if ch is None:
            return
        if op == "settle":
            tags, requeue = args[2], args[3]
            unacked = ch.unacked
            entries = [unacked.pop(t) for t in tags if t in unacked]
            if entries:
                ch._settle(entries, requeue)
        elif op == "credit":
            ch.sink.credit(args[2])
        elif op == "cancel":
            ch.cancel(args[2])
        elif op == "qos":
            (ch.consumer_prefetch_count, ch.consumer_prefetch_size, ch.prefetch_count,
             ch.prefetch_size) = args[2:6]
            ch.resume_delivery()
        elif op == "close_channel":
            session = self._proxy_sessions[(peer, session_id)]
            del session.channels[number]
            ch.close()
            if not session.channels:
                del self._proxy_sessions[(peer, session_id)]

    # --- consumers across workers: the consuming worker's side --------------------------------

    def _channel(self, session_id: int, number: int):
        from warren.spread.channel import SpreadChannel
        session = self._sessions.get(session_id)
        ch = session.channels.get(number) if session is not None else None
        return ch if isinstance(ch, SpreadChannel) and not ch.closed else None

    def _take_deliveries(self, peer: int, items: list) -> None:
        credits: dict = {}
        channel = self._channel
        for item in items:
            key = (item[0], item[1])
            credits[key] = credits.get(key, 0) + 1
            ch = channel(*key)
            if ch is not None:  # else its channel closed: close_channel gets the owner to requeue it
                ch.remote_deliver(peer, item)
        for (session_id, number), n in credits.items():
            self.tell(peer, "credit", session_id, number, n)

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

    # --- answering the others (PeerLinks' handler) ---------------------------------------------

    def peer_request(self, peer: int, op: str, args: tuple):
        if op == "define":
            vhost, what, what_args = args
            return self._sequence(peer, vhost, what, what_args)
        if op == "apply":
            vhost, what, what_args = args
            try:
                return self._apply(self._vhost(vhost), what, what_args)
            except AMQPError as e:  # the sequencer checked it: we hold something it does not
                log.error("worker %d could not apply %s %r from worker 0: %s", self.index, what, what_args, e)
                return None
        if op == "record":
            self._add_record(*args)
            return None
        if op == "forget":
            self._forget(self._vhost(args[0]), args[1])
            return None
        if op == "forgotten":  # on the sequencer: an owner deleted a queue by itself
            vhost, name = args
            v = self._vhost(vhost)
            self._forget(v, name)
            return self._tell_forget(vhost, name, skip=peer)
        if op == "create_queue":
            vhost, name, durable, exclusive, auto_delete, arguments, ref, server_named = args
            return self._create_queue(self._vhost(vhost), name, durable, exclusive, auto_delete, arguments, ref,
                                      server_named)
        if op == "delete_queue":
            vhost, name, if_unused, if_empty = args
            v = self._vhost(vhost)
            q = v.queues.get(name)
            return 0 if q is None else self._delete_local(v, q, if_unused, if_empty)
        if op == "counts":
            vhost, name = args
            q = self._vhost(vhost).queues.get(name)
            if q is None:
                raise NotFound(f"no queue '{name}' in vhost '{vhost}'")
            return (q.message_count, len(q.consumers))
        if op == "purge":
            vhost, name = args
            q = self._vhost(vhost).queues.get(name)
            if q is None:
                raise NotFound(f"no queue '{name}' in vhost '{vhost}'")
            return q.purge()
        if op == "sync":
            return self._synced_future()
        if op == "api_queues":  # for another worker's HTTP API (merged lists, one queue)
            if self.api is None:
                return []
            return self.api("queues", *args)
        if op == "reread":
            self.broker.reload_policies()
            self.broker.access.refresh()
            return None
        if op == "consume":
            return self._proxy_consume(peer, args)
        if op == "get":
            return self._proxy_get(peer, args)
        raise InternalError(f"unknown request {op!r} from worker {peer}")

    def peer_message(self, peer: int, op: str, args: tuple) -> None:
        if op == "publish":
            self._take_publishes(peer, args[0])
        elif op == "deliver":
            self._take_deliveries(peer, args[0])
        elif op in ("settle", "credit", "cancel", "qos", "close_channel"):
            self._proxy_message(peer, op, args)
        elif op == "count":
            self._counts[(peer, args[0])] = args[1]
        elif op == "congested":
            self._remote_congestion(*args)
        elif op == "stopping":
            self._peers_stopping.add(peer)
        elif op == "cancelled":
            ch = self._channel(args[0], args[1])
            if ch is not None:
                ch.remote_cancelled(args[2])
        else:
            log.error("worker %d: unknown message %r from worker %d", self.index, op, peer)

    def peer_lost(self, peer: int) -> None:
        if self.stopping or peer in self._peers_stopping:
            log.info("worker %d: the link to worker %d closed (the node is stopping)", self.index, peer)
            return
        log.critical("worker %d: the link to worker %d closed; the node stops", self.index, peer)
        if self.on_failure is not None:
            self.on_failure(f"the link to worker {peer} closed")

    def _take_publishes(self, peer: int, items: list) -> None:
        from warren.broker.message import Message
        from warren.broker.reply_to import PREFIX as REPLY_PREFIX, lookup as reply_lookup
        vhosts = self.broker.vhosts
        for vhost, name, exchange, routing_key, properties, body in items:
            v = vhosts.get(vhost)
            q = v.queues.get(name) if v is not None else None
            if q is None:
                if v is not None and name.startswith(REPLY_PREFIX):  # a direct reply to one of ours
                    rc = reply_lookup(v, name)
                    if rc is not None:
                        rc.publish(Message(exchange, routing_key, properties, body))
                continue  # deleted meanwhile: dropped, as a message routed to a queue being deleted
            msg = Message(exchange, routing_key, properties, body)
            try:
                msg.check_expiration()
            except AMQPError:
                pass
            q.publish(msg)
            if msg.persistent:
                msg.routed()
            if q.congested:  # flow control: the publishing worker holds its publishers to it
                told = self._congested_told.get(q)
                if told is None:
                    told = self._congested_told[q] = set()
                if peer not in told:
                    told.add(peer)
                    self.tell(peer, "congested", vhost, name, True)

    def queue_drained(self, q) -> None:
        """One of our queues drained (``_SpreadFlow``): the workers told it was congested resume."""
        told = self._congested_told.pop(q, None)
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
            Queue.flow_listener.drained(q)  # the publishers held for it resume

    def _synced_future(self):
        """An awaitable done once this worker's group commit covers every append made so far."""
        d = self.broker.durability
        fut = self.loop.create_future()
        need = d.next_sync if d.dirty else d.next_sync - 1
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

    def __init__(self, spread: Spread, worker: int, vhost: str) -> None:
        self.spread = spread
        self.owner = worker
        self.vhost_name = vhost

    def publish(self, msg) -> int:
        self.spread.forward_reply(self.owner, self.vhost_name, msg)
        return 0


class _SpreadFlow:
    """The queues' flow listener on a spread worker: the server's QueueFlow first, then the
    workers whose publishers a drained queue of ours held."""

    def __init__(self, inner, spread: Spread) -> None:
        self.inner = inner
        self.spread = spread

    def drained(self, queue) -> None:
        self.inner.drained(queue)
        if queue in self.spread._congested_told:
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


def _binding_key(ex, q, routing_key, arguments):
    from warren.broker.exchanges.base import Binding
    return Binding(ex, q, routing_key, arguments).key


def _log_failure(fut) -> None:
    if not fut.cancelled() and fut.exception() is not None:
        log.error("telling the sequencer a queue went failed: %s", fut.exception())
