"""Headers exchange: a binding matches on the message's headers table, not the routing key.

The binding's ``x-match`` argument decides how (RabbitMQ semantics): ``all`` (default) needs
every other binding argument present with an equal value; ``any`` needs at least one. Binding
arguments whose names start with ``x-`` are ignored, and so are message headers starting with
``x-``, unless the mode is ``all-with-x`` / ``any-with-x``. A binding argument of type void
(None) matches on presence of the header alone.
"""

from __future__ import annotations

import datetime
import decimal

from warren.broker.exchanges.base import Exchange
from warren.errors import PreconditionFailed

__all__ = ["HeadersExchange", "headers_match"]

X_MATCH_MODES = ("all", "any", "all-with-x", "any-with-x")


def _typed(v):
    """A value with its type class, so 1 != True and 1 != 1.0, but a string equals the same
    octets as a byte array (RabbitMQ compares field values by type class and value)."""
    if isinstance(v, bool):
        return ("t", v)
    if isinstance(v, int):
        return ("i", v)
    if isinstance(v, float):
        return ("f", v)
    if isinstance(v, str):
        return ("s", v.encode("utf-8", "surrogateescape"))
    if isinstance(v, (bytes, bytearray)):
        return ("s", bytes(v))
    if isinstance(v, dict):
        return ("F", tuple(sorted((k, _typed(x)) for k, x in v.items())))
    if isinstance(v, (list, tuple)):
        return ("A", tuple(_typed(x) for x in v))
    if isinstance(v, decimal.Decimal):
        return ("D", v)
    if isinstance(v, datetime.datetime):
        return ("T", v)
    return ("V", v)


def headers_match(arguments: dict, headers: dict) -> bool:
    mode = arguments.get("x-match", "all")
    with_x = mode.endswith("-with-x")
    want_all = not mode.startswith("any")
    matched_any = False
    for name, value in arguments.items():
        if name.startswith("x-") and (not with_x or name == "x-match"):
            continue
        if name in headers and (value is None or _typed(headers[name]) == _typed(value)):
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

    def check_binding(self, arguments: dict) -> None:
        mode = arguments.get("x-match", "all")
        if mode not in X_MATCH_MODES:
            raise PreconditionFailed(f"invalid x-match field value {mode!r}; expected one of "
                                     + ", ".join(X_MATCH_MODES))

    def _add(self, b) -> None:
        self._bindings.append(b)

    def _remove(self, b) -> None:
        self._bindings.remove(b)

    def match(self, routing_key, message):
        if not self._bindings:
            return ()
        headers = message.headers
        return [b.destination for b in self._bindings if headers_match(b.arguments, headers)]
