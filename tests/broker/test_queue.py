"""Queue's fast paths for a lone consumer (``Queue.publish``'s plain enqueue, which asks a full
consumer instead of calling dispatch, and dispatch's short loop) against the general paths
they shortcut: the same operations give the same deliveries, in the same order, with the same
flags, the same dead letters and the same ready messages. The general paths are forced by
clearing the two flags the fast paths test (``plain_enqueue``, ``_plain``: a queue without
them dispatches through ``_pick``, which gives a lone consumer of priority 0 the same turns).
End to end through real sockets: tests/e2e/test_consumers.py, test_ttl.py, test_flow.py."""

from __future__ import annotations

from hypothesis import given, settings, strategies as st

from warren.broker.broker import Broker
from warren.broker.connection import BrokerConnection
from warren.broker.durability import Durability

from .helpers import QuietChannel, RecordingSink

PLAIN = b"\x00\x00"
EXPIRES_NOW = b"\x01\x00\x010"  # expiration "0": dropped unless a consumer can take it at once
EXPIRES_LATER = b"\x01\x00\x06600000"  # ten minutes: still there when the test ends


def world(tmp_path, name: str, fast: bool, prefetch: int, dlx: bool, channel_prefetch: int = 0):
    broker = Broker(durability=Durability(tmp_path / name, fsync=False))
    conn = BrokerConnection(broker, ("127.0.0.1", 1), None)
    conn.username = "guest"
    conn.open_vhost("/")
    ch = QuietChannel(conn, 1, RecordingSink())
    conn.channels[1] = ch
    args = {"x-dead-letter-exchange": "", "x-dead-letter-routing-key": "dead"} if dlx else {}
    ch.declare_queue("q", False, False, False, False, args)
    ch.declare_queue("dead", False, False, False, False, {})
    ch.set_prefetch(prefetch, 0, False)
    ch.set_prefetch(channel_prefetch, 0, True)  # the channel's shared limit (0: none)
    q = broker.vhosts["/"].queues["q"]
    consumer = ch.consume("q", "c1", False, False, {})
    ch.start_consumer(consumer)
    if not fast:
        q.plain_enqueue = False
        q._plain = False
    return broker, ch, q


def outcome(broker, ch) -> tuple:
    queues = broker.vhosts["/"].queues
    return (ch.sink.delivered, [(e[0], bytes(e[1].body), e[2]) for e in queues["q"].ready], queues["q"].ready_bytes,
            [bytes(e[1].body) for e in queues["dead"].ready], sorted(ch.unacked))


operations = st.lists(st.one_of(
    st.tuples(st.just("publish"), st.sampled_from([PLAIN, PLAIN, EXPIRES_NOW, EXPIRES_LATER])),
    st.tuples(st.just("ack"), st.integers(1, 3)),
    st.tuples(st.just("requeue"), st.integers(1, 2)),
), min_size=1, max_size=40)


@settings(max_examples=80, deadline=None)
@given(operations, st.integers(0, 4), st.booleans(), st.sampled_from([0, 0, 2, 5]))
def test_a_lone_consumer_is_served_as_the_general_paths_serve_it(tmp_path_factory, ops, prefetch, dlx, shared):
    tmp = tmp_path_factory.mktemp("dispatch")
    worlds = [world(tmp, "fast", True, prefetch, dlx, shared), world(tmp, "general", False, prefetch, dlx, shared)]
    for n, (op, arg) in enumerate(ops):
        for broker, ch, q in worlds:
            if op == "publish":
                ch.publish("", "q", arg, b"m%d" % n, False)
            elif op == "ack":
                for tag in list(ch.unacked)[:arg]:
                    ch.ack(tag, False)
            else:  # basic.nack with requeue of the oldest deliveries: back at the head, redelivered
                for tag in list(ch.unacked)[:arg]:
                    ch.reject(tag, False, True)
    (fast_broker, fast, _), (general_broker, general, _) = worlds
    assert outcome(fast_broker, fast) == outcome(general_broker, general)


def test_a_full_consumer_gets_the_backlog_as_it_acks(tmp_path):
    """The plain enqueue leaves a message queued when the lone consumer's window is full (no
    dispatch call): each ack then brings the next one, in order, until the queue is empty."""
    broker, ch, q = world(tmp_path, "full", True, 2, False)
    for i in range(5):
        ch.publish("", "q", PLAIN, b"%d" % i, False)
    assert [d[3] for d in ch.sink.delivered] == [b"0", b"1"] and len(q.ready) == 3
    while ch.unacked:
        ch.ack(next(iter(ch.unacked)), False)
    assert [d[3] for d in ch.sink.delivered] == [b"0", b"1", b"2", b"3", b"4"]
    assert not q.ready and q.ready_bytes == 0


def test_the_channel_s_shared_prefetch_bounds_a_lone_consumer_s_window(tmp_path):
    """basic.qos global=true (the channel's limit) with no limit of the consumer's own: an ack
    frees one delivery, not the whole backlog (Consumer.window takes the lower of the two)."""
    broker, ch, q = world(tmp_path, "shared", True, 0, False, 2)
    for i in range(5):
        ch.publish("", "q", PLAIN, b"%d" % i, False)
    assert len(ch.sink.delivered) == 2
    ch.ack(next(iter(ch.unacked)), False)
    assert [d[3] for d in ch.sink.delivered] == [b"0", b"1", b"2"] and len(q.ready) == 2
    ch.set_prefetch(0, 0, True)
    q.dispatch()  # the adapter offers new room after basic.qos-ok (resume_delivery)
    assert len(ch.sink.delivered) == 5 and not q.ready
