"""Names that are not UTF-8, in the 0-9-1 family's methods: a queue, exchange, routing key or
consumer tag whose octets are not UTF-8 is refused as RabbitMQ's parser refuses it, 501
``FRAME_ERROR - Malformed UTF-8 in shortstr``. The codec keeps such octets
(``surrogateescape``) so property lists round-trip; the check is here, on the methods that name
things, not on basic.publish (RabbitMQ does not check its routing key either). Length needs no
check: a shortstr holds at most 255 octets. The channel (``channel.py``) calls it before the
method reaches the broker."""

from __future__ import annotations

from warren.errors import FrameError
from warren.spec import amqp0_9_1 as spec

__all__ = ["NAMED_METHODS", "check_names"]


def _shortstr_fields() -> dict[int, tuple[str, ...]]:
    """{method INDEX: its shortstr fields} for the channel methods that name queues, exchanges,
    routing keys or consumer tags (basic.publish excepted: its fast path stays as it is)."""
    out = {}
    for name in dir(spec):
        cls = getattr(spec, name)
        fields = getattr(cls, "FIELDS", None)
        index = getattr(cls, "INDEX", None)
        if not fields or index is None or getattr(cls, "CLASS_ID", 0) in (10, 20):
            continue  # connection and channel class: no names of the broker's objects
        if cls is spec.BasicPublish:
            continue
        names = tuple(f for f, kind in fields if kind == "shortstr")
        if names:
            out[index] = names
    return out


NAMED_METHODS = _shortstr_fields()


def check_names(method) -> None:
    """501 if a name argument of ``method`` is not UTF-8 (RabbitMQ's parser's answer). A name
    decoded from bad octets holds lone surrogates (``surrogateescape``): ASCII, the usual
    case, is one ``isascii`` per name."""
    fields = NAMED_METHODS.get(method.INDEX)
    if fields is None:
        return
    for f in fields:
        value = getattr(method, f)
        if value.__class__ is str and not value.isascii():
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                raise FrameError("Malformed UTF-8 in shortstr") from None
