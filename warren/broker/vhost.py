"""A virtual host: its exchanges, queues and bindings, and RabbitMQ's rules for changing them.

Every refusal is raised as the AMQP error RabbitMQ sends for it (INVENTORY.md §10.9, ERR):
the channel handler that called in fills in the class and method ids.
"""

from __future__ import annotations

import base64
import logging
import os

from warren.broker.directory import LocalDirectory
from warren.broker.exchanges import EXCHANGE_TYPES, Exchange
from warren.broker.exchanges.base import Binding
from warren.broker.exchanges.default import DefaultExchange
from warren.broker.dead_letter import REROUTE_ARGUMENT, dead_letter
from warren.broker.dedup import check_arguments as check_dedup_arguments
from warren.broker.message import Message
from warren.broker.policies import effective_arguments, pick
from warren.broker.queues.base import QueueBase
from warren.broker.queues.length_limits import OVERFLOW_MODES
from warren.broker.queues.paging import PAGE_KEEP
from warren.broker.queues.factory import new_queue
from warren.broker.queues.stream_args import check_stream_declare, is_stream_declare
from warren.broker.queues.quorum_args import (
    QUORUM_GENERIC_SKIPPED, check_classic_declare, check_queue_type, check_quorum_declare, is_quorum_declare,
)
from warren.store.message import decode_restored
from warren.codec.refusals import INVALID, amqp0_9_1_refusal
from warren.errors import AccessRefused, CommandInvalid, NotFound, PreconditionFailed, ResourceLocked
from warren.broker.totals import TOTALS

__all__ = ["VirtualHost"]

log = logging.getLogger("warren.vhost")

PREDECLARED = (
    ("amq.direct", "direct"), ("amq.fanout", "fanout"), ("amq.topic", "topic"),
    ("amq.headers", "headers"), ("amq.match", "headers"),
)


def _q(name: str) -> str:
    return f"queue '{name}' in vhost '/'"


