"""Replicated quorum queues and streams: a queue's messages on a majority of its members' disks
before a confirm, and a member that takes over when its leader's node dies (issue 33).

**Members.** A durable quorum queue declared in a cluster gets ``x-quorum-initial-group-size``
members (default 3, or every running node if fewer): its leader, the node that made it, and
followers, the other running nodes by name. etcd holds the queue's record,
``/warren/<C>/replicas/<vhost>/<name>`` = ``{"leader", "epoch", "members"}``; every change of
leader is a compare-and-swap on it that raises the epoch, so two nodes never both take it.

**Leader.** The queue runs on its leader as on one node (warren/broker/queues/quorum.py), its
store wrapped (``ReplicatedStore``): every append, ack, delivered and returned mark is also an
*operation*, numbered, sent to each follower at the end of the loop turn (``r_ops``). A
follower that joins, returns or missed operations first gets a *snapshot* of the store's live
messages (``r_snap``), then the operations after it. The group commit's sync of the store
(on a pool thread: the wrapper is not a plain QueueStore) asks each follower in step to sync up
to the last operation (``r_sync``) and waits for enough of them to answer that, with its own
fsync, a majority of the members hold everything: RabbitMQ's quorum rule. If they do not
answer in time, the confirms waiting are nacks (never a confirm of what a majority may not hold).

**Follower.** Applies snapshots and operations to a store of its own, a QueueStore in
``<data>/replicas/<digest>`` (the queue folder's digest), the same files the leader's queue
folder holds: it is not a queue here, and no client reaches it. Operations of an older epoch
than the follower has seen are refused.

**Failover.** When the leader's node is gone (its lease ended: ``members``), each follower
stops taking the old epoch's operations and votes in etcd (``replica-votes/<vhost>/<name>/
<node>``, with its lease): its last operation's number and whether it was in step. Once a
majority of the members voted, the in-step voter with the highest number takes the queue (the
compare-and-swap, which also moves the queue directory's key): a confirmed message was on a
majority, so on at least one voter, and the highest one has every operation the others have. It
moves its replica folder into its queue folder and declares the queue there: the queue starts
from it as after a restart (messages that were out are redelivered, ``redelivered`` set), and
leads the others. With a majority of members gone, nobody takes it: the queue waits, as
RabbitMQ's does. A node that returns and finds another leader in the record drops its copy and
follows.

**Serving.** A leader hands messages out (dispatch, basic.get) only while its node's etcd lease
surely lives (``ClusterNode.lease_valid``: counted from before each renewal was sent, less a
margin), and only under the lease it took the queue with: a node paused (SIGSTOP) or cut off
from etcd past its lease stops delivering before etcd can end the lease and the followers elect
another leader, so two leaders never serve at once. Its confirms need no such check: a
follower that voted refuses the old epoch's syncs. A lease that ends and is replaced (the node
registered again) makes the leader take its queue again, a new epoch, if nobody took it
meanwhile. Each serving interval's start and end are logged on ``time.monotonic()`` for the
fault harness (tests/cluster/faults). A pause in the middle of one dispatch can still hand out
what that dispatch was handing out (at most a prefetch window): duplicates at worst, as with
any redelivery.

**Streams** are replicated the same way, as logs (``ReplicatedStreamStore``): each append (offset,
timestamp, record) and each retention run is an operation, a snapshot is the retained log from its
first offset, a follower's StreamStore starts there (``StreamStore.start_at``) and refuses an
entry at another offset than its next, so offsets are the same on every member; the leader's
readers see only what a majority holds. Followers serve a stream's reads from their replica, up to
the leader's commit (``r_commit``: replica_reads.py).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import logging
import os
import shutil
import time
from urllib.parse import quote

from warren.broker.directory import ADMIN, apply_change
from warren.cluster.etcd import EtcdError
from warren.cluster.node import cancel_tasks
from warren.cluster.queues import plain, queue_key
from warren.cluster.reach import nack_from_pool
from warren.cluster.replica_reads import ReplicaStream
from warren.errors import AMQPError
from warren.store.message import encode_message_ss
from warren.store.queue_store import QueueStore
from warren.store.stream_store import StreamStore

__all__ = ["Replicas", "ReplicatedStore", "DEFAULT_GROUP_SIZE"]

log = logging.getLogger("warren.cluster")

DEFAULT_GROUP_SIZE = 3  # RabbitMQ's x-quorum-initial-group-size default
SYNC_TIMEOUT_S = 10.0  # followers that do not answer a sync: the confirms waiting are nacks
SNAPSHOT_CHUNK = 1000  # messages per snapshot record
SNAPSHOT_STREAM_BYTES = 4 * 1024 * 1024  # a stream's snapshot record holds at most this many octets of entries
VOTE_POLL_S = 0.2  # how often a voter reads the votes while an election runs
ELECTION_S = 60.0  # a voter gives up waiting for a majority's votes after this long (and votes again later)
CATCH_UP_INTERVAL_S = 0.5  # a follower gets at most one snapshot this often
# a sync with too few followers in step waits this long for one to come back (a snapshot), as
# RabbitMQ's publishes wait for a quorum, before the confirms waiting are nacks; well inside
# SYNC_TIMEOUT_S, so the followers then asked still have time to answer
IN_STEP_WAIT_S = SYNC_TIMEOUT_S / 2


def kind_of(q) -> str:
    """How the logs name a replicated queue's type."""
    return "stream" if q.is_stream else "quorum queue"


def _quote(part: str) -> str:
    return quote(part, safe="")


class ReplicatedStore:
    """A leader's QueueStore, whose changes are also operations for the followers. Everything
    else is the store's own (``__getattr__``)."""

    ack_sync_interval = 0  # acks go out with the next sync, as the messages do

    def __init__(self, inner: QueueStore, leader: "Leader") -> None:
        self.inner = inner
        self.leader = leader
        # its syncs run whole on the group commit's pool thread (Durability.sync), which writes
        # too: a flush handed to the server's disk writer could land after that thread's writes
        inner.writer = None

    def __getattr__(self, name: str):
        return getattr(self.inner, name)

    def __len__(self) -> int:
        return len(self.inner)

    def append(self, seq: int, record) -> None:
        self.inner.append(seq, record)
        self.leader.op(("a", seq, record if type(record) is bytes else encode_message_ss(*record)))

    def ack(self, seq: int) -> None:
        self.inner.ack(seq)
        self.leader.op(("k", (seq,)))

    def ack_run(self, seqs) -> None:
        seqs = tuple(seqs)
        self.inner.ack_run(seqs)
        self.leader.op(("k", seqs))

    def mark_delivered(self, seq: int) -> None:
        self.inner.mark_delivered(seq)
        self.leader.op(("d", seq))

    def mark_returned(self, seq: int) -> None:
        self.inner.mark_returned(seq)
        self.leader.op(("r", seq))

    def sync(self) -> int:
        """On the group commit's pool thread: this node's fsync, and a majority's (module doc).
        Once the node stops (the links closed), this node's alone: its clients are gone."""
        if self.leader.replicas.stopping:
            return self.inner.sync()
        asked = self.leader.ask_majority()
        covered = self.inner.sync()
        return self.synced(covered, self.leader.sync_majority(asked))

    def synced(self, covered: int, on_majority: bool) -> int:
        """What ``sync`` returns once this node's fsync covered ``covered`` and a majority held it
        (``on_majority``) or not (its confirms are nacks then): the store's own answer."""
        return covered


