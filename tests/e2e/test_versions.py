"""AMQP 0-8, 0-9 and Qpid's 0-91 end to end, and across versions (docs/versions.md).

No installable client speaks these versions (py-amqplib, the one 0-8 client on PyPI, does not
import on Python 3), so they are driven by Warren's own sans-IO client mode over real sockets
(tests/e2e/clientmode.py); the 0-9-1 side of the cross-version tests is pika.
"""

from __future__ import annotations

import decimal
import struct

import pika
import pytest

from warren.protocol.client import Heartbeat, Opened
from warren.protocol.events import Content
from warren.spec import amqp0_8 as x08, amqp0_8_qpid as q08, amqp0_9 as x09, amqp0_9_qpid as q09
from warren.spec import amqp0_91_qpid as q91
from warren.spec import amqp0_9_1 as spec

from .clientmode import SocketClient, properties_of
from .helpers import RABBITMQ, connect

pytestmark = pytest.mark.skipif(RABBITMQ, reason="Warren's dialects (Qpid variants, 540 refusals) are not RabbitMQ's")

QPID_PROPERTIES = {"product": "qpid python client", "qpid.client_process": "test", "capabilities": {}}

# (id, client dialect, header the client sends, client properties, connection.start version)
VERSIONS = [
    ("0-8", "0-8", None, None, (8, 0)),
    ("0-8-pdf-header", "0-8", b"AMQP\x01\x01\x09\x01", None, (8, 0)),
    ("0-8-qpid", "0-8-qpid", None, QPID_PROPERTIES, (8, 0)),
    ("0-9", "0-9", None, None, (0, 9)),
    ("0-91-qpid", "0-91-qpid", None, QPID_PROPERTIES, (0, 91)),
]


def client(broker, version_id: str, **kw) -> SocketClient:
    _, dialect, header, props, _ = next(v for v in VERSIONS if v[0] == version_id)
    if props is not None:
        kw.setdefault("client_properties", props)
    return SocketClient(broker, dialect, header=header, **kw)


PROPS = spec.BasicProperties(content_type="text/plain", content_encoding="utf-8",
                             headers={"h-str": "v", "h-int": 42, "h-nested": {"a": "b"}},
                             delivery_mode=2, priority=3, correlation_id="corr", reply_to="rq",
                             expiration="60000", message_id="mid", timestamp=1_700_000_000, type="t",
                             user_id="guest", app_id="app")


@pytest.mark.parametrize("version", [v[0] for v in VERSIONS])
def test_handshake_declare_bind_publish_get_consume_ack_close(broker, cleanup, uid, version):
    expected_version = next(v[4] for v in VERSIONS if v[0] == version)
    q, ex = f"v-{version}-{uid}", f"v-ex-{version}-{uid}"
    cleanup["queues"].append(q)
    cleanup["exchanges"].append(ex)
    with client(broker, version) as c:
        start = c.conn.start
        assert (start.version_major, start.version_minor) == expected_version
        caps = c.conn.server_properties["capabilities"]
        assert (caps == {}) == version.startswith("0-8")  # RabbitMQ: no capabilities for 0-8
        ch = c.channel(1)
        c.call(ch, spec.ExchangeDeclare(0, ex, "direct"), spec.ExchangeDeclareOk)
        ok = c.declare_queue(ch, q)
        assert (ok.queue, ok.message_count, ok.consumer_count) == (q, 0, 0)
        c.call(ch, spec.QueueBind(0, q, ex, "rk"), spec.QueueBindOk)
        for i in range(3):
            c.publish(ch, ex, "rk", b"body-%d" % i, PROPS)
        got = c.get(ch, q, no_ack=False)
        assert got.body == b"body-0" and got.method.message_count == 2
        assert properties_of(got) == PROPS
        c.send(ch, spec.BasicAck(got.method.delivery_tag, False))
        consume_ok = c.call(ch, spec.BasicConsume(0, q, "ctag", False, False, False, False), spec.BasicConsumeOk)
        assert consume_ok.consumer_tag == "ctag"
        d1 = c.wait(spec.BasicDeliver, ch)
        d2 = c.wait(spec.BasicDeliver, ch)
        assert [d1.body, d2.body] == [b"body-1", b"body-2"]
        assert (d1.method.consumer_tag, d1.method.exchange, d1.method.routing_key) == ("ctag", ex, "rk")
        c.send(ch, spec.BasicAck(d2.method.delivery_tag, True))
        c.call(ch, spec.BasicCancel("ctag", False), spec.BasicCancelOk)
        assert c.call(ch, spec.QueueDeclare(0, q, passive=True), spec.QueueDeclareOk).message_count == 0
        c.call(ch, spec.QueueUnbind(0, q, ex, "rk"), spec.QueueUnbindOk)  # 0-8: RabbitMQ's 50.50
        c.call(ch, spec.QueueDelete(0, q), spec.QueueDeleteOk)
        c.call(ch, spec.ChannelClose(200, "bye", 0, 0), spec.ChannelCloseOk)
        closed = c.close()
        assert closed.reply_code == 200 and not closed.by_server
        close_ok = (10, 61) if version.startswith("0-8") else (10, 51)
        assert c.received(0, *close_ok)


