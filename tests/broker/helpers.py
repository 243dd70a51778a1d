"""Helpers shared by the broker unit tests."""

from __future__ import annotations

from warren.broker.channel import BrokerChannel


class Dest:
    """A stand-in binding destination (a queue or an exchange) with just what exchanges use."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.bound_to: set = set()

    def __repr__(self) -> str:
        return self.name


class RecordingSink:
    """A DeliverySink that always has room and records what the broker hands it: deliveries as
    (consumer tag, delivery tag, redelivered, body) and returned messages' bodies."""

    flow_active = True

    def __init__(self) -> None:
        self.delivered: list[tuple] = []
        self.returns: list[bytes] = []

    def can_accept(self) -> bool:
        return True

    def deliver(self, consumer, tag, redelivered, message) -> None:
        self.delivered.append((consumer.tag, tag, redelivered, bytes(message.body)))

    def returned(self, message) -> None:
        self.returns.append(bytes(message.body))

    def cancelled(self, consumer_tag) -> None:
        pass

    def stop(self) -> None:
        pass


class QuietChannel(BrokerChannel):
    """A broker channel without an adapter: confirms are counted, never written."""

    def _confirms_ready(self, confirms) -> None:
        pass
