"""Streams over AMQP 1.0 (RabbitMQ 4.1's source filters, warren/protocol/amqp1_0/filters.py),
dynamic sources and targets (its ``temporary-queue``), and the coordinator it refuses: Qpid
Proton's blocking API and RabbitMQ's AMQP 1.0 Python client, unmodified, with the stream written
over 0-9-1 (pika) and read over 1.0 from an offset."""

from __future__ import annotations

import time

import pika
import pytest
from proton import Data, Described, Message, symbol
from proton.reactor import AtMostOnce, DynamicNodeProperties, Filter, ReceiverOption, SenderOption
from proton.utils import BlockingConnection, LinkDetached

from .conftest import amqp_url

TIMEOUT = 10
OFFSET = symbol("rabbitmq:stream-offset-spec")


@pytest.fixture
def stream(broker, qname):
    """A stream written over 0-9-1: messages 0..9, odd ones with the header colour=red and the
    filter value "red", even ones "blue"; returns (queue, the second's timestamp after message 4)."""
    p = pika.BlockingConnection(pika.URLParameters(broker.url))
    ch = p.channel()
    ch.queue_declare(qname, durable=True, arguments={"x-queue-type": "stream"})
    ch.confirm_delivery()
    for i in range(10):
        colour = "red" if i % 2 else "blue"
        ch.basic_publish("", qname, f"m{i}".encode(), pika.BasicProperties(
            headers={"colour": colour, "n": i, "x-stream-filter-value": colour},
            content_type="text/plain", app_id=f"app-{colour}", message_id=f"id-{i}"))
    p.close()
    return qname


def filters(**named) -> Filter:
    return Filter({symbol(k): Described(symbol(d), v) for k, (d, v) in named.items()})


def remote_filter(receiver):
    d = receiver.link.remote_source.filter
    d.rewind()
    d.next()
    return d.get_object()


def receive(receiver, n: int) -> list:
    got = []
    for _ in range(n):
        m = receiver.receive(timeout=TIMEOUT)
        receiver.accept()
        got.append(m)
    return got


def nothing_more(conn, receiver) -> bool:
    """The receiver's link drained: nothing is waiting for it (a drain is answered at once)."""
    receiver.link.drain(10)
    conn.wait(lambda: not receiver.link.draining(), timeout=TIMEOUT)
    return receiver.queued == 0


def test_a_stream_written_over_0_9_1_is_read_over_1_0_from_an_offset(conn, stream):
    r = conn.create_receiver(f"/queues/{stream}", credit=3, options=filters(o=("rabbitmq:stream-offset-spec", 6)))
    got = receive(r, 4)
    assert [m.body for m in got] == [b"m6", b"m7", b"m8", b"m9"]
    assert [m.annotations["x-stream-offset"] for m in got] == [6, 7, 8, 9]
    assert got[0].properties == {"colour": "blue", "n": 6}
    assert got[1].content_type == "text/plain" and got[1].group_id == "app-red" and got[1].id == "id-7"
    # the filter actually in place comes back in the attach's source (part 3 §3.5.3)
    assert remote_filter(r) == {symbol("o"): Described(OFFSET, 6)}
    assert nothing_more(conn, r)


@pytest.mark.parametrize("spec", ["first", symbol("last"), "next"])
def test_first_last_and_next(conn, stream, spec):
    r = conn.create_receiver(f"/queues/{stream}", credit=10, options=filters(o=("rabbitmq:stream-offset-spec", spec)))
    if spec == "next":
        conn.create_sender(f"/queues/{stream}").send(Message(body=b"new", inferred=True))
    body = r.receive(timeout=TIMEOUT).body
    r.accept()
    if spec == "first":
        assert body == b"m0"
    elif spec == "next":
        assert body == b"new"
    else:  # the start of the last committed batch: m9's, which may hold some before it
        assert body in [f"m{i}".encode() for i in range(10)]
        got = [body] + [m.body for m in receive(r, 9 - int(body[1:]))]
        assert got[-1] == b"m9"