@pytest.mark.parametrize("version", ["0-8", "0-9"])
def test_0_8_and_0_9_publish_is_consumed_by_pika_with_properties_and_headers_intact(broker, cleanup, uid, version):
    q = f"x-{version}-to-091-{uid}"
    cleanup["queues"].append(q)
    pc = connect(broker)
    try:
        pch = pc.channel()
        pch.queue_declare(q)
        with client(broker, version) as c:
            ch = c.channel(1)
            c.publish(ch, "", q, b"from an old version", PROPS)
            c.call(ch, spec.BasicQos(0, 1, False), spec.BasicQosOk)  # a round trip: the publish is in
        method, props, body = next(pch.consume(q, auto_ack=True, inactivity_timeout=5))
        assert body == b"from an old version"
        assert props.headers == {"h-str": "v", "h-int": 42, "h-nested": {"a": "b"}}
        assert (props.content_type, props.content_encoding, props.delivery_mode, props.priority) == \
            ("text/plain", "utf-8", 2, 3)
        assert (props.correlation_id, props.reply_to, props.expiration, props.message_id) == \
            ("corr", "rq", "60000", "mid")
        assert (props.timestamp, props.type, props.user_id, props.app_id) == (1_700_000_000, "t", "guest", "app")
        pch.cancel()
    finally:
        pc.close()


@pytest.mark.parametrize("version", ["0-8", "0-9", "0-91-qpid"])
def test_pika_publish_is_consumed_over_old_versions_with_properties_and_headers_intact(broker, cleanup, uid,
                                                                                      version):
    q = f"x-091-to-{version}-{uid}"
    cleanup["queues"].append(q)
    headers = {"s": "text", "i": -7, "big": 2**40, "flag": True, "list": [1, "a"], "t": {"x": decimal.Decimal("1.5")}}
    pc = connect(broker)
    try:
        pch = pc.channel()
        pch.queue_declare(q)
        pch.basic_publish("", q, b"one", pika.BasicProperties(headers=headers, message_id="m1",
                                                               delivery_mode=2, priority=9))
        pch.basic_publish("", q, b"two", pika.BasicProperties(content_type="application/json"))
        with client(broker, version) as c:
            ch = c.channel(1)
            got = c.get(ch, q)
            assert got.body == b"one"
            p = properties_of(got)
            assert p.headers == headers and (p.message_id, p.delivery_mode, p.priority) == ("m1", 2, 9)
            c.call(ch, spec.BasicConsume(0, q, "", False, True, False, False), spec.BasicConsumeOk)
            d = c.wait(spec.BasicDeliver, ch)
            assert d.body == b"two" and properties_of(d).content_type == "application/json"
    finally:
        pc.close()


