"""A classic queue: ready messages in FIFO order, consumers served round-robin.

Ready messages are ``(seq, message, redelivered, deadline)`` entries in a deque; ``seq``
numbers the queue's messages in arrival order, ``deadline`` is the monotonic time a message
with a TTL (``x-message-ttl`` or its ``expiration`` property, the lower wins) expires, or 0.
As in RabbitMQ, expired messages are dropped when they reach the head of the queue. A message taken by a consumer (or basic.get) and later requeued
(nack/reject with requeue, recover, channel close) goes back to its original place: requeued
messages always precede the rest, because they arrived earlier than anything still ready.

Paging (queues larger than memory): when the broker's memory budget is exceeded, the queue
that is taking messages in moves its tail out of memory and enters paging mode: from then on
new messages go to disk only, and ``paged`` counts them. Every message with a seq above
``page_boundary`` that is not acked is on disk: persistent messages of a durable queue in its
durable store, all others in a spill store that does not survive a restart. When fewer than
``PAGE_LOW`` messages remain in memory, the next ``PAGE_BATCH`` are read back, in order.

Delivery is push: ``publish`` and every event that adds capacity (ack, qos, consume, flow on,
a writable transport) call ``dispatch``, which hands ready messages to consumers with capacity,
turn by turn, until one or the other runs out.
"""

from __future__ import annotations

import time
from collections import deque
from typing import TYPE_CHECKING

from warren.broker.consumer import Consumer
from warren.broker.message import Message
from warren.store.message import decode_message

if TYPE_CHECKING:
    from warren.broker.message import Message

__all__ = ["Queue", "PAGE_BATCH", "PAGE_KEEP"]

PAGE_KEEP = 2048  # messages a paging queue keeps in memory at its head
PAGE_LOW = 1024  # read more back from disk below this many in memory
PAGE_BATCH = 4096  # messages read back at a time
CHECK_EVERY = 1 << 20  # octets taken in between two memory-budget checks