def test_a_timestamp_offset_reads_what_was_published_from_then_on(conn, broker, qname):
    from proton import timestamp
    p = pika.BlockingConnection(pika.URLParameters(broker.url))
    ch = p.channel()
    ch.queue_declare(qname, durable=True, arguments={"x-queue-type": "stream"})
    ch.confirm_delivery()
    ch.basic_publish("", qname, b"old")
    since_1970 = conn.create_receiver(f"/queues/{qname}", credit=5, name="epoch",
                                      options=filters(o=("rabbitmq:stream-offset-spec", timestamp(0))))
    in_an_hour = conn.create_receiver(f"/queues/{qname}", credit=5, name="future", options=filters(
        o=("rabbitmq:stream-offset-spec", timestamp((int(time.time()) + 3600) * 1000))))
    ch.basic_publish("", qname, b"new")
    p.close()
    assert [m.body for m in receive(since_1970, 2)] == [b"old", b"new"]
    assert [m.body for m in receive(in_an_hour, 1)] == [b"new"]  # nothing stored is that recent: from the end on


def test_property_and_application_property_filters(conn, stream):
    opts = filters(o=("rabbitmq:stream-offset-spec", "first"),
                   p=("amqp:properties-filter", {symbol("group-id"): "&s:red", symbol("message-id"): "&p:id-"}),
                   a=("amqp:application-properties-filter", {"colour": "red", "n": None}))
    r = conn.create_receiver(f"/queues/{stream}", credit=10, options=opts)
    assert [m.body for m in receive(r, 5)] == [b"m1", b"m3", b"m5", b"m7", b"m9"]
    assert nothing_more(conn, r)
    assert set(remote_filter(r)) == {symbol("o"), symbol("p"), symbol("a")}
    # an integer reference matches a number of another width (filtex §4.1.1)
    r2 = conn.create_receiver(f"/queues/{stream}", credit=10, name="numbers", options=filters(
        o=("rabbitmq:stream-offset-spec", 0), a=("amqp:application-properties-filter", {"n": 4.0})))
    assert [m.body for m in receive(r2, 1)] == [b"m4"]
    assert nothing_more(conn, r2)


def test_a_filter_it_cannot_read_is_left_out_of_the_answer(conn, stream):
    opts = filters(o=("rabbitmq:stream-offset-spec", 8),
                   bad=("amqp:properties-filter", {symbol("no-such-field"): "x"}),
                   sql=("amqp:sql-filter", "colour = 'red' AND"))  # does not parse (test_sql_filters.py)
    r = conn.create_receiver(f"/queues/{stream}", credit=5, options=opts)
    assert [m.body for m in receive(r, 2)] == [b"m8", b"m9"]
    assert set(remote_filter(r)) == {symbol("o")}


def test_stream_filter_values_bloom(conn, stream):
    opts = filters(o=("rabbitmq:stream-offset-spec", "first"), f=("rabbitmq:stream-filter", ["blue"]))
    r = conn.create_receiver(f"/queues/{stream}", credit=10, options=opts)
    # blocks of 128 offsets: the Bloom filter lets the block through, the exact check follows
    assert [m.body for m in receive(r, 5)] == [b"m0", b"m2", b"m4", b"m6", b"m8"]
    assert nothing_more(conn, r)


def test_a_pre_settled_stream_receiver(conn, stream):
    r = conn.create_receiver(f"/queues/{stream}", credit=20,
                             options=[AtMostOnce(), filters(o=("rabbitmq:stream-offset-spec", 5))])
    got = [r.receive(timeout=TIMEOUT).body for _ in range(5)]
    assert got == [b"m5", b"m6", b"m7", b"m8", b"m9"]


