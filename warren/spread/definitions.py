"""Definitions across workers: who owns a queue, and the changes worker 0 puts in one order.

Every worker holds every exchange and binding; a queue lives in one worker, its *owner*, and
the others hold a ``RemoteQueue`` record of it, which bindings point at. Worker 0, the
*sequencer*, checks every declare, delete, bind and unbind against what it holds (the same
checks and refusals as one process), applies it and has every other worker apply it before
it answers: when a client reads declare-ok, a publisher on any worker sees what it declared.
The links keep each worker's records in the order sent (``links.py``), so every worker applies
the changes in worker 0's order; each writes the durable ones to its own log first.

The owner of a queue is fixed by its name (``queue_owner``: a hash of vhost and name, a
numbered family dealt out in turn, so a restart finds each durable queue's store again),
except an exclusive queue, which lives with its connection's worker, and a server-named queue,
whose name is drawn until it hashes to the declaring worker: the usual
``queue_declare(exclusive=True)`` + consume stays local.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import os
from contextlib import contextmanager

from warren.broker.directory import ADMIN, CHANGES, EXCHANGE_CHANGES
from warren.errors import AMQPError, InternalError, NotFound, NotImplemented_
from warren.broker.ownership import PLACEMENT, place
from warren.spread.links import PeerGone
from warren.spread.proxy import ProxySession
from warren.spread.remote_queue import RemoteOwner, RemoteQueue

__all__ = ["DefinitionOrder", "off_the_loop", "queue_owner", "SEQUENCER", "ADMIN"]

log = logging.getLogger("warren.spread")

QUEUE_CHANGES = CHANGES - EXCHANGE_CHANGES  # their last argument is who asks

SEQUENCER = 0  # the worker that orders every change of definitions


def _deferred(durability, change, *args):
    """``change(*args)`` with the definitions log's fsync left to the group commit (off the loop,
    as a client's change in one process: warren/broker/directory.py ``durable_change``): its
    result and ``None``, or a future done once what it wrote is durable. A refusal is raised at
    once; if the call held an answer anyway (a no-op over a change not durable yet), the
    exception carries that future as ``durable_after``: it is not answered before it."""
    if durability is None:
        return change(*args), None
    definitions = durability.definitions
    held, deferred = definitions.answers_held, definitions.defer_fsync
    definitions.defer_fsync = True
    try:
        result = change(*args)
    except Exception as e:
        if definitions.answers_held != held:
            e.durable_after = _when_durable(durability)
        raise
    finally:
        definitions.defer_fsync = deferred
    return result, (None if definitions.answers_held == held else _when_durable(durability))


def _when_durable(durability, result=None, error: BaseException | None = None) -> asyncio.Future:
    """A future of ``result`` (or ``error``), done once every definitions change made so far is
    durable (the group commit's fsync ended; never if it failed: the broker stops)."""
    done = asyncio.get_running_loop().create_future()

    def settle() -> None:
        if not done.done():
            if error is not None:
                done.set_exception(error)
            else:
                done.set_result(result)
    durability.after_definitions(settle)
    return done


def off_the_loop(durability, change, *args):
    """``_deferred`` for a worker answering another (links.py answers an awaitable when it is
    done): ``change(*args)``'s result, or a future of it (or of its refusal) that resolves once
    the change is durable."""
    try:
        result, durable = _deferred(durability, change, *args)
    except Exception as e:
        if getattr(e, "durable_after", None) is None:
            raise
        return _when_durable(durability, error=e)
    return result if durable is None else _when_durable(durability, result)


async def _settled(*waits) -> None:
    """Wait for every one of ``waits`` that is not None (futures: a change durable here, the
    others' answers); the first error is raised once all have ended."""
    waits = [w for w in waits if w is not None]
    if waits:
        results = await asyncio.gather(*waits, return_exceptions=True)
        for r in results:
            if isinstance(r, BaseException):
                raise r


async def _refused(e: Exception):
    """Raise refusal ``e`` once what its call held is durable (``_deferred``)."""
    durable = getattr(e, "durable_after", None)
    if durable is not None:
        await durable
    raise e


def queue_owner(vhost: str, name: str, workers: int, placement: int = PLACEMENT) -> int:
    """The worker that owns a named, non-exclusive queue: fixed by vhost and name
    (warren/broker/ownership.py: a numbered family of queues is dealt out one per worker)."""
    return place(f"{vhost}\0{name}", name, workers, placement)


class DefinitionOrder:
    """``Spread``'s part that keeps definitions the same on every worker (a mixin: the state is
    ``Spread``'s)."""

    # --- who owns what ---------------------------------------------------------------------

    def owner_for_declare(self, vhost: str, name: str, exclusive: bool, origin: int) -> int:
        return origin if exclusive else queue_owner(vhost, name, self.count, self.placement)

    def server_name(self, vhost: str, origin: int) -> str:
        """A server-named queue's name, drawn until it hashes to the declaring worker."""
        while True:
            name = "amq.gen-" + base64.urlsafe_b64encode(os.urandom(16)).rstrip(b"=").decode()
            if queue_owner(vhost, name, self.count, self.placement) == origin:
                return name

    def owns_durable(self, vhost: str, name: str) -> bool:
        """Whether a durable queue of the definitions log is ours (durable queues are never
        exclusive; a server-named one was named to hash to its declaring worker)."""
        return queue_owner(vhost, name, self.count, self.placement) == self.index

    def restore_record(self, v, d) -> None:
        """At start-up: another worker's durable queue, from our definitions log."""
        owner = queue_owner(v.name, d.name, self.count, self.placement)
        v.remote_queues[d.name] = RemoteQueue(self, v.name, d.name, owner, True, d.auto_delete, d.arguments, None)

    def define_at_start(self, v, op: str, args: tuple) -> None:
        """``--definitions FILE`` at start-up, on every worker, before any client and before the
        links (warren/management/definitions.py's ``apply``): each worker makes the same
        exchanges and bindings, and a queue on its owner with a record of it on the others, as
        the sequencer would have. Durable queues of an earlier run are declared again alike."""
        if op == "declare_queue":
            name, durable, exclusive, auto_delete, arguments, _ = args
            owner = queue_owner(v.name, name, self.count, self.placement)
            if owner == self.index:
                v.declare_queue(None, name, False, durable, exclusive, auto_delete, arguments)
            else:
                self._add_record(v.name, name, owner, durable, auto_delete, arguments, None)
        elif op == "bind_queue":
            name, source, routing_key, arguments, _ = args
            v.bind_queue(self.find_queue(v, name), source, routing_key, arguments)
        elif op in EXCHANGE_CHANGES:
            getattr(v, op)(*args)
        else:
            raise InternalError(f"unknown definition change {op!r}")

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

    def find_queue(self, v, name: str):
        return v.queues.get(name) or v.remote_queues.get(name)

    def reply_suffix(self) -> str:
        return f".{self.index}"  # a reply from a connection on another worker is sent here

    def missing_queue(self, v, name: str):
        return NotFound(f"no queue '{name}' in vhost '{v.name}'")

    # a node's workers replicate nothing (replicated quorum queues are a cluster's: warren/cluster)
    quorum = None

    def quorum_members(self, vhost: str, name: str) -> dict | None:
        return None

    # --- what a client's channel asks (BrokerChannel): awaitables -----------

    def change(self, v, op: str, args: tuple):
        """A client's change of definitions (``CHANGES``, its session as ``who``): ordered by
        the sequencer and applied by every worker before the awaitable is done."""
        if op in QUEUE_CHANGES:
            session = args[-1]
            if op == "declare_queue" and not args[0]:
                session.unmovable = True  # its name is not in the client's octets: no move (placement.py)
            args = args[:-1] + (self.session_ref(session),)
        return self.define(v.name, op, args)

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
        return tuple(await self._ask_owner(q, "counts"))

    async def purge(self, q) -> int:
        if not isinstance(q, RemoteQueue):
            return q.purge()
        return await self._ask_owner(q, "purge")

    async def _ask_owner(self, q, op: str):
        try:
            return await self.ask(q.owner, op, q.vhost_name, q.name)
        except PeerGone as e:
            raise InternalError(f"another worker did not answer: {e}") from None

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
        # applied here (raising the refusal, as one process would) and sent to the others in
        # one turn, so that every worker applies the changes in this order; the answer waits
        # for this worker's fsync (the group commit's, off the loop) and the others' answers
        # (each sent once durable there)
        try:
            result, durable = _deferred(v.durability, self._apply, v, op, args)
        except AMQPError as e:
            await _refused(e)
        await _settled(durable, self.links.broadcast("apply", vhost, op, args))
        return result

    async def _sequence_declare_queue(self, origin, v, name, durable, exclusive, auto_delete, arguments, ref):
        # a declare or delete of this name still under way (its answer waits for every worker's
        # copy to be durable): this one comes after it, never answered before what it repeats
        # is durable, nor sent to the others between a delete's parts
        if name:
            await self._after_changes_of(v.name, name)
        q = self.find_queue(v, name) if name else None
        if q is not None:
            self._check_lock(v, q, ref if exclusive else None, name)
            v.check_equivalent("queue", name, (
                ("durable", q.durable, durable and not exclusive), ("auto_delete", q.auto_delete, auto_delete),
            ), q.arguments, arguments)
            return (name, *(await self.queue_counts(q)))
        server_named = not name
        if server_named:
            name = self.server_name(v.name, origin)
        with self._changing(v.name, name):
            return await self._sequence_create_queue(v, name, durable, exclusive, auto_delete, arguments, ref,
                                                     server_named, origin)

    async def _after_changes_of(self, vhost: str, name: str) -> None:
        """On the sequencer: once no declare or delete of queue ``name`` is under way."""
        while (pending := self._declaring.get((vhost, name))) is not None:
            await pending

    @contextmanager
    def _changing(self, vhost: str, name: str):
        """A declare or delete of queue ``name`` under way (``_after_changes_of`` waits for it)."""
        key = (vhost, name)
        self._declaring[key] = under_way = asyncio.get_running_loop().create_future()
        try:
            yield
        finally:
            del self._declaring[key]
            under_way.set_result(None)

    async def _sequence_create_queue(self, v, name, durable, exclusive, auto_delete, arguments, ref, server_named,
                                     origin):
        owner = self.owner_for_declare(v.name, name, exclusive, origin)
        here = None  # this worker's change, durable once it is done (_deferred)
        if owner == self.index:
            try:
                made, here = _deferred(v.durability, self._create_queue, v, name, durable, exclusive, auto_delete,
                                       arguments, ref, server_named)
            except AMQPError as e:
                await _refused(e)
        else:  # answered by the owner once its create is durable
            made = await self.ask(owner, "create_queue", v.name, name, durable, exclusive, auto_delete,
                                            arguments, ref, server_named)
        record = (v.name, name, owner, made["durable"], auto_delete, arguments, ref if exclusive else None,
                  made["full"])
        if owner != self.index:
            _, here = _deferred(v.durability, self._add_record, *record)
        # the records go out in this turn (the order of changes); declare-ok once every worker's
        # copy is durable
        await _settled(here, self.links.broadcast("record", *record, skip=owner))
        return (name, made["messages"], made["consumers"])

    async def _sequence_delete_queue(self, origin, v, name, if_unused, if_empty, ref):
        await self._after_changes_of(v.name, name)
        with self._changing(v.name, name):  # a declare of the name waits until every worker forgot it
            return await self._sequence_delete(v, name, if_unused, if_empty, ref)

    async def _sequence_delete(self, v, name, if_unused, if_empty, ref):
        q = self.find_queue(v, name)
        if q is None:
            return 0  # idempotent, as RabbitMQ 3.x
        if ref != ADMIN:
            self._check_lock(v, q, ref, name, only_if_exclusive=True)
        if isinstance(q, RemoteQueue):
            n = await self.ask(q.owner, "delete_queue", v.name, name, if_unused, if_empty)
            _, here = _deferred(v.durability, self._forget, v, name)
            await _settled(here, self.links.broadcast("forget", v.name, name, skip=q.owner))
        else:
            n = self._delete_local(v, q, if_unused, if_empty)
            if isinstance(n, asyncio.Future):  # durable first (off_the_loop), then the others forget it
                n = await n
            await self.links.broadcast("forget", v.name, name)
        return n

    def _check_lock(self, v, q, ref, name: str, only_if_exclusive: bool = False) -> None:
        if ref == ADMIN:
            return  # the HTTP API may bind, unbind and delete an exclusive queue, as in one process
        owner = q.exclusive_owner
        if owner is None and only_if_exclusive:
            return
        if isinstance(owner, ProxySession):  # locked by a connection on another worker (lock_remote)
            owner = RemoteOwner(owner.worker, owner.session_id)
        if isinstance(owner, RemoteOwner) or owner is None:
            same = owner == ref
        else:  # a local session's queue
            same = ref is not None and ref.worker == self.index and self._sessions.get(ref.session_id) is owner
        if not same:
            raise v.locked_error(name)

    # --- applying ---------------------------------------------------------------------------

    def _apply(self, v, op: str, args: tuple):
        if op in EXCHANGE_CHANGES:  # the vhost's methods of that name
            getattr(v, op)(*args)
        elif op == "bind_queue":
            name, exchange, routing_key, arguments, ref = args
            q = self.find_queue(v, name)
            if q is None:
                raise NotFound(f"no queue '{name}' in vhost '{v.name}'")
            if q.exclusive_owner is not None:
                self._check_lock(v, q, ref, name)
            v.bind_queue(q, exchange, routing_key, arguments)
        elif op == "unbind_queue":
            name, exchange, routing_key, arguments, ref = args
            q = self.find_queue(v, name)
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
                v.remove_binding(ex, b)
        else:
            raise InternalError(f"unknown definition change {op!r}")
        return None

    def _create_queue(self, v, name, durable, exclusive, auto_delete, arguments, ref, server_named) -> dict:
        session = self._session(ref) if exclusive else None
        q = v.declare_queue(session, name, False, durable, exclusive, auto_delete, arguments, server_named)
        if exclusive and session is not None and q.exclusive_owner is session:
            session.exclusive_queues.add(q)
        # full from the start (x-max-length 0 with reject-publish): every worker's record says so
        # before the declare-ok, so the first publish anywhere is refused as in one process; the
        # tick tells them when it has room (check_full)
        full = q.overflow if q.refuses_publishes() else None
        if full is not None:
            self._full_told[q] = set(self.links.peers)
        return {"durable": q.durable, "messages": q.message_count, "consumers": len(q.consumers), "full": full}

    def _add_record(self, vhost, name, owner, durable, auto_delete, arguments, ref, full=None) -> None:
        v = self._vhost(vhost)
        if name in v.remote_queues or name in v.queues:
            return
        q = v.remote_queues[name] = RemoteQueue(self, vhost, name, owner, durable, auto_delete, arguments, ref)
        q.full = full  # the owner's word at declaration (x-overflow reject-publish), as a "full" message
        if durable and v.durability is not None:  # so that bindings to it are restored (restore_queue)
            v.durability.definitions.declare_queue(vhost, name, durable, auto_delete, arguments)

    def vhost_deleted(self, v) -> None:
        """Vhost ``v`` is deleted: our records of the others' queues go, from the definitions
        log too (a vhost made again under that name starts without them)."""
        for name in list(v.remote_queues):
            self._forget(v, name)

    def _forget(self, v, name: str) -> None:
        q = v.remote_queues.pop(name, None)
        if q is None:
            return
        q.deleted = True
        for b in list(q.bound_to):
            v.remove_binding(b.source, b)
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
            return off_the_loop(v.durability, v.delete_queue, q)
        finally:
            self._deleting = None

    # --- Qpid's exclusive queues that outlive their connection ---------------

    def lock_changed(self, q, ref: RemoteOwner | None) -> None:
        """Our queue ``q`` was locked for ``ref`` (None: unlocked): the others' records say so."""
        for peer in self.links.peers:
            self.tell(peer, "locked", q.vhost.name, q.name, ref)

    async def relock(self, q, session) -> bool:
        """Qpid's rule for another worker's queue ``q`` (``RemoteQueue.relock``): its owner
        locks it for ``session`` if it is unlocked and nobody consumes from it there."""
        if q.exclusive_owner is not None or q.durable:
            return False
        ref = self.session_ref(session)
        try:
            locked = await self.ask(q.owner, "lock", q.vhost_name, q.name, ref.session_id)
        except PeerGone as e:
            raise InternalError(f"another worker did not answer: {e}") from None
        if locked:
            q.exclusive_owner = ref
        return bool(locked)

    def kept_exclusive(self, q, session) -> None:
        if q.is_here:  # (re)locked here by us: the others' records say so (theirs told us: lock_remote)
            self.lock_changed(q, self.session_ref(session))

    def lock_remote(self, peer: int, vhost: str, name: str, session_id: int) -> bool:
        """On the owner: lock our queue for a connection on ``peer``, as a declare of it there
        asks, if it is unlocked and nobody consumes from it."""
        q = self._vhost(vhost).queues.get(name)
        if q is None or q.exclusive_owner is not None or q.consumers or q.durable:
            return False
        session = self._proxy_session(peer, session_id, q.vhost)
        q.exclusive_owner = session
        session.exclusive_queues.add(q)
        self.lock_changed(q, RemoteOwner(peer, session_id))
        return True

    def unlock_kept(self, handler, q) -> None:
        """A 0-10 connection that held ``q`` (ours, or a record of another worker's) closed:
        unlocked everywhere, kept with its messages."""
        if isinstance(q, RemoteQueue):
            ref = RemoteOwner(self.index, id(handler))
            if q.exclusive_owner == ref:
                q.exclusive_owner = None
                self.tell(q.owner, "unlock", q.vhost_name, q.name, ref)
        elif q.exclusive_owner is handler:
            q.exclusive_owner = None
            handler.exclusive_queues.discard(q)
            self.lock_changed(q, None)

    def _unlock_remote(self, vhost: str, name: str, ref: RemoteOwner) -> None:
        q = self._vhost(vhost).queues.get(name)
        owner = q.exclusive_owner if q is not None else None
        if isinstance(owner, ProxySession) and RemoteOwner(owner.worker, owner.session_id) == ref:
            q.exclusive_owner = None
            owner.exclusive_queues.discard(q)
            if not owner.channels and not owner.exclusive_queues:
                self._proxy_sessions.pop((owner.worker, owner.session_id), None)
            self.lock_changed(q, None)

    def _locked(self, vhost: str, name: str, ref: RemoteOwner | None) -> None:
        q = self._vhost(vhost).remote_queues.get(name)
        if q is not None:
            q.exclusive_owner = ref

    def queue_deleted(self, v, q) -> None:
        """A queue of ours went (exclusive connection closed, auto-delete, x-expires, the HTTP
        API): the others forget it, through the sequencer."""
        if q is self._deleting or self.stopping or self.links.closed:
            return  # (stopping: a queue that goes now is an exclusive one, which no restart keeps)
        if self.broker.vhosts.get(v.name) is not v:
            return  # its vhost is being deleted (Broker.vhost_deleted): every worker deletes it whole
        if self.index == SEQUENCER:
            asyncio.ensure_future(self._tell_forget(v.name, q.name, skip=None))
        else:
            fut = self.ask(SEQUENCER, "forgotten", v.name, q.name)
            fut.add_done_callback(_log_failure)

    async def _tell_forget(self, vhost: str, name: str, skip):
        await self.links.broadcast("forget", vhost, name, skip=skip)


def _binding_key(ex, q, routing_key, arguments):
    from warren.broker.exchanges.base import Binding
    return Binding(ex, q, routing_key, arguments).key


def _log_failure(fut) -> None:
    if not fut.cancelled() and fut.exception() is not None:
        log.error("telling the sequencer a queue went failed: %s", fut.exception())

