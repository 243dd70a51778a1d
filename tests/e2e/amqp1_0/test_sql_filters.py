"""SQL filter expressions (RabbitMQ 4.2's ``amqp:sql-filter``) and JMS selectors on streams over
AMQP 1.0 (warren/protocol/amqp1_0/sql_filter.py), through Qpid Proton's blocking API with its own
``Selector`` option (as its ``selected_recv`` example) and Node's rhea with its
``filter.selector`` (as its ``selector`` example): the stream written over 0-9-1 and 1.0, read
over 1.0; expressions that do not parse; a selector on a classic queue, left out."""

from __future__ import annotations

import json
import subprocess

import pika
import pytest
from proton import Described, Message, symbol
from proton.reactor import Filter, Selector
from proton.utils import LinkDetached

from tests.e2e.helpers import wait_until

from .test_rhea import SCRIPT_TIMEOUT_S, rhea  # noqa: F401 (the fixture that installs rhea)
from .test_streams import nothing_more, receive, remote_filter

SQL = symbol("amqp:sql-filter")
SELECTOR = symbol("apache.org:selector-filter:string")
OFFSET = symbol("rabbitmq:stream-offset-spec")


@pytest.fixture
def stream(broker, qname):
    """A stream of ten messages written over 0-9-1: m0..m9, odd ones colour=red, even ones
    colour=blue, each with the header n=i, message-id id-i, priority i % 10."""
    p = pika.BlockingConnection(pika.URLParameters(broker.url))
    ch = p.channel()
    ch.queue_declare(qname, durable=True, arguments={"x-queue-type": "stream"})
    ch.confirm_delivery()
    for i in range(10):
        ch.basic_publish("", qname, f"m{i}".encode(), pika.BasicProperties(
            headers={"colour": "red" if i % 2 else "blue", "n": i}, message_id=f"id-{i}", priority=i,
            delivery_mode=2 if i < 5 else 1))
    p.close()
    return qname


def from_first(selector: Selector | None = None, **named) -> Filter:
    """The filter set: from the stream's first message, with Proton's own selector option's
    filter and the ``named`` (descriptor, value) ones (Proton puts one map per option: one map)."""
    filters = {OFFSET: Described(OFFSET, "first")}
    if selector is not None:
        filters.update(selector.filter_set)
    filters.update({symbol(k): Described(d, v) for k, (d, v) in named.items()})
    return Filter(filters)


def test_proton_selector_reads_the_matching_messages_of_a_stream(conn, stream):
    r = conn.create_receiver(f"/queues/{stream}", credit=10,
                             options=from_first(Selector("colour = 'red' AND n BETWEEN 3 AND 7")))
    assert [m.body for m in receive(r, 3)] == [b"m3", b"m5", b"m7"]
    assert nothing_more(conn, r)
    assert set(remote_filter(r)) == {symbol("selector"), OFFSET}  # the selector is in place


def test_jms_header_names_read_the_10_sections(conn, stream):
    selector = Selector("JMSDeliveryMode = 'PERSISTENT' AND JMSPriority >= 3 AND JMSMessageID LIKE 'id-_'")
    r = conn.create_receiver(f"/queues/{stream}", credit=10, options=from_first(selector))
    assert [m.body for m in receive(r, 2)] == [b"m3", b"m4"]
    assert nothing_more(conn, r)


def test_an_sql_expression_reads_the_matching_messages(conn, stream):
    r = conn.create_receiver(f"/queues/{stream}", credit=10, options=from_first(**{
        "sql-filter": (SQL, "a.colour = 'blue' AND p.message_id LIKE 'id-%' AND (n >= 6 OR h.priority = 0)")}))
    assert [m.body for m in receive(r, 3)] == [b"m0", b"m6", b"m8"]
    assert nothing_more(conn, r)
    assert set(remote_filter(r)) == {symbol("sql-filter"), OFFSET}


