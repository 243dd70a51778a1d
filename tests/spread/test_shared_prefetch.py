"""warren/spread/shared_prefetch.py, the owner's side: a ``ProxyChannel`` under its consuming
channel's shared prefetch delivers only within the room lent to it, asks once when that alone
holds a consumer back, gives back what it could not use, and leaves the room an ack frees to the
lender. A real broker and queue; the link is a recorder. Both sides together, through pika
against two worker processes: tests/e2e/test_spread.py and tests/e2e/test_basic.py."""

from __future__ import annotations

from warren.broker.broker import Broker
from warren.broker.connection import BrokerConnection
from warren.broker.durability import Durability
from warren.spread.proxy import PeerSink, ProxyChannel, ProxySession

from tests.broker.helpers import QuietChannel, RecordingSink

PLAIN = b"\x00\x00"
SESSION, NUMBER = 11, 7  # the consuming worker's connection and channel


class Link:
    """What the owner says to the consuming worker (worker 0), recorded."""

    def __init__(self, broker) -> None:
        self.broker = broker
        self.told: list[tuple] = []
        self.delivered: list[tuple] = []  # (consumer tag, owner's delivery tag or None, body)

    def tell(self, peer: int, op: str, *args) -> None:
        assert peer == 0
        self.told.append((op, *args))

    def send_delivery(self, worker: int, item: tuple) -> None:
        self.delivered.append((item[2], item[3], item[8]))


def owner(tmp_path):
    """(link, the owner's proxy of the remote channel, a local channel that publishes to "q")."""
    broker = Broker(durability=Durability(tmp_path / "owner", fsync=False))
    conn = BrokerConnection(broker, ("127.0.0.1", 1), None)
    conn.username = "guest"
    conn.open_vhost("/")
    publisher = QuietChannel(conn, 1, RecordingSink())
    conn.channels[1] = publisher
    publisher.declare_queue("q", False, False, False, False, {})
    link = Link(broker)
    session = ProxySession(link, 0, SESSION, broker.vhosts["/"])
    sink = PeerSink(link, 0, SESSION, NUMBER)
    proxy = session.channels[NUMBER] = ProxyChannel(session, NUMBER, sink)
    sink.channel = proxy
    return link, proxy, publisher


def publish(ch, n: int) -> None:
    for i in range(n):
        ch.publish("", "q", PLAIN, b"m%d" % i, False)


def consuming(proxy, channel_count: int, no_ack: bool = False):
    proxy.set_limits(0, 0, channel_count, 0)
    c = proxy.consume("q", "c1", no_ack, False, {})
    proxy.start_consumer(c)
    return c


def test_nothing_goes_out_before_room_is_lent_and_the_owner_asks_once(tmp_path):
    link, proxy, publisher = owner(tmp_path)
    consuming(proxy, 3)
    publish(publisher, 5)
    assert link.delivered == []
    assert link.told == [("want", SESSION, NUMBER)]  # once, however many messages wait


def test_a_grant_is_used_up_to_what_the_queue_has_and_the_rest_given_back(tmp_path):
    link, proxy, publisher = owner(tmp_path)
    consuming(proxy, 3)
    publish(publisher, 5)
    proxy.grant(2)
    assert [tag for _, tag, _ in link.delivered] == [1, 2]
    # all of it used, nothing to give back; three still wait: it asks again
    assert link.told == [("want", SESSION, NUMBER)] * 2
    proxy.grant(3)
    assert len(link.delivered) == 5
    assert link.told == [("want", SESSION, NUMBER)] * 2
    proxy.grant(2)  # the queue is empty now
    assert len(link.delivered) == 5
    assert link.told[-1] == ("return", SESSION, NUMBER, 2)
    assert proxy.prefetch_count - proxy.consumer_unacked == 0  # it holds no room it does not use


def test_an_ack_frees_no_room_on_the_owner_the_room_is_the_lenders(tmp_path):
    link, proxy, publisher = owner(tmp_path)
    consuming(proxy, 3)
    publish(publisher, 4)
    proxy.grant(3)
    assert len(link.delivered) == 3
    assert link.told == [("want", SESSION, NUMBER)] * 2  # the fourth waits: asked for room
    proxy.ack(1, False)
    assert len(link.delivered) == 3  # the room the ack freed is the lender's to give
    assert link.told == [("want", SESSION, NUMBER)] * 2  # (asked already)
    proxy.grant(1)
    assert [body for _, _, body in link.delivered] == [b"m0", b"m1", b"m2", b"m3"]


def test_without_a_shared_count_the_owner_counts_its_own_deliveries_again(tmp_path):
    link, proxy, publisher = owner(tmp_path)
    consuming(proxy, 3)
    publish(publisher, 6)
    proxy.grant(2)
    proxy.set_limits(0, 0, 0, 0)  # the consuming channel's basic.qos global 0
    proxy.resume_delivery()
    assert len(link.delivered) == 6
    assert proxy.consumer_unacked == 6 and not proxy.shared
    proxy.set_limits(0, 0, 4, 0)  # and a shared count again: no room until lent
    publish(publisher, 1)
    assert len(link.delivered) == 6
    assert link.told[-1] == ("want", SESSION, NUMBER)


def test_room_lent_after_the_count_was_dropped_goes_straight_back(tmp_path):
    link, proxy, publisher = owner(tmp_path)
    consuming(proxy, 0)
    proxy.grant(4)
    assert link.told == [("return", SESSION, NUMBER, 4)]


def test_a_no_ack_consumer_is_not_held_by_the_shared_count(tmp_path):
    link, proxy, publisher = owner(tmp_path)
    consuming(proxy, 2, no_ack=True)
    publish(publisher, 5)
    assert [(tag, body) for _, tag, body in link.delivered] == [(None, b"m%d" % i) for i in range(5)]
    assert link.told == []


def test_a_consumer_held_by_its_own_prefetch_does_not_ask_for_room(tmp_path):
    link, proxy, publisher = owner(tmp_path)
    proxy.set_limits(1, 0, 3, 0)  # one unacked per consumer, three for the channel
    c = proxy.consume("q", "c1", False, False, {})
    proxy.start_consumer(c)
    publish(publisher, 3)
    assert link.told == [("want", SESSION, NUMBER)]
    proxy.grant(3)
    assert len(link.delivered) == 1  # its own limit, not the room, holds the rest
    assert link.told == [("want", SESSION, NUMBER), ("return", SESSION, NUMBER, 2)]
