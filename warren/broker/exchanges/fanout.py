"""Fanout exchange: every binding matches, whatever the key."""

from __future__ import annotations

from warren.broker.exchanges.base import Exchange

__all__ = ["FanoutExchange"]


class FanoutExchange(Exchange):
    TYPE = "fanout"
    KEY_ROUTED = True

    def __init__(self, *args, **kw) -> None:
        super().__init__(*args, **kw)
        self._dests: list = []

    def _add(self, b) -> None:
        self._dests.append(b.destination)

    def _remove(self, b) -> None:
        self._dests.remove(b.destination)

    def match(self, routing_key, message):
        return self._dests
