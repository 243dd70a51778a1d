"""Queues of other nodes, served through this one: what a client's channel reaches across nodes.

A client connected to any node publishes to, consumes from, gets from, purges and acks a queue
that lives on another node, through the same ``BrokerChannel`` operations as a queue here: the
queue's handle (``NodeQueue``, in ``vhost.remote_queues`` as another worker's ``RemoteQueue``
is) answers the queue-type interface (warren/broker/queues/base.py) by asking the queue's node
over the inter-node links (``links.py``). No protocol adapter, HTTP route or Spark module knows.

What crosses is what crosses between the worker processes of one node (warren/spread), and
the same code does it: messages batched per loop turn to their queue's node, deliveries batched
back, each delivery numbered with the consuming channel's own tags, its settles sent back, a
shared prefetch lent to the queue's node, credit kept beside the queue (``Forwarding`` and
``Consumers`` of warren/spread, reached here with node names where they have worker numbers).
What differs between machines is here:

* **which queues are elsewhere**: the queue directory in etcd (``queues.py``) names each
  queue's node; ``refresh`` keeps a handle of each other node's queue in its vhost (an
  exclusive one too: messages route to it, a channel's use of it is 405). Bindings to it are
  the shared topology's (topology.py), made once its handle is known.
* **a node that goes** (its link closes): its queues' consumers here are cancelled
  (basic.cancel, as RabbitMQ tells consumers of a queue whose node went), its queues' bindings
  are parked (a publish finds no route: RabbitMQ 3.10's answer), what its clients' channels held
  of our queues goes back to them, and a publisher confirm that waited for it is a nack
  (``NodeSync``). Its handles go when its queues leave the directory.
* **limits and confirms**: a full queue here refuses what another node sends as it refuses its
  own clients' (``strict_limits``), and the answer to that node's next sync names each message
  refused (record number, position): its confirm is a nack, the others' acks, as on one node. A confirm through another node waits for that node to take the
  message.
* **direct reply-to**: a reply token ends with its node's name (``reply_suffix``); a reply
  published on another node crosses with the messages batched for this one.
"""

from __future__ import annotations

import asyncio
import base64
import concurrent.futures
import inspect
import logging
import weakref

from warren.broker.queues.length_limits import REFUSED
from warren.cluster.forward_numbers import Arrived, Confirming, Refusals, Sent
from warren.cluster.links import NodeUnavailable
from warren.errors import AMQPError, NotFound
from warren.spread.consumers import Consumers
from warren.spread.dtx import DtxParts
from warren.broker.reply_to import PREFIX as REPLY_PREFIX
from warren.spread.messages import Forwarding, RemoteReply
from warren.spread.remote_queue import RemoteOwner

__all__ = ["NodeReach", "NodeQueue"]

log = logging.getLogger("warren.cluster")

HELD_MAX = 100_000  # messages held for replicated queues between leaders, at most (then nacked)
HELD_TIMEOUT_S = 30.0  # held longer than this (no leader came): dropped, their confirms nacked
NODE_SYNC_TIMEOUT_S = 30.0  # a queue's node that does not answer a sync: what waited for it is nacked
ASK_TIMEOUT_S = 60.0  # a consume, get or purge asked of a queue's node
EXPECTED_S = 10.0  # a handle made from a node's answer waits this long for the directory to list it
ANNOUNCE_TIMEOUT_S = 1.0  # a node told of a queue just made here, answering (``announce``): else its watch tells it
# a sync's answer (``ask_sync``): everything sent before it is safe there; a commit there could
# not make them safe (or a message was refused whose record is not known); a record of them did
# not arrive. (REFUSED_THERE, [(record number, position or None), ...]): those messages were
# refused by a full queue, the rest are safe (forward_numbers.py ``Confirming``)
HELD, REFUSED_THERE, LOST = "held", "refused", "lost"


class NodeSync:
    """A queue's node as one more store of this node's group commit (``Durability``): a
    persistent message forwarded to a durable queue there marks it dirty, and its ``sync`` (on
    the server's sync pool thread) asks that node to answer once its own group commit covers
    what this node sent it. If the node cannot answer (gone, or silent past the time-out), the
    commit is not failed (this node's disk is fine) but every publisher confirm waiting for it is
    a nack (``NodeReach.nack_waiting``): never a confirm of what the node may not hold."""

    ack_sync_interval = 0
    closed_cleanly = False
    failed = None

    def __init__(self, reach: "NodeReach", node: str) -> None:
        self.reach = reach
        self.node = node
        self.directory = f"node {node}"  # for Durability's log lines

    def sync(self) -> None:
        fut = concurrent.futures.Future()
        loop = self.reach.loop
        loop.call_soon_threadsafe(self.reach.ask_sync, self.node, fut)
        try:
            fut.result(NODE_SYNC_TIMEOUT_S)
        except Exception as e:  # noqa: BLE001: whatever kept the answer away, the confirms are nacked
            nack_from_pool(self.reach, self.node, e)

    def close(self) -> None:
        pass


