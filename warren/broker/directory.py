"""Where a vhost's queues live, and how a change of definitions takes effect: the directory.

The broker, the protocol adapters, the HTTP API, the metrics and federation ask the broker's
``directory`` whatever depends on the queues living in more than one place, and never which
kind of directory it is:

* ``LocalDirectory`` (here): one process holds every queue of every vhost; a change applies at
  once, there is nobody else to count or to ask.
* ``warren.spread.Spread``: ``--worker-mode queues``, one vhost spread over worker processes;
  a change is ordered by worker 0 and applied by every worker before it is answered, another
  worker's queue is a ``RemoteQueue`` record here, and listings merge every worker's rows.

A directory for queues on other machines (issue 32, a cluster) implements the same methods.

A *change* is one of ``CHANGES``, named after the vhost's method it becomes, with these
arguments (``who``: the session asking, or ``ADMIN`` for the HTTP API and definitions
imports, which may change another connection's exclusive queue):

====================  ==================================================================
declare_exchange      name, type, passive, durable, auto_delete, internal, arguments
delete_exchange       name, if_unused
bind_exchange         destination, source, routing_key, arguments
unbind_exchange       destination, source, routing_key, arguments
declare_queue         name, durable, exclusive, auto_delete, arguments, who
                      -> (name, ready messages, consumers)
bind_queue            queue, exchange, routing_key, arguments, who
unbind_queue          queue, exchange, routing_key, arguments, who
delete_queue          queue, if_unused, if_empty, who -> messages deleted
====================  ==================================================================
"""

from __future__ import annotations

import asyncio

from warren.errors import InternalError, NotFound, PreconditionFailed

__all__ = ["ADMIN", "CHANGES", "EXCHANGE_CHANGES", "LocalDirectory", "apply_change", "durable_change"]

ADMIN = "http"  # who asks: the HTTP API or an import, which may change an exclusive queue
EXCHANGE_CHANGES = frozenset(("declare_exchange", "delete_exchange", "bind_exchange", "unbind_exchange"))
CHANGES = EXCHANGE_CHANGES | {"declare_queue", "bind_queue", "unbind_queue", "delete_queue"}


