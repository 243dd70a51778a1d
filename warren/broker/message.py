"""A published message as the broker keeps it.

The property list stays encoded exactly as the publisher sent it and is written back to
consumers unchanged; it is decoded only when something needs a property (headers for the
headers exchange, delivery-mode for persistence, expiration for TTL). The exchange and
routing key are kept shortstr-encoded as well, ready for basic.deliver.
"""

from __future__ import annotations

import struct

from warren.codec.fields import encode_shortstr
from warren.errors import PreconditionFailed, SyntaxError_
from warren.spec.amqp0_9_1 import BasicProperties
from warren.store.message import encode_message

__all__ = ["Message"]


class Message:
    __slots__ = ("exchange", "routing_key", "properties", "body", "_decoded", "exchange_ss", "routing_key_ss",
                 "ttl", "persistent", "_record")

    def __init__(self, exchange: str, routing_key: str, properties: bytes, body) -> None:
        self.exchange = exchange
        self.routing_key = routing_key
        self.properties = properties  # encoded flags + property list
        self.body = body
        self._decoded: BasicProperties | None = None
        self.exchange_ss = encode_shortstr(exchange)
        self.routing_key_ss = encode_shortstr(routing_key)
        self.ttl: float | None = None  # seconds, from the expiration property (check_expiration)
        # delivery-mode is the 4th property (flag 0x1000); decode only when it is present
        self.persistent = (len(properties) >= 2 and bool(properties[0] & 0x10)
                           and self.decoded.delivery_mode == 2)
        self._record: bytes | None = None

    @property
    def record(self) -> bytes:
        """The message as a store record (encoded once, shared by every queue it goes to)."""
        r = self._record
        if r is None:
            r = self._record = encode_message(self.exchange, self.routing_key, self.properties, bytes(self.body))
        return r

    def check_expiration(self) -> None:
        """Parse the expiration property (a decimal string of milliseconds); 406 if invalid."""
        exp = self.decoded.expiration
        if exp is None:
            return
        if not exp.isdigit() or not exp.isascii():
            raise PreconditionFailed(f"invalid expiration '{exp}'")
        self.ttl = int(exp) / 1000

    @property
    def decoded(self) -> BasicProperties:
        """The decoded basic properties (cached; raises on a malformed property list)."""
        p = self._decoded
        if p is None:
            if self.properties:
                try:
                    p, _ = BasicProperties.decode(self.properties, 0)
                except (IndexError, ValueError, struct.error, RecursionError, OverflowError) as e:
                    raise SyntaxError_(f"malformed content properties: {e}", 60, 40) from None
            else:
                p = BasicProperties()
            self._decoded = p
        return p

    @property
    def headers(self) -> dict:
        return self.decoded.headers or {}

    def __len__(self) -> int:
        return len(self.body)

    def __repr__(self) -> str:
        return f"<Message {self.exchange!r}/{self.routing_key!r} {len(self.body)} octets>"
