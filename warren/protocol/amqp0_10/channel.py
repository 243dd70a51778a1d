"""One 0-10 session over the broker: the ``exchange``, ``queue``, ``tx`` and ``dtx`` commands.

A session attached to a channel is one ``BrokerChannel`` (``warren/broker/channel.py``); its
commands become the broker's protocol-neutral operations. A handler returns None when the
command is complete once it returns, a struct for a command with a result (``execution.result``,
then completion), ``LATER`` when something completes it afterwards (a persistent transfer on
disk, a commit), or an awaitable of None or the struct when the broker answers later
(warren/broker/later.py: the change is applied by other processes first, or the queue lives in
another one); the adapter then reads nothing more from the client until it is done. A refusal
is a ``warren.errors`` exception (the adapter maps its reply code, ``error_code_for``) or an
``ExecutionError`` with a 0-10 error code of its own; either way the adapter answers
``execution.exception`` and the session ends.

The ``message`` class is in ``message.py``; ``dtx`` goes to ``dtx.py`` when that module exists
(else 540 not-implemented).
"""

from __future__ import annotations

import importlib
from collections import deque

from warren.broker.channel import BrokerChannel
from warren.broker.exchanges import EXCHANGE_TYPES
from warren.broker.later import in_turn, is_later, then
from warren.broker.message import Message
from warren.broker.dead_letter import REROUTE_ARGUMENT
from warren.errors import CommandInvalid, NotFound, ResourceLocked
from warren.protocol.amqp0_10.properties import plain_arguments
from warren.spec import amqp0_10 as spec

__all__ = ["SessionChannel", "ExecutionError", "LATER", "HANDLERS", "query_result"]

E = spec.ExecutionErrorCode
LATER = object()  # a handler's answer: the command completes later


class ExecutionError(Exception):
    """A refusal with a 0-10 error code that no ``warren.errors`` class carries."""

    def __init__(self, code: int, text: str) -> None:
        super().__init__(text)
        self.code, self.text = code, text


class PublishedMessage(Message):
    """A message published over 0-10: it remembers the connection it came from (a number),
    which a no-local queue compares with its own connection's (``no_local``)."""

    __slots__ = ("publisher",)


