"""A stream link reading another worker's stream (``--worker-mode queues``) with a property
filter: each message the filter refuses is settled unseen and gives the owner one more to send
(warren/protocol/amqp1_0/credit.py ``FarLinkCredit``). The owner is told once per write, with
the limit covering every miss so far, not once per miss: the adapter's session sink and
connection handler with stand-ins for the socket side and the other worker's link. Real clients
on real workers: tests/e2e/amqp1_0/test_workers.py."""

from __future__ import annotations

from warren.broker.message import Message
from warren.protocol.amqp1_0.adapter import ConnectionHandler, Outgoing, SessionSink
from warren.protocol.amqp1_0.credit import FarLinkCredit


class OtherWorkersLink:
    """What ``FarLinkCredit`` tells the worker holding the stream."""

    def __init__(self) -> None:
        self.told: list = []

    def tell(self, op: str, *args) -> None:
        self.told.append((op, *args))


class Io:
    def __init__(self) -> None:
        self.flushes_asked = 0

    def want_flush(self) -> None:
        self.flushes_asked += 1


class Core:
    """The sans-IO core's side the sink reads: the client's credit left on the link."""

    def __init__(self, credit: int) -> None:
        self.left = credit

    def credit(self, number: int, handle: int) -> int:
        return self.left


class Channel:
    def __init__(self, sink) -> None:
        self.sink = sink
        self.number = sink.number
        self.closed = False
        self.acked: list = []

    def ack_run(self, tags) -> None:
        self.acked.extend(tags)


class Consumer:
    tag = "ctag-1"

    def __init__(self, credit) -> None:
        self.credit = credit


class RefusesAll:
    def matches(self, properties, application, header=None, annotations=None) -> bool:
        return False


def handler_with_a_far_filtered_link(credit_left: int):
    handler = ConnectionHandler.__new__(ConnectionHandler)  # no broker: only the write-time hooks are used
    handler.conn, handler.io = Core(credit_left), Io()
    handler._paused, handler._confirming, handler._regrants = [], set(), {}
    sink = SessionSink(handler, 0)
    sink.channel = Channel(sink)
    other = OtherWorkersLink()
    consumer = Consumer(FarLinkCredit(other))
    link = Outgoing(0, consumer, "s", stream=True, match=RefusesAll())
    sink.links[consumer.tag] = link
    return handler, sink, consumer, other


def test_the_misses_of_one_batch_are_one_limit_at_the_next_write():
    handler, sink, consumer, other = handler_with_a_far_filtered_link(credit_left=5)
    for tag in range(1, 101):  # a hundred refused messages arrive in one batch
        sink.deliver(consumer, tag, False, Message("", "s", b"\x00\x00", b"blue"))
    assert sink.channel.acked == list(range(1, 101))  # each settled unseen, the stream's reader credited
    assert other.told == []  # nothing yet: told once the batch is written
    handler.before_flush()
    assert other.told == [("limit", 100 + 5)]  # the 100 used, and the client's 5 still to come
    handler.before_flush()
    assert other.told == [("limit", 105)]  # no new misses, nothing more to tell
    sink.deliver(consumer, 101, False, Message("", "s", b"\x00\x00", b"blue"))
    handler.before_flush()
    assert other.told[-1] == ("limit", 106)


def test_a_link_gone_before_the_write_is_not_told():
    handler, sink, consumer, other = handler_with_a_far_filtered_link(credit_left=5)
    sink.deliver(consumer, 1, False, Message("", "s", b"\x00\x00", b"blue"))
    del sink.links[consumer.tag]  # detached meanwhile
    handler.before_flush()
    assert other.told == []
