"""Message groups (warren.broker.queues.message_groups) on the model: who may take what."""

from __future__ import annotations

import time

from warren.broker.queue import Queue
from warren.broker.queues.factory import queue_class
from warren.broker.queues.message_groups import GroupQueue
from warren.broker.vhost import VirtualHost

from .helpers import consumer, delivered, drain, msg, settle

ARGS = {"qpid.group_header_key": "THE-GROUP", "qpid.shared_msg_group": 1}


def group_queue(*groups: str | None) -> GroupQueue:
    q = GroupQueue(VirtualHost("/"), "g", arguments=dict(ARGS))
    for i, g in enumerate(groups):
        q.publish(msg(f"{g}-{i}", headers=None if g is None else {"THE-GROUP": g}))
    return q


def test_the_factory_picks_a_group_queue_for_a_group_header():
    assert queue_class(dict(ARGS)) is GroupQueue
    assert queue_class({"qpid.group_header_key": "k"}) is GroupQueue  # sticky flag absent: same semantics
    assert queue_class({"qpid.shared_msg_group": 1}) is Queue


def test_two_consumers_share_groups_one_owner_at_a_time():
    """Qpid's msg_groups test_simple, step by step (prefetch 1 = one fetch at a time)."""
    q = group_queue(*"AAABBBCCC")
    c1 = consumer(q, "c1", prefetch=1)
    c2 = consumer(q, "c2", prefetch=1)
    assert c1.channel.bodies("c1") == ["A-0"] and c2.channel.bodies("c2") == ["B-3"]
    settle(q, c1, "A-0")  # A free: c1 is offered the next message it may take
    assert c1.channel.bodies("c1")[-1] == "A-1"
    assert q.owner_of("A") is c1 and q.owner_of("B") is c2 and q.owner_of("C") is None
    settle(q, c2, "B-3")  # B free: c2 may not take A (c1's), so B-4
    assert c2.channel.bodies("c2")[-1] == "B-4"
    settle(q, c1, "A-1")
    assert c1.channel.bodies("c1")[-1] == "A-2"
    settle(q, c2, "B-4")
    assert c2.channel.bodies("c2")[-1] == "B-5"
    settle(q, c1, "A-2")  # A done; B is c2's: c1 takes C
    assert c1.channel.bodies("c1")[-1] == "C-6"
    settle(q, c2, "B-5")  # c2 may not take C (c1's): nothing
    assert c2.channel.bodies("c2")[-1] == "B-5" and len(q.ready) == 2
    assert q.owner_of("B") is None


def test_a_consumer_with_room_skips_the_groups_others_own():
    q = group_queue("A", "A", "B", "A", "C")
    c1 = consumer(q, "c1", prefetch=10)
    assert c1.channel.bodies() == ["A-0", "A-1", "B-2", "A-3", "C-4"]  # all free or its own
    q2 = group_queue("A", "A", "B", "A", "C")
    a = consumer(q2, "a", prefetch=1)
    b = consumer(q2, "b", prefetch=10)
    assert a.channel.bodies("a") == ["A-0"] and b.channel.bodies("b") == ["B-2", "C-4"]
    assert [e[1].body for e in q2.ready] == [b"A-1", b"A-3"]


def test_messages_without_the_header_are_one_default_group():
    q = group_queue(None, None, "X")
    c1 = consumer(q, "c1", prefetch=1)
    c2 = consumer(q, "c2", prefetch=5)
    assert c1.channel.bodies("c1") == ["None-0"] and c2.channel.bodies("c2") == ["X-2"]
    assert q.owner_of("qpid.no-group") is c1


def test_requeue_and_reject_free_the_group_and_requeue_keeps_the_place():
    q = group_queue("A", "A", "B", "B")
    c1 = consumer(q, "c1", prefetch=1)
    c2 = consumer(q, "c2", prefetch=1)
    assert (c1.channel.bodies("c1"), c2.channel.bodies("c2")) == (["A-0"], ["B-2"])
    c1.unacked -= 1  # c1 releases A-0 while it has no room: c2 gets A once B is settled
    seq, m = delivered(c1)[0]
    c1.prefetch_count = 0
    c1.has_capacity = lambda: False
    q.requeue([(seq, m)])
    assert q.owner_of("A") is None and [e[1].body for e in q.ready][:1] == [b"A-0"]
    settle(q, c2, "B-2", "reject")  # rejected: gone, and B is free
    assert c2.channel.bodies("c2")[-1] == "A-0"  # the requeued message, in its place


def test_a_cancelled_consumer_keeps_its_groups_until_its_messages_are_settled():
    q = group_queue("A", "A", "B", "B")
    c1 = consumer(q, "c1", prefetch=1)
    c2 = consumer(q, "c2", prefetch=1)
    q.remove_consumer(c1)  # cancelled; its delivery A-0 is still unacked on its channel
    settle(q, c2, "B-2")
    assert c2.channel.bodies("c2") == ["B-2", "B-3"]
    settle(q, c2, "B-3")
    assert c2.channel.bodies("c2") == ["B-2", "B-3"]  # A is still c1's
    seq, m = delivered(c1)[0]
    q.requeue([(seq, m)])  # its channel closed: requeued
    assert c2.channel.bodies("c2")[-1] == "A-0"


def test_basic_get_takes_from_free_groups_only_and_holds_the_group():
    q = group_queue("A", "A", "B")
    first = q.take()
    assert first[1].body == b"A-0"
    second = q.take()
    assert second[1].body == b"B-2"  # A is held by the first get, even for the same getter
    assert q.take() is None
    q.forget(first[0], first[1])  # acked
    assert q.take(no_ack=True)[1].body == b"A-1"


def test_a_consumer_without_acks_holds_no_group():
    q = group_queue("A", "A", "B")
    consumer(q, "auto", prefetch=0, no_ack=True)
    assert q.owner_of("A") is None and not q.ready


def test_expired_messages_are_skipped_wherever_they_are():
    q = GroupQueue(VirtualHost("/"), "g", arguments=dict(ARGS))
    for i, (g, exp) in enumerate([("A", None), ("B", "1"), ("C", None), ("A", None), ("B", "1"), ("C", None)]):
        q.publish(msg(f"{g}-{i}", headers={"THE-GROUP": g}, expiration=exp))
    time.sleep(0.01)
    c1 = consumer(q, "c1", prefetch=1)
    c2 = consumer(q, "c2", prefetch=1)
    assert c1.channel.bodies("c1") == ["A-0"] and c2.channel.bodies("c2") == ["C-2"]
    settle(q, c1, "A-0")
    settle(q, c2, "C-2")
    assert c1.channel.bodies("c1")[-1] == "A-3" and c2.channel.bodies("c2")[-1] == "C-5"
    assert not q.ready  # both B's expired on the way


def test_take_seq_acquires_only_from_a_free_group():
    q = group_queue("A", "A")
    seqs = [e[0] for e in q.ready]
    assert q.take_seq(seqs[0]) is not None
    assert q.take_seq(seqs[1]) is None  # A is held by the first acquire
    assert drain(q) == []  # and a get cannot take it either
