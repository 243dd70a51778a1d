"""A quorum queue (``x-queue-type=quorum``) on one node: RabbitMQ's quorum-queue semantics
without the replication (``docs/features.md``, "Quorum queues").

What differs from the classic queue (``warren/broker/queue.py``), each as RabbitMQ does it:

* Every message is stored, persistent or not (RabbitMQ's quorum queues write every message to
  their log): a transient message is stored as if persistent, its properties unchanged, so
  confirms wait for the disk and the message survives a restart.
* ``x-delivery-limit`` always applies: RabbitMQ 4's default of 20 when none is set (RabbitMQ 3.10
  has no default), none with a negative limit (RabbitMQ 4's -1). ``x-delivery-count`` is on
  every redelivery and every basic.get, as the classic queue with a limit does. The counts are
  kept across restarts: each return is a record in the queue's store (``QueueStore.mark_returned``),
  and a message that was out (delivered, unacked) when the broker stopped comes back with one
  more, as RabbitMQ counts the return of a consumer that went away.
* Priorities as RabbitMQ 4 gives quorum queues, without ``x-max-priority`` (refused on declare):
  two levels, high (priority property above 4) and normal. Of every three messages taken, two
  come from the high level when it has any; the third is the older of the two heads, so
  normal messages are never starved (``QuorumReady``).
* ``x-overflow``: ``drop-head`` or ``reject-publish``; RabbitMQ's quorum queues do not have
  ``reject-publish-dlx``: the declare is accepted, a warning logged and drop-head applies.
  ``reject-publish`` as RabbitMQ's quorum queue does it: a publish is refused once the queue
  is over its limit (so the queue may hold one message past it), until it drains to 80 % of it.
* Global QoS: a consumer on a channel with a global prefetch limit is refused with 540
  NOT_IMPLEMENTED, a connection error, as RabbitMQ ("does not support global qos").
* ``x-dead-letter-strategy: at-least-once`` (with ``x-overflow: reject-publish`` and a DLX;
  otherwise at-most-once, as RabbitMQ): a dead-lettered message stays in this queue's store,
  not deliverable, until every queue it is routed to has it. "Has it" on one node: the target
  accepted it (not refused by its own reject-publish), and when the target stores it (a durable
  queue and a persistent message, or a quorum queue) the sync that writes it completed. Only
  then is it acked here. A DLX that is missing, routes nowhere or is refused is retried every
  ``DLX_RETRY`` seconds from the broker tick. A message still waiting when the broker stops
  comes back to this queue as a ready message (at least once: it may reach the target twice).
"""

from __future__ import annotations

import logging
import sys
from collections import deque

from warren.broker.dead_letter import dead_letter_targets, make_dead_letter, with_headers
from warren.broker.message import Message
from warren.broker.queue import Queue
from warren.broker.queues.length_limits import DROP_HEAD, REFUSED, REJECT_PUBLISH, REJECT_PUBLISH_DLX
from warren.broker.queues.priority import message_priority
from warren.broker.queues.quorum_args import AT_LEAST_ONCE, AT_MOST_ONCE, QUORUM_TYPE
from warren.errors import NotImplemented_

__all__ = ["QuorumQueue", "QuorumReady", "DEFAULT_DELIVERY_LIMIT", "DLX_RETRY", "HIGH_PRIORITY_ABOVE"]

log = logging.getLogger("warren.quorum")

DEFAULT_DELIVERY_LIMIT = 20  # RabbitMQ 4's default for quorum queues (3.10 has none)
NO_LIMIT = sys.maxsize  # a negative x-delivery-limit (RabbitMQ 4: -1 turns the limit off)
HIGH_PRIORITY_ABOVE = 4  # RabbitMQ 4: a priority property above 4 is high, the rest normal
WEIGHT = 2  # of every WEIGHT + 1 messages taken, WEIGHT come from the high level first
LOW_LIMIT = 0.8  # reject-publish: refused until drained to this share of the limit
DLX_RETRY = 1.0  # seconds between two attempts to forward a waiting at-least-once dead letter


def is_high_priority(msg) -> bool:
    return message_priority(msg, 255) > HIGH_PRIORITY_ABOVE


