"""What every queue type has: ``QueueBase``, the base of the classic queue (``warren/broker/queue.py``,
which the priority, quorum, last-value and message-group queues extend) and of the stream queue
(``stream.py``).

Why it exists: the channel, the vhost, the HTTP API, the metrics, the memory budget and the
workers' spread all hold "a queue" without asking which type it is. What they read of any queue
lives here, so that a queue type which is not a classic queue (a stream is an append-only log)
does not inherit the classic queue's features only to switch them off again. The classic queue's
own features (TTL, length limits, delivery limit, consumer choice, paging, flow marks) are objects
``Queue`` holds, and nothing here depends on them.

Here: the queue's identity (vhost, name, flags, arguments and the ``effective`` ones that a policy
changes), its consumers, its bindings, its store, the counters of the HTTP API, ``queue_type`` and
``is_stream``; a few neutral values of the classic queue's figures that callers read of every queue
(below); and the defaults of the operations that are the same for every type, or mean "nothing to
do" for any type without the feature.

Each queue type implements the rest, which callers use on any queue: ``publish``, ``dispatch``,
``add_consumer``/``remove_consumer``, ``take`` (basic.get), ``purge``, ``forget`` (an ack),
``reject``, ``requeue``, ``message_count`` and ``apply_arguments`` (at creation, and again when the
policies change); ``tick`` too if it asks for ticks (``ask_for_ticks``). Its ``__init__`` calls this one
first, then sets its own state, then applies the effective arguments.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from warren.broker.consumer import Consumer
from warren.errors import AccessRefused

if TYPE_CHECKING:
    from warren.broker.message import Message

__all__ = ["QueueBase"]


class QueueBase:
    """What callers read of any queue, and the defaults every queue type shares."""

    # message counts for the HTTP API's message_stats (warren/management/api/stats.py), plain
    # increments by the channel on whatever queue it delivered from; what was published each
    # type counts its own way (stats.published_count)
    stats_deliver = 0  # deliveries to consumers
    stats_get = 0  # basic.get answered with a message
    stats_ack = 0  # deliveries acknowledged
    stats_redeliver = 0  # deliveries flagged redelivered
    # what RabbitMQ calls the type (the HTTP API, Prometheus, warren/broker/totals.py): each
    # queue class says, "classic", "quorum" or "stream"
    queue_type: str
    is_stream = False  # StreamQueue: an append-only log read by offset

    # Neutral values: what the memory budget (memory.py), the HTTP API's queue JSON and the
    # metrics read of every queue, the figures of a queue that holds its messages in memory (the
    # classic queue sets its own in __init__). A queue type that keeps no message in memory, the
    # stream (its log on disk is the queue), has none ready in memory and none paged out, which
    # these class attributes say.
    ready = ()  # the ready messages held in memory, in delivery order
    ready_bytes = 0  # their body octets
    paged = 0  # ready messages paged out to disk (classic: paging.py)
    paged_bytes = 0  # their body octets
    # x-single-active-consumer: only the first consumer gets messages (the HTTP API shows its
    # tag); set by the classic queue from its arguments, which a stream's declare refuses
    single_active = False
    # a length limit applies (the classic x-max-length(-bytes)): the workers' spread watches such
    # queues for x-overflow reject-publish (``refuses_publishes``); a stream's x-max-length-bytes
    # is retention, which never refuses a publish
    limited = False
    # the queue lives in this process; a handle of one elsewhere says False (broker/directory.py)
    is_here = True
    # the queue lives on this node: in this process, or another worker process's handle; not a
    # cluster's handle of another node's queue (the x-local-random exchange's "this node")
    on_this_node = True

    def __init__(self, vhost, name: str, durable: bool = False, exclusive_owner=None,
                 auto_delete: bool = False, arguments: dict | None = None) -> None:
        self.vhost = vhost
        self.name = name
        self.durable = durable
        self.exclusive_owner = exclusive_owner  # the BrokerConnection that owns an exclusive queue, else None
        self.auto_delete = auto_delete
        self.arguments = arguments or {}
        # the declared arguments plus those of the policy that applies (warren/broker/policies.py),
        # set by the type's apply_arguments
        self.effective: dict = {}
        self.consumers: list[Consumer] = []
        self.had_consumer = False  # auto-delete: deleted when its last consumer goes, once it had one
        self.bound_to: set = set()  # bindings whose destination is this queue
        self.store = None  # the queue's message store (a classic queue's QueueStore, a stream's log)
        self.durability = None  # the broker's Durability: group commits of the store (None: no data folder)
        self.memory = None  # the broker's MemoryBudget (None: never page)
        self.deleted = False
        self.last_used = time.monotonic()  # x-expires and the HTTP API's idle_since
        self._ticking = False  # in vhost.timers (ask_for_ticks)
        # over a flow mark with consumers: its publishers are paused (queues/flow_marks.py); the
        # channel asks every queue it published to
        self.congested = False

    def touch(self) -> None:
        """The queue was used (declared, basic.get): x-expires counts from now."""
        self.last_used = time.monotonic()

    def has_exclusive_consumer(self) -> bool:
        return any(c.exclusive for c in self.consumers)

    # --- what a channel asks of a queue (``BrokerChannel``); a handle of a queue in another
    # process (``RemoteQueue``, warren/spread) answers the same questions later --------------

    def locked_against(self, session) -> bool:
        """Whether another connection than ``session`` holds this queue exclusively (405)."""
        return self.exclusive_owner is not None and self.exclusive_owner is not session

    def relock(self, session) -> bool:
        """Qpid's rule for an exclusive declare (not auto-delete) of a queue that outlives its
        owner: unlocked and nobody consuming from it, it is locked for ``session`` again.
        Whether ``session`` holds it now."""
        if self.exclusive_owner is None and not self.consumers and not self.durable:
            self.exclusive_owner = session
            session.exclusive_queues.add(self)
        return self.exclusive_owner is session

    def counts(self) -> tuple[int, int]:
        """(ready messages, consumers): a passive declare's answer."""
        return self.message_count, len(self.consumers)

    def consume(self, channel, tag: str, no_ack: bool, exclusive: bool, arguments: dict, credit=None):
        """A new consumer of ``channel`` here (its tag checked new on the channel); with
        ``credit`` (``CreditTerms``, warren/broker/credit.py) its keeper gates it from the start."""
        if self.has_exclusive_consumer() or (exclusive and self.consumers):
            raise AccessRefused(f"queue '{self.name}' in vhost '{self.vhost.name}' in exclusive use")
        c = Consumer(tag, channel, self, no_ack, exclusive, arguments,
                     channel.consumer_prefetch_count, channel.consumer_prefetch_size)
        if credit is not None:
            c.credit = credit.keep(c)
        channel.consumers[tag] = c
        self.add_consumer(c)
        return c

    def reads_here(self):
        """The queue reads are served from in this process (the HTTP API's stream reads): this
        one. A handle of a queue elsewhere answers with a copy here, or None (its owner reads)."""
        return self

    def get(self, channel, no_ack: bool):
        """basic.get: (what settles it: this queue, its sequence number, the message,
        redelivered, messages left), or None when there is none ready."""
        entry = self.take(no_ack)  # marks it delivered
        if entry is None:
            return None
        seq, msg, redelivered, _ = entry
        self.stats_get += 1
        if redelivered:
            self.stats_redeliver += 1
        return self, seq, msg, redelivered, self.message_count

    def acquire(self, channel, seqs: list) -> dict:
        """0-10's message.acquire of browsed copies: {seq: (this queue, seq, message)} for each
        of ``seqs`` still ready, now taken (marked delivered)."""
        if self.deleted:
            return {}
        taken = {}
        for seq in seqs:
            got = self.take_seq(seq)
            if got is not None:
                taken[seq] = (self, seq, got[0])
        return taken

    def ask_for_ticks(self) -> None:
        """Ask for ``tick(now)`` calls from ``Broker.tick`` (``vhost.timers``) until ``tick``
        returns False: a classic queue's deadlines and x-expires, a stream's retention."""
        if not self._ticking:
            self._ticking = True
            self.vhost.timers.add(self)

    # --- what any queue answers the same way unless its type says otherwise -------------------

    def takes_runs(self) -> bool:
        """Whether ``enqueue_run`` may take a whole run of publishes now (the channel asks every
        queue of a run): only a classic queue in its simplest state does (``Queue.takes_runs``)."""
        return False

    def forget_run(self, items: list) -> None:
        """``forget`` for each (seq, message) of a run of acks (``BrokerChannel.settle_entries``)."""
        for seq, msg in items:
            self.forget(seq, msg)

    def publish_past_limit(self, message: "Message") -> int:
        """``publish`` of a message another worker routed here and counted as taken (--worker-mode
        queues, warren/spread/messages.py): without a reject-publish limit, a plain ``publish``."""
        return self.publish(message)

    def refuses_publishes(self) -> bool:
        """Whether a reject-publish length limit turns the next message away now: never, without
        one (queues/length_limits.py has them)."""
        return False

    def annotate(self, seq: int, headers: dict) -> None:
        """AMQP 1.0's ``modified`` outcome with message annotations, for the taken message
        ``seq`` about to be requeued or rejected: RabbitMQ 4 adds them to the message in quorum
        queues only (``queues/quorum.py``); any other queue type keeps the message as it is."""

    def take_seq(self, seq: int):
        """Take the ready message numbered ``seq`` (a browsed copy): (message, redelivered), or
        None. A queue type that keeps no ready messages (a stream) is never browsed: None."""
        return None

    def page_out(self) -> None:
        """The memory budget asks a queue holding messages in memory to move some to disk
        (queues/paging.py); a queue that holds none has nothing to move."""
