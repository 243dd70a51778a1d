"""RabbitMQ's own AMQP 1.0 Python client (rabbitmq-amqp-python-client), unmodified: it opens only
against "RabbitMQ 4" (our 1.0 open announces it, docs/compatibility.md). Its management node
(``/management``, the ``$management`` link pair) is not served yet, so queues are declared with
pika here; publishing, consuming, accept, discard (dead-lettering) and requeue are its own."""

from __future__ import annotations

import pika
import pytest

rabbitmq_amqp = pytest.importorskip("rabbitmq_amqp_python_client")
from rabbitmq_amqp_python_client import (  # noqa: E402 - after the importorskip
    AddressHelper, AMQPMessagingHandler, Converter, Delivery, Environment, Event, Message)


class _Stop(Exception):
    pass


class _Handler(AMQPMessagingHandler):
    """Accepts the first message, discards the second (dead-lettered), requeues the third once."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list = []

    def on_amqp_message(self, event: Event) -> None:
        body = Converter.bytes_to_string(event.message.body)
        self.seen.append(body)
        if body == "discard":
            self.delivery_context.discard(event)
        elif body == "requeue" and self.seen.count("requeue") == 1:
            self.delivery_context.requeue(event)
        else:
            self.delivery_context.accept(event)
        if len(self.seen) == 4:
            raise _Stop()


def test_rabbitmqs_client_publishes_and_consumes_with_its_outcomes(broker, qname):
    p = pika.BlockingConnection(pika.URLParameters(broker.url))
    ch = p.channel()
    ch.queue_declare(f"{qname}-dlq")
    ch.queue_declare(qname, arguments={"x-dead-letter-exchange": "", "x-dead-letter-routing-key": f"{qname}-dlq"})
    environment = Environment(f"amqp://guest:guest@{broker.host}:{broker.port}/")
    try:
        connection = environment.connection()
        connection.dial()
        publisher = connection.publisher(AddressHelper.queue_address(qname))
        for body in ("accept", "discard", "requeue"):
            status = publisher.publish(Message(body=Converter.string_to_bytes(body)))
            assert status.remote_state == Delivery.ACCEPTED
        publisher.close()
        handler = _Handler()
        consumer = connection.consumer(AddressHelper.queue_address(qname), message_handler=handler)
        with pytest.raises(_Stop):
            consumer.run()
        consumer.close()
        connection.close()
        assert handler.seen == ["accept", "discard", "requeue", "requeue"]
        assert ch.basic_get(f"{qname}-dlq", auto_ack=True)[2] == b"discard"
        assert ch.queue_declare(qname, passive=True).method.message_count == 0
    finally:
        environment.close()
        ch.queue_delete(qname)
        ch.queue_delete(f"{qname}-dlq")
        p.close()
