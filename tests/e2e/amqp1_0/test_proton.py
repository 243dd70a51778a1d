"""Qpid Proton's Python binding (python-qpid-proton), unmodified, against the broker over AMQP 1.0:
its blocking API (``proton.utils.BlockingConnection``) and its reactor, on RabbitMQ's v2 and v1
addresses, with the outcomes, settle modes and durability a broker owes it."""

from __future__ import annotations

import pika
import pytest
from proton import Delivery, Message
from proton.handlers import MessagingHandler
from proton.reactor import AtMostOnce, Container
from proton import ConnectionException, ProtonException
from proton.utils import BlockingConnection, LinkDetached, SendException

from .conftest import amqp_url

TIMEOUT = 10


@pytest.fixture
def pch(broker):
    p = pika.BlockingConnection(pika.URLParameters(broker.url))
    yield p.channel()
    p.close()


def test_work_queue_two_receivers_share_the_messages_and_each_is_accepted_once(conn, pch, qname):
    pch.queue_declare(qname)
    sender = conn.create_sender(f"/queues/{qname}")
    for i in range(6):
        sender.send(Message(body=f"job-{i}".encode(), inferred=True))
    r1 = conn.create_receiver(f"/queues/{qname}", credit=1, name="worker-1")
    r2 = conn.create_receiver(f"/queues/{qname}", credit=1, name="worker-2")
    got = []
    for r in (r1, r2, r1, r2, r1, r2):
        got.append(bytes(r.receive(timeout=TIMEOUT).body))
        r.accept()
    assert sorted(got) == [f"job-{i}".encode() for i in range(6)]
    assert pch.queue_declare(qname, passive=True).method.message_count == 0


def test_publish_subscribe_through_an_exchange_and_its_routing_key(conn, pch, qname):
    pch.exchange_declare(f"x-{qname}", "direct", auto_delete=True)
    for q in (f"{qname}-a", f"{qname}-b"):
        pch.queue_declare(q, exclusive=True)
        pch.queue_bind(q, f"x-{qname}", "news")
    conn.create_sender(f"/exchanges/x-{qname}/news").send(Message(body=b"hi", inferred=True))
    conn.create_sender(f"/exchanges/x-{qname}").send(Message(body=b"by subject", subject="news", inferred=True))
    for q in (f"{qname}-a", f"{qname}-b"):
        bodies = [pch.basic_get(q, auto_ack=True)[2] for _ in range(2)]
        assert bodies == [b"hi", b"by subject"]


def test_an_unroutable_message_is_released_and_the_sender_is_told(conn, pch, qname):
    pch.exchange_declare(f"x-{qname}", "direct", auto_delete=True)
    sender = conn.create_sender(f"/exchanges/x-{qname}/nobody")
    with pytest.raises(SendException) as refused:
        sender.send(Message(body=b"lost", inferred=True))
    assert refused.value.state == Delivery.RELEASED


def test_anonymous_sender_names_each_destination_in_to(conn, pch, qname):
    pch.queue_declare(qname)
    sender = conn.create_sender(None)
    sender.send(Message(address=f"/queues/{qname}", body=b"one", inferred=True))
    with pytest.raises(SendException) as unbound:  # no binding yet: released
        sender.send(Message(address=f"/exchanges/amq.direct/{qname}", body=b"two", inferred=True))
    assert unbound.value.state == Delivery.RELEASED
    with pytest.raises(SendException) as nowhere:  # no such exchange: rejected, not-found
        sender.send(Message(address=f"/exchanges/none-{qname}/k", body=b"x", inferred=True))
    assert nowhere.value.state == Delivery.REJECTED
    pch.queue_bind(qname, "amq.direct", qname)
    sender.send(Message(address=f"/exchanges/amq.direct/{qname}", body=b"three", inferred=True))
    assert [pch.basic_get(qname, auto_ack=True)[2] for _ in range(2)] == [b"one", b"three"]


