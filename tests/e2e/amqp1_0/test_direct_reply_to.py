"""RabbitMQ 4.2's Direct Reply-To over AMQP 1.0 (a dynamic receiver with the capability
``rabbitmq:volatile-queue``, over warren/broker/reply_to.py): Qpid Proton's blocking API as the
requester and as a responder over 1.0 or 0-9-1 (pika); RabbitMQ's own Python client with its
``ConsumerSettleStrategy.DirectReplyTo``, which it sends only to RabbitMQ 4.2 or later."""

from __future__ import annotations

import pika
import pytest
from proton import Data, Message
from proton.reactor import AtMostOnce, DynamicNodeProperties, ReceiverOption
from proton.utils import BlockingConnection

from tests.e2e.helpers import wait_until

from .conftest import amqp_url

TIMEOUT = 10


class _VolatileQueue(ReceiverOption):
    """RabbitMQ 4.2's capability of a dynamic source: Direct Reply-To."""

    def apply(self, link) -> None:
        link.source.dynamic = True
        caps: Data = link.source.capabilities
        caps.put_array(False, Data.SYMBOL)
        caps.enter()
        caps.put_symbol("rabbitmq:volatile-queue")
        caps.exit()


def reply_receiver(conn, credit: int = 5):
    return conn.create_receiver(None, credit=credit,
                                options=[_VolatileQueue(), AtMostOnce(), DynamicNodeProperties({})])


def test_a_volatile_dynamic_source_is_a_reply_address_a_10_responder_answers(conn, broker, qname):
    p = pika.BlockingConnection(pika.URLParameters(broker.url))
    p.channel().queue_declare(qname)
    p.close()
    replies = reply_receiver(conn)
    address = replies.link.remote_source.address
    assert address.startswith("/queues/amq.rabbitmq.reply-to.") and replies.link.remote_source.dynamic
    server = BlockingConnection(amqp_url(broker), timeout=TIMEOUT)
    try:
        requests = server.create_receiver(f"/queues/{qname}", credit=5)
        by_address = server.create_sender(address)  # a sender attached to the reply address
        anonymous = server.create_sender(None)  # and one sending to each message's "to"
        conn.create_sender(f"/queues/{qname}").send(Message(body=b"2+2", reply_to=address, correlation_id="c1"))
        request = requests.receive(timeout=TIMEOUT)
        requests.accept()
        by_address.send(Message(body=b"4", correlation_id=request.correlation_id))
        anonymous.send(Message(address=request.reply_to, body=b"four", correlation_id=request.correlation_id))
        got = [replies.receive(timeout=TIMEOUT) for _ in range(2)]
        assert [(m.body, m.correlation_id) for m in got] == [(b"4", "c1"), (b"four", "c1")]
    finally:
        server.close()


def test_a_0_9_1_responder_replies_to_the_address_name(conn, broker):
    replies = reply_receiver(conn)
    queue = replies.link.remote_source.address[len("/queues/"):]
    p = pika.BlockingConnection(pika.URLParameters(broker.url))
    try:
        ch = p.channel()
        assert ch.queue_declare(queue, passive=True).method.consumer_count == 1  # as for 0-9-1's reply-to
        ch.basic_publish("", queue, b"from pika")
        assert replies.receive(timeout=TIMEOUT).body == b"from pika"
    finally:
        p.close()


def test_without_credit_a_reply_is_dropped_and_after_detach_it_has_no_route(conn, broker):
    replies = reply_receiver(conn, credit=0)  # Proton's blocking receiver grants none by itself
    address = replies.link.remote_source.address
    sender = conn.create_sender(None)
    sender.send(Message(address=address, body=b"one"))  # routed (send waits for it): no credit, dropped
    replies.link.flow(1)  # goes out before the next transfer on this connection
    sender.send(Message(address=address, body=b"two"))
    assert replies.receive(timeout=TIMEOUT).body == b"two"
    assert replies.queued == 0
    replies.close()
    queue = address[len("/queues/"):]
    p = pika.BlockingConnection(pika.URLParameters(broker.url))
    try:
        def gone() -> bool:
            ch = p.channel()
            try:
                ch.queue_declare(queue, passive=True)
                ch.close()
                return False
            except pika.exceptions.ChannelClosedByBroker as e:
                return e.reply_code == 404
        assert wait_until(gone, timeout=5)
    finally:
        p.close()
    assert "Traceback" not in broker.log()


