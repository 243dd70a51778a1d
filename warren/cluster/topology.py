"""Exchanges and bindings shared by every node of a cluster, through etcd.

Why: a publisher on one node and a consumer on another must see the same routing (RabbitMQ's
nodes share exchanges and bindings in Mnesia, since 4.x in Khepri). Every node holds every
exchange and binding of every vhost and routes locally; a binding to a queue of another node
points at that queue's handle (``reach.py``), which sends the message there.

**In etcd**: ``/warren/<C>/topology/<vhost>/e/<exchange>`` (type, durable, auto_delete,
internal, arguments) and ``/warren/<C>/topology/<vhost>/b/<digest>`` (source, destination,
its kind, routing key, arguments), vhost and names percent-encoded. Durable objects have no
lease; a transient exchange, and a binding of one, is held by the lease of the node that made
it and goes with it (RabbitMQ: transient objects go with their node). Queues are in the queue
directory (``queues.py``): the node of a queue checks a declare's equivalence.

**A change** (AMQP or the HTTP API, on any node) is made on this node first, with every check
and refusal of one node, then written to etcd; the client is answered once etcd committed it.
Without etcd (no quorum, out of reach: ``ClusterNode.etcd_problem``), a change is refused with
that reason before it is made. Redeclaring what exists writes nothing.

**Every other node** follows the prefix (ClusterNode's watch) and makes what changed between the
last view and this one (``follow``): an exchange made or deleted, a binding made or removed,
each with the node's own code (its definitions log keeps the durable ones, as for a change of
its own client). A binding whose queue is not known yet (the queue directory is another watch)
waits until the queue's handle is made. At start, the node makes its exchanges and bindings what
etcd holds (``start``): what it holds that etcd does not was deleted while it was down. The
first node of a cluster whose etcd holds no topology yet writes its own instead (a cluster made
from nodes that ran alone keeps their definitions).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from urllib.parse import quote

from warren.broker.exchanges.base import Binding
from warren.cluster.queues import plain
from warren.errors import AMQPError, InternalError, PreconditionFailed

__all__ = ["SharedTopology", "TOPOLOGY_CHANGES"]

log = logging.getLogger("warren.cluster")

TOPOLOGY_CHANGES = frozenset({"declare_exchange", "delete_exchange", "bind_exchange", "unbind_exchange",
                              "bind_queue", "unbind_queue", "delete_queue"})
WRITE_TIMEOUT_S = 5.0  # a change waits this long at most for etcd's commit
OWN_WRITE_S = 10.0  # a watch view without our own write is taken as older than it this long at most
SEEDED = "topology-seeded"  # the key that says the cluster's topology is in etcd


def _is_exchange(destination) -> bool:
    return hasattr(destination, "bindings")  # a queue, or another node's queue's handle, has none


def _ends(v, record: dict) -> tuple:
    """(source exchange, destination exchange or queue or another node's queue's handle) of a
    binding record, as vhost ``v`` holds them now; None for an end it does not hold."""
    source = v.exchanges.get(record["source"])
    name = record["destination"]
    if record["destination_type"] == "exchange":
        return source, v.exchanges.get(name)
    return source, v.queues.get(name) or v.remote_queues.get(name)


def _shared(name: str) -> bool:
    """Exchanges every vhost makes for itself (the default, amq.*) are not written."""
    return bool(name) and not name.startswith("amq.")


class SharedTopology:
    def __init__(self, cluster, broker) -> None:
        self.cluster = cluster
        self.broker = broker
        self.applied: dict[str, dict] = {}  # the view of topology/ this node last made its own
        self.waiting: list[dict] = []  # bindings whose queue is not known here yet
        self._due = False
        self.loop: asyncio.AbstractEventLoop | None = None
        self.reach = None  # NodeReach (reach.py): bindings to a down node's queue are parked there
        # key -> (record or None: deleted, when) of our own recent writes (``written``)
        self.written_here: dict[str, tuple] = {}

    @property
    def prefix(self) -> str:
        return self.cluster.prefix + "topology/"

    @staticmethod
    def exchange_key(vhost: str, name: str) -> str:
        """A record's key under the prefix (the watch's records are keyed so)."""
        return f"{quote(vhost, safe='')}/e/{quote(name, safe='')}"

    @staticmethod
    def binding_key(record: dict) -> str:
        digest = hashlib.sha256(json.dumps([record["source"], record["destination_type"], record["destination"],
                                            record["routing_key"], record["arguments"]],
                                           sort_keys=True).encode()).hexdigest()[:32]
        return f"{quote(record['vhost'], safe='')}/b/{digest}"

    # --- at start ---------------------------------------------------------------------------

    async def start(self) -> None:
        """Make this node's exchanges and bindings etcd's (module doc); the watch follows."""
        self.loop = asyncio.get_running_loop()
        client = self.cluster.client
        if await client.get(self.cluster.prefix + SEEDED) is None:
            ours = self._records()
            puts = [(self.prefix + key, json.dumps(record, sort_keys=True), self._lease(record))
                    for key, record in ours.items()]
            for i in range(0, len(puts), 100):
                await client.write_many(puts[i:i + 100])
            await client.put(self.cluster.prefix + SEEDED, self.cluster.node_name)
            log.info("cluster %s: the %d exchanges and bindings of node %s are the cluster's",
                     self.cluster.cluster_name, len(puts), self.cluster.node_name)
        kvs = await client.get_prefix(self.prefix)
        held = {kv.key.decode()[len(self.prefix):]: json.loads(kv.value) for kv in kvs}
        self.cluster.topology_order.update({kv.key.decode()[len(self.prefix):]: kv.create_revision for kv in kvs})
        for key, record in self._records().items():  # deleted while this node was down
            if key not in held:
                self._remove(record)
        self.applied = {}
        self._follow_to(held)

    def _lease(self, record: dict) -> int:
        return 0 if record["durable"] else self.cluster.lease

    def _records(self) -> dict[str, dict]:
        """This node's shared exchanges and bindings as etcd would hold them."""
        out = {}
        for v in list(self.broker.vhosts.values()):
            for ex in list(v.exchanges.values()):
                self._add_exchange(out, v, ex, True)
        return out

    def _add_exchange(self, out: dict, v, ex, with_bindings: bool) -> None:
        """``ex``'s record (not the default's or an amq.* one's: every vhost has them) and, with
        ``with_bindings``, those of its bindings (an amq.* exchange's too)."""
        if _shared(ex.name):
            out[self.exchange_key(v.name, ex.name)] = {
                "kind": "exchange", "vhost": v.name, "name": ex.name, "type": ex.TYPE, "durable": ex.durable,
                "auto_delete": ex.auto_delete, "internal": ex.internal, "arguments": plain(ex.arguments)}
        if with_bindings and ex.name:
            for b in list(ex.bindings.values()):
                self._add_binding(out, v, b)

    def _add_binding(self, out: dict, v, b) -> None:
        source, destination = b.source, b.destination
        record = {"kind": "binding", "vhost": v.name, "source": source.name,
                  "destination_type": "exchange" if _is_exchange(destination) else "queue",
                  "destination": destination.name, "routing_key": b.routing_key, "arguments": plain(b.arguments),
                  "durable": bool(source.durable and destination.durable)}
        out[self.binding_key(record)] = record

    # --- a change made here -------------------------------------------------------------------

    def check_writable(self, v, op: str, args: tuple, before: dict) -> None:
        """Refused before it is made when etcd cannot take it (module doc); what would write
        nothing (a redeclare, a delete of what is not there, a queue without bindings) is not."""
        problem = self.cluster.etcd_problem
        if problem is None:
            return
        if op == "declare_exchange":
            writes = not args[2] and args[0] not in v.exchanges
        elif op == "delete_exchange":
            writes = args[0] in v.exchanges
        elif op == "delete_queue":
            writes = bool(before)
        else:
            writes = True
        if writes:
            raise InternalError(f"cluster {self.cluster.cluster_name}: a change of exchanges or bindings is refused: "
                                f"etcd cannot take it now ({problem})")

    def snapshot(self, v, op: str, args: tuple) -> dict[str, dict]:
        """The records a change ``op`` may touch, as this node holds them now: the exchanges it
        names, with their bindings (an unbind may auto-delete its source), and the bindings into
        the exchange or queue it names (a delete takes them)."""
        out: dict[str, dict] = {}
        if op in ("declare_exchange", "delete_exchange", "bind_exchange", "unbind_exchange"):
            sources = [args[0]] if op in ("declare_exchange", "delete_exchange") else [args[1]]
        elif op in ("bind_queue", "unbind_queue"):
            sources = [args[1]]
        else:
            sources = []
        for name in sources:
            ex = v.exchanges.get(name)
            if ex is not None:
                self._add_exchange(out, v, ex, op != "declare_exchange")
        into = None
        if op in ("delete_exchange", "bind_exchange", "unbind_exchange"):
            into = v.exchanges.get(args[0])
        elif op == "delete_queue":
            into = v.queues.get(args[0]) or v.remote_queues.get(args[0])
        if into is not None:
            for b in list(into.bound_to):
                self._add_binding(out, v, b)
                if b.source.auto_delete:  # its last binding gone, it goes too: etcd's record with it
                    self._add_exchange(out, v, b.source, True)
        return out

    def expect(self, v, op: str, args: tuple, before: dict) -> tuple[dict, dict]:
        """What the change ``op`` just made here (its ``snapshot`` now), marked as written by this
        node: until the watch shows it, a view from before it must not undo it here
        (``_follow_to``: a watch event while etcd takes the write would otherwise make again
        what this change removed, a binding of an exchange deleted and declared again at once,
        or an auto-deleted exchange). (after, marks) for ``written``."""
        after = self.snapshot(v, op, args)
        now = self.loop.time()
        marks = {key: (record, now) for key, record in after.items() if before.get(key) != record}
        marks.update({key: (None, now) for key in before if key not in after})
        self.written_here.update(marks)
        return after, marks

    async def written(self, v, op: str, args: tuple, before: dict, expected: tuple | None = None) -> None:
        """Write what the change ``op`` made here (``before``: its ``snapshot`` taken before;
        ``expected``: ``expect``'s answer, if taken when the change was made)."""
        after, marks = expected if expected is not None else self.expect(v, op, args, before)
        puts = [(self.prefix + key, json.dumps(record, sort_keys=True), self._lease(record))
                for key, record in after.items() if before.get(key) != record]
        deletes = [self.prefix + key for key in before if key not in after]
        if not puts and not deletes:
            return
        # a new exchange: written only if no node wrote that name meanwhile (two declaring it at once)
        new = self.exchange_key(v.name, args[0]) if op == "declare_exchange" else None
        absent = self.prefix + new if new is not None and new not in before and new in after else None
        # (``applied`` is left to the watch: our change comes back through it and is found made)
        try:
            for i in range(0, max(len(puts), len(deletes)), 100):
                theirs = await asyncio.wait_for(self.cluster.client.write_many(
                    puts[i:i + 100], deletes[i:i + 100], absent=absent), WRITE_TIMEOUT_S)
                if theirs is not None:  # (nothing written: the view is not older than a change of ours)
                    for key, mark in marks.items():
                        if self.written_here.get(key) is mark:
                            del self.written_here[key]
                    return self._declared_elsewhere(v, args[0], json.loads(theirs.value), after[new])
        except PreconditionFailed:
            raise
        except Exception as e:  # noqa: BLE001: made here, not shared: the client hears so
            why = str(e) or "no answer in time"
            log.error("cluster %s: %s in vhost '%s' was made on node %s but etcd did not take it (%s)",
                      self.cluster.cluster_name, op, v.name, self.cluster.node_name, why)
            raise InternalError(f"{op} was made on node {self.cluster.node_name} only: etcd did not take it "
                                f"({why})") from None

    def _declared_elsewhere(self, v, name: str, theirs: dict, mine: dict) -> None:
        """Another node declared exchange ``name`` first, a moment before this node's declare
        reached etcd: the same exchange, and this declare is answered ok (the watch brings
        nothing new); another one, and the exchange made here a moment ago (without bindings yet)
        is unmade, the other node's made in its place (the watch may have brought it already,
        and failed to make it over ours), and the client answered 406 as its declare of an
        existing exchange would be."""
        if theirs == mine:
            return
        if v.exchanges.get(name) is not None:
            v.delete_exchange(name, False)
        self._make(theirs)
        v.check_equivalent("exchange", name, [(flag, theirs.get(flag), mine.get(flag))
                                              for flag in ("type", "durable", "auto_delete", "internal")],
                           theirs.get("arguments") or {}, mine.get("arguments") or {})
        raise PreconditionFailed(f"exchange '{name}' in vhost '{v.name}' was declared otherwise on another node")

    # --- what the others changed ---------------------------------------------------------------

    def changed(self) -> None:
        """The watch saw a change of topology/: made here once per loop turn."""
        if not self._due and self.loop is not None:
            self._due = True
            self.loop.call_soon(self._follow_now)

    def _follow_now(self) -> None:
        self._due = False
        self._follow_to(dict(self.cluster.topology))

    def _follow_to(self, held: dict[str, dict]) -> None:
        previous, self.applied = self.applied, held
        stale = self._stale(held)
        for key, record in previous.items():
            if key not in held and key not in stale:
                self._remove(record)
        # exchanges before the bindings that name them; what the view holds unchanged but this
        # node lacks is made too (a removal above may have auto-deleted an exchange that the
        # view, several changes later, holds again)
        order = self.cluster.topology_order  # bindings made in the cluster's order of creation
        in_order = sorted(held.items(), key=lambda item: order.get(item[0], 0))
        for kind in ("exchange", "binding"):
            for key, record in in_order:
                if record.get("kind") == kind and key not in stale and (
                        previous.get(key) != record or not self._here(record)):
                    self._make(record)
        self.retry_waiting()

    def _here(self, record: dict) -> bool:
        """Whether this node holds ``record``'s exchange or binding (a binding whose queue it
        does not know yet counts as held: it waits for it)."""
        v = self.broker.vhosts.get(record.get("vhost"))
        if v is None:
            return True
        if record["kind"] == "exchange":
            return record["name"] in v.exchanges
        source, destination = _ends(v, record)
        if source is None:
            return False
        if destination is None:
            return True
        if getattr(destination, "parked", None):
            return True  # its node is down: parked (reach.py)
        return Binding(source, destination, record["routing_key"], record["arguments"]).key in source.bindings

    def _stale(self, held: dict[str, dict]) -> set:
        """Keys this node wrote a moment ago that the watch's view does not show yet: the view
        is older than our change there (a queue deleted and declared again at once would lose
        the new one's bindings to the old one's delete). Forgotten once the view shows them, or
        after ``OWN_WRITE_S``."""
        if not self.written_here:
            return set()
        now = self.loop.time()
        stale = set()
        for key, (record, when) in list(self.written_here.items()):
            if held.get(key) == record or now - when > OWN_WRITE_S:
                del self.written_here[key]
            else:
                stale.add(key)
        return stale

    def retry_waiting(self) -> None:
        """Bindings that waited for their queue: made if it is known now (reach.py's refresh)."""
        waiting, self.waiting = self.waiting, []
        for record in waiting:
            self._make(record)

    def _make(self, record: dict) -> None:
        v = self.broker.vhosts.get(record.get("vhost"))
        if v is None:
            return
        try:
            if record["kind"] == "exchange":
                v.declare_exchange(record["name"], record["type"], False, record["durable"], record["auto_delete"],
                                   record["internal"], record["arguments"])
                return
            source, destination = _ends(v, record)
            if source is None:
                return  # deleted meanwhile (its own delete follows)
            if record["destination_type"] == "exchange":
                if destination is not None:
                    v.bind_exchange(destination.name, source.name, record["routing_key"], record["arguments"])
                return
            if destination is None:
                self.waiting.append(record)
                return
            v.bind_queue(destination, source.name, record["routing_key"], record["arguments"])
            if getattr(destination, "parked", None) is not None or getattr(destination, "down", False):
                self.reach.park(destination)  # a queue whose node is down: parked with its others
        except AMQPError as e:  # held here otherwise (a race of two nodes' declares): the log says so
            log.error("cluster %s: node %s cannot make %s: %s", self.cluster.cluster_name, self.cluster.node_name,
                      record, e)

    def _remove(self, record: dict) -> None:
        v = self.broker.vhosts.get(record.get("vhost"))
        if v is None:
            return
        if record["kind"] == "exchange":
            if record["name"] in v.exchanges:
                v.delete_exchange(record["name"], False)
            return
        source, destination = _ends(v, record)
        if source is None:
            return
        if destination is None:
            self.waiting = [r for r in self.waiting if r != record]
            return
        b = source.bindings.get(Binding(source, destination, record["routing_key"], record["arguments"]).key)
        if b is not None:
            v.remove_binding(source, b)
        elif getattr(destination, "parked", None):  # its node is down (reach.py): the parked one goes
            if self.reach.unbind_parked(destination, source.name, record["routing_key"], record["arguments"]):
                if v.durability is not None and source.durable and destination.durable:
                    v.durability.definitions.unbind(v.name, source.name, destination.name, record["routing_key"],
                                                    record["arguments"], "queue")
