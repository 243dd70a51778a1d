"""AMQP 0-10 on Warren's port through the client mode: connect, declare, transfer, subscribe,
accept; the same messages seen by pika (0-9-1) both ways."""

from __future__ import annotations

from warren.spec import amqp0_10 as spec

from ..helpers import get


def test_connect_declare_transfer_subscribe_accept(session, qname):
    session.send(spec.QueueDeclare(queue=qname, auto_delete=True))
    result = session.send(spec.QueueQuery(queue=qname))
    assert result.queue == qname and result.message_count == 0
    session.transfer("", b"hello", routing_key=qname)
    assert session.send(spec.QueueQuery(queue=qname)).message_count == 1
    session.subscribe(qname, "d1")
    msg = session.get("d1")
    assert msg.body == b"hello" and msg.delivery.routing_key == qname
    session.accept(msg.id)
    assert session.send(spec.QueueQuery(queue=qname)).message_count == 0