class ReplicatedStreamStore(ReplicatedStore):
    """A leader's StreamStore, whose appends and retention runs are also operations for the
    followers, and whose readers (consumers, the HTTP API's bulk reads) see only what a majority
    of the members holds: ``committed_offset`` is the last offset a successful sync covered, so
    an offset handed out never names another record after a failover."""

    def __init__(self, inner, leader: "Leader") -> None:
        super().__init__(inner, leader)
        self.replicated_offset = inner.committed_offset  # what the store held when it was led

    @property
    def committed_offset(self) -> int:
        return self.replicated_offset

    def append(self, record, timestamp_ms: int) -> int:
        offset = self.inner.append(record, timestamp_ms)
        self.leader.op(("s", offset, timestamp_ms, bytes(record)))
        return offset

    def enforce_retention(self, now_ms: int) -> int:
        inner = self.inner
        dropped = inner.enforce_retention(now_ms)
        if dropped:  # the followers drop the same segments (their appends made the same ones)
            self.leader.op(("e", now_ms, inner.max_bytes, inner.max_age_s))
        return dropped

    def read_raw(self, offset: int, max_records: int, max_bytes: int, end: int | None = None):
        limit = self.replicated_offset + 1
        return self.inner.read_raw(offset, max_records, max_bytes, limit if end is None else min(end, limit))

    def synced(self, covered: int, on_majority: bool) -> int:
        if on_majority and covered > self.replicated_offset:
            # the followers' readers may read it now (replica_reads.py): the commit, where its
            # batch began ("last", as the stream's queue counts it) and the first retained offset
            batch = self.replicated_offset + 1
            self.replicated_offset = covered
            self.leader.replicas.loop.call_soon_threadsafe(self.leader.tell_commit, covered, batch,
                                                           self.inner.first_offset)
        return self.replicated_offset


