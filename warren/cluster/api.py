"""Every node's HTTP API answers for the whole cluster: the other nodes' queues, connections,
channels, consumers, vhost and overview figures, shovel and federation link status, listed with
this node's; closing a connection or restarting a shovel that another node holds. RabbitMQ's
management plugin on any node does the same over Erlang distribution; here over the inter-node
links (links.py), through the seam the worker processes of one node already use: the vhost
directory's ``api_rows``/``api_act`` (warren/broker/directory.py), answered on the other side by
that node's own ``directory.api`` (warren/management/api/merged.py ``PeerApi``). The HTTP API
never learns which it is.

A node that does not answer in time (killed, cut off) is left out of that answer and logged;
the rest of the cluster is listed.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import random

from warren.broker.directory import ADMIN, apply_change, durable_change
from warren.broker.exchanges.base import Binding
from warren.cluster.etcd import EtcdError
from warren.cluster.links import NodeUnavailable
from warren.cluster.reach import NodeQueue
from warren.cluster.topology import TOPOLOGY_CHANGES
from warren.errors import InternalError, NotFound

__all__ = ["ClusterApi", "NODE_LOCAL", "QUEUE_CHANGES", "down_text"]

log = logging.getLogger("warren.cluster")

DIRECTORY_WRITE_S = 2.0  # a declare waits this long at most for the queue directory's write

QUEUE_CHANGES = frozenset({"declare_queue", "delete_queue", "bind_queue", "unbind_queue"})


def down_text(record: dict) -> str:
    """RabbitMQ 3.10's words for a durable queue whose home node is down."""
    return (f"home node '{record['node']}' of durable queue '{record['name']}' in vhost "
            f"'{record['vhost']}' is down or inaccessible")


# what a node counts for the whole cluster: a user's connections, a user's channels
CLUSTER_COUNTS = frozenset({"user", "channels"})

# kinds that stay each node's own: a Prometheus scrape answers for the scraped node (each node
# is scraped; /metrics/cluster asks for "metrics_text", below), and proxy consumers are a
# worker-process matter
NODE_LOCAL = frozenset({"metrics", "proxy_consumers"})


