"""A classic queue: ready messages in FIFO order, consumers served round-robin.

Ready messages are ``(seq, message, redelivered, deadline)`` entries in a deque; ``seq``
numbers the queue's messages in arrival order, ``deadline`` is the monotonic time a message
with a TTL expires, or 0. A message taken by a consumer (or basic.get) and later requeued
(nack/reject with requeue, recover, channel close) goes back to its original place: requeued
messages always precede the rest, because they arrived earlier than anything still ready.

Delivery is push: ``publish`` and every event that adds capacity (ack, qos, consume, flow on,
a writable transport) call ``dispatch``, which hands ready messages to consumers with capacity,
turn by turn, until one or the other runs out.

This module is the queue's core: taking messages in (``publish``), handing them out
(``dispatch``, ``take``) and their leaving (``forget``, ``requeue``, ``purge``, ``expire``, the
drop-head of a length limit). What every queue type has, the stream included (identity,
consumers, bindings, store, the HTTP API's counters, and the defaults of the operations every
type answers), is ``QueueBase`` in ``warren/broker/queues/base.py``. Each of the classic queue's
features is an object the queue holds, with its own state and rules, in ``warren/broker/queues/``:

* ``expiry.py``, ``self.expiry``: message TTL and ``x-expires`` (what deadline a message gets);
* ``length_limits.py``, ``self.length_limit``: ``x-max-length(-bytes)`` and ``x-overflow``;
* ``delivery_limit.py``, ``self.taken``: what a taken message needs to come back, and
  ``x-delivery-limit``'s counts (``x-delivery-count``);
* ``consumer_choice.py``, ``self.choice``: the consumers' order, single active consumer,
  consumer priorities, the round-robin positions;
* ``paging.py``, ``self.pager``: queues larger than memory, out to disk and back;
* ``flow_marks.py``, ``Queue.flow``: the backlog marks that pause publishers (the server's).

Where ``publish`` and ``dispatch`` run per message they read a few plain flags the features
set (``limited``, ``counts_deliveries``, ``_plain``, ``plain_enqueue``) rather than asking them.

RabbitMQ's queue arguments (``docs/features.md``) are all read in ``apply_arguments`` from the
effective arguments (declared ones plus a policy's, ``policies.py``), again when policies change.
Messages leaving for good go through ``forget``; those that die (rejected, expired, dropped by a
length limit, past the delivery limit) are then dead-lettered (``dead_letter.py``). Priority
queues (``x-max-priority``), the quorum, last-value and message-group queues subclass ``Queue``
(``warren/broker/queues/``); the stream queue does not (``queues/stream.py``: it derives from
``QueueBase`` alone and has none of these jobs).
"""

from __future__ import annotations

import time
from collections import deque
from typing import TYPE_CHECKING

from warren.broker.dead_letter import DELIVERY_LIMIT, EXPIRED, MAXLEN, REJECTED, REROUTE_ARGUMENT, dead_letter
from warren.broker.dedup import queue_duplicate, remember_stored
from warren.broker.memory import MESSAGE_OVERHEAD
from warren.broker.queues.base import QueueBase
from warren.broker.queues.consumer_choice import ConsumerChoice
from warren.broker.queues.delivery_limit import TakenMessages
from warren.broker.queues.expiry import Expiry
from warren.broker.queues.flow_marks import FlowMarks
from warren.broker.queues.length_limits import DROP_HEAD, OVERFLOW_MODES, REFUSED, REJECT_PUBLISH_DLX, LengthLimit
from warren.broker.queues.paging import PAGE_BATCH, PAGE_LOW, PAGE_LOW_BYTES, Pager

if TYPE_CHECKING:
    from warren.broker.message import Message

__all__ = ["Queue"]

_DEDUP_ARGS = ("x-message-deduplication", "x-cache-size", "x-cache-ttl", "x-deduplication-header")


class _EmptyMessage:
    """What ``refuses_publishes`` asks the length limit about: a message with an empty body."""

    __slots__ = ()
    body = b""


_EMPTY = _EmptyMessage()


def _int_arg(arguments: dict, key: str) -> int | None:
    v = arguments.get(key)
    return v if isinstance(v, int) and not isinstance(v, bool) else None


