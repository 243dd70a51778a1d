"""A 1.0 stream link with a property filter under ``--workers 2 --worker-mode queues``: one stream
on each worker, so whichever worker the connection was dealt to, one link reads the other's
stream through its handle, its credit kept there (warren/protocol/amqp1_0/credit.py). A long run
of messages the filter refuses gives the owner its credit back once per write, not once per
message (tests/protocol/amqp1_0/test_far_stream_filter.py counts that); here, Qpid Proton shows
the run still gets through to the one message it wants, with a small credit."""

from __future__ import annotations

import pika
from proton import Described, symbol
from proton.reactor import Filter
from proton.utils import BlockingConnection

from .conftest import amqp_url
from .test_workers import _queue_on

MISSES = 3000


def test_a_filtered_link_on_the_other_workers_stream_gets_past_a_long_run_of_misses(start_broker, qname):
    b = start_broker("--workers", "2", "--worker-mode", "queues")
    names = [_queue_on(qname, w) for w in (0, 1)]
    p = pika.BlockingConnection(pika.URLParameters(b.url))
    ch = p.channel()
    ch.confirm_delivery()
    for name in names:
        ch.queue_declare(name, durable=True, arguments={"x-queue-type": "stream"})
        for i in range(MISSES):
            ch.basic_publish("", name, b"", pika.BasicProperties(headers={"colour": "blue"}))
        ch.basic_publish("", name, b"the red one", pika.BasicProperties(headers={"colour": "red"}))
    p.close()
    c = BlockingConnection(amqp_url(b), timeout=10)
    try:
        for name in names:
            r = c.create_receiver(f"/queues/{name}", credit=2, options=Filter({
                symbol("o"): Described(symbol("rabbitmq:stream-offset-spec"), "first"),
                symbol("a"): Described(symbol("amqp:application-properties-filter"), {"colour": "red"})}))
            m = r.receive(timeout=20)
            r.accept()
            assert (m.body, m.annotations["x-stream-offset"]) == (b"the red one", MISSES), name
            r.close()
    finally:
        c.close()
