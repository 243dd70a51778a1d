"""RabbitMQ's own AMQP 1.0 Python client (rabbitmq-amqp-python-client), unmodified: it opens only
against "RabbitMQ 4" (our 1.0 open announces it, docs/compatibility.md). Its declares, bindings,
purges and deletes go through the management node (``/management``, warren/protocol/amqp1_0/
management.py), checked with pika; publishing, consuming, accept, discard (dead-lettering) and
requeue are its own."""

from __future__ import annotations

import pika
import pytest

rabbitmq_amqp = pytest.importorskip("rabbitmq_amqp_python_client")
from rabbitmq_amqp_python_client import (  # noqa: E402 - after the importorskip
    AddressHelper, AMQPMessagingHandler, ClassicQueueSpecification, Converter, Delivery, Environment, Event,
    ExchangeSpecification, ExchangeToQueueBindingSpecification, Message, QuorumQueueSpecification,
    ValidationCodeException)


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


def test_rabbitmqs_client_declares_binds_purges_and_deletes_through_the_management_node(broker, qname):
    p = pika.BlockingConnection(pika.URLParameters(broker.url))
    ch = p.channel()
    environment = Environment(f"amqp://guest:guest@{broker.host}:{broker.port}/")
    try:
        connection = environment.connection()
        connection.dial()
        management = connection.management()
        management.declare_queue(ClassicQueueSpecification(name=qname, max_len=10))
        management.declare_queue(ClassicQueueSpecification(name=qname, max_len=10))  # again: the same queue
        with pytest.raises(ValidationCodeException, match="PreconditionFailed"):
            management.declare_queue(ClassicQueueSpecification(name=qname, max_len=20))
        management.declare_queue(QuorumQueueSpecification(name=f"{qname}-qq"))
        management.declare_exchange(ExchangeSpecification(name=f"x-{qname}"))
        binding = management.bind(ExchangeToQueueBindingSpecification(
            source_exchange=f"x-{qname}", destination_queue=qname, binding_key="k"))
        publisher = connection.publisher(AddressHelper.exchange_address(f"x-{qname}", "k"))
        for _ in range(3):
            assert publisher.publish(Message(body=b"m")).remote_state == Delivery.ACCEPTED
        publisher.close()
        info = management.queue_info(qname)
        assert (info.name, info.message_count, info.is_durable, info.arguments["x-max-length"]) == (qname, 3, True, 10)
        assert management.queue_info(f"{qname}-qq").queue_type.value == "quorum"
        assert ch.queue_declare(qname, passive=True).method.message_count == 3  # pika sees the same queue
        assert management.purge_queue(qname) == 3
        management.unbind(binding)
        publisher = connection.publisher(AddressHelper.exchange_address(f"x-{qname}", "k"))
        with pytest.raises(Exception):  # unbound: released
            publisher.publish(Message(body=b"m"))
        publisher.close()
        management.delete_exchange(f"x-{qname}")
        management.delete_queue(qname)
        management.delete_queue(f"{qname}-qq")
        with pytest.raises(ValidationCodeException):
            management.queue_info(qname)
        management.close()
        connection.close()
        with pytest.raises(pika.exceptions.ChannelClosedByBroker):
            ch.queue_declare(qname, passive=True)
    finally:
        environment.close()
        p.close()


class _AnnotatingHandler(AMQPMessagingHandler):
    """Requeues "requeue" once and discards "discard", each with the annotation x-opt-why; the
    annotations the redelivered "requeue" carries are kept."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list = []
        self.redelivered_annotations: dict | None = None

    def on_amqp_message(self, event: Event) -> None:
        body = Converter.bytes_to_string(event.message.body)
        self.seen.append(body)
        if body == "discard":
            self.delivery_context.discard_with_annotations(event, {"x-opt-why": "broken"})
        elif body == "requeue" and self.seen.count("requeue") == 1:
            self.delivery_context.requeue_with_annotations(event, {"x-opt-why": "busy"})
        else:
            self.redelivered_annotations = dict(event.message.annotations or {})
            self.delivery_context.accept(event)
        if len(self.seen) == 3:
            raise _Stop()


@pytest.mark.parametrize("queue_type", ["quorum", "classic"])
def test_a_modified_outcomes_annotations_join_the_message_of_a_quorum_queue_only(broker, qname, queue_type):
    """RabbitMQ 4 adds a ``modified`` outcome's message annotations to the message requeued or
    dead-lettered from a quorum queue, and keeps classic queues' messages as they are."""
    p = pika.BlockingConnection(pika.URLParameters(broker.url))
    ch = p.channel()
    ch.queue_declare(f"{qname}-dlq")
    ch.queue_declare(qname, durable=True, arguments={
        "x-queue-type": queue_type, "x-dead-letter-exchange": "", "x-dead-letter-routing-key": f"{qname}-dlq"})
    environment = Environment(f"amqp://guest:guest@{broker.host}:{broker.port}/")
    try:
        connection = environment.connection()
        connection.dial()
        publisher = connection.publisher(AddressHelper.queue_address(qname))
        for body in ("discard", "requeue"):
            assert publisher.publish(Message(body=Converter.string_to_bytes(body))).remote_state == Delivery.ACCEPTED
        publisher.close()
        handler = _AnnotatingHandler()
        consumer = connection.consumer(AddressHelper.queue_address(qname), message_handler=handler)
        with pytest.raises(_Stop):
            consumer.run()
        consumer.close()
        connection.close()
        assert handler.seen == ["discard", "requeue", "requeue"]
        dead = ch.basic_get(f"{qname}-dlq", auto_ack=True)
        assert dead[2] == b"discard"
        if queue_type == "quorum":
            assert handler.redelivered_annotations.get("x-opt-why") == "busy"
            assert dead[1].headers["x-opt-why"] == "broken"
        else:
            assert "x-opt-why" not in handler.redelivered_annotations
            assert "x-opt-why" not in (dead[1].headers or {})
    finally:
        environment.close()
        ch.queue_delete(qname)
        ch.queue_delete(f"{qname}-dlq")
        p.close()
