"""Paging, for queues larger than memory: a collaborator of the classic queue (``warren/broker/queue.py``).

When the broker's memory budget is exceeded, the queue that is taking messages in moves its tail
out of memory and enters paging mode: from then on new messages go to disk only, and the queue's
``paged`` counts them. Every message with a seq above ``boundary`` that is not acked is on disk:
persistent messages of a durable queue in its durable store, all others in a spill store that
does not survive a restart. When fewer than ``PAGE_LOW`` messages remain in memory, the next
``PAGE_BATCH`` are read back, in order. The same marks in octets (``PAGE_*_BYTES``) bound a
queue of large messages: 2048 messages of 64 KiB would be 128 MiB kept "at the head" (the memory
alarm's accounting, memory.py).

The ``Pager`` owns the disk side (the spill store, the boundary); the queue owns its ready
messages and their counts (``ready``, ``ready_bytes``, ``paged``, ``paged_bytes``), which
``page_out`` and ``page_in`` move between memory and disk.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from warren.broker.message import Message
from warren.store.message import decode_restored

if TYPE_CHECKING:
    from warren.broker.queue import Queue

__all__ = ["Pager", "PAGE_KEEP", "PAGE_LOW", "PAGE_BATCH", "PAGE_KEEP_BYTES", "PAGE_LOW_BYTES"]

PAGE_KEEP = 2048  # messages a paging queue keeps in memory at its head
PAGE_LOW = 1024  # read more back from disk below this many in memory
PAGE_BATCH = 4096  # messages read back at a time
PAGE_KEEP_BYTES = 4 << 20  # ... and at most this many body octets kept, and read back at a time
PAGE_LOW_BYTES = 2 << 20  # ... and read more back only below this many in memory


class Pager:
    """Where a queue's paged-out messages are: its durable store's persistent ones, a spill
    store for the rest, and the boundary above which they start."""

    __slots__ = ("spill", "boundary")

    def __init__(self) -> None:
        self.spill = None  # a non-durable QueueStore for paged-out transient messages
        self.boundary = 0  # every message on disk only has a seq above it

    def write(self, queue: "Queue", seq: int, message: Message) -> None:
        """A message of ``queue`` goes to disk only (paging mode)."""
        if queue.store is not None and message.persistent:
            return  # already in the durable store
        if self.spill is None:
            self.spill = queue.durability.open_spill()
        self.spill.append(seq, message.record)

    def resume(self, boundary: int) -> None:
        """After a restart: the messages above ``boundary`` stayed on disk (vhost's recovery)."""
        self.boundary = boundary

    def discard(self) -> None:
        """The queue was purged or deleted: its spill goes."""
        if self.spill is not None:
            self.spill.delete()
            self.spill = None

    def page_out(self, queue: "Queue") -> None:
        """Move the tail of ``queue``'s ready messages to disk and enter paging mode."""
        if queue.durability is None:
            return
        spill = self.spill
        if spill is not None and not len(spill):
            # everything spilled earlier was read back: start a new spill, since a store takes
            # seqs in increasing order only and the tail may hold messages read back from it
            spill.delete()
            self.spill = spill = None
        spilled_up_to = spill.last_seq if spill is not None else 0
        ready = queue.ready
        store = queue.store
        moved = []
        while len(ready) > PAGE_KEEP or (queue.ready_bytes > PAGE_KEEP_BYTES and len(ready) > 1):
            seq, msg, redelivered, deadline = ready[-1]
            if redelivered:
                break  # requeued messages stay in memory (they are few and at the head)
            if seq <= spilled_up_to and not (store is not None and msg.persistent):
                break  # cannot go back to a spill that is past it
            ready.pop()
            moved.append((seq, msg))
            queue.ready_bytes -= len(msg.body)
        if moved:
            self.boundary = moved[-1][0] - 1
        queue.paged += len(moved)
        while moved:  # stores take seqs in increasing order; each message (and the store record
            seq, msg = moved.pop()  # it caches) is freed once written, not after the whole tail
            self.write(queue, seq, msg)
            queue.paged_bytes += len(msg.body)
        if self.spill is not None:
            self.spill.flush()  # out of our memory, into the OS (no fsync: not durable)

    def page_in(self, queue: "Queue") -> None:
        """Read ``queue``'s next batch of paged messages back into memory, in seq order."""
        after = self.boundary
        store, spill = queue.store, self.spill
        durable = store.unacked_after(after, PAGE_BATCH) if store is not None else []
        spilled = spill.unacked_after(after, PAGE_BATCH) if spill is not None else []
        if not durable and not spilled:
            queue.paged = 0
            return
        merged = sorted([(s, d, store) for s, d in durable] + [(s, d, spill) for s, d in spilled])
        now = time.monotonic()
        read = 0
        ttl_of = queue.expiry.ttl_of_stored
        ready = queue.ready
        for seq, delivered, source in merged[:PAGE_BATCH]:
            if read >= PAGE_KEEP_BYTES:
                break  # large messages: the rest comes back with the next batch
            exchange, routing_key, properties, body = decode_restored(source.read(seq))
            msg = Message(exchange, routing_key, properties, body)
            if source is spill:
                source.ack(seq)  # in memory again; the spill copy is not needed any more
            ttl = ttl_of(msg)
            ready.append((seq, msg, delivered, now + ttl if ttl is not None else 0))
            queue.ready_bytes += len(body)
            read += len(body)
            queue.paged_bytes -= len(body)
            self.boundary = seq
            queue.paged -= 1
        if queue.paged <= 0:
            queue.paged = 0
            queue.paged_bytes = 0
        elif queue.paged_bytes < 0:
            queue.paged_bytes = 0
        if ready and (queue.expiry.message_ttl is not None or ready[-1][3]):
            queue.ask_for_ticks()