class Queue(QueueBase):
    queue_type = "classic"  # subclasses say otherwise (quorum)
    # the server's backlog marks and their listener, one for every queue (queues/flow_marks.py);
    # the server sets its own at start
    flow = FlowMarks()

    def __init__(self, vhost, name: str, durable: bool = False, exclusive_owner=None,
                 auto_delete: bool = False, arguments: dict | None = None) -> None:
        super().__init__(vhost, name, durable, exclusive_owner, auto_delete, arguments)
        self.ready: deque = deque()  # (seq, message, redelivered, deadline)
        self.ready_bytes = 0
        self.paged = 0  # messages on disk only (the pager knows where), all with a seq above its boundary
        self.paged_bytes = 0  # body octets of the paged messages (estimated after a restart)
        self._seq = 0  # what was published: one per enqueued message
        self._dispatching = False
        args = self.arguments
        # the queue's features, each an object with its own state (warren/broker/queues/); those
        # made of arguments alone (Expiry, LengthLimit) are made by apply_arguments
        self.taken = TakenMessages()
        self.choice = ConsumerChoice(self.consumers, args.get("x-single-active-consumer") is True)
        self.pager = Pager()
        # hot-path gates, copies of what the features above say (kept where publish and
        # dispatch read them without a second attribute look-up):
        self.single_active = self.choice.single_active
        self._plain = self.choice.plain  # no SAC and every consumer of the same priority
        # the declared arguments plus those of the policy that applies (warren/broker/policies.py)
        self.apply_arguments(vhost.effective_arguments("queue", name, self.arguments))

    @property
    def enqueued(self) -> int:
        """Messages enqueued since the queue was made (each one's seq is the next number): the
        HTTP API's and Prometheus' published count."""
        return self._seq

    # what the arguments set, for those who read them (tests, the workers' spread, the HTTP API)
    message_ttl = property(lambda self: self.expiry.message_ttl)
    expires = property(lambda self: self.expiry.expires)
    delivery_limit = property(lambda self: self.taken.limit)
    max_length = property(lambda self: self.length_limit.max_length)
    max_length_bytes = property(lambda self: self.length_limit.max_length_bytes)
    overflow = property(lambda self: self.length_limit.overflow)

    def apply_arguments(self, effective: dict) -> None:
        """(Re)configure the TTL, length limits, dead-lettering, delivery limit, expiry and
        deduplication from the effective arguments (declared + policy): at creation and
        whenever the policies change. The only place these arguments are read."""
        old = self.effective
        self.effective = args = effective
        ttl = _int_arg(args, "x-message-ttl")
        expires = _int_arg(args, "x-expires")
        self.expiry = Expiry(ttl / 1000 if ttl is not None else None, expires / 1000 if expires else None)
        dlx = args.get("x-dead-letter-exchange")
        self.dead_letter_exchange: str | None = dlx if isinstance(dlx, str) else None
        dlrk = args.get("x-dead-letter-routing-key")
        self.dead_letter_routing_key: str | None = dlrk if isinstance(dlrk, str) else None
        max_length, max_length_bytes = _int_arg(args, "x-max-length"), _int_arg(args, "x-max-length-bytes")
        overflow = args.get("x-overflow") if args.get("x-overflow") in OVERFLOW_MODES else DROP_HEAD
        self.limited = max_length is not None or max_length_bytes is not None
        self.length_limit = LengthLimit(max_length, max_length_bytes, overflow)  # ``limited``: if any applies
        self.taken.limit = limit = self.delivery_limit_of(args)
        self.counts_deliveries = limit is not None  # hot-path gate: an x-delivery-limit applies
        self.deduplicating = "x-message-deduplication" in args
        # publish's fast path: none of the above applies to an enqueue (length limits are
        # tested there on their own: a subclass may set them after this)
        self.plain_enqueue = not self.deduplicating and ttl is None
        if any(old.get(k) != args.get(k) for k in _DEDUP_ARGS):
            self.__dict__.pop("dedup", None)  # queue_duplicate builds the cache again
        if self.expiry.expires is not None:
            self.ask_for_ticks()
        if self.limited and not self.length_limit.rejects and (self.ready or self.paged) and self._over_limit():
            self._drop_over_limit()  # a lower limit applied to a longer queue (RabbitMQ drops the head)

    def delivery_limit_of(self, args: dict) -> int | None:
        """x-delivery-limit of these effective arguments (a queue type may have a default: quorum)."""
        return _int_arg(args, "x-delivery-limit")

    # --- taking messages in -------------------------------------------------------------

    @property
    def message_count(self) -> int:
        self.expire()
        return len(self.ready) + self.paged

    def _dead_letter(self, messages, reason: str) -> None:
        """Messages that left this queue for good because they died: to the DLX, if any."""
        if self.dead_letter_exchange is not None and messages and not self.deleted:
            dead_letter(self, messages, reason)

    def takes_runs(self) -> bool:
        """Whether ``enqueue_run`` may take a run of messages now: ``publish``'s fast path would
        take each (no deduplication, length limit, TTL, store or paging; a classic queue's deque)
        and nothing happens per message (no consumer to dispatch to, so none to congest either)."""
        return (not self.consumers and self.plain_enqueue and self.store is None and not self.paged
                and not self.limited and type(self.ready) is deque and type(self).publish is Queue.publish)

    def enqueue_run(self, messages: list, size: int) -> None:
        """``publish`` of each message of a run, at once, when ``takes_runs`` (``size``: their
        body octets): what a publish-only flood queues without a tuple test and call per
        message (docs/performance.md, "The two-publisher rows"). None of them has a TTL (a run
        gives its messages with an expiration property to ``publish``)."""
        seq = self._seq
        self._seq = end = seq + len(messages)
        self.ready.extend([(s, m, False, 0) for s, m in zip(range(seq + 1, end + 1), messages)])
        self.ready_bytes += size
        memory = self.memory
        if memory is not None:  # the broker-wide intake counter (memory.py): page out, memory alarm
            memory.unchecked += size + MESSAGE_OVERHEAD * len(messages)
            if memory.unchecked > memory.check_every:
                memory.check(self)

    def publish(self, message: "Message") -> int:
        """Enqueue; returns the number of the sync that makes it durable, 0 if none is needed, or
        ``REFUSED`` when a length limit with x-overflow reject-publish(-dlx) turns it away."""
        if (self.plain_enqueue and self.store is None and not self.paged and message.ttl is None
                and not self.limited):
            # No deduplication, length limit, TTL, store or paging (apply_arguments): the
            # general way below, without the tests that cannot apply.
            seq = self._seq = self._seq + 1
            ready = self.ready
            ready.append((seq, message, False, 0))
            size = len(message.body)
            self.ready_bytes += size
            memory = self.memory
            if memory is not None:  # the broker-wide intake counter (memory.py): page out, memory alarm
                memory.unchecked += size + MESSAGE_OVERHEAD
                if memory.unchecked > memory.check_every:
                    memory.check(self)
            consumers = self.consumers
            if consumers:
                # A backlogged queue's one consumer is usually full (its prefetch window): asking
                # it here costs less than a dispatch that would ask it and stop (capacity that
                # appears later, an ack or a qos, dispatches itself).
                # (a no-ack consumer is not counted: dispatch at once, one has_capacity the fewer)
                if (len(consumers) != 1 or not self._plain or consumers[0].counted_capacity is None
                        or consumers[0].has_capacity()):
                    self.dispatch()
                if not self.congested:
                    flow = self.flow
                    if len(ready) > flow.high or self.ready_bytes > flow.high_bytes:
                        self._check_congestion()
            return 0
        if self.deduplicating and queue_duplicate(self, message):
            return 0  # a duplicate: dropped (warren/broker/dedup.py)
        if self.limited and self.length_limit.rejects and self._would_overflow(message):
            if self.length_limit.overflow == REJECT_PUBLISH_DLX:
                self._dead_letter((message,), MAXLEN)
            return REFUSED  # checked before any consumer is offered it, as RabbitMQ
        self._seq += 1
        need = 0
        if self.store is not None and message.persistent:
            # the record's parts, framed by the store without joining them (QueueStore.append)
            self.store.append(self._seq, (message.exchange_ss, message.routing_key_ss, message.properties,
                                          message.body))
            need = self.durability.wrote(self.store)
        if self.paged:
            self.pager.write(self, self._seq, message)
            self.paged += 1
            self.paged_bytes += len(message.body)
            if self.limited:
                self._drop_over_limit()
            if self.consumers and not self.congested:
                self._check_congestion()
            return need
        ttl = self.expiry.message_ttl  # Expiry.ttl_of, inline: this runs for every persistent message
        msg_ttl = message.ttl
        if msg_ttl is not None and (ttl is None or msg_ttl < ttl):
            ttl = msg_ttl
        if ttl is None:
            deadline = 0
        elif ttl:
            deadline = time.monotonic() + ttl
            self.ask_for_ticks()
        elif self.ready or not self.choice.can_deliver_now():
            # TTL 0: expired at once unless a consumer can take it now (RabbitMQ)
            self.forget(self._seq, message)
            self._dead_letter((message,), EXPIRED)
            return need
        else:
            deadline = 0  # the dispatch below delivers it
        self.ready.append((self._seq, message, False, deadline))
        self.ready_bytes += len(message.body)
        memory = self.memory
        if memory is not None:  # the broker-wide intake counter (memory.py): page out, memory alarm
            memory.unchecked += len(message.body) + MESSAGE_OVERHEAD
            if memory.unchecked > memory.check_every:
                memory.check(self)
        consumers = self.consumers
        if consumers:
            # as above; an expiring head goes through dispatch, which drops it
            if len(consumers) != 1 or not self._plain or consumers[0].has_capacity() or self.ready[0][3]:
                self.dispatch()
            if not self.congested:
                flow = self.flow
                if len(self.ready) > flow.high or self.ready_bytes > flow.high_bytes:
                    self._check_congestion()
        if self.limited:
            self._drop_over_limit()  # after the consumers had their chance, as RabbitMQ
        return need

    def restore(self, seq: int, message: "Message", delivered: bool) -> None:
        """Put back a message recovered from the store (start-up), in seq order."""
        ttl = self.expiry.ttl_of(message)
        self.ready.append((seq, message, delivered, time.monotonic() + ttl if ttl is not None else 0))
        self.ready_bytes += len(message.body)
        if ttl is not None:
            self.ask_for_ticks()

    def resume_numbering(self, last_seq: int) -> None:
        """The end of a start-up recovery (every stored message is back, in memory or paged)."""
        self._seq = max(self._seq, last_seq)
        if self.deduplicating and self.store is not None:
            remember_stored(self)  # the keys of the messages still held survive a crash (dedup.py)

    # --- messages leaving for good, or coming back ---------------------------------------

    def forget(self, seq: int, message: "Message") -> None:
        """A taken or expired message is gone for good (acked, dropped, delivered without ack)."""
        taken = self.taken
        if taken.by_seq or taken.returns:
            taken.settled(seq)
        if self.store is not None and message.persistent and not self.deleted:
            self.store.ack(seq)
            self.durability.wrote(self.store)

    def forget_run(self, items: list) -> None:
        """``forget`` for each (seq, message) of a run of acks (``BrokerChannel.settle_entries``): the
        persistent ones leave the store in one call, which asks for one group commit."""
        if type(self).forget is not Queue.forget:  # a queue type with its own forget keeps it
            for seq, msg in items:
                self.forget(seq, msg)
            return
        taken, store = self.taken, self.store
        remembered = taken.by_seq or taken.returns
        seqs = []
        for seq, msg in items:
            if remembered:
                taken.settled(seq)
            if store is not None and msg.persistent:
                seqs.append(seq)
        if seqs and not self.deleted:
            store.ack_run(seqs)
            self.durability.wrote(store)

    def delivered(self, seq: int, message: "Message", no_ack: bool) -> None:
        """A message left the queue for a consumer or basic.get."""
        if self.store is not None and message.persistent:
            if no_ack:
                self.store.ack(seq)
            else:
                self.store.mark_delivered(seq)  # so it comes back redelivered after a restart
            self.durability.wrote(self.store)

    def requeue(self, entries, redelivered: bool = True) -> None:
        """Put taken messages back in their original order, marked redelivered (unless a 0-10
        release says not to), each with the deadline it had; with x-delivery-limit, one
        returned once too often dies instead."""
        if self.deleted:
            if self.arguments.get(REROUTE_ARGUMENT) is True and self.dead_letter_exchange is not None:
                dead_letter(self, [m for _, m in entries], "queue deleted")  # 0-10: to its alternate exchange
            return
        back = []
        gone = []
        taken = self.taken
        returning = taken.returning if taken.by_seq or taken.limit is not None else None
        timed = False
        for seq, msg in entries:
            deadline = 0
            if returning is not None:
                msg, deadline, dies = returning(seq, msg)
                if dies:
                    self.forget(seq, msg)
                    gone.append(msg)
                    continue
                timed = timed or bool(deadline)
            back.append((seq, msg, redelivered, deadline))
        if back:
            back.sort(key=lambda e: e[0])
            self._put_back(back)
            if timed:
                self.ask_for_ticks()
        self._dead_letter(gone, DELIVERY_LIMIT)
        self.dispatch()

    def _put_back(self, entries: list) -> None:
        """Requeued ready entries (in seq order) back in their original places."""
        head = self.ready[0][0] if self.ready else None
        if head is None or entries[-1][0] < head:
            self.ready.extendleft(reversed(entries))
        else:  # interleaved with earlier requeues: merge
            self.ready = deque(sorted([*self.ready, *entries], key=lambda e: e[0]))
        self.ready_bytes += sum(len(e[1].body) for e in entries)

    # --- handing messages out -------------------------------------------------------------

    def take(self, no_ack: bool = False):
        """The next ready (seq, message, redelivered, deadline), or None (basic.get); the message
        is marked delivered (``delivered``) and is the one to send."""
        self.last_used = time.monotonic()
        if self.paged and len(self.ready) < PAGE_LOW and self.ready_bytes < PAGE_LOW_BYTES:
            self.page_in()
        self.expire()
        if not self.ready:
            return None
        seq, msg, redelivered, deadline = self.ready.popleft()
        self.ready_bytes -= len(msg.body)
        if deadline or self.counts_deliveries:
            msg = self.taken.taking(seq, msg, deadline, no_ack, True)
        self.delivered(seq, msg, no_ack)
        if self.congested:
            self._check_drained()
        return seq, msg, redelivered, deadline

    def take_seq(self, seq: int):
        """Take the ready message numbered ``seq`` (a browsed message acquired, 0-10's
        message.acquire) as ``take`` does: (message, redelivered), or None when it is no
        longer ready (taken by another consumer, expired, purged)."""
        ready = self.ready
        if type(ready) is not deque:  # a priority queue's levels (queues/priority.py)
            entry = ready.remove_seq(seq)
            if entry is None:
                return None
        else:
            for i, entry in enumerate(ready):
                if entry[0] == seq:
                    break
                if entry[0] > seq:
                    return None
            else:
                return None
            del ready[i]
        _, msg, redelivered, deadline = entry
        self.ready_bytes -= len(msg.body)
        self.last_used = time.monotonic()
        if deadline or self.counts_deliveries:
            msg = self.taken.taking(seq, msg, deadline, False, True)
        self.delivered(seq, msg, False)
        if self.congested:
            self._check_drained()
        return msg, redelivered

    def purge(self) -> int:
        n = len(self.ready) + self.paged
        if self.store is not None:
            for seq, msg, _, _ in self.ready:
                self.forget(seq, msg)
            if self.paged:
                pager = self.pager
                while page := self.store.unacked_after(pager.boundary, PAGE_BATCH):
                    for seq, _ in page:
                        self.store.ack(seq)
                    pager.boundary = page[-1][0]
                self.durability.wrote(self.store)
        self.pager.discard()
        self.paged = 0
        self.paged_bytes = 0
        self.ready.clear()
        self.ready_bytes = 0
        if self.congested:
            self.release_flow()
        return n

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
            if (len(consumers) == 1 and ready and self._plain and not self.paged
                    and not self.counts_deliveries):
                # One consumer on a queue held in memory (the multi-queue rows: every queue of
                # fanout-1p-10q and 4p4c-16B-4q): no round-robin, nothing to page in, no
                # delivery count; the loop below in its simplest form, one message per turn.
                c = consumers[0]
                # the prefetch window counted down here, the transport asked each time; or,
                # where the window is not a count (Consumer.window), has_capacity each time
                room = c.window() if c.counted_capacity is not None else -1
                if room < 0:
                    room, has_capacity = 1 << 62, c.has_capacity
                else:
                    has_capacity = c.sink.can_accept
                deliver = c.channel.deliver
                no_ack = c.no_ack
                store = self.store
                popleft = ready.popleft
                while room and ready and has_capacity():
                    room -= 1
                    seq, msg, redelivered, deadline = popleft()
                    self.ready_bytes -= len(msg.body)
                    if deadline:
                        if deadline <= time.monotonic():
                            self.forget(seq, msg)
                            self._dead_letter((msg,), EXPIRED)
                            break  # dead-lettering may have changed anything: the general loop goes on
                        msg = self.taken.taking(seq, msg, deadline, no_ack)
                    if store is not None:
                        self.delivered(seq, msg, no_ack)
                    deliver(c, self, seq, msg, redelivered)
                else:
                    return
            while consumers and (ready or self.paged):
                if self.paged and len(ready) < PAGE_LOW and self.ready_bytes < PAGE_LOW_BYTES:
                    self.page_in()
                    ready = self.ready
                    if not ready:
                        break
                if self._plain:
                    n = len(consumers)
                    if n == 1:  # the usual case: no round-robin arithmetic
                        c = consumers[0]
                        if not c.has_capacity():
                            return
                    else:  # round-robin, inline (a call per delivery costs the 4p4c-1q row)
                        choice = self.choice
                        rr = choice.rr
                        for step in range(n):
                            i = (rr + step) % n
                            c = consumers[i]
                            if c.has_capacity():
                                break
                        else:
                            return  # nobody can take more now
                        choice.rr = (i + 1) % n
                else:
                    c = self.choice.pick()
                    if c is None:
                        return
                seq, msg, redelivered, deadline = ready.popleft()
                self.ready_bytes -= len(msg.body)
                if deadline:
                    if deadline <= time.monotonic():
                        self.forget(seq, msg)
                        self._dead_letter((msg,), EXPIRED)
                        continue  # expired on its way to the head
                    msg = self.taken.taking(seq, msg, deadline, c.no_ack)
                elif self.counts_deliveries:
                    msg = self.taken.taking(seq, msg, deadline, c.no_ack)
                if self.store is not None:
                    self.delivered(seq, msg, c.no_ack)
                c.channel.deliver(c, self, seq, msg, redelivered)
        finally:
            self._dispatching = False
            if self.congested:
                self._check_drained()

    # --- expiry (queues/expiry.py decides the deadlines) ------------------------------------

    def expire(self) -> None:
        """Drop (dead-letter) expired messages from the head of the queue."""
        ready = self.ready
        if ready and ready[0][3]:
            now = time.monotonic()
            gone = []
            while ready and ready[0][3] and ready[0][3] <= now:
                gone.append(ready.popleft())
            self.expired(gone)

    def expired(self, entries) -> None:
        """Ready entries taken off the queue because they expired: forgotten, dead-lettered."""
        if not entries:
            return
        for seq, msg, _, _ in entries:
            self.ready_bytes -= len(msg.body)
            self.forget(seq, msg)
        self._dead_letter([e[1] for e in entries], EXPIRED)

    def tick(self, now: float) -> bool:
        """Expire the head and, with x-expires, delete the queue when unused for that long.
        Returns whether to keep ticking."""
        if self.deleted or self.vhost.queues.get(self.name) is not self:
            self._ticking = False
            return False
        expiry = self.expiry
        if not self.consumers and expiry.unused_too_long(self.last_used, now):
            self._ticking = False
            self.vhost.delete_queue(self)
            return False
        self.expire()
        if self.congested:
            self._check_drained()
        self._ticking = expiry.expires is not None or bool(self.ready) or bool(self.paged)
        return self._ticking

    # --- length limits (queues/length_limits.py) ---------------------------------------------

    def _would_overflow(self, message: "Message") -> bool:
        """Whether enqueuing ``message`` would pass a limit (reject-publish refuses it first)."""
        return self.length_limit.over(len(self.ready) + self.paged + 1,
                                      self.ready_bytes + self.paged_bytes + len(message.body))

    def _over_limit(self) -> bool:
        return self.length_limit.over(len(self.ready) + self.paged, self.ready_bytes + self.paged_bytes)

    def _drop_over_limit(self) -> None:
        """x-overflow drop-head: drop (dead-letter) from the head until within the limits."""
        gone = []
        while self._over_limit():
            if self.paged and len(self.ready) < PAGE_LOW and self.ready_bytes < PAGE_LOW_BYTES:
                self.page_in()
            if not self.ready:
                break
            seq, msg, _, _ = self.ready.popleft()
            self.ready_bytes -= len(msg.body)
            self.forget(seq, msg)
            gone.append(msg)
        self._dead_letter(gone, MAXLEN)

    def publish_past_limit(self, message: "Message") -> int:
        """``publish`` of a message another worker routed here and has counted as taken
        (--worker-mode queues, warren/spread/messages.py): a reject-publish limit does not turn
        it away; that worker refuses its publishers while ``refuses_publishes`` says so."""
        if not (self.limited and self.length_limit.rejects):
            return self.publish(message)
        self.limited = False
        try:
            return self.publish(message)
        finally:
            self.limited = True

    def refuses_publishes(self) -> bool:
        """Whether a reject-publish limit turns the next message away now (an empty one)."""
        return self.limited and self.length_limit.rejects and self._would_overflow(_EMPTY)

    # --- a taken message rejected (queues/delivery_limit.py keeps what it needs) --------------

    def reject(self, seq: int, message: "Message") -> None:
        """A taken message was rejected or nacked without requeue: gone, and dead-lettered."""
        message = self.taken.as_queued(seq, message)
        self.forget(seq, message)
        self._dead_letter((message,), REJECTED)

    # --- consumers (queues/consumer_choice.py orders them) -------------------------------------

    def add_consumer(self, consumer) -> None:
        self.choice.add(consumer)
        self._plain = self.choice.plain
        self.had_consumer = True

    def remove_consumer(self, consumer) -> None:
        if not self.choice.remove(consumer):
            return
        self._plain = self.choice.plain
        consumers = self.consumers
        if not consumers:
            self.last_used = time.monotonic()  # x-expires counts from the last consumer's going
            if self.congested:
                self.release_flow()  # nobody drains it now: paging bounds its memory instead
        if self.auto_delete and not consumers and self.had_consumer:
            self.vhost.delete_queue(self)
        elif consumers and self.ready:
            self.dispatch()  # the next active consumer (SAC) or a lower priority may take over

    # --- paging (queues/paging.py) --------------------------------------------------------------

    def page_out(self) -> None:
        """Move the tail of the ready messages to disk and enter paging mode (the memory budget)."""
        self.pager.page_out(self)

    def page_in(self) -> None:
        """Read the next batch of paged messages back into memory, in seq order."""
        self.pager.page_in(self)

    def resume_paging(self, paged: int, boundary: int, paged_bytes: int) -> None:
        """After a restart: ``paged`` stored messages above ``boundary`` stay on disk (vhost's recovery)."""
        self.paged = paged
        self.paged_bytes = paged_bytes
        self.pager.resume(boundary)

    def drop_paged(self) -> None:
        """The queue is deleted: what it paged out to its spill goes (its store goes with it)."""
        self.pager.discard()
        self.paged = 0

    # --- flow marks (queues/flow_marks.py) ------------------------------------------------------

    def _check_congestion(self) -> None:
        """Publishers outrun the consumers: mark the queue congested (the channel then pauses
        the connection that published, ``BrokerConnection.throttled_by``)."""
        if self.consumers and self.flow.passed(len(self.ready) + self.paged, self.ready_bytes):
            self.congested = True

    def _check_drained(self) -> None:
        """Called where the backlog shrinks: below the low marks, read the publishers again."""
        if not self.consumers or self.deleted or self.flow.drained(len(self.ready) + self.paged, self.ready_bytes):
            self.release_flow()

    def release_flow(self) -> None:
        """No longer congested: the publishers held for this queue are resumed."""
        self.congested = False
        self.flow.listener.drained(self)

    def __repr__(self) -> str:
        return f"<Queue {self.name!r} ready={len(self.ready)} consumers={len(self.consumers)}>"