class SessionChannel(BrokerChannel):
    def __init__(self, handler, number: int, sink) -> None:
        super().__init__(handler, number, sink)
        publisher = handler.publisher_id

        def new_message(exchange, routing_key, properties, body):
            msg = PublishedMessage(exchange, routing_key, properties, body)
            msg.publisher = publisher
            return msg
        self.new_message = new_message
        sink.channel = self
        self.conn = handler.conn  # the sans-IO 0-10 ServerConnection
        self.transfers: dict[int, int] = {}  # our transfer id -> delivery tag (acquired, accept pending)
        self.browsed: dict[int, tuple] = {}  # transfer id -> (queue, seq) of a not-acquired transfer
        self.window: dict[int, tuple] = {}  # transfer id -> (subscription, cost): window-mode credit
        self.persisting: deque = deque()  # (publish number, command id) of transfers waiting for the disk
        self.commit_id: int | None = None  # a tx.commit waiting for the disk
        self.dtx = None  # the dtx handler's state for this session (dtx.py)
        self.current = 0  # the id of the command being executed (set by the adapter)
        self.session_queues: set = set()  # exclusive auto-delete queues: deleted with the session
        # delivery tags accepted in the open transaction and then released (qpid.messaging
        # releases before its tx.rollback): requeued if the transaction rolls back
        self.release_on_rollback: set = set()
        self.select_confirms()  # every transfer is numbered: persistent ones complete once on disk

    @property
    def subscriptions(self) -> dict:
        return self.sink.subscriptions

    def queue_named(self, name: str):
        """The queue a command names, or the handle of one in another process; None if there is
        none."""
        return self.vhost.queues.get(name) or self.vhost.remote_queues.get(name)

    def execute(self, command):
        if not HANDLERS:
            HANDLERS.update(_build_handlers())
        handler = HANDLERS.get(command.INDEX)
        if handler is None:
            if command.CLASS_CODE == spec.DtxSelect.CLASS_CODE:
                return _dtx(self, command)
            raise ExecutionError(E.NOT_IMPLEMENTED, f"{command.NAME} is not implemented")
        return handler(self, command)

    # --- completions that wait (hooks of BrokerChannel) ---------------------------------------

    def _confirms_ready(self, confirms) -> None:
        self.session.want_confirm_flush(self)

    def flush_confirms(self) -> None:
        """Complete the transfers whose messages are safe now (``Confirms.settle``)."""
        confirms = self.confirms
        if confirms is None or self.closed:
            return
        settled = confirms.settle()
        if not settled or not self.persisting:
            return
        upto = max(n for n, _, ack in settled)
        pending, complete, number = self.persisting, self.conn.complete, self.number
        while pending and pending[0][0] <= upto:
            complete(number, pending.popleft()[1])

    def tx_committed(self) -> None:
        if self.commit_id is not None and not self.closed:
            self.conn.complete(self.number, self.commit_id)
            self.commit_id = None
            self.session.want_flush()

    def close(self) -> None:
        if self.closed:
            return
        # unsettled messages go back before the subscriptions end, as in Qpid's brokers: an
        # auto-delete queue that its last subscription's end deletes then hands them, in order
        # with the rest, to its alternate exchange
        self.sink.stop()
        self._restore_tx_settles()
        entries = list(self.unacked.values())
        self.unacked.clear()
        if entries:
            self.settle_entries(entries, True)
        super().close()
        for q in self.session_queues:
            if self.vhost.queues.get(q.name) is q:
                self.vhost.delete_queue(q)
                self.session.exclusive_queues.discard(q)
        self.session_queues.clear()

    # --- exchange class --------------------------------------------------------------------

    def handle_exchange_declare(self, c):
        arguments = plain_arguments(c.arguments)
        if c.alternate_exchange:
            arguments["alternate-exchange"] = c.alternate_exchange
        name = c.exchange or ""
        if c.passive:
            if name not in self.vhost.exchanges:
                raise NotFound(f"no exchange '{name}' in vhost '{self.vhost.name}'")
            return None
        existing = self.vhost.exchanges.get(name)
        if existing is not None and c.type and existing.TYPE != c.type:
            raise ExecutionError(E.NOT_ALLOWED, f"exchange '{name}' exists with type {existing.TYPE}, not {c.type}")
        if existing is None and name.startswith(_RESERVED_EXCHANGE_PREFIXES):
            raise ExecutionError(E.NOT_ALLOWED, f"exchange names starting with 'amq.' or 'qpid.' are reserved: '{name}'")
        if existing is not None and c.alternate_exchange and c.alternate_exchange != existing.alternate:
            # Qpid: an exchange's alternate is set when it is made, never added or changed after
            # (declaring it again without one leaves it as it is)
            raise ExecutionError(E.NOT_ALLOWED, f"exchange '{name}' exists with alternate exchange "
                                                f"'{existing.alternate or ''}', not '{c.alternate_exchange}'")
        if existing is not None:  # as for queues: the existing exchange, whatever the other flags
            self.declare_exchange(name, existing.TYPE, True, existing.durable, existing.auto_delete, False, {})
            return None
        if (c.type or "") not in EXCHANGE_TYPES:  # one we do not know: Qpid's brokers say not-found
            raise ExecutionError(E.NOT_FOUND, f"invalid exchange type '{c.type or ''}'")
        try:
            return self.declare_exchange(name, c.type or "", False, bool(c.durable), bool(c.auto_delete), False,
                                         arguments)
        except CommandInvalid as e:
            raise ExecutionError(E.NOT_FOUND, e.text) from None

    def handle_exchange_delete(self, c):
        name = c.exchange or ""
        if not name:
            raise ExecutionError(E.INVALID_ARGUMENT, "the default exchange cannot be deleted")
        if name not in self.vhost.exchanges:
            raise NotFound(f"no exchange '{name}' in vhost '{self.vhost.name}'")
        if name.startswith(_RESERVED_EXCHANGE_PREFIXES):
            raise ExecutionError(E.NOT_ALLOWED, f"exchange '{name}' is a standard exchange: it cannot be deleted")
        v = self.vhost  # (with --worker-mode queues, the other workers' queues too: remote_queues)
        used_by = [q.name for q in (*v.queues.values(), *v.remote_queues.values())
                   if q.arguments.get("x-dead-letter-exchange") == name and q.arguments.get(_AE_MARK)]
        if used_by or any(ex.alternate == name for ex in self.vhost.exchanges.values() if ex.name != name):
            raise ExecutionError(E.NOT_ALLOWED, f"exchange '{name}' is in use as an alternate exchange")
        return self.delete_exchange(name, bool(c.if_unused))

    def handle_exchange_query(self, c):
        ex = self.vhost.exchanges.get(c.name or "")
        if ex is None:
            return spec.ExchangeExchangeQueryResult(not_found=True)
        arguments = dict(ex.arguments)
        return spec.ExchangeExchangeQueryResult(type=ex.TYPE, durable=ex.durable, not_found=False,
                                                arguments=arguments or None)

    def handle_exchange_bind(self, c):
        exchange = c.exchange or ""
        if not exchange:
            raise ExecutionError(E.INVALID_ARGUMENT, "queues cannot be bound to the default exchange")
        if not c.queue:
            raise ExecutionError(E.ILLEGAL_ARGUMENT, "exchange.bind names no queue")
        arguments = plain_arguments(c.arguments)
        ex = self.vhost.exchanges.get(exchange)
        if ex is not None and ex.TYPE == "headers" and "x-match" not in arguments:
            # Qpid's brokers refuse it (and with internal-error, which their suite checks);
            # RabbitMQ reads a missing x-match as "all"
            raise ExecutionError(E.INTERNAL_ERROR, "a headers binding needs an x-match argument (all or any)")
        return self.bind_queue(c.queue, exchange, c.binding_key or "", arguments)

    def handle_exchange_unbind(self, c):
        exchange = c.exchange or ""
        if not exchange:
            raise ExecutionError(E.INVALID_ARGUMENT, "queues cannot be unbound from the default exchange")
        if exchange not in self.vhost.exchanges:
            raise NotFound(f"no exchange '{exchange}' in vhost '{self.vhost.name}'")
        queue = self.queue_named(c.queue or "")
        if queue is None:
            raise NotFound(f"no queue '{c.queue}' in vhost '{self.vhost.name}'")
        # 0-10 names a binding by exchange, queue and key: whatever arguments it was made with
        key = c.binding_key or ""
        bound = [b.arguments for b in self.vhost.exchanges[exchange].bindings.values()
                 if b.destination is queue and b.routing_key == key]
        return in_turn([lambda arguments=arguments: self.unbind_queue(c.queue, exchange, key, arguments or {})
                        for arguments in bound or [{}]])

    def handle_exchange_bound(self, c):
        vhost = self.vhost
        ex = vhost.exchanges.get(c.exchange or "")
        queue = self.queue_named(c.queue or "") if c.queue else None
        result = spec.ExchangeExchangeBoundResult(exchange_not_found=ex is None,
                                                  queue_not_found=bool(c.queue) and queue is None)
        if ex is None:
            return result
        # each criterion on its own, as Qpid's brokers answer: a key bound to another queue
        # matches the key even when the queue named is not bound
        bindings = list(ex.bindings.values())
        if queue is not None:
            result.queue_not_matched = not any(b.destination is queue for b in bindings)
            if not result.queue_not_matched:
                bindings = [b for b in bindings if b.destination is queue]
        if c.binding_key is not None:
            result.key_not_matched = not any(b.routing_key == c.binding_key for b in bindings)
        if c.arguments is not None:
            wanted = plain_arguments(c.arguments)
            result.args_not_matched = not any((b.arguments or {}) == wanted for b in bindings)
        return result

    # --- queue class -----------------------------------------------------------------------

    def handle_queue_declare(self, c):
        name = c.queue or ""
        if not name:
            raise ExecutionError(E.ILLEGAL_ARGUMENT, "queue.declare needs a queue name")
        arguments = _queue_arguments(c.arguments)
        if c.alternate_exchange:
            if not c.passive and c.alternate_exchange not in self.vhost.exchanges:
                raise NotFound(f"alternate exchange '{c.alternate_exchange}' not found")
            # rejected (and expired) messages go to it: the queue's dead-letter exchange
            arguments["x-dead-letter-exchange"] = c.alternate_exchange
            arguments[_AE_MARK] = True
        # Qpid: an exclusive auto-delete queue lives as long as its session (qpid.messaging
        # cancels its topic subscription, then deletes the queue itself: no deletion in between)
        session_scoped = bool(c.exclusive and c.auto_delete and not c.passive) and name not in self.vhost.queues
        # Qpid's brokers answer a declare of an existing queue with that queue, whatever its
        # flags and arguments say (a queue another connection holds exclusively stays locked),
        # except that exclusivity asked for must be had: a passive exclusive declare of a queue
        # not exclusively ours, or an exclusive declare of a queue someone consumes from, is 405
        existing = self.queue_named(name)
        if existing is not None and c.exclusive and existing.exclusive_owner is not self.session and (
                c.passive or existing.exclusive_owner is not None or existing.consumers):
            raise ResourceLocked(f"cannot obtain exclusive access to queue '{name}' in vhost '{self.vhost.name}'")
        passive = bool(c.passive) or existing is not None
        declare = (name, bool(c.durable), bool(c.exclusive), bool(c.auto_delete) and not session_scoped, arguments)
        if passive and not c.passive and not existing.is_here:
            declared = self._existing_or_new(declare)
        else:
            declared = self.declare_queue(name, passive, *declare[1:])

        def then_rules(result):
            # the consumers of a queue in another process are counted there (0 here, above)
            if existing is not None and c.exclusive and existing.exclusive_owner is not self.session and result[2]:
                raise ResourceLocked(f"cannot obtain exclusive access to queue '{name}' in vhost '{self.vhost.name}'")
            return self._declared(c, name, session_scoped)
        return then(declared, then_rules)

    async def _existing_or_new(self, declare: tuple):
        """A declare of a queue whose handle stands here for another process's (a cluster's node):
        that queue, as for one here; or, if it went there a moment ago (an auto-delete) and its
        handle is not gone yet, a new one, as a declare of a missing queue makes."""
        name, rest = declare[0], declare[1:]
        try:
            result = self.declare_queue(name, True, *rest)
            return (await result) if is_later(result) else result
        except NotFound:
            result = self.declare_queue(name, False, *rest)
            return (await result) if is_later(result) else result

    def _declared(self, c, name: str, session_scoped: bool):
        """What Qpid's rules add to a queue.declare: the session's or connection's hold on an
        exclusive queue."""
        q = self.queue_named(name)
        if q is None:
            return None
        if session_scoped and q.exclusive_owner is self.session:
            self.session_queues.add(q)
        if c.exclusive and not c.auto_delete and not c.passive:
            # Qpid: an exclusive queue that is not auto-delete outlives its owner, which holds
            # only its lock; an unlocked one nobody consumes from is locked again by this declare
            return then(q.relock(self.session), lambda held: self._kept(q) if held else None)
        return None

    def _kept(self, q) -> None:
        self.session.kept_exclusive.add(q)
        self.directory.kept_exclusive(q, self.session)

    def queue_to_delete(self, c) -> str:
        """queue.delete's queue name, once checked: one is named, and it exists (0-10)."""
        name = c.queue or ""
        if not name:
            raise ExecutionError(E.ILLEGAL_ARGUMENT, "queue.delete needs a queue name")
        if self.queue_named(name) is None:
            raise NotFound(f"no queue '{name}' in vhost '{self.vhost.name}'")
        return name

    def handle_queue_delete(self, c):
        name = self.queue_to_delete(c)

        def deleted(result) -> None:
            for ch, tag in result[1]:
                # our own subscription on it stays, with nothing more to receive, until the client
                # cancels it (qpid.messaging deletes a receiver's queue, then cancels the receiver)
                if ch is not self:  # another session of this connection: resource-deleted, after our completion
                    ch.notify_cancel(tag)
        return then(self.delete_queue(name, bool(c.if_unused), bool(c.if_empty)), deleted)

    def handle_queue_purge(self, c):
        if not c.queue:
            raise ExecutionError(E.ILLEGAL_ARGUMENT, "queue.purge needs a queue name")
        return then(self.purge_queue(c.queue), _nothing)

    def handle_queue_query(self, c):
        q = self.queue_named(c.queue or "")
        if q is None:
            return _no_queue()
        counts = q.counts()
        if not is_later(counts):
            return query_result(q, *counts)

        async def query():
            try:
                return query_result(q, *await counts)
            except NotFound:  # gone where it lived (an auto-delete queue's last subscription went)
                return _no_queue()
        return query()

    # --- tx class ----------------------------------------------------------------------------

    def handle_tx_select(self, c):
        self.tx_mode = True  # confirms stay selected: transfers before the select still complete on disk
        return None

    def handle_tx_commit(self, c):
        if not self.tx_mode:
            raise ExecutionError(E.ILLEGAL_STATE, "tx.commit on a session that did not select tx")
        self.release_on_rollback.clear()
        if self.commit():
            return None
        self.commit_id = self.current
        return LATER  # tx_committed completes it once the messages are on disk

    def handle_tx_rollback(self, c):
        if not self.tx_mode:
            raise ExecutionError(E.ILLEGAL_STATE, "tx.rollback on a session that did not select tx")
        self.rollback()
        if self.release_on_rollback:
            entries = [self.unacked.pop(t) for t in sorted(self.release_on_rollback) if t in self.unacked]
            self.release_on_rollback.clear()
            if entries:
                self.settle_entries(entries, True)
        return None