def nack_from_pool(reach: "NodeReach", what: str, error: BaseException) -> None:
    """On a group commit's pool thread, for a store that waited on other nodes (``NodeSync``,
    ``HeldSync``, replicas.py's ``ReplicatedStore``) and did not get what it waited for: every
    publisher confirm waiting now is a nack (``NodeReach.nack_waiting``, on the loop), and the
    commit goes on (this node's disk is fine)."""
    done = concurrent.futures.Future()
    reach.loop.call_soon_threadsafe(reach.nack_waiting, what, str(error) or type(error).__name__, done,
                                    isinstance(error, NodeRefused))
    done.result(NODE_SYNC_TIMEOUT_S)


class HeldSync:
    """The messages held for replicated queues between leaders (``NodeReach.hold``) as one more
    store of this node's group commit: its ``sync`` (on the pool thread) waits until they went to
    the queues' new leaders and those synced them; if they never do, the confirms waiting are
    nacks. (The group commit waits meanwhile, so this node's other confirms wait too: a failover
    holds them back for its second or two.)"""

    ack_sync_interval = 0
    closed_cleanly = False
    failed = None
    directory = "messages held between leaders"

    def __init__(self, reach: "NodeReach") -> None:
        self.reach = reach

    def sync(self) -> None:
        loop = self.reach.loop
        fut = concurrent.futures.Future()
        loop.call_soon_threadsafe(self.reach.held_wait, fut)
        try:
            nodes, stores = fut.result(HELD_TIMEOUT_S + NODE_SYNC_TIMEOUT_S)
            for store in stores:  # taken here: this node leads the queue now
                store.sync()
            for node in nodes:
                synced = concurrent.futures.Future()
                loop.call_soon_threadsafe(self.reach.ask_sync, node, synced)
                synced.result(NODE_SYNC_TIMEOUT_S)
        except Exception as e:  # noqa: BLE001: whatever kept them from a leader, the confirms are nacked
            nack_from_pool(self.reach, "a new leader", e)

    def close(self) -> None:
        pass


class _Syncs(dict):
    def __init__(self, reach: "NodeReach") -> None:
        super().__init__()
        self.reach = reach

    def __missing__(self, node: str) -> NodeSync:
        sync = self[node] = NodeSync(self.reach, node)
        return sync


class NodeQueue:
    """A queue that lives on another node, as this node holds it: what bindings, routing and a
    channel ask of a queue (``RemoteQueue``'s questions), answered by its node. Also the HTTP
    API's handle of it (warren/broker/directory.py ``find_queue``); ``owner`` is its node."""

    is_here = False
    on_this_node = False  # (the x-local-random exchange never routes to it)
    consumers = ()

    def __init__(self, record: dict, reach: "NodeReach | None" = None) -> None:
        self.reach = reach
        self.name = record["name"]
        self.vhost_name = record["vhost"]
        self.owner = record["node"]
        self.durable = bool(record.get("durable"))
        self.auto_delete = bool(record.get("auto_delete"))
        self.exclusive = bool(record.get("exclusive"))
        self.arguments = record.get("arguments") or {}
        self.queue_type = record.get("type", "classic")
        self.is_stream = self.queue_type == "stream"
        self.exclusive_owner = None
        self.bound_to: set = set()
        self.deleted = False
        self.expected_until = 0.0  # made before the queue directory listed it (NodeReach.add_handle)
        self.expected_revision = 0  # and the etcd revision that made it, if known
        # the bindings to it taken out of their exchanges while its node is down: (source, key, arguments)
        self.parked: list | None = None
        self.congested = False  # its node says it is congested (flow control, as between workers)

    @property
    def down(self) -> bool:
        return self.reach is None or not self.reach.running(self.owner)

    @property
    def routable(self) -> bool:
        """The default exchange routes to it (its node runs, or it is a replicated queue whose
        followers are taking it over); other exchanges' bindings to it are parked meanwhile
        (``NodeReach.park``)."""
        return not self.down or self.reach.failover_expected(self.vhost_name, self.name)

    def _check_up(self) -> None:
        if self.down:
            from warren.cluster.api import down_text
            raise NotFound(down_text({"name": self.name, "vhost": self.vhost_name, "node": self.owner}))

    def publish(self, msg) -> int:
        """Sent to its node; the sync number a confirm waits for, or REFUSED (a nack) if its
        node went in this very turn (routed before the bindings were parked). A full queue
        there refuses it as it refuses its own clients' (``strict_limits``): the sync says so."""
        if self.down:  # a replicated queue between leaders holds it here (``NodeReach.hold``)
            return self.reach.hold(self, msg)
        return self.reach.forward(self, msg)

    def dispatch(self) -> None:
        pass

    def touch(self) -> None:
        pass

    def locked_against(self, session) -> bool:
        return self.exclusive

    def relock(self, session):
        return False  # Qpid's rule holds for a queue of this node's connections only

    def counts(self):
        self._check_up()
        return self.reach.ask_queue(self, "counts")

    def purge(self):
        self._check_up()
        return self.reach.ask_queue(self, "purge")

    def reads_here(self):
        """A copy of this queue on this node that reads are served from: a follower's replica of
        a stream (replica_reads.py), in step with its leader; else None (its node reads it)."""
        if not self.is_stream or self.reach is None:
            return None
        return self.reach.replica_reads(self.vhost_name, self.name)

    def consume(self, channel, tag: str, no_ack: bool, exclusive: bool, arguments: dict, credit=None):
        here = self.reads_here()
        if here is not None:
            return here.consume(channel, tag, no_ack, exclusive, arguments, credit)
        self._check_up()
        return self.reach.reads_of(channel).consume(self, tag, no_ack, exclusive, arguments, credit)

    def acquire(self, channel, seqs: list):
        self._check_up()
        return self.reach.reads_of(channel).acquire(self, seqs)

    def get(self, channel, no_ack: bool):
        self._check_up()
        return self.reach.reads_of(channel).get(self, no_ack)

    def takes_runs(self) -> bool:
        return False

    def __repr__(self) -> str:
        return f"NodeQueue({self.vhost_name!r}, {self.name!r}, node={self.owner!r})"


