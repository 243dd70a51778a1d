"""A stream's reads served by a follower (issue 33): a client on a node that holds a replica of a
stream consumes from that replica, and the HTTP API's bulk reads of that node read it, as
RabbitMQ serves a stream consumer from the member on its node. Publishes still go to the leader.

A follower's replica (replicas.py ``Follower``) has the stream's entries at the same offsets as
its leader, but an entry it holds is not yet one a majority holds: readers here see up to the
**leader's commit**, which the leader tells each follower in step after every sync that a
majority answered (``r_commit``), and never past what this node synced itself. So an offset a
reader here is given names the same record on every member, before and after a failover.

``ReplicaStream`` is a ``StreamQueue`` (warren/broker/queues/stream.py: cursors, offsets spec,
prefetch, filters, the HTTP API's views) over the replica's store, held by the ``Follower`` and
by nobody's vhost: the queue's handle (reach.py ``NodeQueue``) gives it to a consumer and to the
HTTP routes (``reads_here``). What differs from the leader's stream:

* nothing is appended or deleted here: retention is the leader's (its "e" operations), and
  policies change nothing a reader sees;
* its filter index knows no block (a replica does not decode what it stores), so a filtered
  consumer or records request reads every block and is given only what matches: the same
  messages as from the leader, more read;
* a new snapshot replaces the replica's store (``store_replaced``): its readers keep their
  offsets, which are the same in the new one; while it is taken they wait;
* when this node stops following (it takes the stream over, or is a member no more), its
  consumers are cancelled with the consumer-cancel notification, as the leader's are when it
  goes: clients consume again, from the new leader or replica.
"""

from __future__ import annotations

import logging

from warren.broker.queues.stream import StreamQueue
from warren.broker.queues.stream_filter import FilterIndex, filter_size

__all__ = ["ReplicaStream"]

log = logging.getLogger("warren.cluster")

UNKNOWN_BLOCKS = 1 << 62  # a filter index starting there knows no block before it: all may match


class CommittedReplica:
    """A follower's StreamStore as its readers see it: up to the leader's commit and this node's
    own sync, whichever is lower, and from the leader's first retained offset on (the replica's
    segments are its own, so its retention may keep more than the leader's)."""

    def __init__(self, store, leader_commit: int, leader_first: int) -> None:
        self.inner = store
        self.leader_commit = leader_commit
        self.leader_first = leader_first

    def __getattr__(self, name: str):  # next_offset, byte and segment figures...
        return getattr(self.inner, name)

    @property
    def committed_offset(self) -> int:
        return min(self.leader_commit, self.inner.committed_offset)

    @property
    def first_offset(self) -> int:
        return max(self.leader_first, self.inner.first_offset)

    @property
    def message_count(self) -> int:
        return max(0, self.committed_offset - self.first_offset + 1)

    def offset_for_timestamp(self, timestamp_ms: int) -> int:
        return max(self.inner.offset_for_timestamp(timestamp_ms), self.first_offset)

    def read(self, offset: int, max_records: int, max_bytes: int, committed_only: bool = True):
        entries = self.inner.read(max(offset, self.first_offset), max_records, max_bytes, committed_only=True)
        last = self.committed_offset
        if entries and entries[-1][0] > last:
            entries = [e for e in entries if e[0] <= last]
        return entries

    def read_raw(self, offset: int, max_records: int, max_bytes: int, end: int | None = None):
        limit = self.committed_offset + 1
        return self.inner.read_raw(max(offset, self.first_offset), max_records, max_bytes,
                                   limit if end is None else min(end, limit))


class ReplicaStream(StreamQueue):
    """The readers of a follower's replica of a stream (module doc)."""

    def __init__(self, vhost, name: str, arguments: dict) -> None:
        super().__init__(vhost, name, durable=True, arguments=arguments)
        self.filter_index = FilterIndex(filter_size(self.effective), UNKNOWN_BLOCKS)
        self.leader_batch = 0  # where the leader's last committed batch began ("last")

    def apply_arguments(self, effective: dict) -> None:
        self.effective = effective  # retention and segments are the leader's (its "e" operations)

    @property
    def readable(self) -> bool:
        return self.store is not None and not self.deleted

    def store_replaced(self, store, leader_commit: int = -1, batch: int = 0, first: int = 0) -> None:
        """A snapshot made the follower's store afresh (``store``), or took it away (None)."""
        self.store = CommittedReplica(store, leader_commit, first) if store is not None else None
        if store is not None:
            self.leader_batch = batch
            self.advance()

    def commit(self, leader_commit: int, batch: int, first: int) -> None:
        """The leader's commit moved (its last batch began at ``batch``, its retention kept from
        ``first`` on): readers get what it covers."""
        if self.store is not None:
            self.store.leader_commit = max(self.store.leader_commit, leader_commit)
            self.store.leader_first = max(self.store.leader_first, first)
            self.leader_batch = batch
            self.advance()

    def advance(self) -> None:
        """The leader's commit or this node's sync moved: what readers may read now. "last" is
        where the leader's last batch began, as its queue counts batches."""
        committed = self.store.committed_offset
        if committed > self.committed:
            self.committed = committed
            self.last_batch = min(self.leader_batch, committed)
            if self.consumers:
                self.dispatch()

    def publish(self, message) -> int:  # (the handle sends publishes to the leader)
        raise RuntimeError(f"stream '{self.name}': a replica takes no publish")

    def enforce_retention(self) -> int:
        return 0

    def delete_store(self) -> int:
        return 0

    def close(self, why: str) -> None:
        """This node follows the stream no more: its consumers are told, as the leader's are."""
        self.deleted = True
        self.store = None
        for c in list(self.consumers):
            self.remove_consumer(c)
            c.channel.consumer_cancelled_by_broker(c)
        if self.http_readers.positions():
            log.info("cluster: the replica of stream '%s' in vhost '%s' here is read no more (%s)", self.name,
                     self.vhost.name, why)