def _no_queue():
    return spec.QueueQueueQueryResult(queue="", message_count=0, subscriber_count=0)


def _nothing(_result) -> None:
    """A command's answer that completes it with no result."""


# exchange names a client may not create (0-10: amq.* the standard's, qpid.* Qpid's own)
_RESERVED_EXCHANGE_PREFIXES = ("amq.", "qpid.")

# marks a dead-letter exchange that came from a 0-10 alternate-exchange (queue.query reports
# it; dead-lettering reroutes unchanged, without x-death)
_AE_MARK = REROUTE_ARGUMENT

# Qpid's queue arguments and the broker features they map onto
_QPID_ARGUMENTS = {
    "qpid.max_count": "x-max-length",
    "qpid.max_size": "x-max-length-bytes",
}


def _queue_arguments(arguments) -> dict:
    args = plain_arguments(arguments)
    for qpid_name, ours in _QPID_ARGUMENTS.items():
        value = args.get(qpid_name)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0 and ours not in args:
            args[ours] = value
    priorities = args.get("qpid.priorities", args.get("x-qpid-priorities"))
    if isinstance(priorities, int) and not isinstance(priorities, bool) and "x-max-priority" not in args:
        args["x-max-priority"] = max(1, min(priorities, 255))
    policy = args.get("qpid.policy_type")
    if policy in ("reject", "ring") and "x-overflow" not in args and (
            "x-max-length" in args or "x-max-length-bytes" in args):
        args["x-overflow"] = "reject-publish" if policy == "reject" else "drop-head"
    return args


