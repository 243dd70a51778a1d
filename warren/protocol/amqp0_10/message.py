"""The 0-10 ``message`` class over the broker's operations (INVENTORY.md §11.10, §12.1).

``transfer`` publishes (properties mapped by ``properties.py``); the other handlers take the
session's ``SessionChannel`` and the command, as those of ``channel.py``:

* dispositions name our transfers by id: ``accept`` acks (inside a transaction when one is
  selected), ``release`` requeues (the message comes back marked redelivered, whatever
  ``set-redelivered`` says: the broker marks every requeued message so), ``reject`` drops it
  (dead-lettered when the queue has a dead-letter or alternate exchange), ``acquire`` takes a
  browsed message (result ``acquired``). Ids we do not know are ignored, as Qpid's brokers do.
  Release and reject act at once even inside a transaction (qpid.messaging releases what it
  prefetched after a rollback).
* ``subscribe`` is a consumer plus a ``Subscription`` (``delivery.py``: credit, window, browse);
  ``cancel``, ``set-flow-mode``, ``flow``, ``flush``, ``stop`` act on it (``cancel`` and
  ``set-flow-mode`` of an unknown destination are 404; ``flow``, ``flush`` and ``stop`` of one
  are ignored). A subscription whose queue its own session deletes stays until cancelled. ``resume`` is refused
  (not-implemented): Warren keeps no partial messages.
"""

from __future__ import annotations

from warren.broker.channel import PublishOutcome
from warren.broker.later import in_turn, is_later, then
from warren.codec.amqp0_10.sets import SEQ_MOD, SequenceSet
from warren.errors import AccessRefused
from warren.protocol.amqp0_10.channel import LATER, ExecutionError
from warren.protocol.amqp0_10.delivery import NO_BODY, NOT_ACQUIRED, Subscription, SubscriptionTerms
from warren.protocol.amqp0_10.properties import plain_arguments, to_basic
from warren.spec import amqp0_10 as spec

__all__ = ["transfer", "requeue_unmarked", "forget_window", "transfer_ids"]

E = spec.ExecutionErrorCode
_DELIVERY, _MESSAGE = spec.MessageDeliveryProperties, spec.MessageMessageProperties
_PERSISTING, _REFUSED = PublishOutcome.PERSISTING, PublishOutcome.REFUSED


def transfer(ch, event):
    """message.transfer from the client: publish to the exchange named by ``destination``."""
    delivery = message = None
    for s in event.header or ():
        kind = type(s)
        if kind is _DELIVERY:
            delivery = s
        elif kind is _MESSAGE:
            message = s
    properties = to_basic(delivery, message)
    routing_key = (delivery.routing_key if delivery is not None else None) or ""
    body = event.body if event.body is not None else NO_BODY
    outcome = ch.publish(event.command.destination or "", routing_key, properties, body, False)
    if outcome is _PERSISTING:
        ch.persisting.append((ch.confirms.published_upto, ch.current))
        return LATER  # complete once on disk (flush_confirms)
    if outcome is _REFUSED:
        raise ExecutionError(E.RESOURCE_LIMIT_EXCEEDED, "a queue refused the message (x-overflow reject-publish)")
    return None


def transfer_ids(transfers: SequenceSet | None, known: dict) -> list[int]:
    """The ids of ``known`` (our transfer ids) inside the set, in the set's order."""
    if not transfers or not known:
        return []
    out = []
    for lo, hi in transfers.ranges:
        span = (hi - lo) % SEQ_MOD
        if span < len(known):
            out.extend(i for i in ((lo + k) % SEQ_MOD for k in range(span + 1)) if i in known)
        else:  # a wide range (qpid.messaging's cumulative sets): walk what we know instead
            out.extend(sorted(i for i in known if (i - lo) % SEQ_MOD <= span))
    return out


# --- dispositions -----------------------------------------------------------------------------

def handle_message_accept(ch, c):
    transfers, unacked = ch.transfers, ch.unacked
    tx = ch.tx_mode
    entries = []
    for i in transfer_ids(c.transfers, transfers):
        tag = transfers[i] if tx else transfers.pop(i)  # a rollback may give it back
        entry = unacked.pop(tag, None)
        if entry is not None:
            entries.append(entry)
    if entries:  # settled together, as a 0-9-1 ack with multiple (ch.ack one by one was the cost)
        if tx:
            ch.tx_settles.append((entries, None))
        else:
            ch.settle_entries(entries, None)
    for i in transfer_ids(c.transfers, ch.browsed):
        del ch.browsed[i]
    return None


def _settle_now(ch, c, requeue: bool, redelivered: bool = True) -> None:
    transfers, unacked = ch.transfers, ch.unacked
    entries = []
    for i in transfer_ids(c.transfers, transfers):
        tag = transfers.pop(i)
        entry = unacked.pop(tag, None)
        if entry is not None:
            entries.append(entry)
        elif ch.tx_mode:  # accepted in the open transaction: requeued if it rolls back
            ch.release_on_rollback.add(tag)
    if entries:
        if requeue and not redelivered:
            requeue_unmarked(ch, entries)
        else:
            ch.settle_entries(entries, requeue)
    for i in transfer_ids(c.transfers, ch.browsed):
        del ch.browsed[i]


