"""Bad AMQP 1.0 input over real sockets: each gets the right error condition, a log line naming
the client, and everyone else is still served (a Proton client works before and after)."""

from __future__ import annotations

import pika
import pytest
from proton import Message
from proton.utils import BlockingConnection

from tests.e2e.helpers import wait_until
from warren.codec.amqp1_0.frames import encode_frame
from warren.spec import amqp1_0 as spec

from .conftest import amqp_url
from .raw10 import Raw10, data_message


def assert_logged(broker, port: int, *words: str) -> None:
    peer = f"127.0.0.1:{port}"

    def found() -> bool:
        return any(peer in line and all(w in line for w in words) for line in broker.log().splitlines())
    assert wait_until(found, timeout=5), f"no log line with {peer} and {words}"
    assert "Traceback" not in broker.log()


def still_served(broker, qname: str) -> None:
    p = pika.BlockingConnection(pika.URLParameters(broker.url))
    p.channel().queue_declare(qname, auto_delete=False)
    c = BlockingConnection(amqp_url(broker), timeout=10)
    c.create_sender(f"/queues/{qname}").send(Message(body=b"ok", inferred=True))
    c.close()
    assert p.channel().basic_get(qname, auto_ack=True)[2] == b"ok"
    p.channel().queue_delete(qname)
    p.close()


@pytest.mark.parametrize("octets, condition", [
    (b"\x00\x00\x00\x0c\x02\x00\x00\x00\x00\x53\x99\x45", "amqp:decode-error"),  # no such performative
    (b"\x00\x00\x00\x0d\x02\x00\x00\x00\xc0\x05\x09\x41\x41", "amqp:decode-error"),  # a list cut short
    (b"\x00\x00\x00\x08\x01\x00\x00\x00", "amqp:connection:framing-error"),  # data offset 1
    (b"\x7f\xff\xff\xff\x02\x00\x00\x00", "amqp:connection:framing-error"),  # 2 GiB frame
])
def test_malformed_frames_close_the_connection_with_their_condition(broker, qname, octets, condition):
    with Raw10(broker) as c:
        c.login()
        c.send_raw(octets)
        close = c.expect(spec.Close)
        assert close.error.condition == condition and close.error.description
        assert_logged(broker, c.port, "AMQP 1.0 protocol error", condition)
    still_served(broker, qname)


def test_a_performative_in_the_wrong_state_is_illegal_state(broker, qname):
    with Raw10(broker) as c:
        c.login()
        c.send(0, spec.Open(container_id="twice"))
        assert c.expect(spec.Close).error.condition == "amqp:illegal-state"
        assert_logged(broker, c.port, "a second open")
    with Raw10(broker) as c:
        c.login()
        c.send(5, spec.Flow(incoming_window=1, next_outgoing_id=0, outgoing_window=1))  # no session on 5
        assert c.expect(spec.Close).error.condition == "amqp:not-found"
    still_served(broker, qname)


def test_a_transfer_on_an_unattached_handle_ends_that_session_only(broker, qname):
    p = pika.BlockingConnection(pika.URLParameters(broker.url))
    p.channel().queue_declare(qname)
    with Raw10(broker) as c:
        c.login()
        c.begin(0)
        c.begin(1)
        c.send(0, spec.Transfer(handle=9, delivery_id=0, delivery_tag=b"t", settled=True), data_message(b"x"))
        end = c.expect(spec.End)
        assert end.error.condition == "amqp:session:unattached-handle"
        assert_logged(broker, c.port, "unattached-handle")
        c.send(0, spec.End())
        c.attach_sender(1, 0, f"/queues/{qname}")  # the other session serves on
        c.send(1, spec.Transfer(handle=0, delivery_id=0, delivery_tag=b"t", settled=True), data_message(b"y"))
        assert wait_until(lambda: p.channel().queue_declare(qname, passive=True).method.message_count == 1)
    p.channel().queue_delete(qname)
    p.close()


def test_transfers_sent_before_any_credit_detach_the_link_with_transfer_limit_exceeded(broker, qname):
    p = pika.BlockingConnection(pika.URLParameters(broker.url))
    p.channel().queue_declare(qname)
    with Raw10(broker) as c:
        c.login()
        c.begin(0)
        # the attach and a transfer in one write: the transfer comes before the broker's flow
        attach = spec.Attach(name="eager", handle=0, role=False, source=spec.Source(),
                             target=spec.Target(address=f"/queues/{qname}"))
        c.send_raw(encode_frame(0, attach) + encode_frame(
            0, spec.Transfer(handle=0, delivery_id=0, delivery_tag=b"t", settled=True), data_message(b"m")))
        detach = c.expect(spec.Detach)
        assert detach.error.condition == "amqp:link:transfer-limit-exceeded"
        assert_logged(broker, c.port, "without credit")
        c.send(0, spec.Detach(handle=0, closed=True))
        c.attach_sender(0, 1, f"/queues/{qname}")  # a link that waits for its credit is served
    assert p.channel().queue_declare(qname, passive=True).method.message_count == 0
    p.channel().queue_delete(qname)
    p.close()
    still_served(broker, qname)


