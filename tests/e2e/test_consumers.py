"""Single active consumer (x-single-active-consumer) and consumer priorities (x-priority) with
pika; RabbitMQ is the reference.

SAC consumers each get their own connection, as the applications that use SAC do: the first
consumer registered is the active one, the next one registered takes over when it cancels or its
connection goes (consumer priorities do not choose the active consumer in RabbitMQ 3.10).
"""

from __future__ import annotations

import time

import pytest
from pika.exceptions import ChannelClosedByBroker

from .helpers import PRECONDITION_FAILED, connect, make_queue, passive_counts

pytestmark = pytest.mark.timeout(60)


class Consumer:
    """One pika connection consuming one queue; records (body, redelivered) and acks as told."""

    def __init__(self, broker, queue: str, tag: str, prefetch: int = 0, ack: bool = True, **arguments):
        self.conn = connect(broker)
        self.ch = self.conn.channel()
        self.tag = tag
        self.got: list[tuple[bytes, bool]] = []
        self.held: list[int] = []
        self.ack = ack
        self.prefetch = prefetch
        if prefetch:
            self.ch.basic_qos(prefetch_count=prefetch)
        self.ch.basic_consume(queue, self._on_message, consumer_tag=tag, arguments=arguments or None)

    def _on_message(self, ch, method, props, body):
        self.got.append((body, method.redelivered))
        if self.ack:
            ch.basic_ack(method.delivery_tag)
        else:
            self.held.append(method.delivery_tag)

    @property
    def bodies(self) -> list[bytes]:
        return [b for b, _ in self.got]

    def pump(self, seconds: float = 0.05) -> None:
        if self.conn.is_open:
            self.conn.process_data_events(seconds)

    def ack_held(self) -> None:
        for tag in self.held:
            self.ch.basic_ack(tag)
        self.held.clear()
        # basic.ack has no reply: a synchronous method on the same channel returns only after the
        # broker has taken the acks, so a publish on another connection cannot overtake them.
        self.ch.basic_qos(prefetch_count=self.prefetch)

    def close(self) -> None:
        if self.conn.is_open:
            self.conn.close()


@pytest.fixture
def consumers(broker):
    made: list[Consumer] = []

    def make(queue: str, tag: str, **kw) -> Consumer:
        c = Consumer(broker, queue, tag, **kw)
        made.append(c)
        return c

    yield make
    for c in made:
        c.close()


def pump_all(cs, until=lambda: False, seconds: float = 0.5) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not until():
        for c in cs:
            c.pump(0.02)


# --------------------------------------------------------------------------- single active consumer


def sac_queue(ch, cleanup, uid: str, name: str) -> str:
    return make_queue(ch, cleanup, f"sac-{name}-{uid}", arguments={"x-single-active-consumer": True})


def test_only_the_first_consumer_receives_and_declare_ok_counts_them_all(conn, ch, cleanup, uid, consumers):
    q = sac_queue(ch, cleanup, uid, "first")
    a, b = consumers(q, "a"), consumers(q, "b")
    for i in range(6):
        ch.basic_publish("", q, f"m{i}".encode())
    pump_all([a, b], until=lambda: len(a.got) == 6, seconds=3)
    pump_all([a, b], seconds=0.2)
    assert a.bodies == [f"m{i}".encode() for i in range(6)]
    assert b.got == []
    assert passive_counts(conn, q) == (0, 2)


def test_the_next_consumer_takes_over_when_the_active_one_cancels(ch, cleanup, uid, consumers):
    q = sac_queue(ch, cleanup, uid, "cancel")
    a, b, c = consumers(q, "a"), consumers(q, "b"), consumers(q, "c")
    ch.basic_publish("", q, b"1")
    pump_all([a, b, c], until=lambda: a.got, seconds=3)
    a.ch.basic_cancel("a")
    ch.basic_publish("", q, b"2")
    pump_all([a, b, c], until=lambda: b.got, seconds=3)
    b.ch.basic_cancel("b")
    ch.basic_publish("", q, b"3")
    pump_all([a, b, c], until=lambda: c.got, seconds=3)
    assert (a.bodies, b.bodies, c.bodies) == ([b"1"], [b"2"], [b"3"])


def test_unacked_messages_of_a_closed_active_consumer_go_to_the_next_one(ch, cleanup, uid, consumers):
    q = sac_queue(ch, cleanup, uid, "close")
    a = consumers(q, "a", ack=False)
    b = consumers(q, "b")
    for i in range(3):
        ch.basic_publish("", q, f"m{i}".encode())
    pump_all([a, b], until=lambda: len(a.got) == 3, seconds=3)
    assert a.bodies == [b"m0", b"m1", b"m2"] and b.got == []
    a.close()  # its connection goes: the three come back, b becomes active
    ch.basic_publish("", q, b"m3")
    pump_all([b], until=lambda: len(b.got) == 4, seconds=3)
    assert b.got == [(b"m0", True), (b"m1", True), (b"m2", True), (b"m3", False)]