class Leader:
    """This node leads a replicated queue (module doc): its operations, and its followers' state."""

    def __init__(self, replicas: "Replicas", v, q, epoch: int, members: list[str]) -> None:
        self.replicas = replicas
        self.vhost, self.name, self.q = v.name, q.name, q
        self.epoch = epoch
        self.members = members
        self.index = 0  # the number of the last operation
        self.sent_upto = 0  # the last operation sent (or covered by a snapshot)
        self.pending: list = []  # the operations after it, not sent yet (this loop turn's)
        self.in_step: set[str] = set()  # followers sent a snapshot, and every operation since
        self.synced: dict[str, int] = {}  # the last operation each follower said it synced
        self.snapshots: dict[str, int] = {}  # the operation each follower's last snapshot covered
        self.committed = 0  # the last operation a majority of the members synced
        self.stopped = False
        self.snapshot_sent_at: dict[str, float] = {}  # loop.time() of each follower's last snapshot
        self.catching_up: set[str] = set()  # followers a snapshot is scheduled for (``catch_up_soon``)
        # followers a snapshot is being sent to: the operations since its point, sent after it
        self.receiving: dict[str, list] = {}
        self.step_waiters: list = []  # called when a follower comes in step (``ask_syncs``)
        self.told_commit = -1  # a stream's: the last commit told the followers (``tell_commit``)
        # the lease this node held when it took the queue: it serves under that lease alone
        # (``serving``); a new lease (the old one ended) means another node may have taken it
        self.lease = replicas.cluster.lease
        self.serving_since: float | None = None  # time.monotonic() of this serving interval's start
        self.valid_until = 0.0  # the lease's validity at the last check that let it serve

    def describe(self) -> str:
        return f"{kind_of(self.q)} '{self.name}' in vhost '{self.vhost}'"

    def serving(self) -> bool:
        """Whether the queue may deliver now (the queue asks before each dispatch and basic.get):
        only while this node's lease surely lives, the lease it took the queue under (module doc,
        "Serving"). The start and the end of each interval are logged (``interval``)."""
        cluster = self.replicas.cluster
        if not self.stopped and cluster.lease == self.lease and cluster.lease_valid():
            self.valid_until = cluster.lease_valid_until
            if self.serving_since is None:
                self.serving_since = time.monotonic()
                self.interval(f"serving from {self.serving_since:.3f}")
            return True
        if self.serving_since is not None:
            self.serving_since = None
            self.interval(f"served until {self.valid_until:.3f} (its node's lease was not renewed in time)")
        return False

    def stop_serving(self, why: str) -> None:
        """The queue goes from this node (taken by another, deleted, the node stops)."""
        self.stopped = True
        self.came_in_step()  # (a sync waiting for followers fails now: ``ask_syncs``)
        if self.serving_since is not None:
            self.serving_since = None
            self.interval(f"served until {min(time.monotonic(), self.valid_until):.3f} ({why})")

    def interval(self, what: str) -> None:
        # one line per start and end, on time.monotonic() (one clock for every process of the
        # machine): the fault harness checks that no two leaders' intervals overlap
        log.info("cluster: lease interval of %s, epoch %d, node %s: %s", self.describe(), self.epoch,
                 self.replicas.me, what)

    @property
    def followers(self) -> list[str]:
        return [m for m in self.members if m != self.replicas.me]

    @property
    def needed(self) -> int:
        """Follower answers a sync needs: a majority of the members, this node counted."""
        return len(self.members) // 2

    def op(self, operation: tuple) -> None:
        self.index += 1
        if not self.in_step and not self.receiving:  # nobody to send it to: a follower back takes a snapshot
            self.pending.clear()
            self.sent_upto = self.index
            return
        if not self.pending:
            self.replicas.flush_soon(self)
        self.pending.append(operation)

    def flush(self) -> None:
        if not self.pending or self.stopped:
            return
        ops, self.pending = self.pending, []
        first = self.sent_upto + 1
        self.sent_upto += len(ops)
        for node in list(self.in_step):
            self.replicas.tell(node, "r_ops", self.vhost, self.name, self.epoch, first, ops)
        for held in self.receiving.values():  # sent once their snapshot is (``_send_snapshot``)
            held.append((first, ops))

    def ask_majority(self) -> concurrent.futures.Future:
        """From the group commit's pool thread, before this node's own fsync: the followers asked
        to sync everything so far (``ask_syncs``, on the loop)."""
        fut = concurrent.futures.Future()
        self.replicas.loop.call_soon_threadsafe(self.ask_syncs, fut)
        return fut

    def sync_majority(self, asked: concurrent.futures.Future) -> bool:
        """On the pool thread, after this node's fsync: whether a majority holds everything
        ``ask_majority`` covered. If not, the confirms waiting are nacks (never a confirm of what
        a majority may not hold)."""
        try:
            asked.result(SYNC_TIMEOUT_S)
            return True
        except Exception as e:  # noqa: BLE001: whatever kept the majority away, the confirms are nacked
            # (a leader taken over or deleted nacks too: its clients are still there, and what it
            # appended last may be on no other member; a node that stops has no clients left)
            if not self.replicas.stopping:
                nack_from_pool(self.replicas.api.reach, self.describe(), e)
            return False

    def ask_syncs(self, fut: concurrent.futures.Future, deadline: float | None = None) -> None:
        """On the loop: everything sent, then each follower in step asked to sync up to now. With
        fewer in step than a majority needs (one returning is sent a snapshot first), it waits for
        them until ``deadline`` (IN_STEP_WAIT_S from the first try)."""
        if self.stopped:  # taken over, or deleted: nothing it appended since is sure to be anywhere else
            fut.set_exception(ReplicaError(f"{self.describe()}: this node leads it no more"))
            return
        self.flush()
        needed = self.needed
        if needed == 0:
            self.committed = self.index
            fut.set_result(None)
            return
        asked = list(self.in_step)
        if len(asked) < needed:
            if deadline is None:
                deadline = self.replicas.loop.time() + IN_STEP_WAIT_S
            if self.replicas.loop.time() >= deadline:
                fut.set_exception(ReplicaError(f"{self.describe()}: {len(asked)} of its followers are in step, "
                                               f"{needed} needed"))
                return
            self._wait_for_step(lambda: self.ask_syncs(fut, deadline), deadline)
            return
        state = {"ok": 0, "failed": 0}
        upto = self.index

        def answered(a: asyncio.Future, node: str) -> None:
            error = ReplicaError("cancelled") if a.cancelled() else a.exception()  # (always taken)
            if error is not None:
                self.out_of_step(node, str(error) or type(error).__name__)
            if fut.done():
                return
            if error is None:
                self.synced[node] = max(self.synced.get(node, 0), upto)
                state["ok"] += 1
                if state["ok"] >= needed:
                    self.committed = max(self.committed, upto)
                    fut.set_result(None)
                return
            state["failed"] += 1
            if len(asked) - state["failed"] < needed:
                fut.set_exception(ReplicaError(f"{self.describe()}: followers did not sync ({error})"))

        for node in asked:
            answer = self.replicas.ask(node, "r_sync", self.vhost, self.name, self.epoch, upto)
            answer.add_done_callback(lambda a, node=node: answered(a, node))

    def _wait_for_step(self, retry, deadline: float) -> None:
        """``retry`` once a follower comes in step, or at ``deadline``, whichever is first."""
        def once() -> None:
            if timer.cancelled():
                return
            timer.cancel()
            retry()
        timer = self.replicas.loop.call_at(deadline, once)
        self.step_waiters.append(once)

    def came_in_step(self) -> None:
        waiters, self.step_waiters = self.step_waiters, []
        for waiter in waiters:
            waiter()

    def tell_commit(self, offset: int, batch: int, first: int) -> None:
        """A stream's: the followers in step hear the last offset a majority holds, up to which
        their readers read, where the batch it ended began, and the first offset retention
        kept (``r_commit``; once per sync)."""
        if self.stopped or offset <= self.told_commit:
            return
        self.told_commit = offset
        for node in self.in_step:
            self.replicas.tell(node, "r_commit", self.vhost, self.name, self.epoch, offset, batch, first)

    def out_of_step(self, node: str, why: str) -> None:
        if self.stopped:
            return
        if node in self.in_step:
            self.in_step.discard(node)
            log.warning("cluster: %s: follower %s is out of step (%s); a snapshot brings it back",
                        self.describe(), node, why)
            self.replicas.catch_up_soon(self, node)

    def snapshot_to(self, node: str) -> None:
        """Send ``node`` a snapshot of the store as it is now (its point: every operation so
        far), then the operations after it; ``node`` is in step from then on (the link keeps
        them in order). The snapshot is read on a thread, a part at a time, and written as the
        link drains (``_send_snapshot``): the queue goes on meanwhile, and the operations it
        makes wait for the snapshot in ``receiving``."""
        if node in self.receiving or self.stopped:
            return
        self.flush()
        store = self.q.store.inner if isinstance(self.q.store, ReplicatedStore) else self.q.store
        if self.q.is_stream:  # the retained log from its first offset up to its end now
            point = (store.first_offset, store.next_offset)
        else:  # every live message, with its marks now (what changes later is an operation)
            point = (store.unacked(), store.returned_counts())
        self.receiving[node] = []
        self.replicas.spawn(self._send_snapshot(node, store, point, self.index))

    async def _send_snapshot(self, node: str, store, point: tuple, index: int) -> None:
        parts = self._stream_snapshot(store, *point) if self.q.is_stream else self._queue_snapshot(store, *point)
        try:
            part = 0
            async for items, final, extra in parts:
                if self.stopped or not self.replicas.cluster.running(node):
                    return
                self.replicas.tell(node, "r_snap", self.vhost, self.name, self.epoch, self.replicas.me, part, items,
                                   final, index, *extra)
                await self.replicas.api.links.drained(node)
                part += 1
        except Exception as e:  # noqa: BLE001: whatever failed (the store closed, retention ran), another one later
            log.warning("cluster: %s: the snapshot for node %s failed (%s); another one follows", self.describe(),
                        node, e)
            self.replicas.catch_up_soon(self, node)
            return
        finally:
            held = self.receiving.pop(node, None)
        if self.stopped or held is None:
            return
        for first, ops in held:
            self.replicas.tell(node, "r_ops", self.vhost, self.name, self.epoch, first, ops)
        if self.q.is_stream:  # what its readers may read of it already (replica_reads.py)
            self.replicas.tell(node, "r_commit", self.vhost, self.name, self.epoch, self.q.store.committed_offset,
                               self.q.last_batch, store.first_offset)
        self.in_step.add(node)
        self.snapshots[node] = index
        self.snapshot_sent_at[node] = self.replicas.loop.time()
        self.came_in_step()

    @staticmethod
    async def _queue_snapshot(store, live: list, returns: dict):
        """A queue's snapshot parts: its live messages at the point, records read on a thread;
        one acked since is left out (its ack follows as an operation, which the follower
        ignores)."""
        def read(page) -> list:
            items = []
            for seq, delivered in page:
                try:
                    items.append((seq, bytes(store.read(seq)), delivered, returns.get(seq, 0)))
                except KeyError:
                    continue
            return items
        for start in range(0, max(len(live), 1), SNAPSHOT_CHUNK):
            page = live[start:start + SNAPSHOT_CHUNK]
            yield await asyncio.to_thread(read, page), start + SNAPSHOT_CHUNK >= len(live), ()

    @staticmethod
    async def _stream_snapshot(store, first: int, end: int):
        """A stream's snapshot parts: every retained entry from ``first`` (where the follower's
        log starts: ``StreamStore.start_at``) up to ``end``, offsets and timestamps kept."""
        offset = first
        while True:
            entries = await asyncio.to_thread(store.read, offset, SNAPSHOT_CHUNK, SNAPSHOT_STREAM_BYTES) \
                if offset < end else []
            entries = [(o, ts, bytes(r)) for o, ts, r in entries if o < end]
            if offset < end and (not entries or entries[0][0] != offset):  # retention took it: start again
                raise ValueError(f"offset {offset} of {first}..{end - 1} is gone")
            offset = entries[-1][0] + 1 if entries else end
            yield entries, offset >= end, (first,)
            if offset >= end:
                return

    def status(self) -> list[dict]:
        """rabbitmq-queues quorum_status's rows: each member's state and how far it is."""
        rows = []
        for node in self.members:
            if node == self.replicas.me:
                state, index = "leader", self.index
            elif not self.replicas.cluster.running(node):
                state, index = "noproc", None
            else:
                state, index = ("follower" if node in self.in_step else "catching up"), self.synced.get(node)
            rows.append({"Node Name": node, "Raft State": state, "Log Index": index, "Commit Index": self.committed,
                         "Snapshot Index": self.snapshots.get(node), "Term": self.epoch})
        return rows