def test_rabbitmqs_client_reads_a_stream_with_its_options(broker, stream):
    rmq = pytest.importorskip("rabbitmq_amqp_python_client")

    class Stop(Exception):
        pass

    class Handler(rmq.AMQPMessagingHandler):
        def __init__(self):
            super().__init__()
            self.seen = []

        def on_amqp_message(self, event):
            self.seen.append((bytes(event.message.body), event.message.annotations["x-stream-offset"]))
            self.delivery_context.accept(event)
            if len(self.seen) == 2:
                raise Stop()

    environment = rmq.Environment(f"amqp://guest:guest@{broker.host}:{broker.port}/")
    try:
        connection = environment.connection()
        connection.dial()
        handler = Handler()
        options = rmq.StreamConsumerOptions(offset_specification=6, filter_options=rmq.StreamFilterOptions(
            values=["red"], application_properties={"colour": "red"}))
        consumer = connection.consumer(rmq.AddressHelper.queue_address(stream), message_handler=handler,
                                       consumer_options=options)
        with pytest.raises(Stop):
            consumer.run()
        consumer.close()
        assert handler.seen == [(b"m7", 7), (b"m9", 9)]
    finally:
        environment.close()


class _TemporaryQueue(ReceiverOption, SenderOption):
    """RabbitMQ 4.1's capability of a dynamic terminus: an exclusive queue for this link."""

    def test(self, link) -> bool:
        return True

    def apply(self, link) -> None:
        terminus = link.source if link.is_receiver else link.target
        terminus.dynamic = True
        caps: Data = terminus.capabilities
        caps.put_array(False, Data.SYMBOL)
        caps.enter()
        caps.put_symbol("temporary-queue")
        caps.exit()


def test_rpc_over_a_dynamic_source(conn, broker, qname):
    p = pika.BlockingConnection(pika.URLParameters(broker.url))
    p.channel().queue_declare(qname)
    replies = conn.create_receiver(None, credit=5, options=[_TemporaryQueue(), DynamicNodeProperties({})])
    address = replies.link.remote_source.address
    assert address.startswith("/queues/amq.gen-")
    assert replies.link.remote_source.dynamic
    # the server: a 1.0 receiver of requests answering on an anonymous sender to each reply-to
    server = BlockingConnection(amqp_url(broker), timeout=TIMEOUT)
    try:
        requests = server.create_receiver(f"/queues/{qname}", credit=5)
        answers = server.create_sender(None)
        conn.create_sender(f"/queues/{qname}").send(Message(body=b"2+2", reply_to=address, correlation_id="c1"))
        request = requests.receive(timeout=TIMEOUT)
        requests.accept()
        answers.send(Message(address=request.reply_to, body=b"4", correlation_id=request.correlation_id))
        answer = replies.receive(timeout=TIMEOUT)
        replies.accept()
        assert (answer.body, answer.correlation_id) == (b"4", "c1")
    finally:
        server.close()
    queue = address[len("/queues/"):]
    assert pika_queue_exists(p, queue)
    replies.close()  # the link detaches: its queue goes
    deadline = time.monotonic() + TIMEOUT
    while pika_queue_exists(p, queue) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not pika_queue_exists(p, queue)
    p.close()


def test_a_dynamic_target_is_a_temporary_queue(conn):
    sender = conn.create_sender(None, options=_TemporaryQueue())
    address = sender.link.remote_target.address
    assert address.startswith("/queues/amq.gen-") and sender.link.remote_target.dynamic
    sender.send(Message(body=b"to myself", inferred=True))
    r = conn.create_receiver(address, credit=1)
    assert r.receive(timeout=TIMEOUT).body == b"to myself"
    r.accept()


def test_a_dynamic_source_without_the_capability_is_not_implemented(conn):
    with pytest.raises(LinkDetached, match="amqp:not-implemented.*Dynamic source not supported"):
        conn.create_receiver(None, dynamic=True)


def pika_queue_exists(p, queue: str) -> bool:
    ch = p.channel()
    try:
        ch.queue_declare(queue, passive=True)
    except pika.exceptions.ChannelClosedByBroker as e:
        return e.reply_code != 404  # 405: it exists, exclusive to the 1.0 connection
    ch.close()
    return True