class QuorumReady:
    """The ready entries ``(seq, message, redelivered, deadline)`` of a quorum queue in two
    FIFOs, high and normal, with the deque operations ``Queue`` uses: ``[0]`` (the next to
    take), ``[-1]`` and ``pop`` (the newest, for paging), ``popleft``, ``append``, ``len``,
    iteration, ``clear``; plus ``put_back``."""

    __slots__ = ("high", "normal", "taken")

    def __init__(self) -> None:
        self.high: deque = deque()
        self.normal: deque = deque()
        self.taken = 0  # messages taken, modulo WEIGHT + 1

    def __len__(self) -> int:
        return len(self.high) + len(self.normal)

    def __bool__(self) -> bool:
        return bool(self.high) or bool(self.normal)

    def _next(self) -> deque:
        high, normal = self.high, self.normal
        if high and normal:
            if self.taken == WEIGHT:  # every third turn: the older head, whichever level
                return high if high[0][0] < normal[0][0] else normal
            return high
        return high if high else normal

    def _newest(self) -> deque:
        high, normal = self.high, self.normal
        if high and normal:
            return high if high[-1][0] > normal[-1][0] else normal
        return high if high else normal

    def __getitem__(self, i: int):
        if i == 0:
            return self._next()[0]
        if i == -1:
            return self._newest()[-1]
        raise IndexError("a quorum queue only shows its next and its newest message")

    def popleft(self):
        entry = self._next().popleft()
        self.taken = 0 if self.taken == WEIGHT else self.taken + 1
        return entry

    def pop(self):
        return self._newest().pop()

    def append(self, entry) -> None:
        (self.high if is_high_priority(entry[1]) else self.normal).append(entry)

    def __iter__(self):
        yield from self.high
        yield from self.normal

    def clear(self) -> None:
        self.high.clear()
        self.normal.clear()

    def put_back(self, entries: list) -> None:
        """Requeued entries (in seq order) back in their places within their levels."""
        for high in (True, False):
            group = [e for e in entries if is_high_priority(e[1]) == high]
            if not group:
                continue
            level = self.high if high else self.normal
            if not level or group[-1][0] < level[0][0]:
                level.extendleft(reversed(group))
            else:  # interleaved with earlier requeues: merge
                merged = deque(sorted([*level, *group], key=lambda e: e[0]))
                if high:
                    self.high = merged
                else:
                    self.normal = merged


class _DeadLetter:
    """An at-least-once dead letter on its way: acked in the source once ``done``."""

    __slots__ = ("seq", "message", "keys", "deaths", "reason", "has_it", "need", "routed")

    def __init__(self, seq: int, message: Message, keys: list, deaths: list, reason: str) -> None:
        self.seq = seq
        self.message = message  # the dead letter as published to the DLX
        self.keys = keys
        self.deaths = deaths
        self.reason = reason
        self.has_it: set[str] = set()  # target queues that accepted it
        self.need = 0  # the sync that makes it durable in every target that stores it
        self.routed = False  # every queue it routes to has it (on the last attempt)


def _holding(method):
    """Run a queue method that may dead-letter with the store acks of the messages it forgets
    held back (at-least-once): ``_dead_letter`` takes those it forwards, the rest are acked."""
    def held(self, *args, **kwargs):
        if self.dead_letter_strategy != AT_LEAST_ONCE or self._held is not None:
            return method(self, *args, **kwargs)
        self._held = {}
        try:
            return method(self, *args, **kwargs)
        finally:
            left, self._held = self._held, None
            for seq, msg in left.values():
                Queue.forget(self, seq, msg)
    held.__name__ = method.__name__
    held.__doc__ = method.__doc__
    return held