def requeue_unmarked(ch, entries) -> None:
    """BrokerChannel.settle_entries's requeue, with the messages not marked redelivered (a release
    without set-redelivered)."""
    if ch is not None:
        ch.release_counts(entries)
    by_queue: dict = {}
    for q, seq, msg, _consumer, _ in entries:
        by_queue.setdefault(q, []).append((seq, msg))
    for q, items in by_queue.items():
        q.requeue(items, redelivered=False)


def handle_message_release(ch, c):
    _settle_now(ch, c, True, bool(c.set_redelivered))
    return None


def handle_message_reject(ch, c):
    _settle_now(ch, c, False)
    return None


def handle_message_acquire(ch, c):
    """Take browsed copies: each queue (or the handle of one in another process) takes what is
    still there, now or later; the result lists the transfers acquired, in order."""
    by_queue: dict = {}
    asked = transfer_ids(c.transfers, ch.browsed)
    for i in asked:
        queue, seq = ch.browsed.pop(i)
        by_queue.setdefault(queue, []).append((i, seq))
    acquired: set[int] = set()

    def took(pairs, taken) -> None:
        for i, seq in pairs:
            head = taken.get(seq)  # (what settles it, its number there, the message)
            if head is None:
                continue
            tag = ch.next_tag
            ch.next_tag = tag + 1
            ch.unacked[tag] = (*head, None, tag)
            ch.transfers[i] = tag
            acquired.add(i)

    def step(queue, pairs):
        return lambda: then(queue.acquire(ch, [seq for _, seq in pairs]), lambda taken: took(pairs, taken))
    # in the order asked (transfer ids are serial numbers: sorting would break where they wrap)
    return then(in_turn([step(q, pairs) for q, pairs in by_queue.items()]), lambda _: spec.MessageAcquired(
        transfers=SequenceSet.of([i for i in asked if i in acquired]) if acquired else SequenceSet()))


def handle_message_resume(ch, c):
    raise ExecutionError(E.NOT_IMPLEMENTED, "message.resume: Warren keeps no partial messages")


# --- subscriptions ----------------------------------------------------------------------------

def _subscription(ch, destination) -> Subscription:
    sub = ch.subscriptions.get(destination or "")
    if sub is None:
        raise ExecutionError(E.NOT_FOUND, f"no subscription '{destination}' on this session")
    return sub


def handle_message_subscribe(ch, c):
    destination = c.destination or ""
    if destination in ch.subscriptions:
        raise ExecutionError(E.NOT_ALLOWED, f"subscription '{destination}' exists on this session")
    if not c.queue:
        raise ExecutionError(E.ILLEGAL_ARGUMENT, "message.subscribe names no queue")
    accept_mode = c.accept_mode or 0
    acquire_mode = c.acquire_mode or 0
    no_ack = accept_mode == 1 or acquire_mode == NOT_ACQUIRED  # nothing to settle later
    terms = SubscriptionTerms(destination, accept_mode, acquire_mode, ch.current, ch.session.publisher_id)
    try:
        consumer = ch.consume(c.queue, destination or "amq.0-10." + str(ch.current), no_ack, bool(c.exclusive),
                              plain_arguments(c.arguments), terms)
    except AccessRefused as e:  # in exclusive use: 0-10's resource-locked
        raise ExecutionError(E.RESOURCE_LOCKED, e.text) from None
    if is_later(consumer):  # the queue is in another process (nothing more is read meanwhile)
        consumer = _locked_as_resource_locked(consumer)

    def subscribed(consumer) -> None:
        sub = consumer.credit  # the Subscription, or the FarSubscription of one elsewhere
        ch.subscriptions[destination] = sub
        ch.subscriptions[consumer.tag] = sub
        ch.start_consumer(consumer)  # nothing goes before the client's message.flow; held ones now
        return None
    return then(consumer, subscribed)


async def _locked_as_resource_locked(answer):
    try:
        return await answer
    except AccessRefused as e:
        raise ExecutionError(E.RESOURCE_LOCKED, e.text) from None


def handle_message_cancel(ch, c):
    sub = _subscription(ch, c.destination)
    for key in [k for k, v in ch.subscriptions.items() if v is sub]:
        del ch.subscriptions[key]
    ch.cancel(sub.consumer.tag)
    return None


def forget_window(ch, sub) -> None:
    """Transfers sent before a stop, flush or new flow mode give no credit back when completed."""
    if ch.window:
        ch.window = {i: e for i, e in ch.window.items() if e[0] is not sub}


def handle_message_set_flow_mode(ch, c):
    sub = _subscription(ch, c.destination)
    sub.set_mode(c.flow_mode or 0)
    forget_window(ch, sub)
    return None


# flow, flush and stop for a destination the session does not have are ignored, as Qpid's
# brokers do: qpid.messaging sends them for a receiver it is closing, after its cancel


def handle_message_flow(ch, c):
    sub = ch.subscriptions.get(c.destination or "")
    if sub is not None:
        sub.add(c.unit or 0, c.value)
        sub.queue.dispatch()
    return None


def handle_message_flush(ch, c):
    sub = ch.subscriptions.get(c.destination or "")
    if sub is None:
        return None
    # complete once the transfers the credit allowed now are out; they then give no credit back
    return then(sub.flush(), lambda _: forget_window(ch, sub))


def handle_message_stop(ch, c):
    sub = ch.subscriptions.get(c.destination or "")
    if sub is None:
        return None
    return then(sub.stop(), lambda _: forget_window(ch, sub))
