"""Distributed transactions across processes: a branch's parts, and the dtx commands of any process.

A dtx branch lives in the process of the session that started it, its *home*
(``warren/broker/dtx.py``): a worker under ``--worker-mode queues``, a node in a cluster. The
messages it accepts may belong to queues another process holds (another worker, another
node); the consuming channel knows them only by that owner's delivery tags. So at ``dtx.end``
the home hands them to their owners (``hold``), which take them out of the proxy channel's
unacked set and hold them for the branch, by xid: a *part* of the branch. The outcome then
reaches each part:

- ``prepare``: each part writes ``<xid>.held`` in its process's ``dtx`` folder (the queue and
  sequence number of each persistent message, and the home) and answers; only then does the home
  write its ``<xid>.prepared``, which names the parts. A part that cannot be prepared (its
  channel closed before the hand-over, so its messages went back to the queue) rolls the
  branch back.
- ``commit``: each part settles what it holds as the branch said (ack, reject, requeue), waits
  for its acks to reach the disk, deletes its record and answers; the home deletes its record
  when every part and its own work are on disk. A crash before that leaves the home's record:
  the branch is in doubt again and a repeated commit finds the parts done.
- ``rollback``: each part puts its messages back (told, not asked: a part whose record outlives
  its home's is rolled back at start-up anyway).

At start-up a process takes the messages of its ``.held`` records out of their queues again and
asks each part's home whether it still has the branch prepared; a home without it failed between
the two writes of ``prepare`` (or finished a rollback), and the part is rolled back. In a
cluster a node can go while the others run: a home that goes before ``prepare`` takes the
branch with it, so its parts go back to their queues (``home_lost``); prepared parts stay held,
in doubt, and their home is asked again when it returns (``home_back``).

A transaction manager's connection may land on any process: ``dtx.recover`` lists the prepared
branches of all of them (``recover_elsewhere``) and an outcome command for an xid this process
does not know runs where it is known (``elsewhere``: ``DtxManager.run`` there).
"""

from __future__ import annotations

import asyncio
import logging

from warren import errors
from warren.broker import dtx as broker_dtx
from warren.broker.dtx import HELD_SUFFIX, Xid, manager, settle_docs, settle_recovered
from warren.protocol.amqp0_10.message import requeue_unmarked
from warren.spread.proxy import UNMARKED, RemoteSettler

__all__ = ["DtxParts"]

log = logging.getLogger("warren.dtx")


class HeldPart:
    """What one branch of another worker's holds here: [(proxy channel or None, entries, requeue)]."""

    __slots__ = ("home", "settles", "recorded", "lost", "confirmed")

    def __init__(self, home) -> None:
        self.home = home  # the branch's worker (its index) or, in a cluster, node (its name)
        self.settles: list[tuple] = []
        self.recorded = False  # its .held record is on disk
        self.lost = False  # a hand-over found its channel (and so its messages) gone
        # recovered at start-up: whether its home said since that it still has the branch prepared
        self.confirmed = True


