"""AMQP 1.0 under --workers: the supervisor checks the SASL login and hands the connection to the
worker owning the vhost named in open (vhosts mode); under --worker-mode queues it answers the
client's open with a close amqp:not-implemented that says so, and logs a line."""

from __future__ import annotations

import pika
import pytest
from proton import Message
from proton.utils import BlockingConnection, ConnectionClosed

from tests.e2e.helpers import wait_until

from .conftest import amqp_url


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


def test_under_workers_queues_mode_1_0_is_refused_with_not_implemented_and_a_log_line(start_broker):
    b = start_broker("--workers", "2", "--worker-mode", "queues")
    with pytest.raises(ConnectionClosed, match="amqp:not-implemented.*worker-mode queues"):
        BlockingConnection(amqp_url(b), timeout=10)
    assert wait_until(lambda: "refused AMQP 1.0 connection from 127.0.0.1:" in b.log(), timeout=5)