class LocalDirectory:
    """One process: every queue is here. Also the reference for what each method means."""

    index = None  # which worker process this is (None: the only one)
    workers = 1  # how many processes share the vhosts

    def __init__(self, broker) -> None:
        self.broker = broker
        # what the server gives it (warren/server/server.py): its resource alarms, its runtime
        # parameters, and what its HTTP API answers the others (management/api/merged.py)
        self.alarms = None
        self.parameters = None
        self.api = None
        # the other nodes of a cluster, for the HTTP API's lists and acts (warren/cluster/api.py)
        self.elsewhere = None

    # --- life cycle (warren/server/server.py) -----------------------------------------------

    async def start(self) -> None:
        """Before any client: linked to whoever shares the vhosts."""

    def tick(self) -> None:
        """Every server tick (0.5 s): what others count of ours is brought up to date."""
        if self.elsewhere is not None:
            self.elsewhere.tick()

    def stop(self) -> None:
        """The node stops: the others hear it, rather than take it for a failure."""

    async def close(self, settled, timeout: float) -> None:
        """After the connections closed: once ``settled()`` says nothing waits on the others
        (group commits of messages they hold), or after ``timeout`` seconds, the links go."""

    # --- definitions ------------------------------------------------------------------------

    async def define(self, vhost: str, op: str, args: tuple):
        """Apply a change (``CHANGES``) everywhere the vhost lives, then return its result;
        refusals are raised as the errors of warren/errors.py."""
        v = self.broker.vhosts.get(vhost)
        if v is None:
            raise NotFound(f"no vhost '{vhost}'")
        if self.elsewhere is not None:  # a cluster: a queue's node changes it, etcd shares it (warren/cluster)
            return await self.elsewhere.define(v, op, args)
        return await durable_change(self.broker.durability, apply_change, v, op, args)

    def change(self, v, op: str, args: tuple):
        """A client's change (``CHANGES``; ``who`` is its session) to vhost ``v``: the result
        now, or an awaitable of it when others must apply it first (warren/broker/later.py).
        Here, applied at once; its fsync is the connection's group commit, as for any change a
        connection makes. In a cluster, the node of the queue makes it (``elsewhere.change``)."""
        if self.elsewhere is not None:  # a queue of another node: it makes the change (warren/cluster/api.py)
            return self.elsewhere.change(v, op, args)
        return apply_change(v, op, args)

    def define_at_start(self, v, op: str, args: tuple) -> None:
        """``--definitions FILE`` at start-up, before any client: a change to vhost ``v``."""
        apply_change(v, op, args)

    async def files_changed(self) -> None:
        """Policies, users or runtime parameters changed here: everyone else has read them
        again when this returns."""

    # --- queues -----------------------------------------------------------------------------

    def moves_for_queue(self, session, v, name: str) -> bool:
        """A 0-9-1 connection that may still move (``session.io.placing``) consumes from or
        gets from queue ``name`` of vhost ``v``: True when it moved to where the queue lives
        (which then handles the method); False: it stays here for good."""
        session.io.settle()
        return False

    def moves_for_publish(self, session, v, exchange: str, routing_key: str) -> bool:
        """The same for its first publish (to ``exchange`` with ``routing_key``)."""
        session.io.settle()
        return False

    def unlock_kept(self, session, q) -> None:
        """A 0-10 connection that held exclusive queue ``q`` beyond its life closed: ``q`` is
        unlocked and kept with its messages, wherever it lives."""
        if q.exclusive_owner is session:
            q.exclusive_owner = None
            session.exclusive_queues.discard(q)

    def kept_exclusive(self, q, session) -> None:
        """A 0-10 declare (re)locked ``q`` for ``session`` by Qpid's rule (``QueueBase.relock``):
        wherever else a handle of it stands, it says so."""

    def find_queue(self, vhost, name: str):
        """The queue named ``name`` in ``vhost`` (a Vhost), wherever it lives: the queue, or
        the handle of one elsewhere (``vhost.remote_queues``); None if there is none."""
        found = vhost.queues.get(name) or vhost.remote_queues.get(name)
        if found is None and self.elsewhere is not None:  # another node's (warren/cluster/api.py)
            return self.elsewhere.find_queue(vhost.name, name)
        return found

    @property
    def quorum(self):
        """The replicated quorum queues' membership and status (a cluster's: warren/cluster/
        replicas.py ``change_members``, ``replicated``, ``status``), or None alone."""
        return None if self.elsewhere is None else self.elsewhere.quorum

    def quorum_members(self, vhost: str, name: str) -> dict | None:
        """A replicated quorum queue's ``leader``, ``members`` and ``online`` nodes (a cluster's,
        warren/cluster/replicas.py); None: the queue is this node's alone."""
        return None if self.elsewhere is None else self.elsewhere.quorum_members(vhost, name)

    def missing_queue(self, vhost, name: str):
        """The error for queue ``name`` that ``vhost`` (a Vhost) does not hold: 404 ``no queue``;
        in a cluster, RabbitMQ's answer for a durable queue whose node is down, or 405 for an
        exclusive queue of another node's connection."""
        if self.elsewhere is not None:
            error = self.elsewhere.missing_queue(vhost, name)
            if error is not None:
                return error
        return NotFound(f"no queue '{name}' in vhost '{vhost.name}'")

    async def purge(self, q) -> int:
        """Purge ``q`` (a queue or a handle of one elsewhere); the messages purged."""
        if not q.is_here and self.elsewhere is not None:
            return await self.elsewhere.purge(q)
        return q.purge()

    async def owner_api(self, q, what: str, args: tuple):
        """What the HTTP API of the process owning ``q`` (a handle, ``q.is_here`` False)
        answers to ``what`` ("get": take messages, "stream": read a stream)."""
        if not q.is_here and self.elsewhere is not None:
            return await self.elsewhere.owner_api(q, what, args)
        raise InternalError(f"queue '{q.name}' is here: the HTTP API answers for it itself")

    def proxy_sessions(self) -> list:
        """The sessions here that stand for connections elsewhere (their consumers of our
        queues, warren/spread/proxy.py): what they hold unacked counts with ours."""
        return []

    def vhost_deleted(self, vhost) -> None:
        """``vhost`` is deleted: what stands here for queues elsewhere goes."""

    def queue_deleted(self, vhost, q) -> None:
        """A queue of ours went (a delete, auto-delete, x-expires, its exclusive connection
        closed): wherever a handle of it stands, it goes."""

    def owns_durable(self, vhost: str, name: str) -> bool:
        """At start-up: whether a durable queue of the definitions log lives here."""
        return True

    def restore_record(self, vhost, d) -> None:
        """At start-up: a durable queue of the definitions log that lives elsewhere (``d``: its
        stored declaration), as the handle bindings to it point at."""
        raise InternalError(f"queue '{d.name}' lives here")

    def remote_reply(self, vhost: str, routing_key: str):
        """A direct reply-to consumer elsewhere that ``routing_key`` names, as a destination
        the default exchange routes to; None if there is none."""
        return None if self.elsewhere is None else self.elsewhere.reply_to(vhost, routing_key)

    def reply_suffix(self) -> str:
        """What a direct reply-to token made here ends with, so that a reply published
        elsewhere finds this process (``remote_reply``): another node's name in a cluster."""
        return "" if self.elsewhere is None else self.elsewhere.reply_suffix

    # --- dtx branches whose work spans processes (warren/broker/dtx.py) ----------------------

    def dtx_parts(self):
        """Who holds the parts of dtx branches whose accepted messages other processes own
        (warren/spread/dtx.py's ``DtxParts``): in a cluster, the node's; None when every queue
        is here."""
        return None if self.elsewhere is None else self.elsewhere.dtx_parts()

    # --- counts that span processes (the node's connection limits, Broker.admit) ------------

    def counted_elsewhere(self, key: tuple) -> int:
        """How many of ``key`` (("node",), ("user", name), ("vhost", name)) the others hold:
        in a cluster, the other nodes' connections and channels of a user."""
        return 0 if self.elsewhere is None else self.elsewhere.counted_elsewhere(key)

    def count_changed(self, key: tuple, count: int) -> None:
        """Our count of ``key`` is now ``count``: the others hear it."""
        if self.elsewhere is not None:
            self.elsewhere.count_changed(key, count)

    def runs_here(self, vhost: str, kind: str, name: str) -> bool:
        """Whether this process runs the shovel or federation link ``name`` (one runs each)."""
        return True

    # --- the HTTP API over every process ------------------------------------------------------

    async def api_rows(self, kind: str, *args, only=None) -> list[dict]:
        """The others' objects of ``kind`` ("queues", "connections", "channels", ...) as their
        HTTP APIs show them: the other nodes' in a cluster; none when alone."""
        return [] if self.elsewhere is None else await self.elsewhere.api_rows(kind, args, only=only)

    async def api_act(self, what: str, *args) -> bool:
        """Ask the others to do ``what`` to an object they hold (close a connection); True if
        one did."""
        return False if self.elsewhere is None else await self.elsewhere.api_act(what, args)