class QuorumQueue(Queue):
    queue_type = QUORUM_TYPE
    # a replicated queue's leader in a cluster hands messages out only while this answers True:
    # its node's lease surely lives (warren/cluster/replicas.py sets it); None on one node
    serving = None

    def __init__(self, vhost, name: str, durable: bool = True, exclusive_owner=None,
                 auto_delete: bool = False, arguments: dict | None = None) -> None:
        self.dead_letter_strategy = AT_MOST_ONCE
        self._held: dict | None = None  # id(message) -> (seq, message): acks held back (_holding)
        self._dlx_waiting: dict[int, _DeadLetter] = {}  # seq -> dead letter on its way (at-least-once)
        self._next_dlx_retry = 0.0
        self._refusing = False  # reject-publish: over the limit, not drained to LOW_LIMIT yet
        super().__init__(vhost, name, durable, exclusive_owner, auto_delete, arguments)
        self.ready = QuorumReady()

    # --- arguments -------------------------------------------------------------------------

    @_holding
    def apply_arguments(self, effective: dict) -> None:
        if effective.get("x-overflow") == REJECT_PUBLISH_DLX:
            log.warning("queue '%s' in vhost '%s': quorum queues have no x-overflow reject-publish-dlx; "
                        "drop-head applies (as RabbitMQ)", self.name, self.vhost.name)
            effective = {**effective, "x-overflow": DROP_HEAD}
        super().apply_arguments(effective)
        strategy = effective.get("x-dead-letter-strategy")
        if strategy == AT_LEAST_ONCE and (self.overflow != REJECT_PUBLISH or self.dead_letter_exchange is None):
            log.warning("queue '%s': x-dead-letter-strategy at-least-once needs x-overflow reject-publish and "
                        "a dead-letter exchange; at-most-once applies (as RabbitMQ)", self.name)
            strategy = AT_MOST_ONCE
        self.dead_letter_strategy = AT_LEAST_ONCE if strategy == AT_LEAST_ONCE else AT_MOST_ONCE
        if self.overflow != REJECT_PUBLISH:
            self._refusing = False

    def delivery_limit_of(self, args: dict) -> int:
        limit = args.get("x-delivery-limit")
        if isinstance(limit, int) and not isinstance(limit, bool):
            return limit if limit >= 0 else NO_LIMIT
        return DEFAULT_DELIVERY_LIMIT

    # --- publishing: every message stored ------------------------------------------------------

    @_holding
    def publish(self, message: Message) -> int:
        if not message.persistent and self.store is not None:
            message = _stored_copy(message)
        return super().publish(message)

    def _would_overflow(self, message: Message) -> bool:
        """reject-publish as RabbitMQ's quorum queues: refused once over the limit, until drained
        to LOW_LIMIT of it (so one publish may take the queue past its limit)."""
        # dead letters still on their way count, as RabbitMQ's (at-least-once back-pressure)
        count = len(self.ready) + self.paged + len(self._dlx_waiting)
        size = self.ready_bytes + self.paged_bytes + sum(len(d.message.body) for d in self._dlx_waiting.values())
        limit = self.length_limit
        if self._refusing:
            if limit.within(count, size, LOW_LIMIT):
                self._refusing = False
            else:
                return True
        if limit.over(count, size):
            self._refusing = True
            return True
        return False

    def _drop_over_limit(self) -> None:
        if self.overflow == DROP_HEAD:  # reject-publish lets the queue hold one past its limit
            super()._drop_over_limit()

    # --- taking, returning: delivery counts ------------------------------------------------------

    # a replicated queue's leader hands nothing out while it is not ``serving``

    @_holding
    def take(self, no_ack: bool = False):
        if self.serving is not None and not self.serving():
            return None  # (basic.get answers empty, as while its leader is elected elsewhere)
        return Queue.take(self, no_ack)

    def take_seq(self, seq: int):
        if self.serving is not None and not self.serving():
            return None
        return super().take_seq(seq)

    @_holding
    def dispatch(self) -> None:
        if self.serving is None or self.serving():
            Queue.dispatch(self)

    expire = _holding(Queue.expire)
    reject = _holding(Queue.reject)

    @_holding
    def requeue(self, entries) -> None:
        store = self.store
        if store is not None and not self.deleted:
            for seq, _ in entries:
                store.mark_returned(seq)  # the count survives a restart (module doc)
        super().requeue(entries)

    def annotate(self, seq: int, headers: dict) -> None:
        """A 1.0 ``modified`` outcome's annotations join the taken message before it comes back
        or dies (RabbitMQ 4's quorum queues): kept in memory, as RabbitMQ keeps them, so a
        restart brings the message back as it was stored."""
        def annotated(message: Message) -> Message:
            try:
                return with_headers(message, headers)
            except Exception:  # a property list we cannot rewrite stays as it came
                return message
        self.taken.edit(seq, annotated)

    def _put_back(self, entries: list) -> None:
        self.ready.put_back(entries)
        self.ready_bytes += sum(len(e[1].body) for e in entries)

    def restore(self, seq: int, message: Message, delivered: bool) -> None:
        message.persistent = True  # stored as persistent whatever its delivery mode
        super().restore(seq, message, self._recovered_count(seq, delivered) > 0)

    def page_in(self) -> None:
        boundary = self.pager.boundary
        super().page_in()
        for level in (self.ready.high, self.ready.normal):  # the entries read back: seq > boundary
            for i in range(len(level) - 1, -1, -1):
                seq, msg, delivered, deadline = level[i]
                if seq <= boundary:
                    break
                msg.persistent = True
                if self.store is not None and (delivered or self.store.returned(seq)):
                    level[i] = (seq, msg, self._recovered_count(seq, delivered) > 0, deadline)

    def _recovered_count(self, seq: int, delivered: bool) -> int:
        """The delivery count of a message read back from the store after a restart: its
        returns, plus one when it was out (delivered, not returned since) when the broker
        stopped; that implicit return is logged so the count stays right after the next."""
        store = self.store
        if store is None:
            return 0
        if delivered:
            store.mark_returned(seq)
            self.durability.wrote(store)
        count = store.returned(seq)
        if count:
            self.taken.recovered(seq, count)
        return count

    # --- consumers -----------------------------------------------------------------------------

    def add_consumer(self, consumer) -> None:
        if consumer.channel.prefetch_count:
            raise NotImplemented_(f"queue '{self.name}' in vhost '{self.vhost.name}' does not support global qos")
        super().add_consumer(consumer)

    # --- at-least-once dead-lettering ----------------------------------------------------------

    def forget(self, seq: int, message: Message) -> None:
        held = self._held
        if held is None:
            return super().forget(seq, message)
        self.taken.settled(seq)
        held[id(message)] = (seq, message)  # acked when the method returns, unless dead-lettered

    def _dead_letter(self, messages, reason: str) -> None:
        held = self._held
        if held is None or self.deleted or not messages:
            return super()._dead_letter(messages, reason)
        for msg in messages:
            entry = held.pop(id(msg), None)
            if entry is None:
                super()._dead_letter((msg,), reason)
                continue
            seq = entry[0]
            try:
                properties, keys, deaths = make_dead_letter(msg, reason, self.name, self.dead_letter_routing_key)
            except Exception:  # a property list we cannot rewrite: dropped, as at-most-once does
                log.exception("cannot dead-letter a message from queue %r", self.name)
                self._ack_stored(seq)
                continue
            dl = _DeadLetter(seq, Message(self.dead_letter_exchange, keys[0], properties, msg.body),
                             keys, deaths, reason)
            self._dlx_waiting[seq] = dl
            self._forward(dl)
        if self._dlx_waiting:
            self.ask_for_ticks()

    def _forward(self, dl: _DeadLetter) -> None:
        """Offer a waiting dead letter to the queues its DLX routes it to that lack it; ack it
        here once all have it (now, or after the sync that stores it in them)."""
        exchange = self.vhost.exchanges.get(self.dead_letter_exchange)
        if exchange is None:
            return  # retried: the DLX may be declared later
        targets = dead_letter_targets(exchange, dl.message, dl.keys, dl.deaths, dl.reason)
        complete = bool(targets)
        for q in targets:
            if q.name in dl.has_it:
                continue
            need = q.publish(dl.message)
            if need == REFUSED:
                complete = False
                continue
            dl.has_it.add(q.name)
            dl.need = max(dl.need, need)
        dl.routed = complete
        if complete:
            durability = self.durability
            if not dl.need or durability is None or durability.synced >= dl.need:
                self._settle_dead_letter(dl)
            else:
                durability.waiting.add(self)  # synced() settles it

    def synced(self, number: int) -> None:
        """Durability: sync ``number`` completed (the dead letters that waited for it are safe)."""
        for dl in list(self._dlx_waiting.values()):
            if dl.routed and dl.need <= number:
                self._settle_dead_letter(dl)
        if any(dl.routed for dl in self._dlx_waiting.values()) and self.durability is not None:
            self.durability.waiting.add(self)

    def _settle_dead_letter(self, dl: _DeadLetter) -> None:
        if self._dlx_waiting.pop(dl.seq, None) is not None:
            self._ack_stored(dl.seq)

    def _ack_stored(self, seq: int) -> None:
        """The message left for good: its record goes (every message of a quorum queue is stored)."""
        if self.store is not None and not self.deleted:
            self.store.ack(seq)
            self.durability.wrote(self.store)

    @property
    def dead_letters_waiting(self) -> int:
        return len(self._dlx_waiting)

    def tick(self, now: float) -> bool:
        keep = super().tick(now)
        waiting = self._dlx_waiting
        if not waiting or self.deleted:
            return keep
        if now >= self._next_dlx_retry:
            self._next_dlx_retry = now + DLX_RETRY
            for dl in list(waiting.values())[:1000]:  # bounded work per tick
                if not dl.routed:
                    self._forward(dl)
        self._ticking = True
        return True

    def __repr__(self) -> str:
        return f"<QuorumQueue {self.name!r} ready={len(self.ready)} consumers={len(self.consumers)}>"


def _stored_copy(message: Message) -> Message:
    """The message as a quorum queue keeps it: the same octets, stored as persistent."""
    m = Message.__new__(Message)
    for name in Message.__slots__:
        setattr(m, name, getattr(message, name))
    m.persistent = True
    return m
