"""The default exchange (""): every queue is reachable by its own name, nothing can be bound."""

from __future__ import annotations

from warren.broker.exchanges.base import Exchange

__all__ = ["DefaultExchange"]


class DefaultExchange(Exchange):
    TYPE = "direct"

    def __init__(self, vhost) -> None:
        super().__init__("", durable=True)
        self._queues = vhost.queues

    def match(self, routing_key, message):
        q = self._queues.get(routing_key)
        return (q,) if q is not None else ()
