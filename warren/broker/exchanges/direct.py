"""Direct exchange: a binding matches when its key equals the routing key exactly."""

from __future__ import annotations

from warren.broker.exchanges.base import Exchange

__all__ = ["DirectExchange"]


class DirectExchange(Exchange):
    TYPE = "direct"
    KEY_ROUTED = True

    def __init__(self, *args, **kw) -> None:
        super().__init__(*args, **kw)
        self._by_key: dict[str, list] = {}

    def _add(self, b) -> None:
        self._by_key.setdefault(b.routing_key, []).append(b.destination)

    def _remove(self, b) -> None:
        dests = self._by_key.get(b.routing_key)
        if dests is not None:
            dests.remove(b.destination)
            if not dests:
                del self._by_key[b.routing_key]

    def match(self, routing_key, message):
        return self._by_key.get(routing_key, ())