def query_result(q, messages: int, subscribers: int):
    """queue.query's answer about ``q`` (a queue, or another worker's record of one)."""
    arguments = {k: v for k, v in q.arguments.items() if k != _AE_MARK}
    alternate = arguments.pop("x-dead-letter-exchange", None) if q.arguments.get(_AE_MARK) else None
    return spec.QueueQueueQueryResult(
        queue=q.name, alternate_exchange=alternate, durable=q.durable, exclusive=q.exclusive_owner is not None,
        auto_delete=q.auto_delete, arguments=arguments or None, message_count=messages, subscriber_count=subscribers)


def _dtx(channel: SessionChannel, command):
    """dtx.*: the dtx module's handler when it exists (issue 14, H3), else not-implemented."""
    try:
        module = importlib.import_module("warren.protocol.amqp0_10.dtx")
    except ImportError:
        raise ExecutionError(E.NOT_IMPLEMENTED, f"{command.NAME}: distributed transactions are not implemented") \
            from None
    return module.handle(channel, command)


def _build_handlers() -> dict:
    from warren.protocol.amqp0_10 import message
    table = {}
    for index, cls in spec.COMMANDS.items():
        name = "handle_" + cls.NAME.replace(".", "_").replace("-", "_")
        fn = getattr(SessionChannel, name, None) or getattr(message, name, None)
        if fn is not None:
            table[index] = fn
    return table


HANDLERS: dict = {}  # command INDEX -> handler, filled at the first command (message.py imports this module)