def test_0_8_publish_is_consumed_over_0_9_and_the_other_way_round(broker, cleanup, uid):
    q = f"x-08-09-{uid}"
    cleanup["queues"].append(q)
    with client(broker, "0-8") as c8, client(broker, "0-9") as c9:
        c8.channel(1)
        c9.channel(1)
        c8.declare_queue(1, q)
        c8.publish(1, "", q, b"8 to 9", PROPS)
        c9.call(1, spec.BasicConsume(0, q, "c9", False, False, False, False), spec.BasicConsumeOk)
        d = c9.wait(spec.BasicDeliver, 1)
        assert d.body == b"8 to 9" and properties_of(d) == PROPS
        c9.send(1, spec.BasicAck(d.method.delivery_tag, False))
        c9.call(1, spec.BasicCancel("c9", False), spec.BasicCancelOk)
        c9.publish(1, "", q, b"9 to 8", PROPS)
        c9.call(1, spec.BasicQos(0, 0, False), spec.BasicQosOk)  # a round trip: the publish is in
        got = c8.get(1, q)
        assert got is not None and got.body == b"9 to 8" and properties_of(got) == PROPS


@pytest.mark.parametrize("version", ["0-8", "0-9"])
def test_access_request_is_granted_ticket_1_and_the_ticket_is_ignored_afterwards(broker, cleanup, uid, version):
    q = f"ticket-{version}-{uid}"
    cleanup["queues"].append(q)
    with client(broker, version) as c:
        ch = c.channel(1)
        ok = c.call(ch, spec.AccessRequest("/data", False, False, True, True, True), spec.AccessRequestOk)
        assert ok.ticket == 1
        assert c.received(ch, 30, 11)
        # any ticket value is accepted afterwards
        assert c.call(ch, spec.QueueDeclare(77, q), spec.QueueDeclareOk).queue == q
        c.publish(ch, "", q, b"x")
        assert c.get(ch, q).body == b"x"


@pytest.mark.parametrize("method, name, ids", [
    (x09.MessageTransfer(destination="q", body=(0, b"hello")), "message.transfer", (120, 10)),
    (x09.MessageGet(queue="q"), "message.get", (120, 40)),
    (x09.MessageQos(prefetch_count=1), "message.qos", (120, 110)),
    (x09.ChannelPing(), "channel.ping", (20, 60)),
    (x09.FileOpen(identifier="f", content_size=1), "file.open", (70, 40)),
    (x09.DtxSelect(), "dtx.select", (100, 10)),
], ids=lambda v: v if isinstance(v, str) else None)
def test_0_9_message_and_other_unimplemented_classes_close_the_connection_with_540(broker, method, name, ids):
    with client(broker, "0-9") as c:
        c.channel(1)
        c.send(1, method)
        closed = c.wait_closed()
        assert closed.by_server and closed.reply_code == 540
        assert (closed.class_id, closed.method_id) == ids
        assert closed.reply_text.startswith("NOT_IMPLEMENTED") and name in closed.reply_text
        assert c.read_until_eof() is not None


@pytest.mark.parametrize("version, method, ids", [
    ("0-8", x08.TestInteger(1, 2, 3, 4, 0), (120, 10)),
    ("0-8", x08.StreamQos(prefetch_count=1), (80, 10)),
    ("0-8", x08.TunnelRequest(meta_data={}), (110, 10)),
])
def test_0_8_classes_without_a_0_9_1_twin_are_refused_with_540(broker, version, method, ids):
    with client(broker, version) as c:
        c.channel(1)
        c.send(1, method)
        closed = c.wait_closed()
        assert (closed.reply_code, closed.class_id, closed.method_id) == (540, *ids)
        assert closed.by_server
        if version.startswith("0-8"):
            assert c.received(0, 10, 60)  # 0-8's connection.close id