def test_a_volatile_source_on_an_unsettled_link_is_refused(conn):
    # RabbitMQ 4.2 takes the capability only on a link whose deliveries come settled
    from proton.utils import LinkDetached
    with pytest.raises(LinkDetached) as refused:
        conn.create_receiver(None, credit=1, options=[_VolatileQueue(), DynamicNodeProperties({})])
    assert "amqp:not-implemented" in str(refused.value)


class _Stop(Exception):
    pass


def _collector(n: int, settle: bool = True):
    """A handler of RabbitMQ's client that keeps the first ``n`` messages, then stops its loop."""
    from rabbitmq_amqp_python_client import AMQPMessagingHandler

    class Collect(AMQPMessagingHandler):
        def __init__(self) -> None:
            super().__init__()
            self.seen: list = []

        def on_amqp_message(self, event) -> None:
            self.seen.append(event.message)
            if settle:
                self.delivery_context.accept(event)
            if len(self.seen) == n:
                raise _Stop()
    return Collect()


def test_rabbitmqs_client_direct_reply_to_and_sql_filter(broker, qname):
    pytest.importorskip("rabbitmq_amqp_python_client")
    from rabbitmq_amqp_python_client import (
        AddressHelper, ConsumerOptions, ConsumerSettleStrategy, Converter, Environment, Message as RMessage,
        OffsetSpecification, StreamConsumerOptions, StreamFilterOptions)
    p = pika.BlockingConnection(pika.URLParameters(broker.url))
    ch = p.channel()
    ch.queue_declare(qname)
    ch.queue_declare(f"{qname}-s", durable=True, arguments={"x-queue-type": "stream"})
    p.close()
    environment = Environment(f"amqp://guest:guest@{broker.host}:{broker.port}/")
    try:
        requester, responder = environment.connection(), environment.connection()
        requester.dial()
        responder.dial()
        # Direct Reply-To: the client asks for it only of RabbitMQ 4.2 or later
        got_reply = _collector(1, settle=False)  # its replies come settled
        replies = requester.consumer(message_handler=got_reply, consumer_options=ConsumerOptions(
            settle_strategy=ConsumerSettleStrategy.DirectReplyTo))
        address = replies.address
        assert address.startswith("/queues/amq.rabbitmq.reply-to.")
        requester.publisher(AddressHelper.queue_address(qname)).publish(
            RMessage(body=Converter.string_to_bytes("ping"), reply_to=address, correlation_id="r1"))
        got_request = _collector(1)
        requests = responder.consumer(AddressHelper.queue_address(qname), message_handler=got_request)
        with pytest.raises(_Stop):
            requests.run()
        request = got_request.seen[0]
        responder.publisher(request.reply_to).publish(
            RMessage(body=Converter.string_to_bytes("pong"), correlation_id=request.correlation_id))
        with pytest.raises(_Stop):
            replies.run()
        assert [(Converter.bytes_to_string(m.body), m.correlation_id) for m in got_reply.seen] == [("pong", "r1")]
        # an SQL filter expression on a stream: likewise only for RabbitMQ 4.2 or later
        stream = responder.publisher(AddressHelper.queue_address(f"{qname}-s"))
        for i in range(6):
            stream.publish(RMessage(body=Converter.string_to_bytes(f"m{i}"), subject="odd" if i % 2 else "even",
                                    application_properties={"n": i}))
        filtered = _collector(2)
        reader = requester.consumer(AddressHelper.queue_address(f"{qname}-s"), message_handler=filtered,
                                    consumer_options=StreamConsumerOptions(
                                        offset_specification=OffsetSpecification.first,
                                        filter_options=StreamFilterOptions(sql="properties.subject = 'odd' AND n > 1")))
        with pytest.raises(_Stop):
            reader.run()
        assert [Converter.bytes_to_string(m.body) for m in filtered.seen] == ["m3", "m5"]
    finally:
        environment.close()
