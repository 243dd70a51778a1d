"""The part of routing every exchange type shares.

A type only stores its bindings and answers ``match(routing_key, message)`` with the queues and
exchanges it routes to (``Destination``s). Exchange-to-exchange bindings are followed here, with
a visited set so a cycle of bindings delivers once and terminates (RabbitMQ does the same).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable

if TYPE_CHECKING:
    from warren.broker.message import Message
    from warren.broker.queue import Queue

__all__ = ["Binding", "Exchange"]


class Binding:
    """source --routing_key/arguments--> destination (a Queue or an Exchange)."""

    __slots__ = ("source", "destination", "routing_key", "arguments")

    def __init__(self, source: "Exchange", destination, routing_key: str, arguments: dict) -> None:
        self.source = source
        self.destination = destination
        self.routing_key = routing_key
        self.arguments = arguments

    @property
    def key(self) -> tuple:
        return (id(self.destination), self.routing_key, _freeze(self.arguments))


def _freeze(value):
    if isinstance(value, dict):
        return tuple(sorted((k, _freeze(v)) for k, v in value.items()))
    if isinstance(value, list):
        return tuple(_freeze(v) for v in value)
    return value


class Exchange:
    TYPE = ""

    def __init__(self, name: str, durable: bool = False, auto_delete: bool = False,
                 internal: bool = False, arguments: dict | None = None) -> None:
        self.name = name
        self.durable = durable
        self.auto_delete = auto_delete
        self.internal = internal
        self.arguments = arguments or {}
        self.bindings: dict[tuple, Binding] = {}  # every binding whose source is this exchange
        self.bound_to: set["Binding"] = set()  # bindings whose destination is this exchange

    # --- bindings (a type overrides _add/_remove to index them) ----------------------------

    def check_binding(self, arguments: dict) -> None:
        """Refuse binding arguments this type cannot use (raise an AMQPError)."""

    def bind(self, destination, routing_key: str, arguments: dict) -> bool:
        self.check_binding(arguments)
        b = Binding(self, destination, routing_key, arguments)
        if b.key in self.bindings:
            return False
        self.bindings[b.key] = b
        self._add(b)
        destination.bound_to.add(b)
        return True

    def unbind(self, destination, routing_key: str, arguments: dict) -> bool:
        b = self.bindings.pop(Binding(self, destination, routing_key, arguments).key, None)
        if b is None:
            return False
        self._remove(b)
        destination.bound_to.discard(b)
        return True

    def remove_binding(self, b: Binding) -> None:
        if self.bindings.pop(b.key, None) is not None:
            self._remove(b)
            b.destination.bound_to.discard(b)

    def _add(self, b: Binding) -> None:
        raise NotImplementedError

    def _remove(self, b: Binding) -> None:
        raise NotImplementedError

    def match(self, routing_key: str, message: "Message") -> Iterable:
        """Destinations (queues or exchanges) for this key and message, duplicates allowed."""
        raise NotImplementedError

    # --- routing -------------------------------------------------------------------------

    def route(self, message: "Message", routing_keys: Iterable[str]) -> set["Queue"]:
        """The queues a message published here reaches, following e2e bindings once each."""
        queues: set = set()
        visited = {self}
        pending = [self]
        while pending:
            ex = pending.pop()
            for key in routing_keys:
                for dest in ex.match(key, message):
                    if isinstance(dest, Exchange):
                        if dest not in visited:
                            visited.add(dest)
                            pending.append(dest)
                    else:
                        queues.add(dest)
        return queues

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"
