"""Headers exchange: a binding matches on the message's headers table, not the routing key.

The binding's ``x-match`` argument decides how (RabbitMQ semantics): ``all`` (default) needs
every other binding argument present with an equal value; ``any`` needs at least one. Binding
arguments whose names start with ``x-`` are ignored, and so are message headers starting with
``x-``, unless the mode is ``all-with-x`` / ``any-with-x``. A binding argument of type void
(None) matches on presence of the header alone.
"""

from __future__ import annotations

from warren.broker.exchanges.base import Exchange

__all__ = ["HeadersExchange", "headers_match"]


def headers_match(arguments: dict, headers: dict) -> bool:
    mode = arguments.get("x-match", "all")
    with_x = mode.endswith("-with-x")
    want_all = not mode.startswith("any")
    matched_any = False
    for name, value in arguments.items():
        if name.startswith("x-") and (not with_x or name == "x-match"):
            continue
        if name in headers and (value is None or headers[name] == value):
            if not want_all:
                return True
            matched_any = True
        elif want_all:
            return False
    return want_all


class HeadersExchange(Exchange):
    TYPE = "headers"

    def __init__(self, *args, **kw) -> None:
        super().__init__(*args, **kw)
        self._bindings: list = []

    def _add(self, b) -> None:
        self._bindings.append(b)

    def _remove(self, b) -> None:
        self._bindings.remove(b)

    def match(self, routing_key, message):
        if not self._bindings:
            return ()
        headers = message.headers
        return [b.destination for b in self._bindings if headers_match(b.arguments, headers)]