class ClusterApi:
    """The directory's view of the other nodes (``directory.elsewhere``) and the answers to them."""

    def __init__(self, directory, queues) -> None:
        self.directory = directory
        self.queues = queues  # the queue directory (queues.py): where each queue lives
        self.links = None  # NodeLinks, set once listening (warren/server/server.py)
        self.reach = None  # NodeReach: queues of other nodes served through this one (reach.py)
        self.topology = None  # SharedTopology: exchanges and bindings in etcd (topology.py)
        self.locator = "client-local"  # where a new queue goes (--queue-leader-locator, ``placed``)
        self.counts: dict[str, int] = {}  # this node's counts the others add to theirs (CLUSTER_COUNTS)
        self.replicas = None  # Replicas: replicated quorum queues, led or followed here (replicas.py)
        self.node_metrics = None  # this node's /metrics text for another's /metrics/cluster (warren/metrics)

    # --- what the other nodes ask of this one (NodeLinks' handler) -----------------------------

    def node_request(self, node: str, op: str, args: tuple):
        api = self.directory.api  # None without an HTTP API: nothing to show
        if op == "api_rows" and args[0] == "metrics_text":  # with or without an HTTP API
            return [] if self.node_metrics is None else self.node_metrics()
        if op == "api_rows":
            kind, kind_args = args
            return [] if api is None or kind in NODE_LOCAL else api.rows(kind, *kind_args)
        if op == "api_act":
            what, what_args = args
            return False if api is None else api.act(what, *what_args)
        if op == "define":  # the HTTP API of another node changes a queue that lives here
            vhost, what, what_args = args
            v = self.directory.broker.vhosts.get(vhost)
            if v is None:
                raise NotFound(f"no vhost '{vhost}'")
            # made here, answered once durable, as the HTTP API's own change (directory.py), and
            # once etcd holds what it made or deleted
            return self.define(v, what, what_args, asker=node)
        if op == "purge":
            vhost, name = args
            return self._here(vhost, name).purge()
        if op == "unlisted":
            return self._unlisted(*args)
        if op in ("r_sync", "r_status") and self.replicas is not None:
            return self.replicas.request(node, op, args)
        answer = NotImplemented if self.reach is None else self.reach.request(node, op, args)
        if answer is NotImplemented:
            raise InternalError(f"node {node} asked for {op!r}, which this node does not know")
        return answer

    def node_message(self, node: str, op: str, args: tuple) -> None:
        if op.startswith("r_"):
            if self.replicas is not None:
                self.replicas.message(node, op, args)
        elif self.reach is not None:
            self.reach.message(node, op, args)

    def dtx_parts(self):
        """The parts of dtx branches across nodes (warren/spread/dtx.py), once serving started."""
        return None if self.reach is None else self.reach.dtx

    def node_lost(self, node: str) -> None:
        if self.reach is not None:
            self.reach.node_lost(node)

    def tick(self) -> None:
        if self.reach is not None:
            self.reach.tick()
        if self.replicas is not None:
            self.replicas.tick()

    def flush(self) -> None:
        """The node stops: what is batched for other nodes is written now (links.py close)."""
        if self.reach is not None:
            self.reach.flush_now()

    def _here(self, vhost: str, name: str):
        v = self.directory.broker.vhosts.get(vhost)
        q = v.queues.get(name) if v is not None else None
        if q is None or q.deleted:
            raise NotFound(f"no queue '{name}' in vhost '{vhost}'")
        return q

    # --- a user's connections and channels, counted over the cluster ----------------------------

    def count_changed(self, key: tuple, count: int) -> None:
        """Our count of ``key`` changed: a user's connections or channels travel in this node's
        member record (node.py ``share_counts``), which every node adds to its own for the
        user's limits, as RabbitMQ counts them over the cluster; the node's own connection
        limit stays the node's."""
        if key[0] not in CLUSTER_COUNTS:
            return
        name = "/".join(key)
        if count:
            self.counts[name] = count
        else:
            self.counts.pop(name, None)
        self.queues.cluster.share_counts(self.counts)

    def counted_elsewhere(self, key: tuple) -> int:
        if key[0] not in CLUSTER_COUNTS:
            return 0
        cluster, name = self.queues.cluster, "/".join(key)
        return sum(record.get("counts", {}).get(name, 0) for node, record in list(cluster.members.items())
                   if node != cluster.node_name and cluster.running(node))

    # --- what this node asks of the others -------------------------------------------------------

    def find_queue(self, vhost: str, name: str):
        """A handle of queue ``name`` of ``vhost`` living on another running node, or None."""
        record = self.queues.where(vhost, name)
        if record is None or not self.queues.cluster.running(record["node"]):
            return None
        return NodeQueue(record, self.reach)

    def define(self, v, op: str, args: tuple, asker: str | None = None):
        """A change the HTTP API or an import asks (``ADMIN``), or another node (``asker``)
        places here: an awaitable of its result, made as ``change`` says, answered once
        durable here too."""
        durability = self.directory.broker.durability
        return self._change(v, op, args, lambda v, op, args: durable_change(durability, apply_change, v, op, args),
                            admin=True, asker=asker)

    async def _declared_if_gone_there(self, v, node: str, op: str, args: tuple, make, admin: bool, looked: bool):
        name = args[0]
        try:
            gone = await self.links.ask(node, "unlisted", v.name, name)
        except NodeUnavailable:
            gone = False
        if not gone:
            raise v.locked_error(name)
        handle = v.remote_queues.get(name)
        if handle is not None and getattr(handle, "owner", None) == node:
            self.reach.forget_handle(v, handle)
        result = self._change(v, op, args, make, admin, looked, unlisted=True, stale=node)
        return (await result) if inspect.isawaitable(result) else result

    async def _unlisted(self, vhost: str, name: str) -> bool:
        """Another node asks (``_declared_if_gone_there``): False if queue ``name`` is here;
        True once its listing, if any, is out of etcd."""
        v = self.directory.broker.vhosts.get(vhost)
        if v is not None and name in v.queues:
            return False
        if self.queues.listed_but_gone(vhost, name):
            await asyncio.wait_for(self.queues.publish_once(), DIRECTORY_WRITE_S)
        return True

    async def _unlisted_then(self, v, op: str, args: tuple, make, admin: bool, looked: bool):
        try:
            await asyncio.wait_for(self.queues.publish_once(), DIRECTORY_WRITE_S)
        except (EtcdError, asyncio.TimeoutError) as e:
            raise InternalError(f"cluster {self.queues.cluster.cluster_name}: declare_queue is refused: etcd "
                                f"did not take it ({str(e) or 'no answer in time'})") from None
        result = self._change(v, op, args, make, admin, looked, unlisted=True)
        return (await result) if inspect.isawaitable(result) else result

    def change(self, v, op: str, args: tuple):
        """A client's change (AMQP; ``who`` its session): its result or an awaitable of it.

        A queue here, or a name no node holds: made here (RabbitMQ's ``client-local``). A queue
        of another running node: a declare (its equivalence checked there) or a delete is made
        by that node; a binding to it is made here, to its handle. Exchanges and bindings are
        then written to etcd (topology.py) and a queue made or deleted to the queue directory
        (queues.py): the client is answered once they hold it, so any node routes and finds it.
        Refused: a durable queue whose node is down (RabbitMQ's home-node check), an exclusive
        queue of a connection on another node, or an exclusive declare of another node's queue
        (405, as RabbitMQ locks it for the whole cluster); a change of exchanges or bindings
        while etcd cannot take it."""
        return self._change(v, op, args, apply_change)

    def _change(self, v, op: str, args: tuple, make, admin: bool = False, looked: bool = False,
                asker: str | None = None, unlisted: bool = False, stale: str | None = None):
        """``asker``: the node that placed this declare here; ``unlisted``: this node's gone
        queues are out of etcd; ``stale``: a node that said it no longer holds the queue and
        its listing is out of etcd (``_declared_if_gone_there``)."""
        record = None
        if op == "declare_queue" and args[0] and not unlisted and asker is None \
                and self.queues.listed_but_gone(v.name, args[0]):
            # one of ours, gone (an auto-delete, an exclusive owner's close) while etcd still
            # lists it until the directory's next write (queues.py): written now, so that a
            # claim of the name, here or on the node the declare is placed on, finds it free
            return self._unlisted_then(v, op, args, make, admin, looked)
        if op in QUEUE_CHANGES and args[0] and args[0] not in v.queues:
            record = self.queues.where(v.name, args[0])
            handle = v.remote_queues.get(args[0])
            if record is None and handle is None and op != "declare_queue" and not looked:
                # known nowhere here: perhaps made on another node a moment ago (a declare
                # needs no look: its claim in etcd finds another node's queue)
                return self._looked_again(v, op, args, make, admin)
            if record is None and isinstance(handle, NodeQueue):  # made there a moment ago: the watch is behind
                record = {"name": handle.name, "vhost": v.name, "node": handle.owner, "durable": handle.durable,
                          "exclusive": handle.exclusive}
            if record is not None and record["node"] in (self.queues.cluster.node_name, asker, stale):
                # gone from the node that listed it while the directory as followed here still
                # lists it: that node knows better (and wrote its key's removal first, above)
                record = None
            if record is not None and not self.queues.cluster.running(record["node"]):
                if record.get("durable") and admin and op == "declare_queue":
                    return self._exists(record)  # RabbitMQ 3.10's import (or PUT) of it: taken as it is
                if record.get("durable"):
                    raise NotFound(down_text(record))
                record = None  # a transient queue of a node that is down: gone with it
        shared = op in TOPOLOGY_CHANGES and self.topology is not None
        if record is None and op == "declare_queue":
            node = self.placed(v, args)
            if node is not None:  # a new queue that the locator places on another node
                return self._declared_there(v, node, args)
        if record is None:  # made here
            before = None
            if shared:
                before = self.topology.snapshot(v, op, args)
                self.topology.check_writable(v, op, args, before)
            new = op == "declare_queue" and (not args[0] or args[0] not in v.queues)
            if new or (op == "delete_queue" and args[0] in v.queues):
                self._check_etcd(op)
            if new and args[0]:  # a name another node may be declaring at this moment too
                return self._claimed(v, op, args, make)
            return self._written(make(v, op, args), v, op, args, before, new)
        name, node = args[0], record["node"]
        if op == "declare_queue" and (record.get("exclusive") or args[2]) and stale is None:
            # refused 405 if the queue is there; it may be gone a moment ago (an auto-delete, its
            # exclusive owner's close) while its listing is still being removed: node asked
            return self._declared_if_gone_there(v, node, op, args, make, admin, looked)
        if record.get("exclusive") and (op == "declare_queue" or args[-1] != ADMIN):
            raise v.locked_error(name)
        if op == "declare_queue":
            if args[2]:  # exclusive
                raise v.locked_error(name)
            return self._declared_there(v, node, args)
        if op == "delete_queue":
            return self._deleted_there(v, node, args[:-1] + (ADMIN,))
        handle = v.remote_queues.get(name)
        if handle is None:  # the directory knows it, the handles not yet (this turn's refresh)
            self.reach.refresh()
            handle = v.remote_queues.get(name)
        if handle is None:
            raise NotFound(f"no queue '{name}' in vhost '{v.name}'")
        before = self.topology.snapshot(v, op, args) if shared else None
        if shared:
            self.topology.check_writable(v, op, args, before)
        _, exchange, routing_key, arguments, _ = args
        if op == "bind_queue":
            v.bind_queue(handle, exchange, routing_key, arguments)
        else:
            source = v.exchanges.get(exchange)
            if exchange == "" or source is None:
                apply_change(v, op, args)  # the default exchange's 403, or nothing to remove
            else:
                b = source.bindings.get(Binding(source, handle, routing_key, arguments).key)
                if b is not None:
                    v.remove_binding(source, b)
        return self._written(None, v, op, args, before)

    async def _claimed(self, v, op: str, args: tuple, make):
        """A new queue's declare: made here once the name is claimed in the queue directory
        (queues.py ``claim``); if another node claimed it first (both declared at once), it is
        declared there instead, as if its key had been seen before."""
        name, durable, exclusive, _, arguments, _ = args
        try:
            claim = await asyncio.wait_for(self.queues.claim(v.name, name, durable, exclusive, arguments),
                                           DIRECTORY_WRITE_S)
        except (EtcdError, asyncio.TimeoutError) as e:
            raise InternalError(f"cluster {self.queues.cluster.cluster_name}: declare_queue is refused: etcd "
                                f"did not take it ({str(e) or 'no answer in time'})") from None
        holder = claim.holder
        if holder is not None and holder["node"] != self.queues.cluster.node_name:
            log.info("cluster: queue '%s' in vhost '%s' was declared on node %s at the same moment: declared there",
                     name, v.name, holder["node"])
            if exclusive or holder.get("exclusive"):
                raise v.locked_error(name)
            if not self.queues.cluster.running(holder["node"]):
                raise NotFound(down_text(holder))
            return await self._declared_there(v, holder["node"], args)
        # won, or this node's own claim (another client's declare here a moment ago)
        try:
            result = make(v, op, args)
            if inspect.isawaitable(result):  # the HTTP API's: made once awaited
                result = await result
        except BaseException:
            if holder is None and name not in v.queues:
                await self.queues.unclaim(claim)
            raise
        if holder is None:
            self.queues.made(claim)
        if self.replicas is not None and name in v.queues:  # a quorum queue: its members, then led here
            await self.replicas.created(v, v.queues[name])
        if holder is None and name in v.queues:
            await self.reach.announce(v, self.queues.record_of(v.name, v.queues[name]), claim.revision)
        return await self._published(result, v, op, args, None, True)

    @staticmethod
    async def _exists(record: dict) -> tuple:
        return record["name"], 0, 0

    def _check_etcd(self, op: str) -> None:
        """A queue made or deleted is a change of the cluster's metadata: refused while etcd
        cannot take it (the last lease renewal failed), as exchanges and bindings are."""
        problem = self.queues.cluster.etcd_problem
        if problem is not None:
            raise InternalError(f"cluster {self.queues.cluster.cluster_name}: {op} is refused: etcd cannot take "
                                f"it now ({problem})")

    def _written(self, result, v, op: str, args: tuple, before: dict | None, new: bool = False):
        """``result`` (or an awaitable of it), once etcd holds what the change made: the
        exchanges and bindings (``before``: what they were), a queue made or deleted."""
        if before is None and op not in ("declare_queue", "delete_queue"):
            return result
        # a change made now is marked now, not when the caller first awaits: a watch event in
        # between, older than it, would make again what it removed (topology.py ``expect``)
        expected = self.topology.expect(v, op, args, before) \
            if before is not None and not inspect.isawaitable(result) else None
        return self._published(result, v, op, args, before, new, expected)

    async def _published(self, result, v, op: str, args: tuple, before: dict | None, new: bool = False,
                         expected: tuple | None = None):
        if inspect.isawaitable(result):
            result = await result
        if before is not None:
            await self.topology.written(v, op, args, before, expected)
        if op in ("declare_queue", "delete_queue"):
            try:
                await asyncio.wait_for(self.queues.publish_once(), DIRECTORY_WRITE_S)
            except (EtcdError, asyncio.TimeoutError) as e:
                why = str(e) or "no answer in time"
                name = result[0] if isinstance(result, tuple) else args[0]
                q = v.queues.get(name) if new else None
                if q is not None and not q.message_count:  # made a moment ago: unmade, and refused
                    v.delete_queue(q)
                    log.warning("cluster: a declare of queue '%s' was refused: etcd did not take it (%s)", name, why)
                    raise InternalError(f"cluster {self.queues.cluster.cluster_name}: declare_queue is refused: "
                                        f"etcd did not take it ({why})") from None
                # a delete (made): the directory follows once etcd answers again (queues.py
                # writes what changed every second)
                log.warning("cluster: queue '%s' is not in the queue directory yet (etcd: %s); other nodes "
                            "find it once etcd answers", name, why)
        return result

    def placed(self, v, args: tuple) -> str | None:
        """The running node other than this one where a new queue ``declare_queue(*args)`` goes,
        or None: here. RabbitMQ's queue_leader_locator (``locator``, or the queue's own
        x-queue-leader-locator / 3.x's x-queue-master-locator): client-local, balanced (the
        running node with the fewest queues, this one on a tie), random; or a node's name
        (Warren's). A server-named or exclusive queue is always this node's, as in RabbitMQ."""
        name, _, exclusive, _, arguments, _ = args
        if not name or exclusive:
            return None
        locator = (arguments.get("x-queue-leader-locator") or arguments.get("x-queue-master-locator")
                   or self.locator)
        cluster, me = self.queues.cluster, self.queues.cluster.node_name
        if locator == "client-local":
            return None
        running = [n for n in cluster.members if n == me or cluster.running(n)]
        if locator in ("balanced", "least-leaders", "min-masters"):
            counts = {n: 0 for n in running}
            vhosts = list(self.directory.broker.vhosts.values())
            counts[me] = sum(len(x.queues) for x in vhosts)
            # the others' from the directory, and those made a moment ago that it has not brought
            placed = {(r.get("vhost"), r.get("name"), r.get("node")) for r in list(cluster.queues.values())}
            placed.update((x.name, q.name, q.owner) for x in vhosts for q in x.remote_queues.values())
            for _, _, node in placed:
                if node in counts and node != me:
                    counts[node] += 1
            fewest = min(counts.values())
            return None if counts[me] == fewest else min(n for n in running if counts[n] == fewest)
        if locator == "random":
            choice = random.choice(running)
            return None if choice == me else choice
        return locator if locator != me and cluster.running(locator) else None

    async def _declared_there(self, v, node: str, args: tuple):
        """A new queue made on ``node``: its answer, and its handle here at once (the client's
        next method may use it before the queue directory's watch brings it)."""
        name, durable, _, auto_delete, arguments, _ = args
        answer = await self.links.ask(node, "define", v.name, "declare_queue",
                                      (name, durable, False, auto_delete, arguments, ADMIN), timeout=None)
        self.reach.add_handle(v, {"name": name, "vhost": v.name, "node": node, "durable": durable,
                                  "auto_delete": auto_delete, "exclusive": False, "arguments": arguments,
                                  "type": arguments.get("x-queue-type", "classic")})
        return answer

    async def _deleted_there(self, v, node: str, args: tuple) -> int:
        deleted = await self.links.ask(node, "define", v.name, "delete_queue", args, timeout=None)
        handle = v.remote_queues.get(args[0])
        if handle is not None:  # gone now, not when the directory's watch says so
            self.reach.forget_handle(v, handle)
        return deleted

    def quorum_members(self, vhost: str, name: str) -> dict | None:
        return None if self.replicas is None else self.replicas.describe(vhost, name)

    @property
    def quorum(self):
        """The replicated quorum queues' membership and status (replicas.py), or None."""
        return self.replicas

    def missing_queue(self, v, name: str):
        """What a client asking for queue ``name``, which is not here, is answered when another
        node holds it: RabbitMQ's home-node error if that node is down (a durable queue), 405 if
        it is exclusive to a connection there; a 404 ``no queue`` that may ``look_again`` when
        the queue may have been made on another node a moment ago; None otherwise (404)."""
        record = self.queues.where(v.name, name)
        running = record is not None and self.queues.cluster.running(record["node"])
        if record is None or (running and not record.get("exclusive")):
            # made on another node a moment ago (not in the directory as followed yet, or in it
            # but without its handle until this turn's refresh): the channel may look again
            error = NotFound(f"no queue '{name}' in vhost '{v.name}'")
            error.look_again = lambda: self.look_again(v, name)
            return error
        if not running:
            return NotFound(down_text(record)) if record.get("durable") else None
        return v.locked_error(name)

    async def look_again(self, v, name: str) -> bool:
        """Queue ``name``, of which this node has no handle: if the queue directory as followed
        lists it on a running node, its handle is made now (the watch brought it, this turn's
        refresh has not run); if it lists none, etcd itself is read (one linearizable range
        read) and a running node's queue found there gets its handle now, as the watch would
        have made it a moment later: a node knows a queue once another node's declare-ok went
        out, as RabbitMQ's do. True if a queue of that name is known now; False if none is
        (deleted meanwhile, never made) or etcd could not be read: the 404 stands. Only a miss
        pays this read."""
        if name in v.queues or name in v.remote_queues:
            return True
        if self.reach is None:
            return False
        record = self.queues.where(v.name, name)
        if record is not None and self.queues.cluster.running(record["node"]):
            self.reach.add_handle(v, record)  # the watch brought it: its handle, before this turn's refresh
            return True
        if self.queues.cluster.etcd_problem is not None:
            return False  # etcd cannot answer now: not waited for
        try:
            records = await asyncio.wait_for(self.queues.read(v.name, name), DIRECTORY_WRITE_S)
        except (EtcdError, asyncio.TimeoutError) as e:
            log.debug("cluster: queue '%s' in vhost '%s' could not be looked for in etcd: %s", name, v.name, e)
            return False
        if name in v.queues or name in v.remote_queues:  # made here, or brought by the watch, meanwhile
            return True
        running = [r for r in records if self.queues.cluster.running(r["node"])]
        if not running:
            return False
        self.reach.add_handle(v, running[0])
        return True

    async def _looked_again(self, v, op: str, args: tuple, make, admin: bool):
        """``_change`` of a queue known nowhere here, once etcd was read for it (``look_again``):
        a bind, unbind or delete of a queue another node made a moment ago goes to it."""
        await self.look_again(v, args[0])
        result = self._change(v, op, args, make, admin, looked=True)
        return (await result) if inspect.isawaitable(result) else result

    @property
    def reply_suffix(self) -> str:
        return self.reach.reply_suffix if self.reach is not None else ""

    def reply_to(self, vhost: str, routing_key: str):
        return self.reach.remote_reply(vhost, routing_key) if self.reach is not None else None

    async def owner_api(self, q, what: str, args: tuple):
        return await self.links.ask(q.owner, "api_act", what, args)

    async def purge(self, q) -> int:
        return await self.links.ask(q.owner, "purge", q.vhost_name, q.name)

    async def api_rows(self, kind: str, args: tuple, only=None) -> list:
        if kind in NODE_LOCAL or self.links is None:
            return []
        peers = self.links.running_peers() if only is None else [only]
        answers = await asyncio.gather(*(self.links.ask(p, "api_rows", kind, args) for p in peers),
                                       return_exceptions=True)
        rows = []
        for peer, answer in zip(peers, answers):
            if isinstance(answer, BaseException):
                log.warning("cluster: node %s's %s are missing from this answer: %s", peer, kind, answer)
                continue
            rows.extend(answer)
        if kind == "queues" and only is None and args and args[1] is None:  # a list: down nodes' queues too
            rows.extend(self.queues.down_rows(args[0]))
        return rows

    async def api_act(self, what: str, args: tuple) -> bool:
        if self.links is None:
            return False
        peers = self.links.running_peers()
        answers = await asyncio.gather(*(self.links.ask(p, "api_act", what, args) for p in peers),
                                       return_exceptions=True)
        for peer, answer in zip(peers, answers):
            if isinstance(answer, BaseException):
                log.warning("cluster: node %s could not be asked to %s: %s", peer, what, answer)
        return any(answer is True for answer in answers)