def _unacked(c: SocketClient, q: str, n: int) -> list[int]:
    for i in range(n):
        c.publish(1, "", q, b"m%d" % i)
    tags = []
    for _ in range(n):
        got = c.get(1, q, no_ack=False)
        assert got is not None and not got.method.redelivered
        tags.append(got.method.delivery_tag)
    return tags


def _redelivered(c: SocketClient, q: str, n: int) -> None:
    for _ in range(n):
        got = c.get(1, q)
        assert got is not None and got.method.redelivered


@pytest.mark.parametrize("version, send, reply_ids", [
    # 0-8 / 0-9 / 0-91: basic.recover 60.100 is asynchronous: no reply
    ("0-8", spec.BasicRecoverAsync(True), None),
    ("0-9", spec.BasicRecoverAsync(True), None),
    ("0-91-qpid", spec.BasicRecoverAsync(True), None),
    # RabbitMQ's 0-8 and 0-9-1's synchronous form 60.110 -> recover-ok 60.111
    ("0-8", spec.BasicRecover(True), (60, 111)),
    ("0-9", b"\x00\x3c\x00\x6e\x01", (60, 111)),
    ("0-91-qpid", spec.BasicRecover(True), (60, 111)),  # Qpid's recover-sync 60.110
    # Qpid's 0-8: recover 60.100 answered with recover-ok 60.101; Qpid's 0-9: recover-sync 60.102 -> 60.101
    ("0-8-qpid", spec.BasicRecover(True), (60, 101)),
    ("0-9", q09.BasicRecoverSync(True), (60, 101)),
], ids=["0-8-async", "0-9-async", "0-91-async", "0-8-rabbit-sync", "0-9-091-sync", "0-91-sync",
        "0-8-qpid-sync", "0-9-qpid-sync"])
def test_basic_recover_forms_of_each_version(broker, cleanup, uid, version, send, reply_ids):
    q = f"recover-{version}-{uid}"
    cleanup["queues"].append(q)
    with client(broker, version) as c:
        c.channel(1)
        c.declare_queue(1, q)
        _unacked(c, q, 2)
        if isinstance(send, bytes):
            c.conn.send_raw_method(1, send)
            c.flush()
        else:
            c.send(1, send)
        if reply_ids is not None:
            c.wait(spec.BasicRecoverOk, 1)
            assert c.received(1, *reply_ids)
        c.call(1, spec.BasicQos(0, 0, False), spec.BasicQosOk)  # a round trip
        assert not any(ids[1][0] == 60 and ids[1][1] in (101, 111) for ids in c.conn.trace) or reply_ids
        _redelivered(c, q, 2)


def test_qpid_0_8_consume_with_its_trailing_arguments_table_is_understood(broker, cleanup, uid):
    q = f"qpid-consume-{uid}"
    cleanup["queues"].append(q)
    with client(broker, "0-8-qpid") as c:
        c.channel(1)
        c.declare_queue(1, q)
        c.publish(1, "", q, b"hi")
        ok = c.call(1, q08.BasicConsume(0, q, "qc", False, True, False, False, {"x-priority": 5}),
                    spec.BasicConsumeOk)
        assert ok.consumer_tag == "qc"
        assert c.wait(spec.BasicDeliver, 1).body == b"hi"


def test_0_8_channel_open_ok_has_no_payload_and_0_9_has_a_longstr(broker):
    with client(broker, "0-8") as c8, client(broker, "0-9") as c9:
        c8.channel(3)
        c9.channel(3)
        assert b"\x01\x00\x03\x00\x00\x00\x04\x00\x14\x00\x0b\xce" in c8.raw
        assert b"\x01\x00\x03\x00\x00\x00\x08\x00\x14\x00\x0b\x00\x00\x00\x00\xce" in c9.raw


@pytest.mark.parametrize("version", ["0-8", "0-9", "0-91-qpid"])
def test_heartbeats_are_sent_at_the_interval_the_client_chose(broker, version):
    with client(broker, version, heartbeat=1) as c:
        assert c.conn.tune.heartbeat == 60
        c.wait(Heartbeat, timeout=3)
        c.conn.send_heartbeat()
        c.flush()
        c.channel(1)  # still alive