def apply_change(v, op: str, args: tuple):
    """A change (``CHANGES``) applied to vhost ``v`` in this process, with the checks and
    refusals of one process."""
    if op in EXCHANGE_CHANGES:  # the vhost's methods of that name
        return getattr(v, op)(*args)
    if op == "declare_queue":
        name, durable, exclusive, auto_delete, arguments, who = args
        session = None if who == ADMIN else who
        q = v.declare_queue(session, name, False, durable, exclusive, auto_delete, arguments)
        return q.name, q.message_count, len(q.consumers)
    if op == "bind_queue":
        name, exchange, routing_key, arguments, who = args
        q = v.queues.get(name)
        if q is None:
            raise NotFound(f"no queue '{name}' in vhost '{v.name}'")
        if who != ADMIN and q.exclusive_owner is not None and q.exclusive_owner is not who:
            raise v.locked_error(name)
        return v.bind_queue(q, exchange, routing_key, arguments)
    if op == "unbind_queue":
        name, exchange, routing_key, arguments, who = args
        return v.unbind_queue(None if who == ADMIN else who, name, exchange, routing_key, arguments)
    if op == "delete_queue":
        name, if_unused, if_empty, who = args
        q = v.queues.get(name)
        if q is None:
            return 0  # idempotent, as RabbitMQ 3.x
        owner = q.exclusive_owner
        if who != ADMIN and owner is not None and owner is not who:
            raise v.locked_error(name)
        if if_unused and q.consumers:
            raise PreconditionFailed(f"queue '{q.name}' in vhost '{v.name}' in use")
        if if_empty and q.message_count:
            raise PreconditionFailed(f"queue '{q.name}' in vhost '{v.name}' is not empty")
        n = v.delete_queue(q)
        if owner is not None:
            owner.exclusive_queues.discard(q)
        return n
    raise InternalError(f"unknown definition change {op!r}")


async def durable_change(durability, change, *args):
    """``change(*args)`` on the loop, with the definitions log's fsync left to the next group
    commit (``DefinitionsStore.defer_fsync``, as while a connection handles its client's
    methods): returns once what it changed is durable, so the HTTP API answers 201/204 only
    then, and an fsync that stalls holds this request alone, never the loop (warren/broker/
    durability.py). Deletes of queues and exchanges too, their store folders put aside until
    then (warren/store/aside.py), as for a client."""
    if durability is None:  # no data folder: nothing to wait for
        return change(*args)
    definitions = durability.definitions
    held = definitions.answers_held
    definitions.defer_fsync = True
    try:
        return change(*args)
    finally:
        definitions.defer_fsync = False
        if definitions.answers_held != held:  # even after a refusal: nothing overtakes the fsync
            done = asyncio.get_running_loop().create_future()
            durability.after_definitions(lambda: done.done() or done.set_result(None))
            await done

