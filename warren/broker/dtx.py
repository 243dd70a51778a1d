"""Distributed transactions (XA branches), protocol-neutral: what AMQP 0-10's ``dtx`` class asks.

A *branch*, named by an ``Xid`` (format, global id, branch qualifier), collects the work of the
channels associated with it: the messages they publish and the deliveries they settle (accept,
reject, release) between ``start`` and ``end``. A transaction manager outside the broker then
drives it to an outcome: ``commit`` in one phase, or ``prepare`` then ``commit``/``rollback``
(two-phase commit), possibly from another connection, possibly after the broker restarted.

How work is collected. While a channel is associated with a branch it runs in the channel's own
transaction mode (``BrokerChannel.tx_mode``): its publishes and settles are held in
``tx_publishes``/``tx_settles`` exactly as for a local transaction (``channel.py``), so the hot
path is unchanged. ``end`` (with or without suspend) moves them into the branch; after it the
channel is non-transactional again until the next ``start``. Several channels may work for one
branch at once (``join``); a channel may leave a branch and come back (``suspend``/``resume``).
Settled deliveries leave the channel's unacked set when settled, so a branch's accepted messages
belong to the branch, not to the channel: a rollback puts them back in their queues (marked
redelivered), a commit forgets them, whichever connection does it (as Qpid's C++ broker does).

Durable prepare. ``prepare`` writes one file per branch, ``<data>/dtx/<xid>.prepared`` (fsynced,
renamed into place, the folder fsynced) before it answers: the messages the branch publishes
(store records) and the queue sequence numbers of the messages it consumes. A prepared branch
survives kill -9: at start-up (``DtxManager.recover_prepared``, after the queues are restored)
each record comes back as a prepared branch; the messages it consumed are taken out of their
queues again (they are still in the queue stores, unacked) and held until the outcome, and
``recover`` lists the xid. A commit applies the work, then deletes the record once the group
commit that covers the work (the publishes and the acks) completed; its answer waits for the
same sync. A crash between applying and that sync leaves the branch prepared: the transaction
manager commits it again (the consumed messages that had been acked are not held twice; a
publish that had reached the disk may then be delivered twice: at-least-once in that window).

Across workers (``--worker-mode queues``). A branch lives on the worker of the session that
started it (its *home*); the messages it accepted from queues other workers own are handed to
those owners at ``end``, held there for the branch (its *parts*, ``warren/spread/dtx.py``).
``prepare`` asks each part to record what it holds (``<xid>.held`` in the owner's ``dtx``
folder) before the home writes its own record, which names the parts; ``commit`` waits for the
parts' acks to reach their disks before the home's record goes; a part whose home has no record
of the branch at start-up is rolled back (the home failed between the two writes). The outcome
commands (``run``) and ``recover`` reach every worker: a transaction manager's connection may
land on any of them.

Timeouts (``set_timeout``, seconds; 0 = none; ``DEFAULT_TIMEOUT`` as Qpid's C++ broker, at most
``MAX_TIMEOUT``) apply until a branch is prepared: an expired branch is rolled back at once
(the manager ticks with the vhost's timers) and answers ``XA_RBTIMEOUT`` from then on.
A channel that closes while associated ends its association implicitly and marks the branch
rollback-only (its held work was already undone by ``BrokerChannel.close``).

Errors: the codes the spec gives (404 unknown xid, 409 illegal state, 530 already known), and
where Qpid's conformance suite expects another code than the spec, the suite's (503 for a
channel not selected for dtx, for join with resume, for suspend with fail; 542 for a timeout
above the maximum): ``docs/compatibility.md``.
"""

from __future__ import annotations

import base64
import enum
import json
import logging
import os
import time
import weakref
from collections import defaultdict
from typing import NamedTuple

from warren.broker.durability import SyncWaiter
from warren.broker.message import Message
from warren.errors import CommandInvalid, NotAllowed, NotFound, SoftError
from warren.store.message import decode_restored
from warren.store.segment import fsync_dir

