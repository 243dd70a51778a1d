"""Local random exchange (type ``x-local-random``): RabbitMQ 4.0's, for request-reply.

A message goes to ONE queue bound here, picked at random among the bound queues that live on
this node; with none on this node it is unroutable (the alternate exchange, ``basic.return``
for a mandatory publish, ``released`` over 1.0), never sent to another node. The routing key
(and CC/BCC's keys) play no part. What RabbitMQ 4's type accepts (``rabbit_exchange_type_local_
random``), Warren accepts:

* a binding's key must be empty, and its destination a classic queue: another key, a quorum
  queue or a stream, or an exchange as destination is 406 (RabbitMQ's ``binding_invalid``, a
  precondition failure); binding arguments are taken and play no part;
* declare arguments are kept as declared and play no part (an ``x-delayed-type`` included).

"This node": a queue whose ``on_this_node`` says so: a queue of this process, or of another
worker process of this node (``--worker-mode queues``: a ``RemoteQueue`` handle); not a queue of
another node of a cluster (a ``NodeQueue`` handle). Which queues are here is decided when they
are bound: a queue never moves under its binding (a new leader after a failover is a new queue
bound in the handle's place).
"""

from __future__ import annotations

import random

from warren.broker.exchanges.base import Exchange
from warren.errors import PreconditionFailed

__all__ = ["LocalRandomExchange"]


class LocalRandomExchange(Exchange):
    TYPE = "x-local-random"

    def __init__(self, *args, **kw) -> None:
        super().__init__(*args, **kw)
        self._local: list = []  # one entry per binding to a queue of this node

    def check_key(self, routing_key: str) -> None:
        if routing_key:
            raise PreconditionFailed(f"binding key '{routing_key}' refused: an x-local-random exchange "
                                     "takes only the empty binding key")

    def check_destination(self, destination) -> None:
        if isinstance(destination, Exchange):
            raise PreconditionFailed(f"exchange '{destination.name}' refused as destination: an "
                                     "x-local-random exchange binds queues only")
        kind = getattr(destination, "queue_type", "classic")
        if kind != "classic":
            raise PreconditionFailed(f"queue '{destination.name}' refused: an x-local-random exchange binds "
                                     f"classic queues only, not {kind} queues")

    def _add(self, b) -> None:
        if b.destination.on_this_node:
            self._local.append(b.destination)

    def _remove(self, b) -> None:
        try:
            self._local.remove(b.destination)
        except ValueError:  # a queue of another node: never listed
            pass

    def match(self, routing_key, message):
        local = self._local
        if not local:
            return ()
        if len(local) == 1:
            return (local[0],)
        return (random.choice(local),)

    def match_keys(self, routing_keys, message):
        return self.match("", message)  # one queue per message, whatever the keys