def best_vote(votes: list[dict]) -> dict | None:
    """The vote of the member to take a queue whose leader is down: of those in step, the newest
    copy first, then the longest (Raft's rule). A majority of votes holds a member of every
    majority that confirmed something, so the best of them holds all of it; a copy of an older
    leader's, however long, lacks what the newer one confirmed."""
    return max((x for x in votes if x.get("in_step")), key=lambda x: (x.get("copy", 0), x["applied"], x["node"]),
               default=None)


class Follower:
    """This node follows a replicated queue: its replica store (module doc)."""

    def __init__(self, replicas: "Replicas", vhost: str, name: str) -> None:
        self.replicas = replicas
        self.vhost, self.name = vhost, name
        self.epoch = 0  # the newest epoch seen: operations of an older one are refused
        self.leader = ""
        self.store: QueueStore | None = None
        self.applied = 0  # the number of the last operation applied
        self.in_step = False  # a whole snapshot taken, and every operation since
        self.fenced = False  # voting: the old leader's operations are refused
        self.stream = False  # the replica of a stream (a StreamStore), not of a queue
        self.leader_commit = -1  # a stream's: the last offset its leader said a majority holds
        self.leader_view = (0, 0)  # and where its last batch began, and its first retained offset
        self.reads: ReplicaStream | None = None  # a stream's readers on this node (replica_reads.py)
        self.readable = False  # a stream's whole snapshot is synced here: readers may read it
        self.incoming: tuple | None = None  # (epoch, parts) of a snapshot not all here yet

    @property
    def path(self) -> str:
        return self.replicas.replica_dir(self.vhost, self.name)

    def snapshot(self, epoch: int, leader: str, part: int, items: list, final: bool, index: int,
                 stream_first: int | None = None) -> None:
        """One part of a leader's snapshot. The parts are kept until the last has come, and only
        then replace what this replica held: the leader sends them over several loop turns, and
        until the whole snapshot is here this replica's copy stays what it was (what it synced
        counts towards a majority, and it votes with it if the leader dies meanwhile). A
        stream's (``stream_first``: its first retained offset) is a log of entries, a queue's
        its live messages with their marks."""
        if epoch < self.epoch or (self.fenced and epoch == self.epoch):
            return
        if part == 0:
            self.incoming = (epoch, [])
        elif self.incoming is None or self.incoming[0] != epoch:
            return
        self.incoming[1].append(items)
        if not final:
            return
        parts, self.incoming = self.incoming[1], None
        self.reset(stream_first)
        self.epoch, self.leader, self.fenced = epoch, leader, False
        store = self.store
        try:
            for items in parts:
                if self.stream:
                    for offset, timestamp_ms, record in items:
                        self._append_entry(offset, timestamp_ms, record)
                else:
                    for seq, record, delivered, returned in items:
                        store.append(seq, record)
                        for _ in range(returned):
                            store.mark_returned(seq)
                        if delivered:
                            store.mark_delivered(seq)
        except (ValueError, OSError) as e:  # the next snapshot starts afresh
            log.error("cluster: the replica of queue '%s' in vhost '%s' could not take a snapshot: %s", self.name,
                      self.vhost, e)
            self.in_step = False
            self._close_store()  # the leader's next sync fails, and it snapshots again
            return
        self.applied = index
        self.in_step = True
        if self.stream:  # on disk before its readers read it (the leader's next sync may be far off)
            self.replicas.spawn(self._sync_snapshot(store))

    async def _sync_snapshot(self, store) -> None:
        await asyncio.to_thread(store.sync)
        if self.store is store:
            self.readable = True
            if self.reads is not None:
                self.reads.store_replaced(store, self.leader_commit, *self.leader_view)

    def reset(self, stream_first: int | None = None) -> None:
        self._close_store()
        shutil.rmtree(self.path, ignore_errors=True)
        fsync = self.replicas.durability.fsync
        self.stream = stream_first is not None
        if self.stream:
            self.store = StreamStore(self.path, fsync=fsync)
            self.store.start_at(stream_first)
        else:
            self.store = QueueStore(self.path, fsync=fsync)
        self.applied = 0
        self.in_step = False

    def _append_entry(self, offset: int, timestamp_ms: int, record: bytes) -> None:
        if offset != self.store.next_offset:  # offsets are the same on every member, or this is out of step
            raise ValueError(f"entry {offset} where {self.store.next_offset} comes next")
        self.store.append(record, timestamp_ms)

    def operations(self, epoch: int, first: int, ops: list) -> None:
        if epoch != self.epoch or self.fenced or not self.in_step:
            return
        if first != self.applied + 1:  # a gap: out of step until the next snapshot
            self.in_step = False
            return
        store = self.store
        try:
            for op in ops:
                kind = op[0]
                if kind == "a":
                    store.append(op[1], op[2])
                elif kind == "k":
                    store.ack_run(op[1])
                elif kind == "d":
                    store.mark_delivered(op[1])
                elif kind == "r":
                    store.mark_returned(op[1])
                elif kind == "s":
                    self._append_entry(op[1], op[2], op[3])
                else:  # "e": a stream's retention, as its leader ran it
                    store.set_retention(op[2], op[3])
                    store.enforce_retention(op[1])
        except (ValueError, OSError) as e:  # a replica that cannot take them: out of step, snapshotted again
            log.error("cluster: the replica of queue '%s' in vhost '%s' could not apply operations %d-%d: %s",
                      self.name, self.vhost, first, first + len(ops) - 1, e)
            self.in_step = False
            return
        self.applied = first + len(ops) - 1

    async def sync(self, epoch: int, upto: int) -> int:
        if epoch != self.epoch or self.fenced or not self.in_step or self.applied < upto:
            raise ReplicaError(f"node {self.replicas.me} is not in step with epoch {epoch} up to {upto} "
                               f"(epoch {self.epoch}, applied {self.applied}, in step {self.in_step}, "
                               f"voting {self.fenced})")
        store = self.store
        await asyncio.to_thread(store.sync)
        if self.reads is not None and self.store is store:
            self.reads.advance()
        return upto

    def committed(self, epoch: int, offset: int, batch: int, first: int) -> None:
        """A stream's leader says a majority holds everything up to ``offset``, the last batch
        began at ``batch``, and its retention kept from ``first`` on (``r_commit``)."""
        if epoch == self.epoch and not self.fenced:
            self.leader_commit = max(self.leader_commit, offset)
            self.leader_view = (batch, first)
            if self.reads is not None and self.reads.store is not None:
                self.reads.commit(offset, batch, first)

    def reads_here(self, vhost) -> ReplicaStream | None:
        """A stream's replica that readers here may use now: in step with its leader, and
        synced (replica_reads.py); made at the first reader."""
        if not (self.stream and self.in_step and self.readable):
            return None
        if self.reads is None:
            record = self.replicas.record(self.vhost, self.name) or {}
            self.reads = ReplicaStream(vhost, self.name, dict(record.get("arguments") or {}))
            self.reads.store_replaced(self.store, self.leader_commit, *self.leader_view)
        return self.reads

    def close(self, why: str = "this node follows it no more") -> None:
        """This node stops following: its store closes, its readers are cancelled."""
        if self.reads is not None:
            reads, self.reads = self.reads, None
            reads.close(why)
        self._close_store()

    def _close_store(self) -> None:
        self.readable = False
        if self.reads is not None:
            self.reads.store_replaced(None)
        if self.store is not None:
            store, self.store = self.store, None
            try:
                store.close()
            except Exception:  # noqa: BLE001: a replica that cannot close is replaced by the next snapshot
                log.exception("cluster: closing the replica of queue '%s' failed", self.name)