def test_v1_addresses_of_rabbitmq_3_plugin_users(conn, pch, qname):
    conn.create_sender(f"/queue/{qname}").send(Message(body=b"declared", inferred=True))  # /queue/Q declares Q
    assert pch.queue_declare(qname, passive=True).method.message_count == 1
    conn.create_sender(f"/amq/queue/{qname}").send(Message(body=b"amq", inferred=True))
    r = conn.create_receiver(f"/amq/queue/{qname}")
    assert [bytes(r.receive(timeout=TIMEOUT).body) for _ in range(2)] == [b"declared", b"amq"]
    r.accept()
    topic = conn.create_receiver(f"/topic/news.{qname}")  # a temporary queue bound to amq.topic
    conn.create_sender(f"/topic/news.{qname}").send(Message(body=b"topic", inferred=True))
    assert bytes(topic.receive(timeout=TIMEOUT).body) == b"topic"
    topic.accept()
    pch.queue_delete(qname)


def test_a_missing_queue_refuses_the_link_with_not_found(conn, qname):
    with pytest.raises(LinkDetached, match="amqp:not-found"):
        conn.create_receiver(f"/queues/{qname}")
    with pytest.raises(LinkDetached, match="amqp:not-found"):
        conn.create_sender(f"/queues/{qname}")
    conn.create_sender(None)  # the connection and its session serve on


def test_rejected_is_dead_lettered_released_and_modified_requeue(conn, pch, qname):
    pch.queue_declare(f"{qname}-dlq")
    pch.queue_declare(qname, arguments={"x-dead-letter-exchange": "", "x-dead-letter-routing-key": f"{qname}-dlq"})
    sender = conn.create_sender(f"/queues/{qname}")
    for body in (b"r", b"l"):
        sender.send(Message(body=body, inferred=True))
    r = conn.create_receiver(f"/queues/{qname}", credit=1)
    assert bytes(r.receive(timeout=TIMEOUT).body) == b"r"
    r.reject()  # rejected: dead-lettered
    m = r.receive(timeout=TIMEOUT)
    assert bytes(m.body) == b"l" and m.delivery_count == 0
    r.release(delivered=False)  # released: back to the queue, first in line
    m = r.receive(timeout=TIMEOUT)
    assert bytes(m.body) == b"l" and m.delivery_count == 1
    r.release(delivered=True)  # modified (delivery-failed): requeued as well
    assert bytes(r.receive(timeout=TIMEOUT).body) == b"l"
    r.accept()
    method, props, body = pch.basic_get(f"{qname}-dlq", auto_ack=True)
    assert body == b"r" and props.headers["x-death"][0]["reason"] == "rejected"


def test_pre_settled_deliveries_need_no_outcome(conn, pch, qname):
    pch.queue_declare(qname)
    for i in range(3):
        pch.basic_publish("", qname, str(i).encode())
    r = conn.create_receiver(f"/queues/{qname}", options=AtMostOnce())
    assert [bytes(r.receive(timeout=TIMEOUT).body) for _ in range(3)] == [b"0", b"1", b"2"]
    assert pch.queue_declare(qname, passive=True).method.message_count == 0
    r.close()


def test_a_message_sent_over_1_0_reaches_pika_with_every_mapped_field(conn, pch, qname):
    pch.queue_declare(qname)
    conn.create_sender(f"/queues/{qname}").send(Message(
        body=b"payload", inferred=True, id="msg-1", correlation_id="corr-1", user_id=b"guest", reply_to="replies",
        content_type="text/plain", content_encoding="utf-8", creation_time=1700000000.5, group_id="group",
        durable=True, priority=5, ttl=60.0, subject="subj", properties={"app": "value", "n": 7},
        annotations={"x-opt-tag": "t"}))
    method, p, body = pch.basic_get(qname, auto_ack=True)
    assert body == b"payload"
    assert (p.message_id, p.correlation_id, p.user_id, p.reply_to) == ("msg-1", "corr-1", "guest", "replies")
    assert (p.content_type, p.content_encoding, p.app_id, p.delivery_mode, p.priority) == ("text/plain", "utf-8", "group", 2, 5)
    assert p.expiration == "60000" and p.timestamp == 1700000000
    assert p.headers["app"] == "value" and p.headers["n"] == 7 and p.headers["x-opt-tag"] == "t"