class VirtualHost:
    def __init__(self, name: str, durability=None, memory=None) -> None:
        self.name = name
        self.memory = memory  # the broker's MemoryBudget: queues page out past it
        self.durability = durability  # None: nothing is stored (tests of the model alone)
        self.queues: dict[str, QueueBase] = {}
        # the queues other workers own (--worker-mode queues, warren/spread) or other nodes hold (a
        # cluster, warren/cluster/reach.py), as handles; the broker's directory says where each
        # queue lives (directory.py; alone until the broker's)
        self.remote_queues: dict = {}
        self.directory = LocalDirectory(None)
        self.timers: set = set()  # objects with tick(now) -> bool (keep ticking); Broker.tick calls them
        self.reply_channels: dict = {}  # direct reply-to: token -> ReplyConsumer (warren/broker/reply_to.py)
        self.policies: list = []  # this vhost's policies (warren/broker/policies.py), Broker sets them
        self.exchanges: dict[str, Exchange] = {"": DefaultExchange(self)}
        for ex_name, ex_type in PREDECLARED:
            self.exchanges[ex_name] = ex = EXCHANGE_TYPES[ex_type](ex_name, durable=True)
            ex.attach(self)

    # --- policies ------------------------------------------------------------------------

    def effective_arguments(self, kind: str, name: str, declared: dict) -> dict:
        """A queue's or exchange's declared arguments plus those of the policy that applies."""
        if not self.policies or (kind == "exchange" and name == ""):
            return declared
        return effective_arguments(kind, declared, pick(self.policies, self.name, kind, name))

    def set_policies(self, policies: list) -> None:
        """New policies: re-apply them to every queue and exchange whose arguments change."""
        self.policies = [p for p in policies if p.vhost == self.name]
        for ex in list(self.exchanges.values()):
            if ex.name:
                eff = self.effective_arguments("exchange", ex.name, ex.arguments)
                if eff != ex.effective:
                    ex.apply_arguments(eff)
        for q in list(self.queues.values()):
            if q.deleted:
                continue
            eff = self.effective_arguments("queue", q.name, q.arguments)
            if eff != q.effective:
                try:
                    q.apply_arguments(eff)
                except Exception:
                    log.exception("applying a policy to queue %r failed", q.name)

    def _describe(self, kind: str, name: str) -> str:
        return f"{kind} '{name}' in vhost '{self.name}'"

    # --- exchanges -----------------------------------------------------------------------

    def exchange(self, name: str) -> Exchange:
        ex = self.exchanges.get(name)
        if ex is None:
            raise NotFound(f"no {self._describe('exchange', name)}")
        return ex

    def declare_exchange(self, name: str, type_: str, passive: bool, durable: bool, auto_delete: bool,
                         internal: bool, arguments: dict) -> Exchange:
        _check_name_length("exchange", name)
        if name == "":
            # RabbitMQ refuses any declare of the default exchange, passive or not
            raise AccessRefused("operation not permitted on the default exchange")
        if passive:
            return self.exchange(name)
        cls = EXCHANGE_TYPES.get(type_)
        if cls is None:
            raise CommandInvalid(f"invalid exchange type '{type_}'")
        ex = self.exchanges.get(name)
        if ex is None and name.startswith("amq."):
            # an existing amq.* exchange may be redeclared (equivalence first, as RabbitMQ)
            raise AccessRefused(f"exchange name '{name}' contains reserved prefix 'amq.*'")
        if ex is not None:
            self.check_equivalent("exchange", name, (
                ("type", ex.TYPE, type_), ("durable", ex.durable, durable),
                ("auto_delete", ex.auto_delete, auto_delete), ("internal", ex.internal, internal),
            ), ex.arguments, arguments)
            return ex
        ex = cls(name, durable, auto_delete, internal, arguments)
        if durable and self.durability is not None:
            # on disk before declare-ok is queued
            self.durability.definitions.declare_exchange(self.name, name, type_, durable, auto_delete,
                                                         internal, arguments)
        self.exchanges[name] = ex
        ex.attach(self)
        return ex

    def delete_exchange(self, name: str, if_unused: bool) -> None:
        if name == "" or name.startswith("amq."):
            raise AccessRefused(f"operation not permitted on {self._describe('exchange', name)}"
                                if name else "operation not permitted on the default exchange")
        ex = self.exchanges.get(name)
        if ex is None:
            return  # idempotent, as RabbitMQ 3.x
        if if_unused and ex.bindings:
            raise PreconditionFailed(f"{self._describe('exchange', name)} in use")
        self.remove_exchange(ex)

    def remove_exchange(self, ex: Exchange) -> None:
        if ex.durable and self.durability is not None:
            # logged before ``detach`` puts a delayed exchange's store folder aside (store/aside.py)
            self.durability.log_delete("exchange", self.name, ex.name)
        del self.exchanges[ex.name]
        ex.detach()
        for b in list(ex.bindings.values()):
            ex.remove_binding(b)
        for b in list(ex.bound_to):
            self.remove_binding(b.source, b)

    def remove_binding(self, source: Exchange, binding) -> None:
        source.remove_binding(binding)
        if self._stored_binding(source, binding.destination):
            kind = "exchange" if isinstance(binding.destination, Exchange) else "queue"
            self.durability.definitions.unbind(self.name, source.name, binding.destination.name,
                                               binding.routing_key, binding.arguments, kind)
        if source.auto_delete and not source.bindings and source.name in self.exchanges:
            self.remove_exchange(source)

    def _writable_exchange(self, name: str) -> Exchange:
        if name == "":
            raise AccessRefused("operation not permitted on the default exchange")
        return self.exchange(name)

    def _stored_binding(self, source: Exchange, destination) -> bool:
        """Bindings between durable entities survive restarts (never to an exclusive queue)."""
        return (self.durability is not None and source.durable and destination.durable
                and (isinstance(destination, Exchange) or destination.exclusive_owner is None))

    def _bind(self, source: Exchange, destination, routing_key: str, arguments: dict) -> None:
        if source.bind(destination, routing_key, arguments) and self._stored_binding(source, destination):
            kind = "exchange" if isinstance(destination, Exchange) else "queue"
            self.durability.definitions.bind(self.name, source.name, destination.name, routing_key,
                                             arguments, kind)

    def bind_exchange(self, destination: str, source: str, routing_key: str, arguments: dict) -> None:
        dest = self._writable_exchange(destination)
        src = self._writable_exchange(source)
        self._bind(src, dest, routing_key, arguments)

    def unbind_exchange(self, destination: str, source: str, routing_key: str, arguments: dict) -> None:
        """exchange.unbind, idempotent as in RabbitMQ 3.x: a missing source, destination or
        binding is unbind-ok (aio-pika's patterns unbind what is gone); the default exchange 403."""
        if destination == "" or source == "":
            raise AccessRefused("operation not permitted on the default exchange")
        dest = self.exchanges.get(destination)
        src = self.exchanges.get(source)
        if dest is None or src is None:
            return
        b = src.bindings.get(Binding(src, dest, routing_key, arguments).key)
        if b is not None:
            self.remove_binding(src, b)

    # --- queues --------------------------------------------------------------------------

    def queue(self, name: str, session) -> QueueBase:
        """A queue this session may use: 404 if missing, 405 if another connection's exclusive."""
        q = self.queues.get(name)
        if q is None:
            remote = self.remote_queues.get(name)
            if remote is not None:  # --worker-mode queues: it lives on another worker
                raise remote.spread.refuse_remote(remote, "using")
            raise self.directory.missing_queue(self, name)
        if q.exclusive_owner is not None and q.exclusive_owner is not session:
            raise self.locked_error(name)
        return q

    def queue_handle(self, name: str, session):
        """The queue named ``name`` or, when it lives in another process, its handle there
        (``remote_queues``): what a channel asks of either (``QueueBase.counts``, ``consume``,
        ``get``, ``purge``) is answered now or later. 404 if missing, 405 if another
        connection's exclusive queue."""
        q = self.queues.get(name) or self.remote_queues.get(name)
        if q is None:
            raise self.directory.missing_queue(self, name)
        if q.locked_against(session):
            raise self.locked_error(name)
        return q

    def locked_error(self, name: str) -> ResourceLocked:
        return ResourceLocked(f"cannot obtain exclusive access to locked {self._describe('queue', name)}. "
                              "It could be originally declared on another connection or the exclusive "
                              "property value does not match that of the original declaration.")

    def declare_queue(self, session, name: str, passive: bool, durable: bool, exclusive: bool,
                      auto_delete: bool, arguments: dict, server_named: bool = False) -> QueueBase:
        """``server_named``: ``name`` is one the server drew (--worker-mode queues draws it on the
        worker that orders declarations, warren/spread), not the client's."""
        if passive:
            return self.queue(name, session)
        _check_name_length("queue", name)
        stream = is_stream_declare(arguments)
        quorum = is_quorum_declare(arguments)
        if not name or server_named:
            if stream or quorum:
                raise PreconditionFailed("Cannot declare a server-named queue for type "
                                         f"rabbit_{'stream' if stream else 'quorum'}_queue")
            name = name or "amq.gen-" + base64.urlsafe_b64encode(os.urandom(16)).rstrip(b"=").decode()
        elif name.startswith("amq."):
            raise AccessRefused(f"{self._describe('queue', name)} contains reserved prefix 'amq.*'")
        check_queue_type(self._describe("queue", name), arguments)  # queues/quorum_args.py
        q = self.queues.get(name)
        if q is not None:
            # The exclusive flag is a lock, checked before equivalence (RabbitMQ's strict
            # check_exclusive_access): the owner must be this connection if the declare says
            # exclusive, and nobody if it does not; else 405, never 406. An exclusive queue is
            # never durable, whatever the declare says (RabbitMQ: durable and not exclusive).
            if q.exclusive_owner is not (session if exclusive else None):
                raise self.locked_error(name)
            self.check_equivalent("queue", name, (
                ("durable", q.durable, durable and not exclusive), ("auto_delete", q.auto_delete, auto_delete),
            ), q.arguments, arguments)
            return q
        if stream:  # RabbitMQ checks only a stream's own arguments' values (queues/stream_args.py)
            check_stream_declare(self._describe("queue", name), durable, exclusive, auto_delete, arguments)
            if self.durability is None:
                raise PreconditionFailed(f"{self._describe('queue', name)}: stream queues need a data directory")
        elif quorum:  # RabbitMQ's order: values, other types' arguments, properties (quorum_args.py)
            self._validate_queue_arguments({k: v for k, v in arguments.items() if k not in QUORUM_GENERIC_SKIPPED},
                                           name)
            check_quorum_declare(self._describe("queue", name), durable, exclusive, auto_delete, arguments)
        else:
            self._validate_queue_arguments(arguments, name)
            check_classic_declare(self._describe("queue", name), arguments)
        check_dedup_arguments(arguments, "queue", name)  # warren/broker/dedup.py
        if exclusive:
            durable = False  # exclusive queues never survive their connection (ERR §30)
        q = new_queue(self, name, durable, session if exclusive else None, auto_delete, arguments)
        q.durability, q.memory = self.durability, self.memory
        if durable and self.durability is not None:
            self.durability.definitions.declare_queue(self.name, name, durable, auto_delete, arguments)
            self._attach_store(q)
        self.queues[name] = q
        return q

    def _attach_store(self, q: QueueBase) -> int:
        """Open the queue's message store; put back what it holds. Returns the message count."""
        if q.is_stream:
            return q.attach(self.durability)  # a stream reads its log as consumers ask
        store = self.durability.open_queue_store(self.name, q.name)
        q.store, q.durability = store, self.durability
        count = 0
        head_record_bytes = 0
        # the head comes into memory; the rest stays paged on disk (queues may outgrow memory)
        head = store.unacked_after(0, PAGE_KEEP)
        for seq, delivered in head:
            record = store.read(seq)
            head_record_bytes += len(record)
            exchange, routing_key, properties, body = decode_restored(record)
            msg = Message(exchange, routing_key, properties, body)
            try:
                msg.check_expiration()
            except Exception:
                pass  # it was valid when published; keep the message rather than lose it
            q.restore(seq, msg, delivered)
            count += 1
        if len(store) > count:
            paged = len(store) - count
            # x-max-length-bytes: the paged bodies, estimated from the record octets on disk
            # less the head's own overhead per record (reading them all would defeat paging)
            overhead = (head_record_bytes - q.ready_bytes) / count if count else 0
            q.resume_paging(paged, head[-1][0], max(0, int(store.message_bytes - head_record_bytes - overhead * paged)))
        q.resume_numbering(store.last_seq)
        return len(store)

    def delete_queue(self, q: QueueBase) -> int:
        """Remove a queue, its bindings and its consumers (who get a cancel notification)."""
        if q.deleted:
            return 0
        self.queues.pop(q.name, None)
        self.directory.queue_deleted(self, q)  # --worker-mode queues: the others forget their record of it
        if q.is_stream:
            return self._delete_stream(q)
        # an AMQP 0-10 alternate exchange also takes what is left in a deleted queue (Qpid)
        reroute = q.arguments.get(REROUTE_ARGUMENT) is True and q.dead_letter_exchange is not None
        if reroute:
            while q.paged:  # into memory first: the store goes next
                before = q.paged
                q.page_in()
                if q.paged == before:
                    break
            remaining = [e[1] for e in q.ready]
        if q.store is not None:
            self.durability.log_delete("queue", self.name, q.name)
            self.durability.remove_store(q.store)  # put aside until the delete is durable (store/aside.py)
        q.drop_paged()
        self._detach(q)  # unbound first: a queue bound to its own alternate does not get them back
        n = q.purge()
        if reroute and remaining:
            dead_letter(q, remaining, "queue deleted")
        return n

    def _delete_stream(self, q) -> int:
        """delete_queue for a stream queue: its files go; returns the messages it held."""
        self.durability.log_delete("queue", self.name, q.name)
        n = q.delete_store()
        self._detach(q)
        return n

    def _detach(self, q) -> None:
        """A deleted queue (classic or stream) leaves its bindings and cancels its consumers."""
        q.deleted = True
        TOTALS.queue_deleted(q)  # its counts outlive it (warren/broker/totals.py)
        for b in list(q.bound_to):
            self.remove_binding(b.source, b)
        for c in list(q.consumers):
            c.channel.consumer_cancelled_by_broker(c)
        q.consumers.clear()

    def bind_queue(self, q: QueueBase, exchange: str, routing_key: str, arguments: dict) -> None:
        self._bind(self._writable_exchange(exchange), q, routing_key, arguments)

    # --- restoring durable definitions at start-up ------------------------------------------

    def restore_exchange(self, d) -> None:
        cls = EXCHANGE_TYPES.get(d.type)
        if cls is None or d.name in self.exchanges:
            return
        ex = self.exchanges[d.name] = cls(d.name, d.durable, d.auto_delete, d.internal, d.arguments)
        ex.attach(self)

    def restore_queue(self, d) -> int:
        if d.name in self.queues or d.name in self.remote_queues:
            return 0
        if not self.directory.owns_durable(self.name, d.name):
            self.directory.restore_record(self, d)  # another worker's queue: its record, for bindings
            return 0
        q = new_queue(self, d.name, True, None, d.auto_delete, d.arguments)
        q.memory = self.memory
        self.queues[d.name] = q
        return self._attach_store(q)

    def restore_binding(self, d) -> None:
        src = self.exchanges.get(d.source)
        if d.destination_kind == "exchange":
            dest = self.exchanges.get(d.destination)
        else:
            dest = self.queues.get(d.destination) or self.remote_queues.get(d.destination)
        if src is not None and dest is not None:  # (in a cluster, one to another node's queue is
            src.bind(dest, d.routing_key, d.arguments)  # made from etcd's: warren/cluster/topology.py)

    def unbind_queue(self, session, name: str, exchange: str, routing_key: str, arguments: dict) -> None:
        """queue.unbind, idempotent as in RabbitMQ 3.x: a missing queue, exchange or binding is
        unbind-ok; the default exchange is 403 and an existing binding of another
        connection's exclusive queue 405, as RabbitMQ answers."""
        if exchange == "":
            raise AccessRefused("operation not permitted on the default exchange")
        ex = self.exchanges.get(exchange)
        q = self.queues.get(name)
        if ex is None or q is None:
            return
        b = ex.bindings.get(Binding(ex, q, routing_key, arguments).key)
        if b is not None:
            self.queue(name, session)  # 405 for another connection's exclusive queue
            self.remove_binding(ex, b)

    # --- checks --------------------------------------------------------------------------

    def check_equivalent(self, kind: str, name: str, flags, old_args: dict, new_args: dict) -> None:
        for flag, current, received in flags:
            if current != received:
                raise PreconditionFailed(
                    f"inequivalent arg '{flag}' for {self._describe(kind, name)}: "
                    f"received '{_show(received)}' but current is '{_show(current)}'")
        # x- arguments must match (RabbitMQ checks the ones it knows; we check all of them)
        for key in sorted(set(old_args) | set(new_args)):
            old, new = old_args.get(key), new_args.get(key)
            if key == "x-queue-type" and kind == "queue":  # classic is the default: named or not, the same
                if (old or "classic") != (new or "classic") and old is not None and new is not None:
                    raise PreconditionFailed(f"inequivalent arg 'x-queue-type' for {self._describe(kind, name)}: "
                                             f"received '{new}' but current is '{old}'")  # RabbitMQ's words
                old, new = old or "classic", new or "classic"
            if old != new:
                raise PreconditionFailed(
                    f"inequivalent arg '{key}' for {self._describe(kind, name)}: "
                    f"received {_show_arg(new_args.get(key))} but current is {_show_arg(old_args.get(key))}")

    def _validate_queue_arguments(self, arguments: dict, name: str = "") -> None:
        """RabbitMQ's checks of the queue arguments it knows (its declare_args), same texts."""
        where = f"for {self._describe('queue', name)}"
        # (argument, lowest value): integers, x-expires > 0; x-delivery-limit on any queue here
        for key, low in (("x-message-ttl", 0), ("x-expires", 1), ("x-max-length", 0),
                         ("x-max-length-bytes", 0), ("x-max-priority", 0), ("x-delivery-limit", 0)):
            if key in arguments:
                v = arguments[key]
                if isinstance(v, bool) or not isinstance(v, int):
                    raise PreconditionFailed(f"invalid arg '{key}' {where}: \"expected integer, got {_arg_type(v)}\"")
                if v < 0:
                    raise PreconditionFailed(f"invalid arg '{key}' {where}: {{value_negative,{v}}}")
                if v < low:
                    raise PreconditionFailed(f"invalid arg '{key}' {where}: {{value_zero,{v}}}")
                if key == "x-max-priority" and v > 255:
                    raise PreconditionFailed(f"invalid arg '{key}' {where}: {{max_value_exceeded,{v}}}")
        if "x-overflow" in arguments:
            v = arguments["x-overflow"]
            if not isinstance(v, str):
                raise PreconditionFailed(f"invalid arg 'x-overflow' {where}: {{unacceptable_type,{_arg_type(v)}}}")
            if v not in OVERFLOW_MODES:
                raise PreconditionFailed(f"invalid arg 'x-overflow' {where}: invalid_overflow")
        v = arguments.get("x-single-active-consumer")
        if v is not None and not isinstance(v, bool):
            raise PreconditionFailed(f"invalid arg 'x-single-active-consumer' {where}: "
                                     f"{{unacceptable_type,{_arg_type(v)}}}")
        for key in ("x-dead-letter-exchange", "x-dead-letter-routing-key"):
            if key in arguments and not isinstance(arguments[key], str):
                raise PreconditionFailed(f"invalid type '{_arg_type(arguments[key])}' for arg '{key}' in "
                                         f"{self._describe('queue', name)}")
        if "x-dead-letter-routing-key" in arguments and "x-dead-letter-exchange" not in arguments:
            raise PreconditionFailed(f"invalid arg 'x-dead-letter-routing-key' {where}: routing_key_but_no_dlx_defined")


