"""Events a sans-IO connection hands to the broker (all AMQP versions before 1.0).

Each is a small slotted class; the broker dispatches on its type. ``Method`` carries a decoded
method object from ``warren.spec``; ``Content`` is a content-bearing method (basic.publish)
together with its raw property list (encoded flags + properties, decoded lazily by whoever
needs them) and its body. ``Publishes`` is a run of basic.publish contents on one channel with
the same method (a publisher streaming to one exchange and routing key), handled as one event.
"""

from __future__ import annotations

__all__ = ["Method", "Content", "Publishes", "ChannelOpened", "ChannelClosed", "ConnectionClosed"]


class Method:
    __slots__ = ("channel", "method")

    def __init__(self, channel: int, method) -> None:
        self.channel = channel
        self.method = method

    def __repr__(self) -> str:
        return f"Method({self.channel}, {self.method!r})"


class Content:
    __slots__ = ("channel", "method", "properties", "body")

    def __init__(self, channel: int, method, properties: bytes, body) -> None:
        self.channel = channel
        self.method = method
        self.properties = properties  # the encoded property flags and list, not decoded
        self.body = body  # bytes or bytearray, never mutated after this point

    def __repr__(self) -> str:
        return f"Content({self.channel}, {self.method!r}, {len(self.body)} octets)"


class Publishes:
    """Consecutive basic.publish contents of one channel with the same method arguments: what
    as many ``Content`` events would carry, in order (``properties[i]`` goes with ``bodies[i]``;
    an equal property list is the same object). Only for a session that asked for runs
    (``ServerConnection.publish_runs``): one event instead of many is most of what a run saves."""

    __slots__ = ("channel", "method", "properties", "bodies")

    def __init__(self, channel: int, method, properties: list, bodies: list) -> None:
        self.channel = channel
        self.method = method
        self.properties = properties
        self.bodies = bodies

    def __repr__(self) -> str:
        return f"Publishes({self.channel}, {self.method!r}, {len(self.bodies)} messages)"


class Acks:
    """Consecutive basic.ack frames of one channel without ``multiple``: the delivery tags in
    order, as many basic.ack ``Method`` events would carry them (``warren/codec/acks.py``)."""

    __slots__ = ("channel", "tags")

    def __init__(self, channel: int, tags: list) -> None:
        self.channel = channel
        self.tags = tags

    def __repr__(self) -> str:
        return f"Acks({self.channel}, {len(self.tags)} tags)"


class ChannelOpened:
    __slots__ = ("channel",)

    def __init__(self, channel: int) -> None:
        self.channel = channel


class ChannelClosed:
    """The channel is gone: the peer closed it (reply_code from its close) or its close-ok came."""

    __slots__ = ("channel", "reply_code", "reply_text")

    def __init__(self, channel: int, reply_code: int = 200, reply_text: str = "") -> None:
        self.channel = channel
        self.reply_code = reply_code
        self.reply_text = reply_text


class ConnectionClosed:
    """The close handshake is over (either side started it): flush output, then close the socket."""

    __slots__ = ("reply_code", "reply_text")
    channel = 0  # the connection's own: what the handler reads of every event

    def __init__(self, reply_code: int = 200, reply_text: str = "") -> None:
        self.reply_code = reply_code
        self.reply_text = reply_text