def test_a_stream_written_over_10_is_filtered_by_its_properties(conn, broker, qname):
    p = pika.BlockingConnection(pika.URLParameters(broker.url))
    p.channel().queue_declare(qname, durable=True, arguments={"x-queue-type": "stream"})
    p.close()
    s = conn.create_sender(f"/queues/{qname}")
    for i, subject in enumerate(["order.created", "order.paid", "review.submitted", "order.created"]):
        s.send(Message(body=f"e{i}", subject=subject, group_id="g", properties={"price": 10.5 * i}))
    r = conn.create_receiver(f"/queues/{qname}", credit=10, options=from_first(**{
        "sql-filter": (SQL, "p.subject LIKE 'order.%' AND price > 10 AND p.group_id IS NOT NULL")}))
    assert [m.body for m in receive(r, 2)] == ["e1", "e3"]
    assert nothing_more(conn, r)


def test_an_sql_expression_that_does_not_parse_is_left_out_with_a_log_line(conn, broker, stream):
    r = conn.create_receiver(f"/queues/{stream}", credit=10, name="bad-sql", options=from_first(**{
        "sql-filter": (SQL, "colour = 'red' AND")}))
    assert [m.body for m in receive(r, 10)] == [f"m{i}".encode() for i in range(10)]  # RabbitMQ 4.2: all of them
    assert set(remote_filter(r)) == {OFFSET}  # the client sees it is not in place

    def logged() -> bool:
        return any("bad-sql" in line and "sql-filter" in line and "left out" in line
                   for line in broker.log().splitlines())
    assert wait_until(logged, timeout=5)


def test_a_selector_that_does_not_parse_refuses_the_link_and_nothing_else(conn, broker, stream):
    with pytest.raises(LinkDetached) as refused:
        conn.create_receiver(f"/queues/{stream}", credit=10, name="bad-selector",
                             options=from_first(Selector("colour = 'red' AND")))
    assert "amqp:invalid-field" in str(refused.value)
    assert wait_until(lambda: any("bad-selector" in line and "amqp:invalid-field" in line
                                  for line in broker.log().splitlines()), timeout=5)
    # the connection and the stream serve the next link
    r = conn.create_receiver(f"/queues/{stream}", credit=10, options=from_first(Selector("n = 9")))
    assert [m.body for m in receive(r, 1)] == [b"m9"]
    assert "Traceback" not in broker.log()


def test_a_selector_on_a_classic_queue_is_left_out(conn, broker, qname):
    # a queue hands each message to one consumer: Warren does not skip one for a selector, and
    # says so in the attach answer (docs/compatibility.md); every message arrives
    p = pika.BlockingConnection(pika.URLParameters(broker.url))
    ch = p.channel()
    ch.queue_declare(qname)
    for colour in ("red", "green"):
        ch.basic_publish("", qname, colour.encode(), pika.BasicProperties(headers={"colour": colour}))
    p.close()
    r = conn.create_receiver(f"/queues/{qname}", credit=10, options=Selector("colour = 'red'"))
    assert sorted(m.body for m in receive(r, 2)) == [b"green", b"red"]
    assert remote_filter(r) == {}


def test_rhea_selector_on_a_stream(rhea, broker, qname):  # noqa: F811 (the rhea fixture)
    p = pika.BlockingConnection(pika.URLParameters(broker.url))
    p.channel().queue_declare(qname, durable=True, arguments={"x-queue-type": "stream"})
    p.close()
    r = subprocess.run(["node", "rhea_selector.js", broker.host, str(broker.port), qname],
                       cwd=rhea, capture_output=True, text=True, timeout=SCRIPT_TIMEOUT_S)
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["error"] is None, (out, r.stderr)
    assert out["received"] == ["red-0", "red-3", "red-5"]
    assert out["inPlace"] == ["jms-selector"]
    assert out["refused"] == "amqp:invalid-field"