def _check_name_length(kind: str, name: str) -> None:
    """A queue or exchange name must fit a shortstr (255 octets): over AMQP none can be longer,
    but the HTTP API and a definitions file can ask for one, and every delivery through such an
    exchange failed to encode (an HTTP 500, a 541). Refused as invalid (warren/codec/refusals.py:
    406, and 400 over HTTP). RabbitMQ's API refuses such a queue and takes such an exchange."""
    if len(name) > 63 and len(name.encode("utf-8", "surrogateescape")) > 255:
        raise amqp0_9_1_refusal(INVALID, f"{kind} name of {len(name.encode('utf-8', 'surrogateescape'))} octets: "
                                         "at most 255 (an AMQP shortstr)")


def _arg_type(v) -> str:
    """RabbitMQ's name for the field type of a decoded argument value."""
    for kind, type_name in ((bool, "bool"), (int, "signedint"), (str, "longstr"), (float, "double"),
                            (dict, "table"), (list, "array"), (bytes, "binary")):
        if isinstance(v, kind):
            return type_name
    return "void" if v is None else type(v).__name__


def _show(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def _show_arg(v) -> str:
    """An argument as RabbitMQ shows it in an inequivalence: "the value '5' of type 'signedint'"."""
    return "none" if v is None else f"the value '{_show(v)}' of type '{_arg_type(v)}'"
