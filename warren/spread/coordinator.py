"""One worker's part of a node whose vhosts are spread over worker processes (``Spread``).

``Spread`` holds the links to the other workers (``links.py``) and answers them; what it does
is in four parts, one file each: definitions kept the same on every worker and the owner of
each queue (``definitions.py``), messages and their confirms and flow control across workers
(``messages.py``), consumers of another worker's queue (``consumers.py``), dtx branches that
accepted another worker's messages (``dtx.py``). Here: life cycle,
the node's connection counts (its limits count every worker's), the merged HTTP API's rows, and
the dispatch of what the other workers ask and tell. docs/performance.md, "One vhost over
worker processes", says what is built and what is not.
"""

from __future__ import annotations

import asyncio
import logging
import weakref

from warren.errors import AMQPError, InternalError, NotFound
from warren.spread.consumers import Consumers
from warren.spread.dtx import DtxParts
from warren.broker.ownership import PLACEMENT, place
from warren.spread.definitions import ADMIN, SEQUENCER, DefinitionOrder, off_the_loop, queue_owner
from warren.spread.links import PeerGone, PeerLinks
from warren.spread.messages import Forwarding, RemoteSync, SpreadFlow

__all__ = ["Spread", "queue_owner", "SEQUENCER", "ADMIN"]

log = logging.getLogger("warren.spread")

# one-way messages that set what this worker knows of another's queues: op -> Spread's method
_STATE_MESSAGES = {"congested": "_remote_congestion", "full": "_remote_full", "locked": "_locked",
                   "unlock": "_unlock_remote", "alarm": "_remote_alarm"}


