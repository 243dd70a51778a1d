"""AMQP 1.0 flow over real sockets: multi-frame transfers both ways, the session window, the
receiver settle mode, and idle time-outs (empty frames sent, a silent client dropped)."""

from __future__ import annotations

import pika
from proton import Message
from proton.utils import BlockingConnection

from tests.e2e.helpers import wait_until
from warren.spec import amqp1_0 as spec

from .conftest import amqp_url
from .raw10 import AMQP_HEADER, SASL_HEADER, Raw10


def test_a_message_larger_than_a_frame_travels_in_several_frames_both_ways(broker, qname):
    p = pika.BlockingConnection(pika.URLParameters(broker.url))
    p.channel().queue_declare(qname)
    body = bytes(range(256)) * 2048  # 512 KiB: four times the broker's max-frame-size
    c = BlockingConnection(amqp_url(broker), timeout=10)
    c.create_sender(f"/queues/{qname}").send(Message(body=body, inferred=True))
    r = c.create_receiver(f"/queues/{qname}")
    assert r.receive(timeout=10).body == body
    r.accept()
    c.close()
    assert p.channel().queue_declare(qname, passive=True).method.message_count == 0
    p.channel().queue_delete(qname)
    p.close()


def test_the_broker_sends_no_more_transfers_than_the_session_window_allows(broker, qname):
    p = pika.BlockingConnection(pika.URLParameters(broker.url))
    p.channel().queue_declare(qname)
    for i in range(5):
        p.channel().basic_publish("", qname, str(i).encode())
    with Raw10(broker) as c:
        c.login()
        c.send(0, spec.Begin(next_outgoing_id=0, incoming_window=2, outgoing_window=100))
        c.expect(spec.Begin)
        attach = c.attach_receiver(0, 0, f"/queues/{qname}")
        assert attach.rcv_settle_mode == spec.ReceiverSettleMode.FIRST
        c.send(0, spec.Flow(next_incoming_id=0, incoming_window=2, next_outgoing_id=0, outgoing_window=100,
                            handle=0, delivery_count=0, link_credit=10))
        assert [c.expect(spec.Transfer).delivery_id for _ in range(2)] == [0, 1]
        # an echo is answered once the broker handled our flow: whatever it could send came before
        c.send(0, spec.Flow(next_incoming_id=2, incoming_window=0, next_outgoing_id=0, outgoing_window=100, echo=True))
        echo = c.expect(spec.Flow)
        assert echo.handle is None and not any(type(x) is spec.Transfer for x in c.skipped)
        c.send(0, spec.Flow(next_incoming_id=2, incoming_window=10, next_outgoing_id=0, outgoing_window=100))
        assert [c.expect(spec.Transfer).delivery_id for _ in range(3)] == [2, 3, 4]
    p.channel().queue_delete(qname)
    p.close()


def test_a_receiver_asking_to_settle_second_is_answered_with_first(broker, qname):
    p = pika.BlockingConnection(pika.URLParameters(broker.url))
    p.channel().queue_declare(qname)
    with Raw10(broker) as c:
        c.login()
        c.begin(0)
        c.send(0, spec.Attach(name="second", handle=0, role=True, rcv_settle_mode=spec.ReceiverSettleMode.SECOND,
                              source=spec.Source(address=f"/queues/{qname}"), target=spec.Target()))
        assert c.expect(spec.Attach).rcv_settle_mode == spec.ReceiverSettleMode.FIRST
    p.channel().queue_delete(qname)
    p.close()


def test_idle_time_out_empty_frames_come_and_a_silent_client_is_dropped(broker):
    with Raw10(broker, timeout=15) as c:
        c.send_raw(SASL_HEADER)
        c.header()
        c.expect(spec.SaslMechanisms)
        c.send(0, spec.SaslInit(mechanism="PLAIN", initial_response=b"\0guest\0guest"), sasl=True)
        c.expect(spec.SaslOutcome)
        c.send_raw(AMQP_HEADER)
        c.header()
        c.send(0, spec.Open(container_id="idle", idle_time_out=1000))
        assert c.expect(spec.Open).idle_time_out == 1000
        # the broker's empty frames keep us alive while we say nothing; then it drops us
        empty = 0
        while not c.eof:
            frame = c.reader.maybe_frame()
            if frame is None:
                c._read()
            elif not frame.body:
                empty += 1
        assert empty >= 1
    assert wait_until(lambda: "missed heartbeats" in broker.log(), timeout=5)