def test_the_active_consumer_keeps_the_messages_while_it_is_at_its_prefetch_limit(ch, cleanup, uid, consumers):
    q = sac_queue(ch, cleanup, uid, "full")
    a = consumers(q, "a", prefetch=1, ack=False)
    b = consumers(q, "b")
    for i in range(3):
        ch.basic_publish("", q, f"m{i}".encode())
    pump_all([a, b], seconds=0.5)
    assert a.bodies == [b"m0"] and b.got == []  # b never gets anything while a is active
    a.ack = True
    a.ack_held()
    pump_all([a, b], until=lambda: len(a.got) == 3, seconds=3)
    assert a.bodies == [b"m0", b"m1", b"m2"] and b.got == []


def test_consumer_priorities_do_not_choose_the_active_consumer(ch, cleanup, uid, consumers):
    q = sac_queue(ch, cleanup, uid, "prio")
    a = consumers(q, "a", **{"x-priority": 1})
    b = consumers(q, "b", **{"x-priority": 10})
    ch.basic_publish("", q, b"x")
    pump_all([a, b], until=lambda: a.got or b.got, seconds=3)
    pump_all([a, b], seconds=0.2)
    assert (a.bodies, b.bodies) == ([b"x"], [])


@pytest.mark.parametrize("value", ["yes", 1])
def test_a_single_active_consumer_argument_that_is_not_a_boolean_is_refused(ch, uid, value):
    with pytest.raises(ChannelClosedByBroker) as ei:
        ch.queue_declare(f"sac-bad-{uid}", arguments={"x-single-active-consumer": value})
    assert ei.value.reply_code == PRECONDITION_FAILED


def test_single_active_consumer_false_is_an_ordinary_queue(ch, cleanup, uid, consumers):
    q = make_queue(ch, cleanup, f"sac-off-{uid}", arguments={"x-single-active-consumer": False})
    a, b = consumers(q, "a"), consumers(q, "b")
    for i in range(4):
        ch.basic_publish("", q, f"m{i}".encode())
    pump_all([a, b], until=lambda: len(a.got) + len(b.got) == 4, seconds=3)
    assert len(a.got) == 2 and len(b.got) == 2


# --------------------------------------------------------------------------- consumer priorities


def test_a_higher_priority_consumer_gets_everything_while_it_has_capacity(ch, cleanup, uid, consumers):
    q = make_queue(ch, cleanup, f"cp-all-{uid}")
    low = consumers(q, "low", **{"x-priority": 1})
    high = consumers(q, "high", **{"x-priority": 5})
    for i in range(10):
        ch.basic_publish("", q, f"m{i}".encode())
    pump_all([low, high], until=lambda: len(high.got) == 10, seconds=3)
    assert len(high.got) == 10 and low.got == []


def test_lower_priority_consumers_get_messages_only_when_higher_ones_are_blocked(ch, cleanup, uid, consumers):
    q = make_queue(ch, cleanup, f"cp-blocked-{uid}")
    high = consumers(q, "high", prefetch=2, ack=False, **{"x-priority": 10})
    low = consumers(q, "low", **{"x-priority": -5})
    for i in range(5):
        ch.basic_publish("", q, f"m{i}".encode())
    pump_all([high, low], until=lambda: len(high.got) + len(low.got) == 5, seconds=3)
    assert high.bodies == [b"m0", b"m1"]
    assert low.bodies == [b"m2", b"m3", b"m4"]
    high.ack = True
    high.ack_held()  # capacity again: new messages go to the higher priority
    ch.basic_publish("", q, b"m5")
    pump_all([high, low], until=lambda: len(high.got) == 3, seconds=3)
    assert high.bodies[-1] == b"m5" and len(low.got) == 3


def test_consumers_of_equal_priority_share_round_robin(ch, cleanup, uid, consumers):
    q = make_queue(ch, cleanup, f"cp-rr-{uid}")
    a = consumers(q, "a", **{"x-priority": 3})
    b = consumers(q, "b", **{"x-priority": 3})
    c = consumers(q, "c", **{"x-priority": 0})
    for i in range(6):
        ch.basic_publish("", q, f"m{i}".encode())
    pump_all([a, b, c], until=lambda: len(a.got) + len(b.got) == 6, seconds=3)
    assert len(a.got) == 3 and len(b.got) == 3 and c.got == []


def test_when_the_high_priority_consumer_cancels_the_lower_one_takes_the_backlog(ch, cleanup, uid, consumers):
    q = make_queue(ch, cleanup, f"cp-cancel-{uid}")
    high = consumers(q, "high", prefetch=1, ack=False, **{"x-priority": 2})
    low = consumers(q, "low", prefetch=1, ack=False, **{"x-priority": 1})
    for i in range(4):
        ch.basic_publish("", q, f"m{i}".encode())
    pump_all([high, low], until=lambda: high.got and low.got, seconds=3)
    assert high.bodies == [b"m0"] and low.bodies == [b"m1"]
    high.close()  # m0 comes back; low takes it after its own
    low.ack = True
    low.ack_held()
    pump_all([low], until=lambda: len(low.got) == 4, seconds=3)
    assert low.bodies == [b"m1", b"m0", b"m2", b"m3"]


@pytest.mark.parametrize("value", ["high", True])
def test_a_consumer_priority_that_is_not_an_integer_is_refused_with_406(ch, cleanup, uid, value):
    q = make_queue(ch, cleanup, f"cp-bad-{uid}")
    with pytest.raises(ChannelClosedByBroker) as ei:
        ch.basic_consume(q, lambda *a: None, arguments={"x-priority": value})
    assert ei.value.reply_code == PRECONDITION_FAILED
