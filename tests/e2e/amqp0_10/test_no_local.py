"""Qpid's ``no-local`` queue argument over 0-10: a message published on the queue's own
connection (the one that holds it exclusively, or holds an exclusive subscription on it) is
dropped, not enqueued; other sessions of that connection are local too; other connections,
0-9-1 publishers included, are not. The publisher is remembered by the message, so a local
message rerouted later (a deleted queue's alternate exchange) is still dropped."""

from __future__ import annotations

from warren.spec import amqp0_10 as spec

from .client010 import Client010


def _count(session, queue: str) -> int:
    return session.send(spec.QueueQuery(queue=queue)).message_count


def test_no_local_queue_drops_what_its_own_connection_publishes(client, broker, ch, qname):
    s = client.session(1)
    plain, no_local = qname + "-a", qname + "-b"
    s.send(spec.QueueDeclare(queue=plain, exclusive=True, auto_delete=True))
    s.send(spec.QueueDeclare(queue=no_local, exclusive=True, auto_delete=True, arguments={"no-local": "true"}))
    for q in (plain, no_local):
        s.send(spec.ExchangeBind(queue=q, exchange="amq.fanout", binding_key=q))
    s.transfer("amq.fanout", b"same session")
    client.session(2).transfer("amq.fanout", b"same connection")
    with Client010(broker) as other:
        other.session(1).transfer("amq.fanout", b"other connection")
    ch.basic_publish("amq.fanout", "", b"from 0-9-1")
    s.subscribe(no_local, "nl", accept_mode=1)
    assert [s.get("nl").body for _ in range(2)] == [b"other connection", b"from 0-9-1"]
    assert s.nothing("nl")
    assert _count(s, plain) == 4 and _count(s, no_local) == 0


def test_an_exclusive_subscription_makes_its_connection_local(client, broker, qname):
    s = client.session(1)
    s.send(spec.QueueDeclare(queue=qname, auto_delete=True, arguments={"no-local": True}))
    s.transfer("", b"before", routing_key=qname)  # nobody's yet: kept
    s.subscribe(qname, "x", accept_mode=1, exclusive=True)
    s.transfer("", b"local", routing_key=qname)
    with Client010(broker) as other:
        other.session(1).transfer("", b"foreign", routing_key=qname)
    assert [s.get("x").body for _ in range(2)] == [b"before", b"foreign"]
    assert s.nothing("x")
    assert _count(s, qname) == 0


def test_a_local_message_rerouted_later_is_still_dropped(client, broker, qname):
    s = client.session(1)
    holding, receiver = qname + "-holding", qname + "-rcv"
    s.send(spec.QueueDeclare(queue=holding, alternate_exchange="amq.fanout"))
    with Client010(broker) as other:
        o = other.session(1)
        o.transfer("", b"a", routing_key=holding)
        s.transfer("", b"b", routing_key=holding)
        o.transfer("", b"c", routing_key=holding)
    s.send(spec.QueueDeclare(queue=receiver, exclusive=True, auto_delete=True, arguments={"no-local": True}))
    s.send(spec.ExchangeBind(queue=receiver, exchange="amq.fanout"))
    s.send(spec.QueueDelete(queue=holding))  # its messages go to its alternate exchange
    s.subscribe(receiver, "r", accept_mode=1)
    assert [s.get("r").body for _ in range(2)] == [b"a", b"c"]
    assert s.nothing("r")
