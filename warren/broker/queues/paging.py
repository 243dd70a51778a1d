"""Paging, for queues larger than memory: a part of the classic queue (``warren/broker/queue.py``).

When the broker's memory budget is exceeded, the queue that is taking messages in moves its tail
out of memory and enters paging mode: from then on new messages go to disk only, and ``paged``
counts them. Every message with a seq above ``page_boundary`` that is not acked is on disk:
persistent messages of a durable queue in its durable store, all others in a spill store that
does not survive a restart. When fewer than ``PAGE_LOW`` messages remain in memory, the next
``PAGE_BATCH`` are read back, in order. The same marks in octets (``PAGE_*_BYTES``) bound a
queue of large messages: 2048 messages of 64 KiB would be 128 MiB kept "at the head" (the memory
alarm's accounting, memory.py).
"""

from __future__ import annotations

import time
from warren.broker.message import Message
from warren.store.message import decode_restored

__all__ = ["Paging", "PAGE_KEEP", "PAGE_LOW", "PAGE_BATCH", "PAGE_KEEP_BYTES", "PAGE_LOW_BYTES"]

PAGE_KEEP = 2048  # messages a paging queue keeps in memory at its head
PAGE_LOW = 1024  # read more back from disk below this many in memory
PAGE_BATCH = 4096  # messages read back at a time
PAGE_KEEP_BYTES = 4 << 20  # ... and at most this many body octets kept, and read back at a time
PAGE_LOW_BYTES = 2 << 20  # ... and read more back only below this many in memory


class Paging:
    """``Queue``'s paging to disk and back (its state is the queue's: ``ready``, ``paged``,
    ``paged_bytes``, ``page_boundary``, ``store``, ``spill``). ``page_out`` overrides
    ``QueueBase``'s, that of a queue with nothing in memory."""

    def _page_write(self, seq: int, message: "Message") -> None:
        if self.store is not None and message.persistent:
            return  # already in the durable store
        if self.spill is None:
            self.spill = self.durability.open_spill()
        self.spill.append(seq, message.record)

    def page_out(self) -> None:
        """Move the tail of the ready messages to disk and enter paging mode."""
        if self.durability is None:
            return
        spill = self.spill
        if spill is not None and not len(spill):
            # everything spilled earlier was read back: start a new spill, since a store takes
            # seqs in increasing order only and the tail may hold messages read back from it
            spill.delete()
            self.spill = spill = None
        spilled_up_to = spill.last_seq if spill is not None else 0
        ready = self.ready
        moved = []
        while len(ready) > PAGE_KEEP or (self.ready_bytes > PAGE_KEEP_BYTES and len(ready) > 1):
            seq, msg, redelivered, deadline = ready[-1]
            if redelivered:
                break  # requeued messages stay in memory (they are few and at the head)
            if seq <= spilled_up_to and not (self.store is not None and msg.persistent):
                break  # cannot go back to a spill that is past it
            ready.pop()
            moved.append((seq, msg))
            self.ready_bytes -= len(msg.body)
        if moved:
            self.page_boundary = moved[-1][0] - 1
        self.paged += len(moved)
        while moved:  # stores take seqs in increasing order; each message (and the store record
            seq, msg = moved.pop()  # it caches) is freed once written, not after the whole tail
            self._page_write(seq, msg)
            self.paged_bytes += len(msg.body)
        if self.spill is not None:
            self.spill.flush()  # out of our memory, into the OS (no fsync: not durable)

    def page_in(self) -> None:
        """Read the next batch of paged messages back into memory, in seq order."""
        after = self.page_boundary
        durable = self.store.unacked_after(after, PAGE_BATCH) if self.store is not None else []
        spilled = self.spill.unacked_after(after, PAGE_BATCH) if self.spill is not None else []
        if not durable and not spilled:
            self.paged = 0
            return
        merged = sorted([(s, d, self.store) for s, d in durable] + [(s, d, self.spill) for s, d in spilled])
        now = time.monotonic()
        read = 0
        for seq, delivered, store in merged[:PAGE_BATCH]:
            if read >= PAGE_KEEP_BYTES:
                break  # large messages: the rest comes back with the next batch
            exchange, routing_key, properties, body = decode_restored(store.read(seq))
            msg = Message(exchange, routing_key, properties, body)
            if store is self.spill:
                store.ack(seq)  # in memory again; the spill copy is not needed any more
            ttl = self._ttl_of(msg)
            self.ready.append((seq, msg, delivered, now + ttl if ttl is not None else 0))
            self.ready_bytes += len(body)
            read += len(body)
            self.paged_bytes -= len(body)
            self.page_boundary = seq
            self.paged -= 1
        if self.paged <= 0:
            self.paged = 0
            self.paged_bytes = 0
        elif self.paged_bytes < 0:
            self.paged_bytes = 0
        if self.ready and (self.message_ttl is not None or self.ready[-1][3]):
            self._timed()