def test_a_transaction_coordinator_is_refused_as_rabbitmq_4_refuses_it(broker):
    from proton.handlers import MessagingHandler, TransactionHandler
    from proton.reactor import Container

    class Declare(MessagingHandler, TransactionHandler):
        def __init__(self):
            super().__init__()
            self.error = None

        def on_start(self, event):
            self.conn = event.container.connect(amqp_url(broker))
            event.container.declare_transaction(self.conn, handler=self)

        def on_link_remote_close(self, event):
            self.error = event.link.remote_condition
            self.conn.close()

        def on_transaction_declared(self, event):
            self.conn.close()

    h = Declare()
    Container(h).run()
    assert h.error is not None
    assert (h.error.name, h.error.description) == ("amqp:not-implemented", "Transactions not supported")


def test_a_stream_sender_is_accepted_once_on_disk(conn, broker, qname):
    p = pika.BlockingConnection(pika.URLParameters(broker.url))
    p.channel().queue_declare(qname, durable=True, arguments={"x-queue-type": "stream"})
    p.close()
    s = conn.create_sender(f"/queues/{qname}")
    s.send(Message(body=b"over 1.0", durable=True, inferred=True))  # returns once accepted
    r = conn.create_receiver(f"/queues/{qname}", credit=1, options=filters(o=("rabbitmq:stream-offset-spec", "first")))
    assert r.receive(timeout=TIMEOUT).body == b"over 1.0"
    r.accept()


def test_a_filter_that_skips_a_long_run_lets_others_through_and_goes_on(conn, broker, qname):
    # more misses in a row than one turn allows (adapter.SCAN_TURN, 4096): the link pauses
    # until the next write and goes on from where it stopped
    p = pika.BlockingConnection(pika.URLParameters(broker.url))
    ch = p.channel()
    ch.queue_declare(qname, durable=True, arguments={"x-queue-type": "stream"})
    for i in range(5000):
        ch.basic_publish("", qname, b"", pika.BasicProperties(headers={"colour": "blue"}))
    ch.confirm_delivery()
    ch.basic_publish("", qname, b"the red one", pika.BasicProperties(headers={"colour": "red"}))
    p.close()
    r = conn.create_receiver(f"/queues/{qname}", credit=5, options=filters(
        o=("rabbitmq:stream-offset-spec", "first"), a=("amqp:application-properties-filter", {"colour": "red"})))
    m = r.receive(timeout=TIMEOUT)
    r.accept()
    assert (m.body, m.annotations["x-stream-offset"]) == (b"the red one", 5000)
    assert nothing_more(conn, r)


def test_a_dynamic_queue_goes_with_its_session(broker):
    from warren.codec.amqp1_0.types import Symbol
    from warren.spec import amqp1_0 as spec
    from .raw10 import Raw10
    with Raw10(broker) as c:
        c.login()
        c.begin(0)
        c.send(0, spec.Attach(name="replies", handle=0, role=True, target=spec.Target(),
                              source=spec.Source(dynamic=True, capabilities=[Symbol("temporary-queue")])))
        source = c.expect(spec.Attach).source
        assert source.dynamic and source.expiry_policy == "link-detach"
        queue = source.address[len("/queues/"):]
        p = pika.BlockingConnection(pika.URLParameters(broker.url))
        assert pika_queue_exists(p, queue)
        c.send(0, spec.End())
        c.expect(spec.End)
        assert not pika_queue_exists(p, queue)
        p.close()


def test_an_offset_the_stream_cannot_read_refuses_the_link(conn, stream):
    with pytest.raises(LinkDetached, match="amqp:precondition-failed.*x-stream-offset"):
        conn.create_receiver(f"/queues/{stream}", options=filters(o=("rabbitmq:stream-offset-spec", "yesterday")))