class Queue:
    def __init__(self, vhost, name: str, durable: bool = False, exclusive_owner=None,
                 auto_delete: bool = False, arguments: dict | None = None) -> None:
        self.vhost = vhost
        self.name = name
        self.durable = durable
        self.exclusive_owner = exclusive_owner  # the Session that owns an exclusive queue, else None
        self.auto_delete = auto_delete
        self.arguments = arguments or {}
        self.ready: deque = deque()  # (seq, message, redelivered, deadline)
        ttl = self.arguments.get("x-message-ttl")
        self.message_ttl: float | None = ttl / 1000 if isinstance(ttl, int) else None
        self.ready_bytes = 0
        self.consumers: list[Consumer] = []
        self.bound_to: set = set()  # bindings whose destination is this queue
        self.had_consumer = False
        self.store = None  # a QueueStore for a durable queue: persistent messages go there too
        self.durability = None
        self.memory = None  # the broker's MemoryBudget (None: never page)
        self.spill = None  # a non-durable QueueStore for paged-out transient messages
        self.paged = 0  # messages on disk only, all with a seq above page_boundary
        self.page_boundary = 0
        self._unchecked = 0
        self.deleted = False
        self._seq = 0
        self._rr = 0  # round-robin position in self.consumers
        self._dispatching = False

    # --- ready messages ------------------------------------------------------------------

    @property
    def message_count(self) -> int:
        self.expire()
        return len(self.ready) + self.paged

    def expire(self) -> None:
        """Drop expired messages from the head of the queue."""
        ready = self.ready
        if ready and ready[0][3]:
            now = time.monotonic()
            while ready and ready[0][3] and ready[0][3] <= now:
                seq, msg, _, _ = ready.popleft()
                self.ready_bytes -= len(msg.body)
                self.forget(seq, msg)

    def publish(self, message: "Message") -> int:
        """Enqueue; returns the number of the sync that makes it durable, or 0 if none is needed."""
        self._seq += 1
        need = 0
        if self.store is not None and message.persistent:
            self.store.append(self._seq, message.record)
            need = self.durability.wrote(self.store)
        if self.paged:
            self._page_write(self._seq, message)
            self.paged += 1
            return need
        ttl = self.message_ttl
        msg_ttl = message.ttl
        if msg_ttl is not None and (ttl is None or msg_ttl < ttl):
            ttl = msg_ttl
        self.ready.append((self._seq, message, False, time.monotonic() + ttl if ttl is not None else 0))
        self.ready_bytes += len(message.body)
        if self.memory is not None:
            self._unchecked += len(message.body) + 400
            if self._unchecked > CHECK_EVERY:
                self._unchecked = 0
                if self.memory.over():
                    self.page_out()
        if self.consumers:
            self.dispatch()
        return need

    # --- paging --------------------------------------------------------------------------

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
        ready = self.ready
        moved = []
        while len(ready) > PAGE_KEEP:
            seq, msg, redelivered, deadline = ready[-1]
            if redelivered:
                break  # requeued messages stay in memory (they are few and at the head)
            ready.pop()
            moved.append((seq, msg))
            self.ready_bytes -= len(msg.body)
        for seq, msg in reversed(moved):  # stores take seqs in increasing order
            self._page_write(seq, msg)
        if moved:
            self.page_boundary = moved[-1][0] - 1
        self.paged += len(moved)
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
        for seq, delivered, store in merged[:PAGE_BATCH]:
            exchange, routing_key, properties, body = decode_message(store.read(seq))
            msg = Message(exchange, routing_key, properties, body)
            if store is self.spill:
                store.ack(seq)  # in memory again; the spill copy is not needed any more
            ttl = self.message_ttl
            self.ready.append((seq, msg, delivered, now + ttl if ttl is not None else 0))
            self.ready_bytes += len(body)
            self.page_boundary = seq
            self.paged -= 1
        if self.paged < 0:
            self.paged = 0

    def restore(self, seq: int, message: "Message", delivered: bool) -> None:
        """Put back a message recovered from the store (start-up), in seq order."""
        ttl = self.message_ttl if message.ttl is None else min(message.ttl, self.message_ttl or message.ttl)
        self.ready.append((seq, message, delivered, time.monotonic() + ttl if ttl is not None else 0))
        self.ready_bytes += len(message.body)

    def resume_numbering(self, last_seq: int) -> None:
        self._seq = max(self._seq, last_seq)

    def forget(self, seq: int, message: "Message") -> None:
        """A taken or expired message is gone for good (acked, dropped, delivered without ack)."""
        if self.store is not None and message.persistent and not self.deleted:
            self.store.ack(seq)
            self.durability.wrote(self.store)

    def delivered(self, seq: int, message: "Message", no_ack: bool) -> None:
        """A message left the queue for a consumer or basic.get."""
        if self.store is not None and message.persistent:
            if no_ack:
                self.store.ack(seq)
            else:
                self.store.mark_delivered(seq)  # so it comes back redelivered after a restart
            self.durability.wrote(self.store)

    def requeue(self, entries) -> None:
        """Put taken messages back in their original order, marked redelivered."""
        if self.deleted:
            return
        entries = sorted(entries, key=lambda e: e[0])
        head = self.ready[0][0] if self.ready else None
        if head is None or entries[-1][0] < head:
            for seq, msg in reversed(entries):
                self.ready.appendleft((seq, msg, True, 0))
        else:  # interleaved with earlier requeues: merge
            merged = sorted([*self.ready, *((s, m, True, 0) for s, m in entries)], key=lambda e: e[0])
            self.ready = deque(merged)
        self.ready_bytes += sum(len(m.body) for _, m in entries)
        self.dispatch()

    def take(self):
        """The next ready (seq, message, redelivered, deadline), or None (basic.get)."""
        if self.paged and len(self.ready) < PAGE_LOW:
            self.page_in()
        self.expire()
        if not self.ready:
            return None
        entry = self.ready.popleft()
        self.ready_bytes -= len(entry[1].body)
        return entry

    def purge(self) -> int:
        n = len(self.ready) + self.paged
        if self.store is not None:
            for seq, msg, _, _ in self.ready:
                self.forget(seq, msg)
            if self.paged:
                while page := self.store.unacked_after(self.page_boundary, PAGE_BATCH):
                    for seq, _ in page:
                        self.store.ack(seq)
                    self.page_boundary = page[-1][0]
                self.durability.wrote(self.store)
        if self.spill is not None:
            self.spill.delete()
            self.spill = None
        self.paged = 0
        self.ready.clear()
        self.ready_bytes = 0
        return n

    # --- consumers -----------------------------------------------------------------------

    def add_consumer(self, consumer: Consumer) -> None:
        self.consumers.append(consumer)
        self.had_consumer = True

    def remove_consumer(self, consumer: Consumer) -> None:
        try:
            i = self.consumers.index(consumer)
        except ValueError:
            return
        del self.consumers[i]
        if i < self._rr:
            self._rr -= 1
        if self.auto_delete and not self.consumers and self.had_consumer:
            self.vhost.delete_queue(self)

    def has_exclusive_consumer(self) -> bool:
        return any(c.exclusive for c in self.consumers)

    def dispatch(self) -> None:
        """Deliver ready messages to consumers with capacity, round-robin."""
        if self._dispatching:
            return  # re-entered from a delivery side effect; the outer loop carries on
        self._dispatching = True
        try:
            ready = self.ready
            consumers = self.consumers
            if ready and ready[0][3]:
                self.expire()
            while consumers and (ready or self.paged):
                if self.paged and len(ready) < PAGE_LOW:
                    self.page_in()
                    ready = self.ready
                    if not ready:
                        break
                n = len(consumers)
                for step in range(n):
                    i = (self._rr + step) % n
                    c = consumers[i]
                    if c.has_capacity():
                        break
                else:
                    return  # nobody can take more now
                self._rr = (i + 1) % n
                seq, msg, redelivered, deadline = ready.popleft()
                self.ready_bytes -= len(msg.body)
                if deadline and deadline <= time.monotonic():
                    self.forget(seq, msg)
                    continue  # expired on its way to the head
                if self.store is not None:
                    self.delivered(seq, msg, c.no_ack)
                c.channel.deliver(c, self, seq, msg, redelivered)
        finally:
            self._dispatching = False

    def __repr__(self) -> str:
        return f"<Queue {self.name!r} ready={len(self.ready)} consumers={len(self.consumers)}>"
