"""AMQP 1.0 and 0-10 on the same queues: a 1.0 message consumed over 0-10 and a 0-10 transfer
consumed over 1.0, their mapped fields checked (both go through the broker's 0-9-1 form)."""

from __future__ import annotations

import uuid

from proton import Message
from proton.utils import BlockingConnection

from warren.codec.amqp0_10 import types as t010
from warren.spec import amqp0_10 as spec010

from ..amqp0_10.client010 import Client010
from .conftest import amqp_url


def test_1_0_to_0_10_and_0_10_to_1_0(broker, qname):
    mid = uuid.uuid4()
    with Client010(broker) as client:
        s = client.session(1)
        s.send(spec010.QueueDeclare(queue=qname, auto_delete=False))
        c = BlockingConnection(amqp_url(broker), timeout=10)
        try:
            c.create_sender(f"/queues/{qname}").send(Message(
                body=b"from 1.0", inferred=True, id=mid, correlation_id="corr", content_type="text/plain",
                durable=True, priority=6, properties={"k": "v"}))
            s.subscribe(qname, "d")
            msg = s.get("d")
            assert msg.body == b"from 1.0"
            assert (msg.delivery.delivery_mode, msg.delivery.priority) == (2, 6)
            assert msg.properties.message_id == mid and msg.properties.correlation_id == b"corr"
            assert msg.properties.content_type == "text/plain" and msg.properties.application_headers["k"] == "v"
            s.accept(msg.id)
            s.send(spec010.MessageCancel(destination="d"))  # else the 0-10 subscriber takes it back
            s.transfer("", b"from 0-10", routing_key=qname,
                       delivery=spec010.MessageDeliveryProperties(delivery_mode=2, priority=2),
                       properties=spec010.MessageMessageProperties(
                           message_id=mid, content_type="application/json",
                           application_headers={"n": t010.Int32(5)}))
            r = c.create_receiver(f"/queues/{qname}")
            m = r.receive(timeout=10)
            r.accept()
            assert m.body == b"from 0-10" and m.durable and m.priority == 2
            # 0-10's uuid is kept as its text by the 0-9-1 form, and only urn:uuid: text becomes a
            # 1.0 uuid again (RabbitMQ's rule): the 1.0 consumer sees the string
            assert m.id == str(mid) and m.content_type == "application/json" and m.properties == {"n": 5}
        finally:
            c.close()
            s.send(spec010.QueueDelete(queue=qname))
