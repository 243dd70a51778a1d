"""The default exchange (""): every queue is reachable by its own name, nothing can be bound.

Direct reply-to addresses (``amq.rabbitmq.reply-to.<token>``) are reachable here too, and only
here (``warren/broker/reply_to.py``)."""

from __future__ import annotations

from warren.broker.exchanges.base import Exchange
from warren.broker.reply_to import lookup

__all__ = ["DefaultExchange"]


class DefaultExchange(Exchange):
    TYPE = "direct"
    KEY_ROUTED = True

    def __init__(self, vhost) -> None:
        super().__init__("", durable=True)
        self._queues = vhost.queues
        self._vhost = vhost

    def match(self, routing_key, message):
        q = self._queues.get(routing_key)
        if q is not None:
            return (q,)
        q = self._vhost.remote_queues.get(routing_key)  # another worker's or another node's
        if q is not None and q.routable:  # (not a queue whose node is down: warren/cluster/reach.py)
            return (q,)
        # direct reply-to: "amq.rabbitmq.reply-to.<token>" reaches that channel's reply consumer
        rc = lookup(self._vhost, routing_key)
        if rc is None:  # --worker-mode queues: one on another worker (warren/spread)
            rc = self._vhost.directory.remote_reply(self._vhost.name, routing_key)
        return (rc,) if rc is not None else ()