def test_a_receiver_granting_all_the_credit_there_is_gets_its_messages(broker, qname):
    p = pika.BlockingConnection(pika.URLParameters(broker.url))
    p.channel().queue_declare(qname)
    for i in range(3):
        p.channel().basic_publish("", qname, str(i).encode())
    with Raw10(broker) as c:
        c.login()
        c.begin(0)
        c.attach_receiver(0, 0, f"/queues/{qname}")
        # 0xFFFFFFFF credit, and a delivery-count from nowhere: neither wraps into "no credit"
        c.send(0, spec.Flow(next_incoming_id=0, incoming_window=1000, next_outgoing_id=0, outgoing_window=1000,
                            handle=0, delivery_count=0x7FFFFFFF, link_credit=0xFFFFFFFF))
        assert [c.expect(spec.Transfer).delivery_id for _ in range(3)] == [0, 1, 2]
    p.channel().queue_delete(qname)
    p.close()


def test_an_oversized_transfer_detaches_with_message_size_exceeded(start_broker, qname):
    b = start_broker("--max-message-size", "4096")
    p = pika.BlockingConnection(pika.URLParameters(b.url))
    p.channel().queue_declare(qname)
    with Raw10(b) as c:
        open_ = c.login()
        c.begin(0)
        c.attach_sender(0, 0, f"/queues/{qname}")
        body = data_message(b"x" * 3000)
        c.send(0, spec.Transfer(handle=0, delivery_id=0, delivery_tag=b"t", more=True), body)
        c.send(0, spec.Transfer(handle=0, more=False), body)
        detach = c.expect(spec.Detach)
        assert detach.error.condition == "amqp:link:message-size-exceeded" and open_.max_frame_size
        assert_logged(b, c.port, "larger than 4096 octets")
    still_served(b, qname)
    p.close()


def test_drain_spends_the_credit_left_once_the_queue_is_empty(broker, qname):
    p = pika.BlockingConnection(pika.URLParameters(broker.url))
    p.channel().queue_declare(qname)
    p.channel().basic_publish("", qname, b"only")
    with Raw10(broker) as c:
        c.login()
        c.begin(0)
        c.attach_receiver(0, 0, f"/queues/{qname}")
        c.send(0, spec.Flow(next_incoming_id=0, incoming_window=1000, next_outgoing_id=0, outgoing_window=1000,
                            handle=0, delivery_count=0, link_credit=5, drain=True))
        transfer = c.expect(spec.Transfer)
        flow = c.expect(spec.Flow)
        assert transfer.delivery_id == 0 and (flow.delivery_count, flow.link_credit, flow.drain) == (5, 0, True)
        c.send(0, spec.Disposition(role=True, first=0, settled=True, state=spec.Accepted()))
        assert wait_until(lambda: p.channel().queue_declare(qname, passive=True).method.message_count == 0)
    p.channel().queue_delete(qname)
    p.close()


def test_a_login_without_sasl_is_refused_unless_anonymous_is_configured(broker, start_broker):
    with Raw10(broker) as c:
        c.send_raw(b"AMQP\x00\x01\x00\x00")
        assert c.header() == b"AMQP\x00\x01\x00\x00"
        c.send(0, spec.Open(container_id="anon"))
        c.expect(spec.Open)
        assert c.expect(spec.Close).error.condition == "amqp:unauthorized-access"
        assert_logged(broker, c.port, "login refused")
    b = start_broker("--anonymous-user", "guest")
    with Raw10(b) as c:
        c.send_raw(b"AMQP\x00\x01\x00\x00")
        assert c.header() == b"AMQP\x00\x01\x00\x00"
        c.send(0, spec.Open(container_id="anon"))
        assert c.expect(spec.Open).container_id


def test_transactions_are_not_implemented(broker):
    with Raw10(broker) as c:
        c.login()
        c.begin(0)
        c.send(0, spec.Attach(name="tx", handle=0, role=False, source=spec.Source(address="me"),
                              target=spec.Coordinator()))
        a = c.expect(spec.Attach)  # RabbitMQ 4's answer: the client's source back, no target
        assert (a.source.address, a.target) == ("me", None)
        error = c.expect(spec.Detach).error
        assert (error.condition, error.description) == ("amqp:not-implemented", "Transactions not supported")
