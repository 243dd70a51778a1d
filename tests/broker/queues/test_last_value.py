"""Last-value queues (warren.broker.queues.last_value) on the model."""

from __future__ import annotations

from warren.broker.queue import Queue

from warren.broker.queues.length_limits import REFUSED
from warren.broker.queues.factory import new_queue, queue_class
from warren.broker.queues.last_value import LastValueQueue
from warren.broker.vhost import VirtualHost

from .helpers import consumer, delivered, drain, msg

KEY = {"qpid.last_value_queue_key": "lvq-key"}


def lvq(extra: dict | None = None) -> LastValueQueue:
    return new_queue(VirtualHost("/"), "lvq", arguments={**KEY, **(extra or {})})


def send(q, key, body: str):
    return q.publish(msg(body, headers=None if key is None else {"lvq-key": key}))


def bodies(q) -> list[str]:
    return [e[1].body.decode() for e in q.ready]


def test_the_factory_picks_a_last_value_queue_for_its_key_and_the_legacy_forms():
    assert queue_class(dict(KEY)) is LastValueQueue
    assert queue_class({"qpid.last_value_queue": 1}) is LastValueQueue
    assert lvq().key_header == "lvq-key"
    legacy = new_queue(VirtualHost("/"), "old", arguments={"qpid.last_value_queue": True})
    assert legacy.key_header == "qpid.LVQ_key"
    assert queue_class({"qpid.last_value_queue": 0}) is Queue


def test_a_new_value_replaces_the_ready_one_and_goes_to_the_tail():
    """Qpid's lvq test_simple, as the queue holds it."""
    q = lvq()
    for key, body in [("a", "a-1"), ("b", "b-1"), ("a", "a-2"), ("a", "a-3"), ("c", "c-1"), ("c", "c-2")]:
        send(q, key, body)
    assert bodies(q) == ["b-1", "a-3", "c-2"]
    send(q, "b", "b-2")
    send(q, "d", "d-1")
    assert bodies(q) == ["a-3", "c-2", "b-2", "d-1"]
    assert [e[0] for e in q.ready] == sorted(e[0] for e in q.ready)  # still in seq order (browsing)
    assert q.replaced == 4 and q.ready_bytes == sum(len(e[1].body) for e in q.ready)


def test_keys_compare_as_strings_and_messages_without_the_header_share_the_empty_key():
    q = lvq()
    send(q, 3, "int")
    send(q, "3", "str")
    send(q, None, "none-1")
    send(q, None, "none-2")
    assert bodies(q) == ["str", "none-2"]


def test_a_taken_message_is_not_replaced_and_the_newer_value_wins_when_it_returns():
    q = lvq()
    send(q, "a", "a-1")
    c = consumer(q, "c", prefetch=1)
    assert c.channel.bodies() == ["a-1"]
    q.remove_consumer(c)
    send(q, "a", "a-2")  # a-1 is taken: a-2 is simply enqueued
    assert bodies(q) == ["a-2"]
    seq, m = delivered(c)[0]
    q.requeue([(seq, m)])  # a-1 comes back, but a newer value is ready: it is replaced
    assert bodies(q) == ["a-2"]
    taken = q.take()  # a-2 taken; a-3 published; a-2 comes back older than a-3: dropped
    send(q, "a", "a-3")
    q.requeue([(taken[0], taken[1])])
    assert bodies(q) == ["a-3"]


def test_a_returning_value_newer_than_the_ready_one_replaces_it():
    q = lvq()
    send(q, "a", "a-1")
    first = q.take()
    send(q, "a", "a-2")
    second = q.take()
    send(q, "a", "a-3")  # a-1 and a-2 are taken: a-3 is simply enqueued
    assert bodies(q) == ["a-3"]
    q.requeue([(first[0], first[1]), (second[0], second[1])])  # both older than a-3: dropped
    assert bodies(q) == ["a-3"]
    third = q.take()
    send(q, "b", "b-1")
    q.requeue([(third[0], third[1])])
    assert bodies(q) == ["a-3", "b-1"]
    send(q, "a", "a-4")
    assert bodies(q) == ["b-1", "a-4"]  # the returned a-3 was indexed again, and replaced


def test_a_ring_limit_replaces_before_it_counts():
    q = lvq({"qpid.max_count": 3, "qpid.policy_type": "ring"})
    for key, body in [("a", "a-1"), ("b", "b-1"), ("c", "c-1"), ("a", "a-2"), ("b", "b-2")]:
        send(q, key, body)
    assert bodies(q) == ["c-1", "a-2", "b-2"]  # no other key's value dropped to make room
    send(q, "d", "d-1")
    assert bodies(q) == ["a-2", "b-2", "d-1"]  # a new key: the oldest goes (ring)


def test_reject_publish_accepts_a_replacement_at_the_limit_and_keeps_the_old_value_when_refused():
    q = lvq({"qpid.max_count": 2})  # no policy type: Qpid rejects
    send(q, "a", "a-1")
    send(q, "b", "b-1")
    assert send(q, "c", "c-1") == REFUSED
    send(q, "a", "a-2")
    assert bodies(q) == ["b-1", "a-2"]
    big = lvq({"x-max-length-bytes": 6, "x-overflow": "reject-publish"})
    send(big, "a", "a-1")
    assert send(big, "a", "a-2-too-long") == REFUSED
    assert bodies(big) == ["a-1"]  # back in its place, and still the value of "a"
    send(big, "a", "a-3")
    assert bodies(big) == ["a-3"]


def test_recovery_keeps_the_newest_of_a_key():
    q = lvq()
    for seq, (key, body) in enumerate([("a", "a-1"), ("b", "b-1"), ("a", "a-2")], start=1):
        q.restore(seq, msg(body, headers={"lvq-key": key}), False)  # a crash left a-1 behind
    q.resume_numbering(3)
    assert bodies(q) == ["b-1", "a-2"]
    send(q, "b", "b-2")
    assert bodies(q) == ["a-2", "b-2"] and drain(q) == ["a-2", "b-2"]


def test_purge_forgets_the_keys():
    q = lvq()
    send(q, "a", "a-1")
    assert q.purge() == 1
    send(q, "a", "a-2")
    assert bodies(q) == ["a-2"] and q._latest == {"a": q.ready[0][0]}