class ReplicaError(Exception):
    pass


class Replicas:
    """This node's replicated quorum queues: those it leads, those it follows (module doc)."""

    def __init__(self, cluster, broker, api) -> None:
        self.cluster = cluster
        self.broker = broker
        self.api = api  # ClusterApi: links, reach (nack_waiting)
        self.durability = broker.durability
        self.me = cluster.node_name
        self.loop: asyncio.AbstractEventLoop | None = None
        self.leading: dict[tuple[str, str], Leader] = {}
        self.following: dict[tuple[str, str], Follower] = {}
        self._flush_due: list[Leader] = []
        self._tasks: set[asyncio.Task] = set()
        self._electing: set[tuple[str, str]] = set()
        self._creating: set = set()  # queues whose record ``created`` is writing
        self._promote_at_start: list = []  # taken at start, made once the links are up (``start``)
        self._stopped = False

    # --- keys and folders ------------------------------------------------------------------

    def record_key(self, vhost: str, name: str) -> str:
        return f"{self.cluster.prefix}replicas/{_quote(vhost)}/{_quote(name)}"

    def votes_prefix(self, vhost: str, name: str) -> str:
        return f"{self.cluster.prefix}replica-votes/{_quote(vhost)}/{_quote(name)}/"

    def replica_dir(self, vhost: str, name: str) -> str:
        digest = os.path.basename(str(self.durability.queue_dir(vhost, name)))
        return os.path.join(str(self.durability.data_dir), "replicas", digest)

    def record(self, vhost: str, name: str) -> dict | None:
        return self.cluster.replicas.get(f"{_quote(vhost)}/{_quote(name)}")

    # --- the links ---------------------------------------------------------------------------

    def tell(self, node: str, op: str, *args) -> None:
        if self.api.links is not None and self.cluster.running(node):
            self.api.links.tell(node, op, *args)

    def ask(self, node: str, op: str, *args) -> asyncio.Future:
        return asyncio.ensure_future(self.api.links.ask(node, op, *args, timeout=SYNC_TIMEOUT_S))

    def flush_soon(self, leader: Leader) -> None:
        if not self._flush_due:
            self.loop.call_soon(self._flush)
        self._flush_due.append(leader)

    def _flush(self) -> None:
        due, self._flush_due = self._flush_due, []
        for leader in due:
            leader.flush()

    def spawn(self, coro) -> None:
        if self._stopped:
            coro.close()
            return
        task = self.loop.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # --- start and stop --------------------------------------------------------------------------

    async def settle(self) -> None:
        """At start, before this node publishes its queues: each local durable quorum queue is
        led again (the record's epoch raised) or, if another node leads it now, dropped here
        (this node follows it); the replicas this node holds are kept for following."""
        self.loop = asyncio.get_running_loop()
        kvs, _ = await self.cluster.client.range_prefix(f"{self.cluster.prefix}replicas/")
        records = {}
        for kv in kvs:
            try:
                records[kv.key.decode()[len(self.cluster.prefix) + len("replicas/"):]] = (json.loads(kv.value), kv)
            except ValueError:
                continue
        for v in list(self.broker.vhosts.values()):
            for q in list(v.queues.values()):
                if not self._replicated(q):
                    continue
                found = records.get(f"{_quote(v.name)}/{_quote(q.name)}")
                if found is None:
                    await self._create(v, q)
                elif found[0].get("leader") == self.me:
                    if not await self._take(v.name, q.name, found[0], found[1]):
                        self._drop_local(v, q, "another")  # taken a moment ago
                    else:
                        self._lead(v, q, found[0])
                else:
                    self._drop_local(v, q, found[0].get("leader"))
        for key, (record, kv) in records.items():  # led here, but the queue was never made here (taken, then died)
            vhost, name = record.get("vhost"), record.get("name")
            v = self.broker.vhosts.get(vhost)
            if record.get("leader") == self.me and v is not None and name not in v.queues \
                    and os.path.isdir(self.replica_dir(vhost, name)):
                if await self._take(vhost, name, record, kv):
                    self._promote_at_start.append((vhost, name, record))

    def start(self) -> None:
        """Links are up: lead (snapshots to the followers), follow, and watch for leaders gone."""
        self.cluster.listen("members", self.members_changed)
        self.cluster.listen("replicas", self.records_changed)
        self.cluster.listen("lease", self.lease_changed)
        for vhost, name, record in self._promote_at_start:
            self.spawn(self._promote(vhost, name, record))
        self._promote_at_start = []
        self.members_changed()

    @property
    def stopping(self) -> bool:
        """The node stops: its links close, its clients are gone."""
        return self._stopped

    async def stop(self) -> None:
        self._stopped = True
        await cancel_tasks(*self._tasks)
        for leader in self.leading.values():
            leader.stop_serving("this node stops")
        for follower in self.following.values():
            follower.close()

    @staticmethod
    def _replicated(q) -> bool:
        return q.queue_type in ("quorum", "stream") and q.durable and q.exclusive_owner is None

    # --- a new queue, led here -------------------------------------------------------------------

    async def created(self, v, q) -> None:
        """A durable quorum queue just declared here: its record (epoch 1, its members), then led.
        A queue of that name deleted a moment ago (before the tick saw it) is forgotten first: its
        record is taken again, epoch raised, so its followers start afresh."""
        if not self._replicated(q) or q in self._creating:  # (two declares at once: one record)
            return
        old = self.leading.get((v.name, q.name))
        if old is not None and old.q is q:
            return
        if old is not None:
            del self.leading[(v.name, q.name)]
            old.stop_serving("the queue was deleted")
        self._creating.add(q)
        try:
            await self._create(v, q)
        finally:
            self._creating.discard(q)

    async def _create(self, v, q) -> None:
        # RabbitMQ's arguments: a quorum queue's group size, a stream's initial cluster size
        size = q.arguments.get("x-initial-cluster-size" if q.is_stream else "x-quorum-initial-group-size",
                               DEFAULT_GROUP_SIZE)
        size = size if isinstance(size, int) and size > 0 else DEFAULT_GROUP_SIZE
        others = sorted(n for n in self.cluster.members if n != self.me and self.cluster.running(n))
        members = [self.me] + others[:size - 1]
        record = {"vhost": v.name, "name": q.name, "leader": self.me, "epoch": 1, "members": members,
                  "arguments": plain(q.arguments), "type": q.queue_type}
        written, existing = await self.cluster.client.put_if_absent(self.record_key(v.name, q.name),
                                                                    json.dumps(record, sort_keys=True))
        if not written:  # declared before and deleted while this node was down, or a race: take it
            record = json.loads(existing.value)
            if not await self._take(v.name, q.name, record, existing):
                return
            record = self.record(v.name, q.name) or record
        self.cluster.replicas[f"{_quote(v.name)}/{_quote(q.name)}"] = record
        self._lead(v, q, record)

    def _lead(self, v, q, record: dict) -> None:
        leader = Leader(self, v, q, record["epoch"], list(record["members"]))
        before = self.leading.get((v.name, q.name))
        if before is not None:  # led again (a new epoch): the old epoch's interval ends here
            before.stop_serving(f"led again, epoch {leader.epoch}")
        store = q.store.inner if isinstance(q.store, ReplicatedStore) else q.store
        wrapped = ReplicatedStreamStore(store, leader) if q.is_stream else ReplicatedStore(store, leader)
        listeners = self.durability.sync_listeners  # a stream hears of its syncs (durability.py)
        if q.store in listeners:
            listeners[wrapped] = listeners.pop(q.store)
        q.store = wrapped
        if not q.is_stream:  # (a stream's readers see only what a majority holds, from any leader)
            q.serving = leader.serving
        self.leading[(v.name, q.name)] = leader
        self.following.pop((v.name, q.name), None)
        log.info("cluster: this node leads %s (epoch %d, members %s)", leader.describe(), leader.epoch,
                 ", ".join(leader.members))
        if self.loop is not None and self.api.links is not None:
            for node in leader.followers:
                if self.cluster.running(node):
                    leader.snapshot_to(node)
        leader.serving()  # the interval's start, logged

    async def _take(self, vhost: str, name: str, record: dict, kv) -> bool:
        """Raise the record's epoch with this node as its leader, if nobody changed it since
        ``kv`` was read; the queue directory's key moves here in the same transaction."""
        new = {**record, "leader": self.me, "epoch": int(record.get("epoch", 0)) + 1}
        old_leader = record.get("leader")
        deletes = [queue_key(self.cluster.prefix, vhost, name, old_leader)] if old_leader and old_leader != self.me else []
        taken = await self.cluster.client.write_if_unchanged(
            self.record_key(vhost, name), kv.mod_revision, [(self.record_key(vhost, name),
                                                             json.dumps(new, sort_keys=True), 0)], deletes)
        if taken:
            self.cluster.replicas[f"{_quote(vhost)}/{_quote(name)}"] = new
            record.update(new)
        return taken

    # --- a queue led elsewhere -------------------------------------------------------------------

    def _drop_local(self, v, q, leader: str | None) -> None:
        """Another node leads ``q``: this node's copy goes (every confirmed message is on the
        leader: module doc) and this node follows it."""
        log.warning("cluster: %s '%s' in vhost '%s' is led by node %s now: this node's copy is dropped, "
                    "and it follows", kind_of(q), q.name, v.name, leader)
        v.delete_queue(q)

    # --- a queue deleted here -------------------------------------------------------------------

    def tick(self) -> None:
        """From the server's tick: a queue this node led and deleted (a client, the HTTP API,
        x-expires) loses its record, and its followers their replicas (they watch the records)."""
        for k, leader in list(self.leading.items()):
            if leader.q.deleted:
                del self.leading[k]
                leader.stop_serving("the queue was deleted")
                self.spawn(self._forget(k, leader.epoch))

    async def _forget(self, k, epoch: int) -> None:
        key = self.record_key(*k)
        try:
            kv = await self.cluster.client.get(key)
            if kv is not None and json.loads(kv.value).get("epoch") == epoch:  # not declared again since
                await self.cluster.client.write_if_unchanged(key, kv.mod_revision, [], [key])
        except EtcdError as e:
            log.warning("cluster: the record of deleted quorum queue '%s' in vhost '%s' stays in etcd: %s",
                        k[1], k[0], e)

    # --- what the cluster's views say ------------------------------------------------------------

    def members_changed(self) -> None:
        """A node came or went: followers that came back are caught up; a leader gone is
        replaced (an election, module doc)."""
        if self.loop is None:
            return
        for leader in list(self.leading.values()):
            for node in leader.followers:
                if node not in leader.in_step and self.cluster.running(node):
                    self.catch_up_soon(leader, node)
                elif node in leader.in_step and not self.cluster.running(node):
                    leader.in_step.discard(node)
        self.records_changed()

    def records_changed(self) -> None:
        if self.api.reach is not None:  # handles kept for a replicated queue follow its record (reach.py)
            self.api.reach.directory_changed()
        for key, record in list(self.cluster.replicas.items()):
            members = record.get("members") or []
            vhost, name, leader = record.get("vhost"), record.get("name"), record.get("leader")
            k = (vhost, name)
            if self.me not in members:
                if k in self.following:  # a member no more (delete_member, shrink): its replica goes
                    self.following.pop(k).close()
                    shutil.rmtree(self.replica_dir(*k), ignore_errors=True)
                continue
            if leader == self.me:
                led = self.leading.get(k)
                if led is not None and led.members != members:  # add_member, delete_member, grow, shrink
                    led.members = list(members)
                    for node in set(led.in_step) - set(members):
                        led.in_step.discard(node)
                    self.members_changed()
                continue
            if k in self.leading:  # taken by another node: this one stops
                self._stepped_down(k, leader)
            follower = self.following.get(k)
            if follower is None:
                follower = self.following[k] = Follower(self, vhost, name)
            if leader not in self.cluster.members and k not in self._electing:
                self._electing.add(k)
                self.spawn(self._elect(k, record))
        for k in [k for k in self.following if f"{_quote(k[0])}/{_quote(k[1])}" not in self.cluster.replicas]:
            self.following.pop(k).close()  # the queue was deleted
            shutil.rmtree(self.replica_dir(*k), ignore_errors=True)

    def lease_changed(self) -> None:
        """This node's lease was renewed, or replaced after it ended. A leader that stopped
        serving under a lease still alive serves again; one whose lease ended takes its queue
        again under the new lease (a new epoch) if nobody took it meanwhile (``_retake``)."""
        for k, leader in list(self.leading.items()):
            if leader.lease != self.cluster.lease:
                if k not in self._electing:
                    self._electing.add(k)
                    self.spawn(self._retake(k, leader))
            elif leader.serving_since is None and not leader.q.deleted:
                leader.q.dispatch()  # (which asks ``serving``: the new interval's start)

    async def _retake(self, k, leader: Leader) -> None:
        try:
            kv = await self.cluster.client.get(self.record_key(*k))
            record = json.loads(kv.value) if kv is not None else None
            if record is None or record.get("leader") != self.me or int(record.get("epoch", 0)) != leader.epoch:
                return  # taken (or deleted): the records' watch makes this node follow
            if self.leading.get(k) is not leader or not await self._take(*k, record, kv):
                return
            leader.stop_serving("its node's lease ended; taken again under a new one")
            log.warning("cluster: this node's lease ended and nobody took %s meanwhile: it leads it again (epoch %d)",
                        leader.describe(), record["epoch"])
            del self.leading[k]
            self._lead(self.broker.vhosts[k[0]], leader.q, record)
            leader.q.dispatch()
        except EtcdError as e:
            log.warning("cluster: %s could not be taken again under this node's new lease (%s); tried again at "
                        "the next renewal", leader.describe(), e)
        finally:
            self._electing.discard(k)

    def _stepped_down(self, k, new_leader: str) -> None:
        leader = self.leading.pop(k)
        leader.stop_serving(f"taken by node {new_leader}")
        v = self.broker.vhosts.get(k[0])
        q = v.queues.get(k[1]) if v is not None else None
        if q is not None:
            log.warning("cluster: %s was taken by node %s: this node stops serving it", leader.describe(), new_leader)
            # before its store leaves the group commit: what it took last is on no majority
            self.api.reach.nack_all(f"{leader.describe()} was taken by another node")
            v.delete_queue(q)
            # and what this node's clients publish to it from now on goes to the new leader, not
            # nowhere (unroutable, and so confirmed) until the queue directory's watch says where
            self.api.reach.add_handle(v, {"name": q.name, "vhost": v.name, "node": new_leader, "type": q.queue_type,
                                          "durable": True, "auto_delete": False, "exclusive": False,
                                          "arguments": plain(q.arguments)})

    def catch_up_soon(self, leader: Leader, node: str) -> None:
        """A snapshot for ``node``, at most one per CATCH_UP_INTERVAL_S: a follower that refuses
        every sync (it voted, or follows a newer epoch this node has not heard of yet) must not
        make this node send snapshot after snapshot as fast as it can."""
        if node in leader.catching_up:
            return
        leader.catching_up.add(node)

        def send() -> None:
            leader.catching_up.discard(node)
            if not leader.stopped and node not in leader.in_step and self.cluster.running(node):
                leader.snapshot_to(node)
        last = leader.snapshot_sent_at.get(node)
        wait = 0.0 if last is None else max(0.0, last + CATCH_UP_INTERVAL_S - self.loop.time())
        self.loop.call_later(wait, send)

    # --- an election (module doc) -----------------------------------------------------------------

    async def _elect(self, k, record: dict) -> None:
        vhost, name = k
        follower = self.following[k]
        epoch = int(record.get("epoch", 0))
        try:
            follower.fenced = True
            # (``copy``: the epoch of the leader this replica followed, older than ``epoch`` if
            # that leader never snapshotted it: its ``applied`` counts another leader's operations)
            vote = {"node": self.me, "epoch": epoch, "copy": follower.epoch, "applied": follower.applied,
                    "in_step": follower.in_step}
            await self.cluster.client.put(self.votes_prefix(vhost, name) + self.me, json.dumps(vote),
                                          lease=self.cluster.lease)
            members = record.get("members") or []
            needed = len(members) // 2 + 1
            deadline = self.loop.time() + ELECTION_S
            while not self._stopped and self.loop.time() < deadline:
                current = self.record(vhost, name)
                if current is None or int(current.get("epoch", 0)) != epoch:
                    return  # decided (by another voter, or the leader came back)
                votes = [json.loads(kv.value) for kv in await self.cluster.client.get_prefix(self.votes_prefix(vhost, name))]
                votes = [x for x in votes if x.get("epoch") == epoch and x.get("node") in members]
                if len(votes) >= needed:
                    best = best_vote(votes)
                    if best is None:  # (its leader may return: this node votes again when members change)
                        log.warning("cluster: quorum queue '%s' in vhost '%s': none of the members voting was in step "
                                    "with its leader %s, which is down: nobody takes it until it returns", name, vhost,
                                    record.get("leader"))
                        return
                    if best["node"] == self.me:
                        kv = await self.cluster.client.get(self.record_key(vhost, name))
                        current = json.loads(kv.value) if kv is not None else None
                        if current is not None and int(current.get("epoch", 0)) == epoch \
                                and await self._take(vhost, name, current, kv):
                            await self._promote(vhost, name, current)
                            for x in votes:
                                await self.cluster.client.delete(self.votes_prefix(vhost, name) + x["node"])
                        return
                await asyncio.sleep(VOTE_POLL_S)
        except EtcdError as e:
            log.warning("cluster: quorum queue '%s' in vhost '%s': the election failed (%s); tried again", name,
                        vhost, e)
        finally:  # (the vote's fence stays: a snapshot of a newer epoch lifts it)
            self._electing.discard(k)

    async def _promote(self, vhost: str, name: str, record: dict) -> None:
        """This node took the queue: its replica becomes its queue folder, the queue is declared
        here and starts from it (as after a restart), then this node leads it."""
        follower = self.following.pop((vhost, name), None)
        if follower is not None:
            follower.close()
        v = self.broker.vhosts.get(vhost)
        if v is None:
            log.error("cluster: quorum queue '%s': no vhost '%s' here to take it into", name, vhost)
            return
        kind = record.get("type", "quorum")
        target = self.durability.stream_dir(vhost, name) if kind == "stream" else self.durability.queue_dir(vhost, name)
        source, target = self.replica_dir(vhost, name), str(target)
        if os.path.isdir(source):
            shutil.rmtree(target, ignore_errors=True)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            os.rename(source, target)
        arguments = dict(record.get("arguments") or {})
        handle = v.remote_queues.get(name)
        # declared, led, bound where the old leader's handle was and given what was held for it
        # in one turn: nothing published meanwhile reaches a queue not led yet (confirmed by this
        # node's disk alone), nor finds no binding (returned, or dropped and confirmed). Its record
        # is fsynced off the loop by this task, not by the next group commit: that one may be
        # waiting for this very queue (the publishes held for it here, reach.py ``HeldSync``)
        definitions = self.durability.definitions
        with definitions.deferred():
            bound = []
            if handle is not None:
                arguments = dict(handle.arguments)
                bound = [(b.source.name, b.routing_key, b.arguments) for b in handle.bound_to]
                bound += [(source.name, key, args) for source, key, args in handle.parked or ()]
                self.api.reach.forget_handle(v, handle)
            arguments["x-queue-type"] = kind
            apply_change(v, "declare_queue", (name, True, False, False, arguments, ADMIN))
            q = v.queues[name]
            self._lead(v, q, record)
            for exchange, key, args in bound:
                try:
                    v.bind_queue(q, exchange, key, args)
                except AMQPError as e:  # (the exchange went meanwhile: the shared topology says so next)
                    log.warning("cluster: %s '%s' in vhost '%s': its binding from exchange '%s' was not made "
                                "again here: %s", kind_of(q), name, vhost, exchange, e)
            self.api.reach.release(v, name)  # what this node's clients published to it meanwhile
        log.warning("cluster: this node took %s '%s' in vhost '%s' (epoch %d): %d messages", kind_of(q), name, vhost,
                    record["epoch"], q.message_count)
        await asyncio.to_thread(definitions.sync)
        if self.api.topology is not None:  # (bindings made since the handle went, if any)
            self.api.topology.changed()
        await self.api.queues.publish_once()  # the other nodes route to it here from now on

    # --- what the leader sends (NodeLinks' handler, through ClusterApi) -----------------------------

    def message(self, node: str, op: str, args: tuple) -> None:
        vhost, name, epoch = args[0], args[1], args[2]
        led = self.leading.get((vhost, name))
        if led is not None:
            if epoch <= led.epoch:
                return  # from a leader this node replaced, which has not heard yet: nothing to follow
            # a newer epoch was taken in etcd (only a compare-and-swap makes one): this node's is over,
            # whether or not the records' watch has said so yet; the sender leads it
            self._stepped_down((vhost, name), node)
        follower = self.following.get((vhost, name))
        if follower is None:
            follower = self.following[(vhost, name)] = Follower(self, vhost, name)
        if op == "r_snap":
            follower.snapshot(epoch, *args[3:])
        elif op == "r_ops":
            follower.operations(epoch, args[3], args[4])
        elif op == "r_commit":
            follower.committed(epoch, *args[3:])

    def request(self, node: str, op: str, args: tuple):
        if op == "r_status":
            led = self.leading.get((args[0], args[1]))
            if led is None:
                raise ReplicaError(f"node {self.me} does not lead queue '{args[1]}' in vhost '{args[0]}'")
            return led.status()
        vhost, name, epoch, upto = args
        follower = self.following.get((vhost, name))
        if follower is None:
            raise ReplicaError(f"node {self.me} does not follow queue '{name}' in vhost '{vhost}'")
        return follower.sync(epoch, upto)

    # --- membership (rabbitmq-queues add_member, delete_member, grow, shrink) -------------------------

    async def change_members(self, vhost: str, name: str, add: tuple = (), remove: tuple = ()) -> dict:
        """The queue's members with ``add`` added and ``remove`` removed, in its record (a
        compare-and-swap: its leader follows it, snapshotting to a new member; a removed one
        drops its replica). Its leader is not removed (ValueError), nor a node the cluster does
        not know; the record afterwards is returned."""
        key = self.record_key(vhost, name)
        for _ in range(10):  # another change between the read and the write: read again
            kv = await self.cluster.client.get(key)
            if kv is None:
                raise LookupError(f"no replicated quorum queue '{name}' in vhost '{vhost}'")
            record = json.loads(kv.value)
            members = list(record.get("members") or [])
            for node in add:
                if node not in self.cluster.known:
                    raise ValueError(f"node {node} is not a node of cluster {self.cluster.cluster_name}")
                if node not in members:
                    members.append(node)
            for node in remove:
                if node == record.get("leader"):
                    raise ValueError(f"node {node} is the leader of quorum queue '{name}' in vhost '{vhost}': "
                                     "it cannot be removed while it leads")
                if node in members:
                    members.remove(node)
            if members == record.get("members"):
                return record
            new = {**record, "members": members}
            if await self.cluster.client.write_if_unchanged(key, kv.mod_revision,
                                                            [(key, json.dumps(new, sort_keys=True), 0)]):
                log.info("cluster: quorum queue '%s' in vhost '%s': members %s", name, vhost, ", ".join(members))
                return new
        raise ReplicaError(f"quorum queue '{name}' in vhost '{vhost}': its record kept changing")

    def replicated(self) -> list[dict]:
        """Every replicated queue's record."""
        return [dict(r) for r in list(self.cluster.replicas.values())]

    def status(self, vhost: str, name: str):
        """quorum_status's rows, from the queue's leader (asked over the links if another node)."""
        led = self.leading.get((vhost, name))
        if led is not None:
            return led.status()
        record = self.record(vhost, name)
        if record is None:
            raise LookupError(f"no replicated quorum queue '{name}' in vhost '{vhost}'")
        leader = record.get("leader")
        if not self.cluster.running(leader):
            raise ReplicaError(f"the leader of quorum queue '{name}' in vhost '{vhost}', node {leader}, is down")
        return self.api.links.ask(leader, "r_status", vhost, name, timeout=SYNC_TIMEOUT_S)

    def failover_expected(self, vhost: str, name: str) -> bool:
        """Whether queue ``name``, whose handle here names a node that is down (or whose old
        leader's key left the queue directory), is replicated and a majority of its members
        run: one of them leads it, or will once elected and once the directory lists it there,
        so what is published to it meanwhile is held for it (reach.py ``hold``), not refused,
        and its handle is kept until the new one comes."""
        record = self.record(vhost, name)
        if record is None:
            return False
        members = record.get("members") or []
        alive = [m for m in members if m == self.me or self.cluster.running(m)]
        return len(alive) >= len(members) // 2 + 1

    def reads_here(self, vhost: str, name: str) -> ReplicaStream | None:
        """This node's replica of stream ``name`` for its readers here, if it follows it in step
        (replica_reads.py): the queue handle's ``reads_here``."""
        follower = self.following.get((vhost, name))
        v = self.broker.vhosts.get(vhost)
        if follower is None or v is None:
            return None
        return follower.reads_here(v)

    # --- the HTTP API's view ------------------------------------------------------------------------

    def describe(self, vhost: str, name: str) -> dict | None:
        """``leader``, ``members`` and ``online`` for /api/queues, as RabbitMQ shows a quorum queue."""
        record = self.record(vhost, name)
        if record is None:
            return None
        members = list(record.get("members") or [])
        return {"leader": record.get("leader"), "members": members,
                "online": [m for m in members if m == self.me or self.cluster.running(m)]}