__all__ = ["Xid", "XaStatus", "DtxManager", "IllegalState", "InvalidArgument", "manager", "DEFAULT_TIMEOUT",
           "MAX_TIMEOUT", "HELD_SUFFIX", "settle_docs", "settle_recovered", "xid_of"]

log = logging.getLogger("warren.dtx")

DEFAULT_TIMEOUT = 60  # seconds (Qpid's C++ broker: --dtx-default-timeout)
MAX_TIMEOUT = 3600  # seconds (Qpid's C++ broker: --dtx-max-timeout)
_SUFFIX = ".prepared"
HELD_SUFFIX = ".held"  # a part of another worker's branch (warren/spread/dtx.py)


class IllegalState(SoftError, register=False):
    """0-10's illegal-state (409): the command does not fit the branch's state."""

    reply_code = 409


class InvalidArgument(SoftError, register=False):
    """0-10's invalid-argument (542): a value out of range."""

    reply_code = 542


class XaStatus(enum.IntEnum):
    """XA outcomes (X/Open XA; 0-10's ``dtx.xa-status`` has the same numbers)."""

    XA_OK = 0
    XA_RBROLLBACK = 1  # rolled back: marked rollback-only (end with fail, an implicit end)
    XA_RBTIMEOUT = 2  # rolled back: the branch's timeout expired
    XA_HEURHAZ = 3
    XA_HEURCOM = 4
    XA_HEURRB = 5
    XA_HEURMIX = 6
    XA_RDONLY = 7


class Xid(NamedTuple):
    format: int
    global_id: bytes
    branch_id: bytes

    @property
    def file_name(self) -> str:
        return self.file_stem + _SUFFIX

    @property
    def file_stem(self) -> str:
        return f"{self.format:08x}-{self.global_id.hex()}-{self.branch_id.hex()}"

    def __str__(self) -> str:
        return f"{self.format}:{self.global_id!r}:{self.branch_id!r}"


# branch states
ACTIVE, PREPARING, PREPARED, ROLLED_BACK = "active", "preparing", "prepared", "rolled-back"


class Branch:
    """One transaction branch: its associations and the work they handed over."""

    def __init__(self, xid: Xid, timeout: int) -> None:
        self.xid = xid
        self.state = ACTIVE
        self.associated: set = set()  # channels working for it now
        self.suspended: set = set()  # channels that suspended their association (may resume)
        # (vhost name, exchange, message, mandatory); the exchange by name in a recovered branch
        self.publishes: list[tuple] = []
        # (channel or None, entries, requeue): settles as BrokerChannel.settle_entries takes them; a
        # recovered branch has no channel (its entries name no consumer)
        self.settles: list[tuple] = []
        self.outcome = XaStatus.XA_OK  # XA_RBROLLBACK / XA_RBTIMEOUT once rolled back by the broker
        self.rollback_only = False
        self.timeout = timeout
        self.deadline = time.monotonic() + timeout if timeout else 0.0
        self.recorded = False  # a prepared record is on disk
        # --worker-mode queues: the other workers that hold messages the branch accepted
        # (warren/spread/dtx.py); its outcome is theirs too
        self.parts: set[int] = set()

    def __repr__(self) -> str:
        return f"<Branch {self.xid} {self.state} associated={len(self.associated)}>"


def manager(broker) -> "DtxManager":
    """The broker's DtxManager (made on first use)."""
    m = broker.dtx
    if m is None:
        m = broker.dtx = DtxManager(broker)
    return m