class Spread(DefinitionOrder, Forwarding, Consumers):
    def __init__(self, broker, index: int, count: int, peer_fds: dict[int, int], placement: int = PLACEMENT) -> None:
        self.broker = broker
        self.index = index
        self.count = count
        self.placement = placement  # the data folder's rule (warren/broker/ownership.py)
        self.links = PeerLinks(index, count, peer_fds)
        self.loop: asyncio.AbstractEventLoop | None = None
        # sessions that asked for something another worker may name back (an exclusive queue's)
        self._sessions: weakref.WeakValueDictionary = weakref.WeakValueDictionary()
        self._outgoing: dict = {}  # owner -> what was routed to it this loop turn (messages.Outgoing)
        self._deliveries: dict[int, list] = {}  # consuming worker -> deliveries to it this loop turn
        # the owner's side of consumers on other workers: (worker, session id) -> its ProxySession
        self._proxy_sessions: dict = {}
        self._flush_scheduled = False
        self._remote_syncs = {i: RemoteSync(self, i) for i in range(count) if i != index}
        self._replies: dict = {}  # (worker, vhost) -> RemoteReply: direct reply-to consumers there
        self.on_failure = None  # the server's: a link closed while the node runs
        self.parameters = None  # the runtime parameters' store (the server's), which "reread" refreshes
        self.alarms = None  # the server's ResourceAlarms: ours are told to the others, theirs block ours
        self.api = None  # our HTTP API's rows and acts, for the others' APIs (warren/management/api/merged.py)
        # stopping: this worker (``stop``), and the others that said so; a link that closes then
        # is the node stopping, not a worker dying
        self.stopping = False
        self._peers_stopping: set[int] = set()
        self._deleting = None  # the queue a delete asked through the sequencer is removing
        # on the sequencer: (vhost, name) -> a future done when the declare creating that queue,
        # or the delete removing it, has answered (definitions.py _changing)
        self._declaring: dict[tuple[str, str], asyncio.Future] = {}
        # flow control across workers: our congested queues -> the workers told so, which hold
        # their publishers to it (RemoteQueue.congested) until we tell them it drained
        self.congested_told: dict = {}
        # x-overflow reject-publish: our full queues -> the workers told so (messages.py)
        self._full_told: dict = {}
        # the other workers' connection counts, by (worker, key): ("node",), ("user", name),
        # ("vhost", name): the node's limits count every worker's connections
        self._counts: dict[tuple, int] = {}
        # dtx branches whose accepted messages other workers own (dtx.py)
        self.dtx = DtxParts(self, f"worker {index}", lambda: self.links.peers)

    def dtx_parts(self) -> DtxParts:
        return self.dtx

    @property
    def workers(self) -> int:
        return self.count

    # --- placement: a new 0-9-1 connection moves to the owner of the queue it uses -------------
    # (warren/server/placement.py; the adapter asks while ``session.io.placing``)

    def moves_for_queue(self, session, v, name: str) -> bool:
        q = v.remote_queues.get(name)
        if q is not None and q.exclusive_owner is not None:
            return False  # another connection's exclusive queue: refused here, as before any move
        return self._place(session, q.owner if q is not None else None)

    def moves_for_publish(self, session, v, exchange: str, routing_key: str) -> bool:
        return self._place(session, self._publish_owner(v, exchange, routing_key))

    def _place(self, session, owner: int | None) -> bool:
        """Move to ``owner`` (None: stay for good); True when the connection has gone there."""
        io = session.io
        if owner is None or owner == self.index:
            io.settle()
            return False
        return io.move_to(owner)

    @staticmethod
    def _publish_owner(v, exchange: str, routing_key: str) -> int | None:
        """The one worker owning every queue a publish would reach, if it depends on the routing
        key alone; None otherwise (or when one of them is here)."""
        ex = v.exchanges.get(exchange)
        dests = ex.run_destinations(routing_key) if ex is not None else None
        if not dests:
            return None
        owners = {-1 if q.is_here else q.owner for q in dests}
        return owners.pop() if len(owners) == 1 and -1 not in owners else None

    async def start(self) -> None:
        self.loop = asyncio.get_running_loop()
        from warren.broker.queue import Queue
        Queue.flow.listener = SpreadFlow(Queue.flow.listener, self)  # drained queues tell publishers' workers
        await self.links.start(self)
        self.dtx.adopt(int)  # parts of prepared dtx branches, recovered: are their branches still prepared?
        self.dtx.home_back()
        log.info("worker %d of %d: linked to workers %s", self.index, self.count,
                 ", ".join(map(str, self.links.peers)) or "-")
        if self.alarms is not None:  # raised before the links were up (the disk, at start)
            self.alarms.on_local_change = self.alarm_changed
            for name in list(self.alarms.raised):
                if " (worker " not in name:
                    self.alarm_changed(name, True, "raised before the workers were linked")

    # --- resource alarms: one worker's blocks the node's publishers -----------------------------

    def alarm_changed(self, name: str, on: bool, detail: str) -> None:
        """Our memory or disk alarm was raised or cleared: the others block or release their
        publishers too, since what those publish may be queued here (a forward to our queues)."""
        for peer in self.links.peers:
            self.tell(peer, "alarm", self.index, name, on, detail)

    def _remote_alarm(self, worker: int, name: str, on: bool, detail: str) -> None:
        if self.alarms is not None:
            self.alarms.set_alarm(f"{name} (worker {worker})", on, detail, local=False)

    def stop(self) -> None:
        """The node stops (SIGTERM reaches every worker): say so, so that the others take our
        links closing as that, not as a worker gone."""
        if not self.stopping:
            self.stopping = True
            for peer in self.links.peers:
                self.tell(peer, "stopping")

    async def close(self, settled, timeout: float) -> None:
        """Group commits waiting for another worker's answer end first (it answers while it
        stops too), then the links close."""
        deadline = self.loop.time() + timeout
        while not settled() and self.loop.time() < deadline:
            await asyncio.sleep(0.01)
        self.stop()
        self._flush()
        self.links.close()

    def tick(self) -> None:
        """The server's tick: users' channels closed here since are recounted for the others,
        and our full queues with room again tell their publishers' workers so."""
        self.broker.limits.recount_channels(self.broker.access)
        self.check_full()

    # --- the node's connection counts (a vhost's max-connections, Broker.admit) ---------------

    def counted_elsewhere(self, key: tuple) -> int:
        return sum(n for (_, k), n in self._counts.items() if k == key)

    def count_changed(self, key: tuple, count: int) -> None:
        """Our count of ``key`` changed: the others hear it before the client does (its open-ok
        is written after this), so that its next connection, dealt to another worker, is
        counted with this one; a worker held off the core before its turn's end would otherwise
        let both in (seen in CI under load)."""
        if self.loop is None or self.stopping:
            return
        for peer in self.links.peers:
            self.tell(peer, "count", key, count, now=True)

    def runs_here(self, vhost: str, kind: str, name: str) -> bool:
        """Whether this worker runs the shovel or federation link of exchange ``name`` (``kind``
        "shovel" or "exchange"): one worker each, fixed by the name (warren/federation)."""
        return place(f"{vhost}\0{kind}\0{name}", name, self.count) == self.index

    async def files_changed(self) -> None:
        """Policies, users or runtime parameters changed through this worker's HTTP API: every
        other worker reads the shared files again before the change is answered (they would
        within 0.5 s anyway)."""
        try:
            await self.links.broadcast("reread")
        except PeerGone:
            pass  # the node is stopping

    # --- the HTTP API over every worker ------------------------------------------------------

    async def api_rows(self, kind: str, *args, only: int | None = None) -> list[dict]:
        """The other workers' objects of ``kind`` ("queues", "connections", "channels") as
        their APIs show them (``args``: what their ``api`` callback takes for that kind)."""
        peers = [only] if only is not None else self.links.peers
        answers = await asyncio.gather(*(self.ask(p, "api_rows", kind, args) for p in peers), return_exceptions=True)
        rows = []
        for a in answers:
            if isinstance(a, BaseException):
                log.warning("worker %d: another worker's %s are missing from the HTTP API: %s", self.index, kind, a)
                continue
            rows.extend(a)
        return rows

    async def owner_api(self, q, what: str, args: tuple):
        """What the HTTP API of ``q``'s owner answers to ``what`` (broker/directory.py)."""
        return await self.ask(q.owner, "api_act", what, args)

    async def api_act(self, what: str, *args) -> bool:
        """Ask every other worker to do ``what`` to an object it holds (close a connection);
        True if one did."""
        answers = await asyncio.gather(*(self.ask(p, "api_act", what, args) for p in self.links.peers),
                                       return_exceptions=True)
        return any(a is True for a in answers)

    def ask(self, peer: int, op: str, *args) -> asyncio.Future:
        """``links.request`` after what is batched for ``peer``: a worker's records to another
        keep the order they were made in (a basic.get after publishes finds them)."""
        if peer in self._outgoing or peer in self._deliveries:
            self._flush()
        return self.links.request(peer, op, *args)

    def tell(self, peer: int, op: str, *args, now: bool = False) -> None:
        """``links.tell`` after what is batched for ``peer`` (``ask``)."""
        if peer in self._outgoing or peer in self._deliveries:
            self._flush()
        self.links.tell(peer, op, *args, now=now)

    # --- answering the others (PeerLinks' handler) ---------------------------------------------

    def peer_request(self, peer: int, op: str, args: tuple):
        # a change of definitions is applied at once, in the order the sequencer sent it, and
        # answered once durable here: its fsync is the group commit's, off the loop
        # (definitions.py ``off_the_loop``), so a stalled disk holds that answer, not this worker
        if op == "define":
            vhost, what, what_args = args
            return self._sequence(peer, vhost, what, what_args)
        if op == "apply":
            vhost, what, what_args = args
            v = self._vhost(vhost)
            try:
                done = off_the_loop(v.durability, self._apply, v, what, what_args)
            except AMQPError as e:
                return self._not_applied(what, what_args, e, None)
            if isinstance(done, asyncio.Future):
                return self._not_applied(what, what_args, None, done)
            return done
        if op == "record":
            v = self._vhost(args[0])
            return off_the_loop(v.durability, self._add_record, *args)
        if op == "forget":
            v = self._vhost(args[0])
            return off_the_loop(v.durability, self._forget, v, args[1])
        if op == "forgotten":  # on the sequencer: an owner deleted a queue by itself
            vhost, name = args
            v = self._vhost(vhost)
            # the others are told in this turn (the order of changes), the answer once both are durable
            here = off_the_loop(v.durability, self._forget, v, name)
            told = self.links.broadcast("forget", vhost, name, skip=peer)
            return told if here is None else _both(here, told)
        if op == "create_queue":
            vhost, name, durable, exclusive, auto_delete, arguments, ref, server_named = args
            v = self._vhost(vhost)
            return off_the_loop(v.durability, self._create_queue, v, name, durable, exclusive, auto_delete,
                                 arguments, ref, server_named)
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
            return self.synced_future()
        if op == "api_rows":  # for another worker's HTTP API (merged lists, one object)
            return [] if self.api is None else self.api.rows(args[0], *args[1])
        if op == "api_act":
            return False if self.api is None else self.api.act(args[0], *args[1])
        if op == "reread":
            self.broker.reload_policies()
            self.broker.access.refresh()
            if self.parameters is not None:
                self.parameters.refresh_global()  # runtime parameters are the node's too (shovels, upstreams)
            return None
        if op == "consume":
            return self._proxy_consume(peer, args)
        if op == "get":
            return self._proxy_get(peer, args)
        if op == "keeper_ask":  # a consumer's credit (warren/broker/credit.py)
            return self._proxy_keeper(peer, args, True)
        if op == "acquire":
            return self._proxy_acquire(peer, args)
        if op == "lock":
            return self.lock_remote(peer, *args)
        if op.startswith("dtx_"):  # dtx branches across workers (dtx.py)
            return self.dtx.request(peer, op, args)
        raise InternalError(f"unknown request {op!r} from worker {peer}")

    async def _not_applied(self, what: str, what_args: tuple, error: AMQPError | None, done) -> None:
        """An "apply" from the sequencer, answered once durable here (``done``); a refusal is
        logged, not returned: the sequencer checked it, so we hold something it does not."""
        if error is not None:
            durable = getattr(error, "durable_after", None)
            if durable is not None:
                await durable
        else:
            try:
                await done
                return None
            except AMQPError as e:
                error = e
        log.error("worker %d could not apply %s %r from worker 0: %s", self.index, what, what_args, error)
        return None

    def peer_message(self, peer: int, op: str, args: tuple) -> None:
        if op == "handover":
            self._take_handover(peer, args[0])
        elif op == "publish":
            self._take_publishes(peer, args[0])
        elif op == "deliver":
            self._take_deliveries(peer, args[0])
        elif op in ("settle", "credit", "cancel", "qos", "flow", "close_channel", "grant"):
            self._proxy_message(peer, op, args)
        elif op == "keeper":
            self._proxy_keeper(peer, args, False)
        elif op in ("want", "return"):
            self._prefetch_message(peer, op, args)
        elif op == "count":
            self._counts[(peer, args[0])] = args[1]
        elif op in _STATE_MESSAGES:  # what the other worker tells of a queue it owns or a lock
            getattr(self, _STATE_MESSAGES[op])(*args)
        elif op == "stopping":
            self._peers_stopping.add(peer)
        elif op == "cancelled":
            reads = self._reader(args[0], args[1])
            if reads is not None:
                reads.remote_cancelled(args[2])
        elif op in ("dtx_hold", "dtx_rollback"):
            self.dtx.message(peer, op, args)
        else:
            log.error("worker %d: unknown message %r from worker %d", self.index, op, peer)

    def peer_lost(self, peer: int) -> None:
        if self.stopping or peer in self._peers_stopping:
            log.info("worker %d: the link to worker %d closed (the node is stopping)", self.index, peer)
            return
        log.critical("worker %d: the link to worker %d closed; the node stops", self.index, peer)
        if self.on_failure is not None:
            self.on_failure(f"the link to worker {peer} closed")


async def _both(here: asyncio.Future, told: asyncio.Future):
    """``told``'s result once ``here`` (a change durable on this worker) is done too."""
    await here
    return await told