def test_a_message_sent_with_pika_reaches_proton_with_every_mapped_field(conn, pch, qname):
    pch.queue_declare(qname)
    pch.basic_publish("", qname, b"from pika", pika.BasicProperties(
        content_type="application/json", content_encoding="gzip", headers={"h": "v", "x-tag": 3, "num": 9},
        delivery_mode=2, priority=3, correlation_id="c", reply_to="r", expiration="30000", message_id="m",
        timestamp=1700000000, type="t", user_id="guest", app_id="app"))
    r = conn.create_receiver(f"/queues/{qname}")
    m = r.receive(timeout=TIMEOUT)
    r.accept()
    assert bytes(m.body) == b"from pika" and m.durable and m.priority == 3 and m.ttl == 30.0
    assert (m.id, m.correlation_id, m.reply_to, m.user_id) == ("m", "c", "r", b"guest")
    assert (m.content_type, m.content_encoding, m.group_id, m.creation_time) == ("application/json", "gzip", "app", 1700000000.0)
    assert m.properties == {"h": "v", "num": 9}
    assert m.annotations["x-tag"] == 3 and m.annotations["x-basic-type"] == "t"
    assert m.annotations["x-routing-key"] == qname and m.annotations["x-exchange"] == ""


def test_1_0_to_1_0_keeps_what_0_9_1_has_no_field_for(conn, pch, qname):
    pch.queue_declare(qname)
    conn.create_sender(f"/queues/{qname}").send(Message(body={"a": [1, "two"]}, subject="s", address="/queues/x", id=42))
    r = conn.create_receiver(f"/queues/{qname}")
    m = r.receive(timeout=TIMEOUT)
    r.accept()
    assert m.body == {"a": [1, "two"]} and m.subject == "s" and m.address == "/queues/x" and m.id == 42


def test_a_durable_message_accepted_survives_kill_9(start_broker, tmp_path, qname):
    b = start_broker()
    p = pika.BlockingConnection(pika.URLParameters(b.url))
    p.channel().queue_declare(qname, durable=True)
    p.close()
    c = BlockingConnection(amqp_url(b), timeout=TIMEOUT)
    c.create_sender(f"/queues/{qname}").send(Message(body=b"kept", durable=True, inferred=True))  # waits for accepted
    b.signal(9)
    b.wait()
    again = start_broker(data_dir=b.data_dir)
    p = pika.BlockingConnection(pika.URLParameters(again.url))
    assert p.channel().basic_get(qname, auto_ack=True)[2] == b"kept"
    p.close()


def test_a_wrong_password_is_refused_and_logged(broker):
    with pytest.raises(ProtonException):
        BlockingConnection(amqp_url(broker, password="wrong"), timeout=TIMEOUT)
    c = BlockingConnection(amqp_url(broker), timeout=TIMEOUT)  # others are served
    c.close()


def test_vhost_hostname_convention_opens_that_vhost(broker, pch, qname):
    c = BlockingConnection(amqp_url(broker), timeout=TIMEOUT, virtual_host="vhost:/")
    pch.queue_declare(qname)
    c.create_sender(f"/queues/{qname}").send(Message(body=b"v", inferred=True))
    c.close()
    assert pch.basic_get(qname, auto_ack=True)[2] == b"v"
    # a refused open is not answered, the socket is closed (as RabbitMQ 4: docs/compatibility.md)
    with pytest.raises(ConnectionException, match="disconnected"):
        BlockingConnection(amqp_url(broker), timeout=TIMEOUT, virtual_host="vhost:no-such-vhost")


class _Drainer(MessagingHandler):
    """The reactor API: credit 10, drain: the two ready messages arrive, then the drain completes."""

    def __init__(self, url: str, address: str) -> None:
        super().__init__(prefetch=0, auto_accept=True)
        self.url, self.address = url, address
        self.received: list = []
        self.drained = False

    def on_start(self, event):
        conn = event.container.connect(self.url)
        self.receiver = event.container.create_receiver(conn, self.address)
        self.receiver.drain(10)

    def on_message(self, event):
        self.received.append(bytes(event.message.body))

    def on_link_flow(self, event):
        if self.receiver.drained() or (self.receiver.credit == 0 and not self.receiver.draining()):
            self.drained = True
            event.connection.close()


def test_reactor_credit_and_drain(broker, pch, qname):
    pch.queue_declare(qname)
    for i in range(2):
        pch.basic_publish("", qname, str(i).encode())
    handler = _Drainer(amqp_url(broker), f"/queues/{qname}")
    container = Container(handler)
    container.timeout = TIMEOUT
    container.run()
    assert handler.received == [b"0", b"1"] and handler.drained
