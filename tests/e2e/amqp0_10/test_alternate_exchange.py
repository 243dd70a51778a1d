"""0-10 alternate exchanges as Qpid's brokers keep them: set when an exchange is made (adding or
changing one later is 530 not-allowed, declaring again without one changes nothing), and a
queue's alternate exchange takes what is left in the queue when it is deleted (by
``queue.delete`` or by auto-delete), unacknowledged messages included, in queue order."""

from __future__ import annotations

import pytest

from warren.codec.amqp0_10.sets import SequenceSet
from warren.spec import amqp0_10 as spec

from .client010 import SessionException

E = spec.ExecutionErrorCode


def _dlq(session, name: str) -> None:
    """A fanout exchange ``name`` whose messages land in queue ``name``-q, subscribed as ``name``."""
    session.send(spec.ExchangeDeclare(exchange=name, type="fanout", auto_delete=True))
    session.send(spec.QueueDeclare(queue=name + "-q", exclusive=True, auto_delete=True))
    session.send(spec.ExchangeBind(queue=name + "-q", exchange=name))
    session.subscribe(name + "-q", name, accept_mode=1)


def _bodies(session, destination: str, n: int) -> list[bytes]:
    got = [session.get(destination).body for _ in range(n)]
    assert session.nothing(destination)
    return got


def test_alternate_exchange_cannot_be_added_or_changed_but_a_plain_redeclare_is_fine(client, qname):
    s = client.session(1)
    for name in ("alt1", "alt2"):
        s.send(spec.ExchangeDeclare(exchange=f"{qname}-{name}", type="direct", auto_delete=True))
    main = qname + "-main"
    s.send(spec.ExchangeDeclare(exchange=main, type="fanout", alternate_exchange=qname + "-alt1"))
    s.send(spec.ExchangeDeclare(exchange=main, type="fanout"))  # without one: nothing changes
    s.send(spec.ExchangeDeclare(exchange=main, type="fanout", alternate_exchange=qname + "-alt1"))  # the same
    with pytest.raises(SessionException) as e:
        s.send(spec.ExchangeDeclare(exchange=main, type="fanout", alternate_exchange=qname + "-alt2"))
    assert e.value.code == E.NOT_ALLOWED
    s = client.session(2)
    plain = qname + "-plain"
    s.send(spec.ExchangeDeclare(exchange=plain, type="fanout"))
    with pytest.raises(SessionException) as e:
        s.send(spec.ExchangeDeclare(exchange=plain, type="fanout", alternate_exchange=qname + "-alt1"))
    assert e.value.code == E.NOT_ALLOWED
    s = client.session(3)
    assert s.send(spec.ExchangeQuery(name=main)).arguments == {"alternate-exchange": qname + "-alt1"}
    for name in (main, plain):
        s.send(spec.ExchangeDelete(exchange=name))


def test_a_deleted_queue_hands_its_messages_to_its_alternate_exchange(session, qname):
    dlq = qname + "-dlq"
    _dlq(session, dlq)
    # the queue's alternate routes nothing itself: that exchange's own alternate is tried
    session.send(spec.ExchangeDeclare(exchange=qname + "-mid", type="direct", alternate_exchange=dlq,
                                      auto_delete=True))
    session.send(spec.QueueDeclare(queue=qname, alternate_exchange=qname + "-mid"))
    session.send(spec.ExchangeBind(queue=qname, exchange=dlq))  # bound to where its messages go: no loop
    for body in (b"One", b"Two", b"Three"):
        session.transfer("", body, routing_key=qname, sync=False)
    session.sync()
    session.send(spec.QueueDelete(queue=qname))
    assert _bodies(session, dlq, 3) == [b"One", b"Two", b"Three"]


@pytest.mark.parametrize("exclusive", [True, False])
def test_an_auto_deleted_queue_hands_its_messages_unacknowledged_ones_first_to_its_alternate(
        client, qname, exclusive):
    watcher = client.session(1)
    dlq = qname + "-dlq"
    _dlq(watcher, dlq)
    s = client.session(2)
    s.send(spec.QueueDeclare(queue=qname, alternate_exchange=dlq, exclusive=exclusive, auto_delete=True))
    for body in (b"One", b"Two", b"Three"):
        s.transfer("", body, routing_key=qname, sync=False)
    s.subscribe(qname, "in", credit=1)
    assert s.get("in").body == b"One"  # acquired, never accepted
    client.conn.detach(2)
    client.flush()
    assert _bodies(watcher, dlq, 3) == [b"One", b"Two", b"Three"]
    assert watcher.send(spec.QueueQuery(queue=qname)).queue == ""


def test_a_message_released_after_its_queue_was_deleted_goes_to_the_alternate(client, qname):
    watcher = client.session(1)
    dlq = qname + "-dlq"
    _dlq(watcher, dlq)
    s = client.session(2)
    s.send(spec.QueueDeclare(queue=qname, alternate_exchange=dlq))
    s.transfer("", b"held", routing_key=qname)
    s.transfer("", b"ready", routing_key=qname)
    s.subscribe(qname, "in", credit=1)
    held = s.get("in")
    s.send(spec.QueueDelete(queue=qname))  # our own subscription just ends; the transfer stays ours
    assert _bodies(watcher, dlq, 1) == [b"ready"]
    s.send(spec.MessageRelease(transfers=SequenceSet.of([held.id])))
    assert _bodies(watcher, dlq, 1) == [b"held"]