@pytest.mark.parametrize("frame_max", [0, 1 << 20])
@pytest.mark.parametrize("version", ["0-8", "0-9", "0-9-1"])
def test_tune_ok_frame_max_zero_or_above_ours_is_capped_in_0_8_and_0_9_and_refused_in_0_9_1(
        broker, cleanup, uid, version, frame_max):
    # 0-8/0-9: "the client can negotiate a lower value", 0 = no limit of its own; 0-9-1 (D89,
    # RabbitMQ): a client asking more than the server offered is refused with 530
    c = SocketClient(broker, version, handshake=False, frame_max=frame_max, channel_max=16, negotiate=False)
    with c:
        if version == "0-9-1":
            closed = c.wait_closed()
            assert (closed.reply_code, closed.class_id, closed.method_id) == (530, 10, 31)
            return
        c.wait(Opened)
        q = f"cap-{version}-{frame_max}-{uid}"
        cleanup["queues"].append(q)
        c.conn.frame_max = c.conn.tune.frame_max  # what the server settled on: its own offer
        c.channel(1)
        c.declare_queue(1, q)
        body = b"x" * 300_000
        c.publish(1, "", q, body)
        assert c.get(1, q).body == body
        assert c.conn.largest_frame == c.conn.tune.frame_max - 8


@pytest.mark.parametrize("version", ["0-8", "0-9"])
def test_0_8_and_0_9_body_frames_respect_a_small_negotiated_frame_max(broker, cleanup, uid, version):
    q = f"frames-{version}-{uid}"
    cleanup["queues"].append(q)
    with client(broker, version, frame_max=4096) as c:
        c.channel(1)
        c.declare_queue(1, q)
        body = bytes(range(256)) * 40  # 10240 octets: three body frames each way
        c.publish(1, "", q, body)
        got = c.get(1, q)
        assert got.body == body
        assert c.conn.largest_frame <= 4096 - 8


def test_channel_max_counts_open_channels_in_0_8_as_in_0_9_1(broker):
    # any channel number; channel-max open at once (RabbitMQ: 530, no class or method ids)
    with client(broker, "0-8", channel_max=2) as c:
        c.channel(5000)
        c.channel(7)
        c.conn.open_channel(9)  # a third channel: too many
        c.flush()
        closed = c.wait_closed()
        assert (closed.reply_code, closed.class_id, closed.method_id) == (530, 0, 0)
    with SocketClient(broker, "0-9-1", channel_max=2) as c:
        c.channel(65535)
        c.channel(5000)
        c.conn.open_channel(1)
        c.flush()
        closed = c.wait_closed()
        assert closed.reply_code == 530 and "reached the negotiated channel_max (2)" in closed.reply_text


@pytest.mark.parametrize("version, code", [("0-8", 503), ("0-9", 503), ("0-9-1", 505), ("0-91-qpid", 505)])
def test_unexpected_frame_is_503_where_505_does_not_exist(broker, version, code):
    c = client(broker, version) if version != "0-9-1" else SocketClient(broker, "0-9-1")
    with c:
        c.channel(1)
        c.conn.send_raw(struct.pack(">BHIHHQH", 2, 1, 14, 60, 0, 0, 0) + b"\xce")  # a header, no method
        c.flush()
        closed = c.wait_closed()
        assert closed.reply_code == code
        assert closed.reply_text.startswith("COMMAND_INVALID" if code == 503 else "UNEXPECTED_FRAME")


@pytest.mark.parametrize("version, code", [("0-8", 540), ("0-9", 540), ("0-9-1", 501)])
def test_out_of_band_frames_are_not_implemented_in_0_8_and_0_9_and_unknown_in_0_9_1(broker, version, code):
    c = client(broker, version) if version != "0-9-1" else SocketClient(broker, "0-9-1")
    with c:
        c.conn.send_raw(struct.pack(">BHI", 4, 1, 4) + b"\x00\x3c\x00\x28\xce")
        c.flush()
        assert c.wait_closed().reply_code == code