class NodeRefused(Exception):
    """A queue's node refused a message sent since the last sync (a full reject-publish queue)."""


class NodeReach(Forwarding, Consumers):
    """This node's part of serving queues across nodes (module doc). ``Forwarding`` and
    ``Consumers`` are warren/spread's, whose peers are here node names; so is its ``dtx``
    (0-10 dtx branches that accepted messages of another node's queues)."""

    # a full queue refuses what another node sends as it refuses its own clients' messages: the
    # publishing node's confirms wait for the answer to a sync, which says so (``request``)
    strict_limits = True


    def __init__(self, cluster, broker) -> None:
        self.cluster = cluster
        self.broker = broker
        broker.notes_confirming = True  # our handles learn of a refusal later (``forward``)
        self.links = None  # NodeLinks, set once listening
        self.loop: asyncio.AbstractEventLoop | None = None
        self._sessions: weakref.WeakValueDictionary = weakref.WeakValueDictionary()
        self._outgoing: dict = {}
        self._deliveries: dict = {}
        self._proxy_sessions: dict = {}
        self._flush_scheduled = False
        self._remote_syncs = _Syncs(self)
        self._replies: dict = {}
        self.congested_told: dict = {}
        self._full_told: dict = {}
        self._refresh_due = False
        # messages for replicated queues between leaders (``hold``), and where they went since
        self._held: dict[tuple[str, str], list] = {}
        self._held_count = 0
        self._held_since = 0.0
        self._released_nodes: set[str] = set()
        self._released_stores: set = set()
        self._held_waiters: list[concurrent.futures.Future] = []
        self._held_sync = HeldSync(self)
        # consumers of replicated queues between leaders: (channel, tag, RemoteConsumer) by queue
        self._resuming: dict[tuple[str, str], list] = {}
        self._resuming_since: dict[tuple[str, str], float] = {}  # when each queue's first was kept
        self._failed_through = -1  # commits up to this number failed to make their appends safe (``nack_waiting``)
        # the records of messages between nodes are numbered: a sync knows whether everything
        # sent before it arrived (forward_numbers.py)
        self._sent = Sent()
        self._arrived = Arrived()
        # and a full queue's refusal of a message in one names it, so that its confirm alone is a nack
        self._confirming = Confirming()
        self._refusals = Refusals()
        # (vhost, name) -> whether a replicated queue whose leader is down will have another one
        # (warren/cluster/replicas.py ``failover_expected``, set by the server)
        self.failover_expected = lambda vhost, name: False
        # (vhost, name) -> this node's replica of a stream to read, or None (replicas.py ``reads_here``)
        self.replica_reads = lambda vhost, name: None
        self.topology = None  # SharedTopology (topology.py): its bindings may wait for our handles
        # dtx branches whose accepted messages other nodes' queues hold (warren/spread/dtx.py):
        # the running nodes are asked, a node is reached while it runs
        self.dtx = DtxParts(self, f"node {cluster.node_name}", lambda: self.links.running_peers(),
                            lambda node: self.running(node) and node not in cluster.unreachable)

    def start(self, links) -> None:
        from warren.broker.queue import Queue
        from warren.spread.messages import SpreadFlow
        self.links = links
        self.loop = asyncio.get_running_loop()
        Queue.flow.listener = SpreadFlow(Queue.flow.listener, self)  # drained queues tell publishers' nodes
        # parts of other nodes' prepared dtx branches recorded here: their messages held again,
        # until each home says (once it runs: ``members_changed``) whether it has the branch
        self.dtx.adopt(str)
        self.refresh()

    def flush_now(self) -> None:
        self._flush()

    def send_forward(self, node: str, op: str, messages, positions: list) -> None:
        tag = self._sent.next(node)
        self._confirming.sent(node, tag[1], positions)
        self.links.tell(node, op, messages, tag)

    def _flush(self) -> None:
        super()._flush()
        self._confirming.unsent()  # (every record of this turn went: what was routed has its number)

    def tick(self) -> None:
        """The server's tick: our full queues with room again tell their publishers' nodes."""
        self.check_full()

    def running(self, node: str) -> bool:
        return self.cluster.running(node)

    def forward(self, q: NodeQueue, msg) -> int:
        """``Forwarding.forward``, and a confirm of a transient message (or of one to a
        transient queue) waits for its node too: confirmed once that node took it, as RabbitMQ
        confirms it once the queue did, not once it left this node."""
        need = super().forward(q, msg)
        confirms = self.broker.confirming
        if confirms is not None:  # its publisher's next number: the one a refusal there nacks
            self._confirming.routed(msg, confirms, confirms.published_upto + 1)
        if not need and self.broker.durability is not None:
            return self.broker.durability.wrote(self._remote_syncs[q.owner])
        return need

    # --- what Forwarding and Consumers ask of their owner ---------------------------------------

    def ask(self, node: str, op: str, *args):
        if node in self._outgoing or node in self._deliveries:
            self._flush()
        # a future, not a coroutine: Forwarding adds callbacks to a sync's answer
        return asyncio.ensure_future(self._ask(node, op, args))

    async def _ask(self, node: str, op: str, args: tuple):
        try:
            return await self.links.ask(node, op, *args, timeout=ASK_TIMEOUT_S)
        except NodeUnavailable as e:  # what RabbitMQ answers for a queue whose node is down
            self.node_lost(node)
            raise NotFound(f"node '{node}' is down or inaccessible ({e})") from None

    def tell(self, node: str, op: str, *args, now: bool = False) -> None:
        if node in self._outgoing or node in self._deliveries:
            self._flush()
        self.links.tell(node, op, *args)

    def session_ref(self, session) -> RemoteOwner:
        self._sessions[id(session)] = session
        return RemoteOwner(self.cluster.node_name, id(session))

    def _vhost(self, name: str):
        v = self.broker.vhosts.get(name)
        if v is None:
            raise NotFound(f"no vhost '{name}' on node {self.cluster.node_name}")
        return v

    def ask_queue(self, q: NodeQueue, op: str):
        """An awaitable of ``op`` ("counts", "purge") answered by ``q``'s node."""
        return self.ask(q.owner, op, q.vhost_name, q.name)

    # --- which queues are elsewhere: handles kept from the queue directory ----------------------

    def members_changed(self) -> None:
        """A node joined, returned, left or went: link to the running ones, follow the handles."""
        if self.links is not None and not self.links.closed:
            self.links.link_all()
            self.dtx.home_back()
        self.directory_changed()

    def directory_changed(self) -> None:
        """The queue directory changed (a watch event): the handles follow, once per loop turn."""
        if not self._refresh_due and self.loop is not None:
            self._refresh_due = True
            self.loop.call_soon(self.refresh)

    def refresh(self) -> None:
        self._refresh_due = False
        me = self.cluster.node_name
        wanted: dict = {}
        moved = False  # a handle with bindings went: they are made again to its queue's new place
        followed = self.cluster.followed_revision.get("queues", 0)
        for record in list(self.cluster.queues.values()):
            node = record.get("node")
            if node == me or "name" not in record:
                continue  # (an exclusive queue's handle routes to it; a channel's use of it is refused 405)
            # a queue of a node that is down keeps its handle, parked (below): a node taken for
            # down a moment too soon loses no binding; its transient queues' keys go with its lease
            key = (record.get("vhost"), record["name"])
            if key not in wanted or self.cluster.running(node):
                wanted[key] = record
        for v in list(self.broker.vhosts.values()):
            for name, q in list(v.remote_queues.items()):
                record = wanted.get((v.name, name))
                if record is None and q.expected_until > self.loop.time() and \
                        (not q.expected_revision or q.expected_revision > followed):
                    continue  # made by its node a moment ago (add_handle): the watch has not brought it yet
                if record is None and self.failover_expected(v.name, name):
                    continue  # its old leader's key went: kept (routing, holding) until the new one's comes
                if record is None or record["node"] != q.owner or name in v.queues:
                    moved = moved or bool(q.bound_to)
                    self.forget_handle(v, q)
        for v in list(self.broker.vhosts.values()):
            for q in list(v.remote_queues.values()):
                if not isinstance(q, NodeQueue):
                    continue
                if q.down and not self.failover_expected(v.name, q.name):
                    self.park(q)
                elif q.parked is not None and not q.down:
                    self.unpark(q)
        for (vhost, name), record in wanted.items():
            v = self.broker.vhosts.get(vhost)
            if v is None or name in v.queues or name in v.remote_queues:
                continue
            v.remote_queues[name] = NodeQueue(record, self)
            self.release(v, name)  # what was held for it between leaders
        # held for a leader whose link closed but which still leads (a link cut and back, a
        # partition healed before anyone took the queue over): back to it now it is reachable
        for vhost, name in set(self._held) | set(self._resuming):
            v = self.broker.vhosts.get(vhost)
            target = v.queues.get(name) or v.remote_queues.get(name) if v is not None else None
            if target is not None and not getattr(target, "down", False):
                self.release(v, name)
        if self.topology is not None:
            self.topology.retry_waiting()  # bindings that waited for a queue of another node
            if moved:  # (a replicated queue taken by another node: replicas.py)
                self.topology.changed()

    def add_handle(self, v, record: dict, revision: int = 0) -> None:
        """The handle of a queue another node just made or answered for (before the watch):
        kept without its record until the watch is past ``revision`` (the etcd write that made
        it: the record, or its delete, has come by then), EXPECTED_S at most."""
        if revision and self.cluster.followed_revision.get("queues", 0) >= revision:
            self.refresh()  # the watch brought it already: its handle from its record (or it went since)
            return
        if record["name"] not in v.queues and record["name"] not in v.remote_queues:
            q = v.remote_queues[record["name"]] = NodeQueue(record, self)
            q.expected_until = self.loop.time() + EXPECTED_S
            q.expected_revision = revision
            if self.topology is not None:
                self.topology.retry_waiting()

    async def announce(self, v, record: dict, revision: int) -> None:
        """A queue just made here: every running node takes its handle (``add_handle``) before
        the declare-ok goes, so a publish by its name through any node routes to it at once, as
        RabbitMQ's declare is known to every node once answered (an RPC reply through another
        node finds the exclusive reply queue made a moment before). A node that does not answer
        within ANNOUNCE_TIMEOUT_S learns it from its watch of the queue directory."""
        nodes = self.links.running_peers()
        if nodes:
            await asyncio.gather(*(self.links.ask(node, "handle", record, revision, timeout=ANNOUNCE_TIMEOUT_S)
                                   for node in nodes), return_exceptions=True)

    # --- publishes to a replicated queue between leaders ---------------------------------------

    def hold(self, q: NodeQueue, msg) -> int:
        """``q``'s leader is down and a follower is taking it over (replicas.py): the message
        waits here (at most ``HELD_MAX``) and goes to the new leader once its handle is known;
        its confirm waits for that (``HeldSync``), as RabbitMQ's channel holds publishes to a
        quorum queue until a leader is elected. Otherwise (or past the bound, or without a data
        folder) REFUSED: a nack."""
        if (self._held_count >= HELD_MAX or self.broker.durability is None
                or not self.failover_expected(q.vhost_name, q.name)):
            return REFUSED
        if not self._held_count:
            self._held_since = self.loop.time()
            self.loop.call_later(HELD_TIMEOUT_S, self._held_expired, self._held_since)
        self._held.setdefault((q.vhost_name, q.name), []).append(msg)
        self._held_count += 1
        return self.broker.durability.wrote(self._held_sync)

    def release(self, v, name: str) -> None:
        """The queue ``name`` has its new leader (its handle, or the queue itself here): what was
        held for it goes there, and its consumers here consume from it again."""
        self._resume(v, name)
        msgs = self._held.pop((v.name, name), None)
        if not msgs:
            return
        target = v.queues.get(name) or v.remote_queues.get(name)
        self._held_count -= len(msgs)
        if target is None:
            log.warning("cluster: %d messages held for queue '%s' in vhost '%s' have nowhere to go: dropped, "
                        "their confirms nacked", len(msgs), name, v.name)
            self._held_failed("the queue has no leader")
            return
        for msg in msgs:
            target.publish(msg)
        if isinstance(target, NodeQueue):
            self._released_nodes.add(target.owner)
        elif target.store is not None:
            self._released_stores.add(target.store)
        log.info("cluster: %d messages held for queue '%s' in vhost '%s' while it had no leader went to it",
                 len(msgs), name, v.name)
        self._held_done()

    def _resume(self, v, name: str) -> None:
        """Each consumer kept through the failover (``node_lost``) consumes from the new leader
        with its tag, flags and arguments: its client sees nothing but redeliveries of what it
        had not acked (the old tags' acks are taken and go nowhere). Refused there (the channel
        closed meanwhile, an exclusive consumer already there): cancelled, as before."""
        target = v.queues.get(name) or v.remote_queues.get(name)
        kept = self._resuming.pop((v.name, name), ())
        self._resuming_since.pop((v.name, name), None)  # (its expiry timer is moot)
        for ch, tag, rc in kept:
            reads = ch.remote
            if ch.closed or reads is None or reads.consumers.get(tag) is not rc:
                continue  # closed or cancelled meanwhile
            del reads.consumers[tag]
            exclusive, arguments, credit = rc.terms
            try:
                if target is None:
                    raise NotFound(f"no queue '{name}' in vhost '{v.name}'")
                started = target.consume(ch, tag, rc.no_ack, exclusive, arguments, credit)
            except AMQPError as e:
                log.warning("cluster: consumer %s of queue '%s' could not consume again (%s): cancelled", tag, name, e)
                ch.cancelled_by_broker(tag)
                continue
            if inspect.isawaitable(started):
                task = asyncio.ensure_future(started)
                task.add_done_callback(lambda t, ch=ch, tag=tag, credit=credit: self._resumed(ch, tag, credit, t))
            else:
                self._resumed_now(ch, started, credit)

    def _resume_expired(self, key: tuple[str, str], since: float) -> None:
        """Consumers kept HELD_TIMEOUT_S for a queue that found no leader in that time: cancelled
        (basic.cancel, where the client asked for it), so their clients consume again themselves."""
        if self._resuming_since.get(key) != since:
            return  # resumed meanwhile (and perhaps kept again since, with a timer of its own)
        del self._resuming_since[key]
        kept = self._resuming.pop(key, ())
        log.warning("cluster: %d consumers of queue '%s' in vhost '%s' waited %d s for a leader: cancelled",
                    len(kept), key[1], key[0], HELD_TIMEOUT_S)
        for ch, tag, rc in kept:
            reads = ch.remote
            if not ch.closed and reads is not None and reads.consumers.get(tag) is rc:
                reads.remote_cancelled(tag)

    def _resumed(self, ch, tag: str, credit, task: asyncio.Future) -> None:
        if task.cancelled() or task.exception() is not None:
            if not ch.closed:
                ch.cancelled_by_broker(tag)
            return
        self._resumed_now(ch, task.result(), credit)

    @staticmethod
    def _resumed_now(ch, consumer, credit) -> None:
        consumer.start()
        if credit is not None:  # (a 1.0 link, a 0-10 subscription: its new keeper learns the credit left)
            credit.moved(ch, consumer)

    def held_wait(self, fut: concurrent.futures.Future) -> None:
        """On the loop, for HeldSync: ``fut`` gets (nodes, stores) the held messages went to,
        once none is held any more."""
        self._held_waiters.append(fut)
        self._held_done()

    def _held_done(self) -> None:
        if self._held_count or not self._held_waiters:
            return
        nodes, stores = self._released_nodes, self._released_stores
        self._released_nodes, self._released_stores = set(), set()
        waiters, self._held_waiters = self._held_waiters, []
        for fut in waiters:
            if not fut.done():
                fut.set_result((nodes, stores))

    def _held_expired(self, since: float) -> None:
        if self._held_count and self._held_since == since:
            log.warning("cluster: %d messages held for queues without a leader for %g s: dropped, their confirms "
                        "nacked", self._held_count, HELD_TIMEOUT_S)
            self._held.clear()
            self._held_count = 0
            self._held_failed(f"no leader within {HELD_TIMEOUT_S:g} s")

    def _held_failed(self, why: str) -> None:
        waiters, self._held_waiters = self._held_waiters, []
        for fut in waiters:
            if not fut.done():
                fut.set_exception(NodeRefused(why))
        self._held_done()

    # --- direct reply-to across nodes ---------------------------------------------------------

    @property
    def reply_suffix(self) -> str:
        """A reply token made here ends with ``.n-`` and this node's name (base64, no dots)."""
        return ".n-" + base64.urlsafe_b64encode(self.cluster.node_name.encode()).rstrip(b"=").decode()

    def remote_reply(self, vhost: str, routing_key: str):
        """The reply consumer another running node's token names, as a destination (warren/
        spread's ``RemoteReply``: the reply crosses with the messages batched for that node)."""
        if not routing_key.startswith(REPLY_PREFIX):
            return None
        tail = routing_key.rpartition(".")[2]
        if not tail.startswith("n-"):
            return None
        try:
            node = base64.urlsafe_b64decode(tail[2:] + "=" * (-len(tail[2:]) % 4)).decode()
        except (ValueError, UnicodeDecodeError):
            return None
        if node == self.cluster.node_name or not self.running(node):
            return None
        reply = self._replies.get((node, vhost))
        if reply is None:
            reply = self._replies[(node, vhost)] = RemoteReply(self, node, vhost)
        return reply

    def refused_by(self, peer: str, position: int | None = None) -> None:
        self._refusals.refused(peer, position)

    def ask_sync(self, node: str, fut: concurrent.futures.Future) -> None:
        """On the loop, for NodeSync: everything sent to ``node`` so far, then the question,
        naming the last record sent; its answer says whether a queue there refused something
        since (NodeRefused), or a record did not arrive (a link broke with it on the way: this
        question, on a new link, is answered all the same): then the confirms waiting are
        nacks (a nack may be of a message kept, never the reverse)."""
        self._flush()
        terms = self._sent.sync_terms(node)
        answer = self.ask(node, "sync", terms)

        def done(a: asyncio.Future) -> None:
            if fut.done():
                return
            e = a.exception()
            answer = a.result() if e is None else None
            if answer == LOST:
                e = NodeUnavailable(f"messages sent to node {node} did not all arrive (a link to it broke)")
            elif type(answer) is tuple and (refused := self._confirming.refused(node, answer[1])) is not None:
                for confirms, number in refused:  # these messages only: their confirms
                    confirms.refuse(number)
            elif e is None and answer != HELD:  # (refused, whose not known: every confirm waiting)
                e = NodeRefused(f"a full queue on node {node} refused a message")
            self._sent.settled(node, terms[1])
            self._confirming.settled(node, terms[1])
            if e is not None:
                fut.set_exception(e)
            else:
                fut.set_result(None)
        answer.add_done_callback(done)

    @staticmethod
    def park(q: NodeQueue) -> None:
        """``q``'s node is down: its bindings leave their exchanges (not the definitions log,
        nor etcd), so what they routed to it is unroutable meanwhile (a mandatory publish is
        returned, a confirm is an ack), as RabbitMQ 3.10 answers for a queue on a down node."""
        if q.parked is None:
            q.parked = []
        for b in list(q.bound_to):
            b.source.remove_binding(b)
            q.parked.append((b.source, b.routing_key, b.arguments))

    @staticmethod
    def unpark(q: NodeQueue) -> None:
        """``q``'s node runs again: its parked bindings are back in their exchanges."""
        parked, q.parked = q.parked, None
        for source, routing_key, arguments in parked or ():
            if source.vhost is not None and source.vhost.exchanges.get(source.name) is source:
                source.bind(q, routing_key, arguments)

    def unbind_parked(self, q: NodeQueue, source_name: str, routing_key: str, arguments: dict) -> bool:
        """A binding removed while parked (topology.py): True if it was one of them."""
        before = len(q.parked or ())
        if q.parked:
            q.parked = [p for p in q.parked if (p[0].name, p[1], p[2]) != (source_name, routing_key, arguments)]
        return len(q.parked or ()) != before

    def forget_handle(self, v, q: NodeQueue) -> None:
        """``q`` is gone from the directory (deleted, or its node forgotten): its handle and the
        bindings to it go."""
        del v.remote_queues[q.name]
        q.deleted = True
        self.unpark(q)  # (so that they are removed below, from the definitions log too)
        for b in list(q.bound_to):
            v.remove_binding(b.source, b)

    # --- a node that goes --------------------------------------------------------------------

    def node_lost(self, node: str) -> None:
        """``node``'s link closed (it stopped or died): consumers here of its queues are
        cancelled; our queues' consumers of its clients' channels go, their unacked messages
        back to the queues."""
        if node in self.cluster.unreachable:
            return
        self.cluster.mark_unreachable(node)  # (its listeners refresh the handles: parked, transient ones gone)
        log.warning("cluster: node %s is gone; its queues' consumers here are cancelled (a replicated queue's "
                    "consume again once it has a leader)", node)
        for session in list(self._sessions.values()):
            for ch in list(getattr(session, "channels", {}).values()):
                reads = getattr(ch, "remote", None)
                if reads is None or ch.closed:
                    continue
                for tag, rc in list(reads.consumers.items()):
                    if rc.owner != node:
                        continue
                    vhost = ch.vhost.name
                    handle = ch.vhost.remote_queues.get(rc.queue_name)
                    # (a stream's consumer is cancelled, as RabbitMQ's: its offset is its client's to resume)
                    credit = rc.terms[2]
                    if (credit is None or credit.MOVABLE) and not getattr(handle, "is_stream", False) \
                            and self.failover_expected(vhost, rc.queue_name):
                        # kept: it consumes from the new leader (``_resume``), as RabbitMQ keeps a
                        # quorum queue's consumers through a leader change
                        key = (vhost, rc.queue_name)
                        if key not in self._resuming:
                            since = self._resuming_since[key] = self.loop.time()
                            self.loop.call_later(HELD_TIMEOUT_S, self._resume_expired, key, since)
                        self._resuming.setdefault(key, []).append((ch, tag, rc))
                    else:
                        reads.remote_cancelled(tag)
        self.dtx.home_lost(node)  # (before its proxy channels close: what they handed over is held apart)
        for key in [k for k in self._proxy_sessions if k[0] == node]:
            session = self._proxy_sessions.pop(key)
            for ch in list(session.channels.values()):
                ch.close()
            session.channels.clear()
        if self._outgoing.pop(node, None) is not None:
            # messages for it not sent yet are dropped: their number is skipped, so the next sync
            # asked of it (on a new link, answered) does not confirm them
            self._sent.skip(node)
        self._deliveries.pop(node, None)

    def nack_all(self, why: str) -> None:
        """On the loop: a replicated queue this node led was taken by another node (replicas.py)
        and goes from here with what it took last, which may be on no other member: every confirm
        waiting now is a nack, this node's clients' and those other nodes wait for from it (the
        commits not begun yet included: the queue's store leaves them when it is deleted)."""
        d = self.broker.durability
        if d is not None:
            self._failed_through = max(self._failed_through, d.next_sync)
        done = concurrent.futures.Future()
        self.nack_waiting(self.cluster.node_name, why, done)

    def nack_waiting(self, node: str, why: str, done: concurrent.futures.Future, refused: bool = False) -> None:
        """On the loop, for NodeSync: ``node`` did not answer a sync, or a full queue there
        refused a message (``refused``); every confirm waiting for a sync now is a nack (those
        of this node's own queues too: a nack may be of a message kept, never the reverse), and
        so is each confirm another node waits for from a sync of this node's that covered it
        (``_synced_then``)."""
        d = self.broker.durability
        if not refused and d is not None:  # (a full queue refused one message: the others' safety is not in doubt)
            # every commit begun so far counts as failed (the failing one is among them): a sync
            # asked of this node that waits for one of them answers "refused", even one asked
            # after this failure (its messages are in a commit this failure may have spoilt)
            self._failed_through = max(self._failed_through, d.next_sync - 1)
        try:
            count = 0
            for waiter in list(d.waiting):
                nack = getattr(waiter, "nack_unsynced", None)
                if nack is not None:
                    count += nack()
            if count and refused:
                log.debug("cluster: a full queue on node %s refused a message: %d confirms are nacks", node, count)
            elif count:
                log.warning("cluster: node %s did not confirm what was sent to its queues (%s): %d publisher "
                            "confirms are nacks", node, why, count)
        finally:
            done.set_result(None)

    # --- what the other nodes ask and tell (NodeLinks' handler, through ClusterApi) ------------

    def request(self, node: str, op: str, args: tuple):
        self.cluster.unreachable.discard(node)
        if op == "counts":
            vhost, name = args
            v = self.broker.vhosts.get(vhost)
            q = v.queues.get(name) if v is not None else None
            if q is None or q.deleted:
                raise NotFound(f"no queue '{name}' in vhost '{vhost}'")
            return q.message_count, len(q.consumers)
        if op == "sync":  # what was refused is known now: every message sent before it was taken in
            if self._arrived.missing(node, args[0] if args else None):
                return LOST
            refused = self._refusals.answer(node)
            need = self._sync_needed() if self.broker.durability is not None else 0
            return self._synced_then(self.synced_future(), refused, need)
        if op == "handle":  # a queue another node just made (``announce``)
            v = self.broker.vhosts.get(args[0].get("vhost"))
            if v is not None:
                self.add_handle(v, args[0], args[1])
            return True
        if op == "consume":
            return self._proxy_consume(node, args)
        if op == "get":
            return self._proxy_get(node, args)
        if op == "keeper_ask":
            return self._proxy_keeper(node, args, True)
        if op == "acquire":
            return self._proxy_acquire(node, args)
        if op.startswith("dtx_"):  # 0-10 dtx branches across nodes (warren/spread/dtx.py)
            return self.dtx.request(node, op, args)
        return NotImplemented

    async def _synced_then(self, synced, refused: list | None, need: int):
        await synced
        # a commit of this node's that could not make what it covered safe (a replicated queue's
        # majority missing, a node it forwarded to silent: ``nack_waiting``) refuses the other
        # nodes' messages it covered too: their confirms are nacks, as this node's own are
        if need <= self._failed_through or (refused and any(number is None for number, _ in refused)):
            return REFUSED_THERE
        return (REFUSED_THERE, refused) if refused else HELD

    def message(self, node: str, op: str, args: tuple) -> None:
        self.cluster.unreachable.discard(node)
        if op in ("handover", "publish"):
            self._arrived.record(node, args[1])
            self._refusals.taking(node, args[1])  # a refusal names the record and the position in it
            try:
                (self._take_handover if op == "handover" else self._take_publishes)(node, args[0])
            finally:
                self._refusals.taking(node, None)
        elif op == "deliver":
            self._take_deliveries(node, args[0])
        elif op in ("settle", "credit", "cancel", "qos", "flow", "close_channel", "grant"):
            self._proxy_message(node, op, args)
        elif op == "keeper":
            self._proxy_keeper(node, args, False)
        elif op in ("want", "return"):
            self._prefetch_message(node, op, args)
        elif op == "congested":
            self._remote_congestion(*args)
        elif op in ("dtx_hold", "dtx_rollback"):
            self.dtx.message(node, op, args)
        elif op == "hello":
            pass  # a node linked to us (NodeLinks.link_all): nothing to do
        elif op == "cancelled":
            reads = self._reader(args[0], args[1])
            if reads is not None:
                reads.remote_cancelled(args[2])
        else:
            log.error("cluster: unknown message %r from node %s", op, node)