class DtxParts:
    """The parts of dtx branches across processes: ``Spread``'s across workers (peers: worker
    indexes) and, in a cluster, ``NodeReach``'s across nodes (warren/cluster/reach.py; peers:
    node names). Its ``owner`` carries the messages: ``tell`` and ``ask`` a peer, ``loop``,
    ``broker``, ``proxy_channel`` (the channels serving another process's consumers) and
    ``synced_future`` (once this process's group commit covers every append so far).

    ``where``: this process, as errors and logs name it; ``peers()``: whom an outcome command
    or ``recover`` for a branch unknown here asks; ``reachable(peer)``: whether a peer can be
    asked now (a worker always: the node dies with it; a node only while it runs)."""

    def __init__(self, owner, where: str, peers, reachable=lambda peer: True) -> None:
        self.owner = owner
        self.where = where
        self.peers = peers
        self.reachable = reachable
        self.held: dict = {}  # xid -> HeldPart: the parts of other processes' branches held here
        self._tasks: set = set()  # the asks under way (the loop keeps only weak references)

    def parts_down(self, branch) -> list:
        """The parts of ``branch`` that cannot be reached now."""
        return [p for p in branch.parts if not self.reachable(p)]

    # --- the branch's worker -------------------------------------------------------------------

    def hold(self, branch, channel, settles: list) -> list:
        """At the branch's ``end``: hand the settled deliveries of other workers' queues to their
        owners, to hold for the branch; returns the settles that stay here."""
        kept = []
        for entries, requeue in settles:
            local, remote = [], {}
            for entry in entries:
                q = entry[0]
                if isinstance(q, RemoteSettler):
                    remote.setdefault((q.owner, q.session_id, q.number), []).append(entry)
                else:
                    local.append(entry)
            for (owner, session_id, number), group in remote.items():
                channel.release_counts(group)  # off this channel's prefetch: the owner's counts until the outcome
                self.owner.tell(owner, "dtx_hold", session_id, number, branch.xid, [e[1] for e in group], requeue)
                branch.parts.add(owner)
            if local:
                kept.append((local, requeue))
        return kept

    def _ask_each(self, peers, op: str, args: tuple, then) -> None:
        """Ask each of ``peers`` to run ``op``; ``then(answers)``, in their order, an error
        raised there (or a gone link) standing as its answer."""
        async def ask() -> None:
            then(await asyncio.gather(*(self.owner.ask(p, op, *args) for p in peers), return_exceptions=True))
        self.task(ask())

    def task(self, coro) -> None:
        """Run ``coro`` as a task held until done (the loop keeps only weak references)."""
        task = self.owner.loop.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def prepare_parts(self, branch, done) -> None:
        """Ask each part to record what it holds: ``done([True or the reason, ...])``."""
        self._ask_each(branch.parts, "dtx_prepare", (branch.xid,), lambda answers: done([
            a if a is True else (str(a) if isinstance(a, BaseException) else "its messages went back")
            for a in answers]))

    def commit_parts(self, branch, done) -> None:
        """Each part settles as the branch said: ``done()`` once all are on their disks,
        ``done(error)`` if a worker is gone."""
        def then(answers) -> None:
            failed = [a for a in answers if isinstance(a, BaseException)]
            done(errors.InternalError(f"dtx.commit of {branch.xid}: {failed[0]}") if failed else None)
        self._ask_each(branch.parts, "dtx_commit", (branch.xid,), then)

    def roll_back_parts(self, branch) -> None:
        for owner in branch.parts:
            self.owner.tell(owner, "dtx_rollback", branch.xid)

    # --- any worker: the branches of the others ------------------------------------------------

    def elsewhere(self, op: str, xid: Xid, args: tuple, done) -> bool:
        """An outcome command for a branch this worker does not know: run where it is known
        (True: ``done`` hears the outcome, or that no worker knows the xid)."""
        def then(answers) -> None:
            for a in answers:
                if isinstance(a, tuple) and a[0] == "ok":
                    done(a[1])
                    return
                if isinstance(a, tuple) and a[0] == "error":
                    done(_rebuild(a[1], a[2]))
                    return
            done(errors.NotFound(f"dtx.{op.replace('_', '-')}: unknown xid {xid}"))
        self._ask_each(self.peers(), "dtx_run", (op, xid, args), then)
        return True

    def known_elsewhere(self, xid: Xid, done) -> None:
        """``done(True)`` if another worker has a branch ``xid`` (a new one's xid must be new to the node)."""
        self._ask_each(self.peers(), "dtx_has", (xid,), lambda answers: done(any(a is True for a in answers)))

    def recover_elsewhere(self, mine: list, done) -> None:
        """``done(xids)``: ours and every other worker's prepared branches."""
        def then(answers) -> None:
            xids = list(mine)
            for a in answers:
                if isinstance(a, list):
                    xids.extend(x for x in a if x not in xids)
            done(xids)
        self._ask_each(self.peers(), "dtx_recover", (), then)

    # --- answering the others ------------------------------------------------------------------

    def request(self, peer: int, op: str, args: tuple):
        if op == "dtx_prepare":
            return self._prepare_part(args[0])
        if op == "dtx_commit":
            return self._commit_part(args[0])
        if op == "dtx_known":  # a part's question at its start-up: is the branch still prepared here?
            return manager(self.owner.broker).is_prepared(args[0])
        if op == "dtx_has":
            return args[0] in manager(self.owner.broker).branches
        if op == "dtx_run":
            return self._run(*args)
        if op == "dtx_recover":
            return manager(self.owner.broker).recover()
        raise errors.InternalError(f"unknown dtx request {op!r} from {peer!r}")

    def message(self, peer: int, op: str, args: tuple) -> None:
        if op == "dtx_hold":
            self._hold(peer, *args)
        elif op == "dtx_rollback":
            self._roll_back_part(args[0])

    def _hold(self, peer: int, session_id: int, number: int, xid: Xid, tags: list, requeue) -> None:
        part = self.held.get(xid)
        if part is None:
            part = self.held[xid] = HeldPart(peer)
        ch = self.owner.proxy_channel(peer, session_id, number)
        entries = [] if ch is None else [ch.unacked.pop(t) for t in tags if t in ch.unacked]
        if len(entries) < len(tags):  # its channel closed first: those went back to their queue
            part.lost = True
        if entries:
            part.settles.append((ch, entries, requeue))

    def _prepare_part(self, xid: Xid):
        part = self.held.get(xid)
        if part is None or part.lost:
            return False
        dtx = manager(self.owner.broker)
        if dtx.folder is not None:
            dtx.write(xid.file_stem + HELD_SUFFIX, {
                "xid": [xid.format, xid.global_id.hex(), xid.branch_id.hex()], "home": part.home,
                "settles": settle_docs(part.settles)})
            part.recorded = True
        return True

    def _commit_part(self, xid: Xid):
        part = self.held.pop(xid, None)
        if part is None:
            return True  # committed before a restart of the branch's worker (or nothing held)
        for ch, entries, requeue in part.settles:
            _settle(ch, entries, requeue)
        if self.owner.broker.durability is None:
            return True

        async def on_disk() -> bool:  # the acks first (a one-phase commit's too), then the record
            await self.owner.synced_future()
            if part.recorded:
                manager(self.owner.broker).delete(xid.file_stem + HELD_SUFFIX)
            return True
        return on_disk()

    def _roll_back_part(self, xid: Xid) -> None:
        part = self.held.pop(xid, None)
        if part is None:
            return
        for ch, entries, _ in part.settles:
            _settle(ch, entries, True)
        if part.recorded:
            manager(self.owner.broker).delete(xid.file_stem + HELD_SUFFIX)

    def _run(self, op: str, xid: Xid, args: tuple):
        dtx = manager(self.owner.broker)
        if xid not in dtx.branches:
            return ("unknown",)
        fut = self.owner.loop.create_future()

        def done(value) -> None:
            if fut.done():
                return
            if isinstance(value, errors.AMQPError):
                fut.set_result(("error", type(value).__name__, value.text))
            elif isinstance(value, BaseException):
                fut.set_result(("error", "InternalError", f"{type(value).__name__} on {self.where}"))
            else:
                fut.set_result(("ok", value))
        try:
            dtx.run(op, None, xid, args, done)
        except errors.AMQPError as e:
            done(e)
        return fut

    # --- start-up ------------------------------------------------------------------------------

    def adopt(self, home_type) -> None:
        """At start: the parts an earlier run recorded here (``DtxManager.adopt_held_parts``),
        their messages held again until each home says what became of its branch
        (``home_back``: a worker's home is an index, a node's a name: ``home_type``)."""
        for xid, home, settles in manager(self.owner.broker).adopt_held_parts(home_type):
            self.recover_part(xid, home, settles)

    def recover_part(self, xid: Xid, home, settles: list) -> None:
        """A ``.held`` record found at start-up (``DtxManager.recover_prepared``): its messages,
        out of their queues again, are held until the home says what became of the branch."""
        part = self.held[xid] = HeldPart(home)
        part.settles = settles
        part.recorded = True
        part.confirmed = False

    async def ask_homes(self) -> None:
        """Once linked: roll back the parts whose home no longer has their branch prepared. A
        home out of reach is asked again when it is back (``home_back``)."""
        for xid, part in list(self.held.items()):
            if part.confirmed or not self.reachable(part.home):
                continue
            try:
                known = await self.owner.ask(part.home, "dtx_known", xid)
            except (errors.AMQPError, ConnectionError) as e:
                log.warning("dtx: could not ask %s about branch %s: %s", part.home, xid, e)
                continue
            if known:
                part.confirmed = True
                log.info("dtx: %s holds %d messages for branch %s, prepared on %s", self.where,
                         sum(len(e) for _, e, _ in part.settles), xid, part.home)
            elif self.held.get(xid) is part:
                log.info("dtx: %s has no prepared branch %s: the %d messages held for it here go back to "
                         "their queues", part.home, xid, sum(len(e) for _, e, _ in part.settles))
                try:  # (in a task nobody awaits: an error would otherwise go unsaid)
                    self._roll_back_part(xid)
                except Exception:
                    log.exception("dtx: could not roll back the part of branch %s", xid)

    def home_lost(self, home) -> None:
        """``home`` (a node) is gone: what it handed over here for branches not yet prepared
        goes back to the queues, since their branches cannot be prepared any more (a branch
        lives in its home's memory until then). Prepared parts are kept, in doubt, and their home
        is asked about them when it returns."""
        for xid, part in list(self.held.items()):
            if part.home != home:
                continue
            if part.recorded:
                part.confirmed = False
            else:
                log.info("dtx: %s is gone before branch %s was prepared: the %d messages held for it here go "
                         "back to their queues", home, xid, sum(len(e) for _, e, _ in part.settles))
                self._roll_back_part(xid)

    def home_back(self) -> None:
        """Nodes returned: ask the homes of parts in doubt again."""
        if any(not part.confirmed for part in self.held.values()):
            self.task(self.ask_homes())


def _settle(channel, entries, requeue) -> None:
    """Settle held deliveries: through the proxy channel that delivered them (its prefetch
    counts), or without one (recovered at start-up, or its channel closed meanwhile)."""
    if requeue == UNMARKED:
        requeue_unmarked(channel, entries)
    elif channel is not None and not channel.closed:
        channel.settle_entries(entries, requeue)
    else:
        settle_recovered(entries, requeue)


def _rebuild(name: str, text: str) -> errors.AMQPError:
    """A refusal the branch's worker answered, as the class it raised (dtx's own or ``warren.errors``')."""
    cls = getattr(broker_dtx, name, None) or getattr(errors, name, None)
    if not (isinstance(cls, type) and issubclass(cls, errors.AMQPError)):
        cls = errors.InternalError
    return cls(text)