@pytest.mark.parametrize("header", [
    b"AMQP\x00\x00\x09\x02",  # no such 0-9-x
    b"AMQP\x01\x01\x08\x01",  # not 0-8
    b"AMQP\x01\x01\x00\x5c",  # not Qpid's 0-91 (0-10 is served: tests/e2e/amqp0_10)
])
def test_unknown_header_is_answered_with_0_9_1_and_closed(broker, header):
    c = SocketClient(broker, "0-9-1", header=header, handshake=False)
    try:
        assert c.read_until_eof() == b"AMQP\x00\x00\x09\x01"
    finally:
        c.close_socket()


def test_amqplain_login_as_0_8_clients_do(broker):
    with client(broker, "0-8", mechanism="AMQPLAIN") as c:
        assert c.conn.is_open
    with client(broker, "0-8", mechanism="PLAIN", plain_table=True) as c:  # 0-8 XML's PLAIN: a table
        assert c.conn.is_open
    bad = client(broker, "0-8", mechanism="AMQPLAIN", password="nope", handshake=False)
    try:
        closed = bad.wait_closed()
        assert closed.reply_code == 403 and bad.received(0, 10, 60)
    finally:
        bad.close_socket()


def test_deliveries_to_a_0_8_consumer_use_0_9_1_s_basic_deliver_encoding(broker, cleanup, uid):
    # basic.deliver is 60.60 with the same fields in every version: the hand-encoded fast path
    q = f"deliver-08-{uid}"
    cleanup["queues"].append(q)
    with client(broker, "0-8") as c:
        c.channel(1)
        c.declare_queue(1, q)
        c.call(1, spec.BasicConsume(0, q, "t", False, True, False, False), spec.BasicConsumeOk)
        c.publish(1, "", q, b"fast")
        d = c.wait(Content, 1)
        assert isinstance(d.method, spec.BasicDeliver) and c.received(1, 60, 60)
        assert x08.BasicDeliver.FIELDS == spec.BasicDeliver.FIELDS


@pytest.mark.parametrize("version", ["0-8", "0-9"])
def test_connection_open_with_insist_is_opened_here_with_no_known_hosts_and_no_redirect(broker, version):
    with client(broker, version, insist=True) as c:
        assert c.conn.is_open
        assert not c.received(0, 10, 50 if version == "0-8" else 42)  # connection.redirect
        c.channel(1)


@pytest.mark.parametrize("version, table", [("0-8-qpid", q08), ("0-9", q09), ("0-91-qpid", q91)])
def test_qpid_exchange_bound_answers_with_the_qpid_reply_codes(broker, uid, version, table):
    with client(broker, version) as c:
        c.channel(1)
        q = f"bound-{uid}"
        c.declare_queue(1, q)
        c.call(1, spec.QueueBind(queue=q, exchange="amq.direct", routing_key="k"), spec.QueueBindOk)

        def bound(exchange, key, queue):
            ok = c.call(1, table.ExchangeBound(exchange, key, queue), table.ExchangeBoundOk)
            return ok.reply_code

        assert bound("amq.direct", "k", q) == 0  # bound with that key
        assert bound("amq.direct", "", q) == 0  # bound at all
        assert bound("amq.direct", "k", "") == 0  # something bound with that key
        assert bound(f"no-such-{uid}", "", "") == 1  # exchange not found
        assert bound("amq.direct", "", f"no-such-{uid}") == 2  # queue not found
        assert bound("amq.fanout", "", q) == 4  # queue not bound
        assert bound("amq.direct", "other", "") == 5  # no queue bound with that key
        assert bound("amq.direct", "other", q) == 6  # this queue not bound with that key
        assert bound("amq.headers", "", "") in (0, 3)  # 3 when nothing at all is bound there
        c.call(1, spec.QueueDelete(queue=q), spec.QueueDeleteOk)