class DtxManager:
    """Every branch of one broker, and which channel is selected for dtx and associated with what."""

    def __init__(self, broker) -> None:
        self.broker = broker
        self.durability = broker.durability
        self.branches: dict[Xid, Branch] = {}
        # channel -> its current branch (or None): the channels selected for dtx
        self.selected: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self.folder = self.durability.data_dir / "dtx" if self.durability is not None else None
        self._ticking: set = set()  # the vhosts whose timers hold us
        # prepared branches whose commit waits for their parts elsewhere: still known to a part
        # asking whether its branch is prepared (``is_prepared``)
        self.committing: set[Xid] = set()
        # parts of other processes' branches recorded here (``.held``), which this process's
        # DtxParts takes at its start (``adopt_held_parts``)
        self._held_records: list[tuple] = []

    # --- selection and association -------------------------------------------------------------

    def is_selected(self, channel) -> bool:
        return channel in self.selected

    def select(self, channel) -> None:
        """dtx.select: the channel will work for branches (never for a local transaction)."""
        if channel.tx_mode and channel not in self.selected:
            raise CommandInvalid("session is selected for local transactions (tx.select)")
        self.selected.setdefault(channel, None)

    def _selected(self, channel, what: str) -> None:
        if channel not in self.selected:
            raise CommandInvalid(f"{what}: session not selected for use with dtx (dtx.select first)")

    def start(self, channel, xid: Xid, join: bool = False, resume: bool = False) -> XaStatus:
        """Associate the channel with a branch: a new one, or (join) one others work for, or
        (resume) the one it suspended."""
        self._selected(channel, "dtx.start")
        if join and resume:
            raise CommandInvalid("dtx.start: join and resume cannot both be set")
        current = self.selected.get(channel)
        if current is not None:
            raise IllegalState(f"dtx.start: session already associated with xid {current.xid}")
        branch = self.branches.get(xid)
        if resume:
            if branch is None or channel not in branch.suspended:
                raise IllegalState(f"dtx.start: xid {xid} is not suspended by this session")
            branch.suspended.discard(channel)
        elif join:
            if branch is None:
                raise NotAllowed(f"dtx.start: cannot join unknown xid {xid}")
            if branch.state in (PREPARING, PREPARED):
                raise IllegalState(f"dtx.start: xid {xid} is {branch.state}")
        else:
            if branch is not None:
                raise NotAllowed(f"dtx.start: xid {xid} is already known (join or resume to work for it)")
            branch = self.branches[xid] = Branch(xid, DEFAULT_TIMEOUT)
            self._arm()
        branch.associated.add(channel)
        self.selected[channel] = branch
        channel.tx_mode = True  # its publishes and settles are held (channel.py) until end
        return branch.outcome

    def start_unique(self, channel, xid: Xid, join: bool, resume: bool, done) -> None:
        """``start``, and with ``--worker-mode queues`` a new branch's xid checked against the
        other workers' branches: ``done(status)``, or ``done(NotAllowed)`` (530, as one process
        refuses a known xid) with the new branch dropped. The association holds meanwhile, so
        the session's next commands already work for the branch."""
        status = self.start(channel, xid, join, resume)
        if join or resume:
            done(status)
            return
        branch = self.branches[xid]

        def checked(elsewhere: bool) -> None:
            if not elsewhere:
                done(status)
                return
            if self.branches.get(xid) is branch:
                del self.branches[xid]
            if self.selected.get(channel) is branch:
                self.selected[channel] = None
                channel.tx_mode = False
                self._collect_for_rollback(channel)
            done(NotAllowed(f"dtx.start: xid {xid} is already known (join or resume to work for it)"))
        parts = self._parts()
        if parts is None:
            checked(False)
        else:
            parts.known_elsewhere(xid, checked)  # the other workers' (or nodes')?

    def end(self, channel, xid: Xid, fail: bool = False, suspend: bool = False) -> XaStatus:
        """End (or suspend) the channel's association; its held work goes to the branch.
        ``fail``: the branch is rolled back (XA_RBROLLBACK)."""
        self._selected(channel, "dtx.end")
        if suspend and fail:
            raise CommandInvalid("dtx.end: suspend and fail cannot both be set")
        branch = self.selected.get(channel)
        if branch is None or branch.xid != xid:
            raise IllegalState(f"dtx.end: xid {xid} is not associated with this session")
        self._collect(branch, channel)
        branch.associated.discard(channel)
        self.selected[channel] = None
        channel.tx_mode = False
        if suspend:
            branch.suspended.add(channel)
        if fail and branch.state == ACTIVE:
            self._roll_back(branch, XaStatus.XA_RBROLLBACK)
        return branch.outcome

    def _collect(self, branch: Branch, channel) -> None:
        """Move what the channel holds for the branch into it (or undo it: rolled back)."""
        publishes, settles = channel.tx_publishes, channel.tx_settles
        channel.tx_publishes, channel.tx_settles = [], []
        if branch.state == ROLLED_BACK:
            for entries, _ in settles:
                channel.settle_entries(entries, True)
            return
        vhost_name = channel.vhost.name
        branch.publishes.extend((vhost_name, ex, msg, mandatory) for ex, msg, mandatory in publishes)
        parts = self._parts()
        if settles and parts is not None:  # other processes' deliveries are held by their owners
            settles = parts.hold(branch, channel, settles)
        branch.settles.extend((channel, entries, requeue) for entries, requeue in settles)

    def _refresh(self, branch: Branch) -> None:
        """Channels gone since they associated end their association implicitly: the branch
        becomes rollback-only (their held work was undone by the channel's close)."""
        for group in (branch.associated, branch.suspended):
            gone = [ch for ch in group if ch.closed]
            for ch in gone:
                group.discard(ch)
                branch.rollback_only = True

    def channel_closed(self, channel) -> None:
        """The channel is closing (its session ended): end its association implicitly."""
        branch = self.selected.pop(channel, None)
        if branch is not None:
            self._collect(branch, channel)
            branch.associated.discard(channel)
            branch.rollback_only = True
        for b in self.branches.values():
            if channel in b.suspended:
                b.suspended.discard(channel)
                b.rollback_only = True

    def _known(self, xid: Xid, what: str, idle: bool = True) -> Branch:
        """The branch of ``xid`` (404 if none); with ``idle``, 409 while a channel works for it."""
        branch = self.branches.get(xid)
        if branch is None:
            raise NotFound(f"{what}: unknown xid {xid}")
        self._refresh(branch)
        if idle and (branch.associated or branch.suspended):
            raise IllegalState(f"{what}: xid {xid} is still associated with a session")
        if idle and branch.state == PREPARING:
            raise IllegalState(f"{what}: xid {xid} is being prepared")
        return branch

    # --- outcomes ------------------------------------------------------------------------------

    def run(self, op: str, channel, xid: Xid, args: tuple, done) -> None:
        """One of the outcome commands (prepare, commit, rollback, forget, get_timeout,
        set_timeout) on the branch ``xid``, wherever it lives:
        ``done(result)`` once it is over (at once, or later: a prepare or commit waits for disks),
        ``done(error)`` for a refusal found after the call. ``args``: commit's ``one_phase``,
        set_timeout's seconds. ``channel`` routes a commit's publishes (None: a command another
        worker passed on, ``warren/spread/dtx.py``)."""
        parts = self._parts()
        if xid not in self.branches and parts is not None and parts.elsewhere(op, xid, args, done):
            return  # another worker's branch, or none (--worker-mode queues)
        if op == "prepare":
            self.prepare(xid, done)
        elif op == "commit":
            self.commit(channel if channel is not None else _Router(), xid, args[0], done)
        elif op == "rollback":
            done(self.rollback(xid))
        elif op == "forget":
            self.forget(xid)  # (refuses every known xid: see forget)
            done(None)
        elif op == "get_timeout":
            done(self.get_timeout(xid))
        elif op == "set_timeout":
            done(self.set_timeout(xid, args[0]))
        else:
            raise ValueError(f"unknown dtx operation {op!r}")

    def recover_all(self, done) -> None:
        """``done(xids)``: the prepared branches of every worker (``recover`` for one)."""
        parts = self._parts()
        if parts is None:
            done(self.recover())
        else:
            parts.recover_elsewhere(self.recover(), done)

    def prepare(self, xid: Xid, done) -> None:
        """Phase one: make the branch's work durable so that commit cannot fail, or answer that
        it was rolled back. ``done(status)`` once the record is written (after the parts'
        records, which other workers write)."""
        branch = self._known(xid, "dtx.prepare")
        if branch.state == PREPARED:
            raise IllegalState(f"dtx.prepare: xid {xid} is already prepared")
        if branch.rollback_only and branch.state == ACTIVE:
            self._roll_back(branch, XaStatus.XA_RBROLLBACK)
        if branch.state == ROLLED_BACK:
            done(branch.outcome)
            return
        if not branch.parts:
            self._prepared(branch)
            done(XaStatus.XA_OK)
            return
        branch.state = PREPARING
        branch.deadline = 0.0

        def parts_recorded(answers: list) -> None:
            if branch.state != PREPARING:  # (refusals keep other commands off it: defensive)
                return
            if all(a is True for a in answers):
                try:
                    self._prepared(branch)
                except OSError as e:
                    log.error("dtx: cannot write the prepared record of %s: %s; rolled back", xid, e)
                else:
                    done(XaStatus.XA_OK)
                    return
            else:
                log.warning("dtx: a part of branch %s on another worker could not be prepared (%s); rolled back",
                            xid, next(a for a in answers if a is not True))
            branch.state = ACTIVE
            self._roll_back(branch, XaStatus.XA_RBROLLBACK)
            done(branch.outcome)
        self._parts().prepare_parts(branch, parts_recorded)

    def _prepared(self, branch: Branch) -> None:
        self._write_record(branch)
        branch.state = PREPARED
        branch.deadline = 0.0  # a prepared branch waits for its outcome, however long

    def commit(self, channel, xid: Xid, one_phase: bool, done) -> None:
        """Apply the branch's work (routed through ``channel``); ``done(status)`` runs once the
        work is on disk (at once when nothing waits for the disk)."""
        branch = self._known(xid, "dtx.commit")
        if branch.state == ROLLED_BACK or (branch.rollback_only and branch.state == ACTIVE):
            if branch.state == ACTIVE:
                self._roll_back(branch, XaStatus.XA_RBROLLBACK)
            self._forget(branch)
            done(branch.outcome)
            return
        if one_phase and branch.state == PREPARED:
            raise IllegalState(f"dtx.commit: xid {xid} is prepared: commit it with one-phase off")
        if not one_phase and branch.state != PREPARED:
            raise IllegalState(f"dtx.commit: xid {xid} is not prepared: prepare it or commit in one phase")
        down = self._parts().parts_down(branch) if branch.parts else []
        if down:  # (a cluster) nothing applied: the branch stays prepared for the manager to commit again
            raise NotFound(f"dtx.commit: xid {xid} holds messages of node '{down[0]}', which is down or "
                           f"inaccessible; the branch stays prepared")
        del self.branches[xid]
        need = 0
        for vhost_name, ex, msg, mandatory in branch.publishes:
            if isinstance(ex, str):  # recovered: by name
                vhost = self.broker.vhosts.get(vhost_name)
                ex = vhost.exchanges.get(ex) if vhost is not None else None
                if ex is None:
                    log.warning("dtx commit of %s: exchange %r is gone; a message is dropped", xid, msg.exchange)
                    continue
            need = max(need, channel._route(ex, msg, mandatory))
        for owner, entries, requeue in branch.settles:
            if owner is not None:
                owner.settle_entries(entries, requeue)
            else:
                settle_recovered(entries, requeue)
        durability = self.durability
        if durability is not None and durability.dirty:
            need = max(need, durability.next_sync)  # the acks written just now
        # the record goes once every worker's part of the work is on its disk
        waiting = 1 + bool(branch.parts)  # this worker's sync, and the parts' answers

        def one_done(error=None) -> None:
            nonlocal waiting
            if waiting < 0:
                return
            if error is not None:
                # a part's worker is gone (the node is stopping), or its node went during the
                # commit: the record stays, and the branch stays prepared with only the parts'
                # work left, for the manager to commit again (``_left_to_parts``)
                waiting = -1
                self.committing.discard(xid)
                self._left_to_parts(branch)
                done(error)
                return
            waiting -= 1
            if waiting == 0:
                self.committing.discard(xid)
                self._delete_record(branch)
                done(XaStatus.XA_OK)
        if branch.parts:
            self.committing.add(xid)
            self._parts().commit_parts(branch, one_done)
        if need and durability is not None and need > durability.synced:
            durability.waiting.add(SyncWaiter(durability, need, one_done))
            return
        one_done()

    def _left_to_parts(self, branch: Branch) -> None:
        """A commit whose parts did not all answer: what this node did is done (its publishes
        routed, its acks made); the parts' outcome is still owed. The branch is prepared again,
        with the parts alone, so that a repeated commit asks them again and routes nothing twice
        (the record on disk still names the publishes: a restart before that commit routes them
        again, the at-least-once window the module doc names)."""
        if branch.xid in self.branches:
            return
        branch.publishes, branch.settles = [], []
        branch.state = PREPARED
        self.branches[branch.xid] = branch

    def rollback(self, xid: Xid) -> XaStatus:
        branch = self._known(xid, "dtx.rollback")
        if branch.state != ROLLED_BACK:
            self._roll_back(branch, XaStatus.XA_RBROLLBACK if branch.rollback_only else XaStatus.XA_OK)
        self._forget(branch)
        return branch.outcome

    def forget(self, xid: Xid) -> None:
        """Only a heuristically completed branch may be forgotten; Warren never completes one
        heuristically, so a known xid is refused (409)."""
        self._known(xid, "dtx.forget")
        raise IllegalState(f"dtx.forget: xid {xid} was not heuristically completed")

    def _roll_back(self, branch: Branch, outcome: XaStatus) -> None:
        """Undo the work: publishes dropped, settled deliveries back in their queues."""
        for ch in list(branch.associated):
            self._collect_for_rollback(ch)
        for owner, entries, _ in branch.settles:
            if owner is not None:
                owner.settle_entries(entries, True)
            else:
                settle_recovered(entries, True)
        if branch.parts:
            self._parts().roll_back_parts(branch)
        branch.publishes, branch.settles = [], []
        branch.state = ROLLED_BACK
        branch.outcome = outcome
        branch.deadline = 0.0
        self._delete_record(branch)

    @staticmethod
    def _collect_for_rollback(channel) -> None:
        settles = channel.tx_settles
        channel.tx_publishes, channel.tx_settles = [], []
        for entries, _ in settles:
            channel.settle_entries(entries, True)

    def _forget(self, branch: Branch) -> None:
        if self.branches.get(branch.xid) is branch:
            del self.branches[branch.xid]
        for ch in branch.associated | branch.suspended:
            if self.selected.get(ch) is branch:
                self.selected[ch] = None
                ch.tx_mode = False

    def recover(self) -> list[Xid]:
        """The prepared branches (in doubt), for a transaction manager to decide."""
        return [b.xid for b in self.branches.values() if b.state == PREPARED]

    # --- timeouts ------------------------------------------------------------------------------

    def get_timeout(self, xid: Xid) -> int:
        return self._known(xid, "dtx.get-timeout", idle=False).timeout

    def set_timeout(self, xid: Xid, seconds: int) -> None:
        """From now on, the branch is rolled back if not prepared within ``seconds`` (0: never)."""
        branch = self._known(xid, "dtx.set-timeout", idle=False)
        if seconds > MAX_TIMEOUT:
            raise InvalidArgument(f"dtx.set-timeout: {seconds} s is above the maximum of {MAX_TIMEOUT} s")
        branch.timeout = seconds
        if branch.state == ACTIVE:
            branch.deadline = time.monotonic() + seconds if seconds else 0.0
            self._arm()

    def _arm(self) -> None:
        """Be ticked (Broker.tick): the timers of any one vhost will do, the branches are the broker's."""
        for vhost in self.broker.vhosts.values():
            vhost.timers.add(self)
            return

    def tick(self, now: float) -> bool:
        """Roll back the branches whose timeout expired; whether any deadline remains."""
        pending = False
        for branch in list(self.branches.values()):
            if branch.state == ACTIVE and branch.deadline:
                if branch.deadline <= now:
                    log.info("dtx branch %s timed out after %d s: rolled back", branch.xid, branch.timeout)
                    self._roll_back(branch, XaStatus.XA_RBTIMEOUT)
                else:
                    pending = True
        return pending

    # --- the prepared records ------------------------------------------------------------------

    def _write_record(self, branch: Branch) -> None:
        if self.folder is None:
            return
        doc = {"xid": [branch.xid.format, branch.xid.global_id.hex(), branch.xid.branch_id.hex()],
               "publishes": self._publish_docs(branch), "settles": settle_docs(branch.settles)}
        if branch.parts:
            doc["parts"] = sorted(branch.parts)
        self.write(branch.xid.file_name, doc)
        branch.recorded = True

    @staticmethod
    def _publish_docs(branch: Branch) -> list:
        publishes = []
        for vhost_name, ex, msg, mandatory in branch.publishes:
            publishes.append({"vhost": vhost_name, "exchange": ex if isinstance(ex, str) else ex.name,
                              "mandatory": mandatory,
                              "record": base64.b64encode(bytes(msg.record)).decode()})
        return publishes

    def write(self, file_name: str, doc: dict) -> None:
        """A record in the dtx folder, on disk (fsynced, renamed into place) when this returns."""
        data = json.dumps(doc, separators=(",", ":")).encode()
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self.folder / file_name
        tmp = path.with_suffix(".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
        try:
            mv = memoryview(data)
            while mv:
                mv = mv[os.write(fd, mv):]
            if self.durability.fsync:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
        if self.durability.fsync:
            fsync_dir(str(self.folder))

    def delete(self, file_name: str) -> None:
        if self.folder is not None:
            try:
                os.unlink(self.folder / file_name)
            except FileNotFoundError:
                pass

    def _delete_record(self, branch: Branch) -> None:
        if branch.recorded:
            self.delete(branch.xid.file_name)
            branch.recorded = False

    def recover_prepared(self) -> int:
        """Start-up, after the queues were restored: every prepared record becomes a prepared
        branch again; the messages it consumed leave their queues until its outcome."""
        if self.folder is None or not self.folder.is_dir():
            return 0
        count = 0
        for path in sorted(self.folder.iterdir()):
            if path.suffix == ".tmp":
                path.unlink(missing_ok=True)  # a prepare that never answered
                continue
            if path.suffix == HELD_SUFFIX:
                try:  # a part another worker's (or node's) branch left here (warren/spread/dtx.py)
                    doc = json.loads(path.read_bytes())
                    self._held_records.append((path, doc))  # taken by the DtxParts (adopt_held_parts)
                except (ValueError, KeyError, TypeError) as e:
                    log.error("dtx: cannot read held part %s (%s): kept, not recovered", path, e)
                continue
            if path.suffix != _SUFFIX:
                continue
            try:
                branch = self._load(json.loads(path.read_bytes()))
            except (ValueError, KeyError, TypeError) as e:
                log.error("dtx: cannot read prepared record %s (%s): kept, not recovered", path, e)
                continue
            self.branches[branch.xid] = branch
            count += 1
        if count:
            log.info("dtx: recovered %d prepared branches", count)
        return count

    def _parts(self):
        """The DtxParts of this process (warren/spread/dtx.py), or None: every queue is here."""
        return self.broker.directory.dtx_parts()

    def adopt_held_parts(self, home_type=str) -> list[tuple]:
        """The parts of other processes' branches recorded here, as [(xid, home, settles)],
        their messages taken out of their queues again: asked by the DtxParts at its start
        (a worker's ``home_type`` is int, a node's name str). Without workers or a cluster
        nobody asks, and the records and messages stay as they are."""
        parts = []
        for path, doc in self._held_records:
            try:
                parts.append((xid_of(doc), home_type(doc["home"]), self.take_settles(doc)))
            except (ValueError, KeyError, TypeError) as e:
                log.error("dtx: cannot read held part %s (%s): kept, not recovered", path, e)
        self._held_records = []
        return parts

    def is_prepared(self, xid: Xid) -> bool:
        """Whether ``xid`` is prepared here, or committing (a part elsewhere asks)."""
        branch = self.branches.get(xid)
        return xid in self.committing or (branch is not None and branch.state == PREPARED)

    def _load(self, doc: dict) -> Branch:
        branch = Branch(xid_of(doc), DEFAULT_TIMEOUT)
        branch.state, branch.deadline, branch.recorded = PREPARED, 0.0, True
        branch.parts = set(doc.get("parts", ()))
        for p in doc["publishes"]:
            exchange, routing_key, properties, body = decode_restored(base64.b64decode(p["record"]))
            branch.publishes.append((p["vhost"], p["exchange"], Message(exchange, routing_key, properties, body),
                                     bool(p["mandatory"])))
        branch.settles.extend(self.take_settles(doc, branch.xid))
        return branch

    def take_settles(self, doc: dict, xid: Xid | None = None) -> list[tuple]:
        """A record's settled messages taken out of their queues again (restored at start-up,
        unacked): [(None, entries, requeue)], as a branch holds them."""
        xid = xid or xid_of(doc)
        settles = []
        wanted: dict = defaultdict(dict)  # (vhost, queue) -> seq -> requeue
        for s in doc["settles"]:
            wanted[(s["vhost"], s["queue"])][int(s["seq"])] = s["requeue"]
        for (vhost_name, queue_name), seqs in wanted.items():
            vhost = self.broker.vhosts.get(vhost_name)
            q = vhost.queues.get(queue_name) if vhost is not None else None
            if q is None:
                continue  # the queue is gone: so are its messages
            held = _take_seqs(q, set(seqs))
            missing = set(seqs) - {seq for seq, _ in held}
            if missing and q.paged:
                log.warning("dtx: prepared branch %s consumed %d messages of queue '%s' that are paged out at "
                            "start-up; they stay in the queue", xid, len(missing), queue_name)
            by_requeue = defaultdict(list)
            for seq, msg in held:
                by_requeue[seqs[seq]].append((q, seq, msg, None, 0))
            settles.extend((None, entries, requeue) for requeue, entries in by_requeue.items())
        return settles


def xid_of(doc: dict) -> Xid:
    fmt, gid, bid = doc["xid"]
    return Xid(int(fmt), bytes.fromhex(gid), bytes.fromhex(bid))


def settle_docs(settles) -> list[dict]:
    """What a record keeps of settled deliveries: those a restart can bring back."""
    docs = []
    for _, entries, requeue in settles:
        for q, seq, msg, _c, _t in entries:
            if q.store is not None and msg.persistent:
                docs.append({"vhost": q.vhost.name, "queue": q.name, "seq": seq, "requeue": requeue})
    return docs


class _Router:
    """Routes the publishes of a commit another worker passed on (``run`` without a channel):
    no client to return a mandatory message to (``Exchange.enqueue``)."""

    @staticmethod
    def _route(ex, msg, mandatory: bool) -> int:
        return ex.enqueue(msg)[1]


def _take_seqs(q, seqs: set) -> list[tuple]:
    """Take the ready messages with these seqs out of a queue: [(seq, message)]."""
    ready = q.ready
    kept, taken = [], []
    while ready:
        entry = ready.popleft()
        (taken if entry[0] in seqs else kept).append(entry)
    for entry in kept:
        ready.append(entry)
    for seq, msg, _, _ in taken:
        q.ready_bytes -= len(msg.body)
    return [(seq, msg) for seq, msg, _, _ in taken]


def settle_recovered(entries, requeue) -> None:
    """Settle deliveries that no channel holds (a branch recovered at start-up)."""
    if requeue:
        by_queue = defaultdict(list)
        for q, seq, msg, _, _ in entries:
            by_queue[q].append((seq, msg))
        for q, items in by_queue.items():
            q.requeue(items)
        return
    for q, seq, msg, _, _ in entries:
        if requeue is None:
            q.stats_ack += 1
            q.forget(seq, msg)
        else:
            q.reject(seq, msg)
