"""AMQP 1.0 under --workers: the supervisor checks the SASL login and hands the connection to the
worker owning the vhost named in open (vhosts mode), or to the next worker in turn under
--worker-mode queues, where its links read and write queues on any worker."""

from __future__ import annotations

import pika
import pytest
from proton import Message
from proton.utils import BlockingConnection

from tests.e2e.helpers import wait_until
from warren.spec import amqp1_0 as spec
from warren.spread.definitions import queue_owner

from .conftest import amqp_url
from .raw10 import Raw10


def test_under_workers_1_0_goes_to_the_vhosts_worker(start_broker, qname):
    b = start_broker("--workers", "2", "--worker-mode", "vhosts")
    p = pika.BlockingConnection(pika.URLParameters(b.url))
    p.channel().queue_declare(qname)
    c = BlockingConnection(amqp_url(b), timeout=10)
    try:
        c.create_sender(f"/queues/{qname}").send(Message(body=b"handed over", inferred=True))
        r = c.create_receiver(f"/queues/{qname}")
        assert r.receive(timeout=10).body == b"handed over"
        r.accept()
    finally:
        c.close()
    p.close()
    with pytest.raises(Exception, match="amqp:unauthorized-access|SASL|sasl|auth"):
        BlockingConnection(amqp_url(b, password="wrong"), timeout=10)


def _queue_on(name: str, worker: int) -> str:
    """A queue name that worker ``worker`` of two owns (warren/spread/definitions.py)."""
    return next(f"{name}-{i}" for i in range(1000) if queue_owner("/", f"{name}-{i}", 2) == worker)


def test_under_workers_queues_mode_1_0_links_use_queues_on_either_worker(start_broker, qname):
    """One queue on each worker: whichever worker the 1.0 connection was dealt to, one of them is
    the other's, read through its handle with the link's credit kept there
    (warren/protocol/amqp1_0/credit.py). Messages published over 1.0 and over 0-9-1 come back in
    order under a small credit; a drain spends the credit once the queue is empty; a queue the
    management node declares is there for pika."""
    b = start_broker("--workers", "2", "--worker-mode", "queues")
    names = [_queue_on(qname, w) for w in (0, 1)]
    p = pika.BlockingConnection(pika.URLParameters(b.url))
    ch = p.channel()
    for name in names:
        ch.queue_declare(name, durable=True)
        for i in range(10):
            ch.basic_publish("", name, f"0-9-1 {i}".encode())
    c = BlockingConnection(amqp_url(b), timeout=10)
    try:
        for name in names:
            s = c.create_sender(f"/queues/{name}")
            for i in range(20):
                s.send(Message(body=f"1.0 {i}".encode(), durable=True, inferred=True))
            r = c.create_receiver(f"/queues/{name}", credit=3)
            got = []
            for _ in range(30):
                got.append(r.receive(timeout=10).body)
                r.accept()
            assert got == [f"0-9-1 {i}".encode() for i in range(10)] + [f"1.0 {i}".encode() for i in range(20)], name
            r.close()
            s.close()
    finally:
        c.close()
    for name in names:
        assert wait_until(lambda: ch.queue_declare(name, passive=True).method.message_count == 0, timeout=10)
    for name in names:  # a drain: the three messages, then the rest of the credit is spent
        for i in range(3):
            ch.basic_publish("", name, b"x")
        with Raw10(b) as raw:
            raw.login()
            raw.begin()
            raw.attach_receiver(0, 0, f"/queues/{name}")
            raw.send(0, spec.Flow(next_incoming_id=0, incoming_window=100, next_outgoing_id=0, outgoing_window=100,
                                  handle=0, delivery_count=0, link_credit=10, drain=True))
            assert [raw.expect(spec.Transfer).delivery_id for _ in range(3)] == [0, 1, 2]
            flow = raw.expect(spec.Flow)
            assert (flow.delivery_count, flow.link_credit, flow.drain) == (10, 0, True), name
    p.close()


def test_under_workers_queues_mode_a_modified_outcome_annotates_the_other_workers_quorum_queue(start_broker, qname):
    """A quorum queue on each worker: the modified outcome's annotations of a delivery from the
    other worker's queue travel to its owner before the requeue or reject (warren/spread/proxy.py
    ``RemoteSettler.annotate``) and join the message there, as they do in one process."""
    client = pytest.importorskip("rabbitmq_amqp_python_client")
    from .test_rabbitmq_client import _AnnotatingHandler, _Stop
    b = start_broker("--workers", "2", "--worker-mode", "queues")
    names = [_queue_on(qname, w) for w in (0, 1)]
    p = pika.BlockingConnection(pika.URLParameters(b.url))
    ch = p.channel()
    environment = client.Environment(f"amqp://guest:guest@{b.host}:{b.port}/")
    try:
        connection = environment.connection()
        connection.dial()
        for name in names:
            ch.queue_declare(f"{name}-dlq", durable=True)
            ch.queue_declare(name, durable=True, arguments={
                "x-queue-type": "quorum", "x-dead-letter-exchange": "", "x-dead-letter-routing-key": f"{name}-dlq"})
            for body in (b"discard", b"requeue"):
                ch.basic_publish("", name, body)
            handler = _AnnotatingHandler()
            consumer = connection.consumer(client.AddressHelper.queue_address(name), message_handler=handler)
            with pytest.raises(_Stop):
                consumer.run()
            consumer.close()
            assert handler.redelivered_annotations.get("x-opt-why") == "busy", name
            dead = []  # the dead-lettered message reaches its queue once the owner's reject ran

            def got_dead_letter(name=name) -> bool:
                dead.append(ch.basic_get(f"{name}-dlq", auto_ack=True))
                return dead[-1][0] is not None

            assert wait_until(got_dead_letter, timeout=10), name
            assert dead[-1][2] == b"discard" and dead[-1][1].headers["x-opt-why"] == "broken", name
        connection.close()
    finally:
        environment.close()
        p.close()
