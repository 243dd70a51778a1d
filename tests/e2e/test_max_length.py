"""Queue length limits (x-max-length, x-max-length-bytes) and x-overflow (drop-head,
reject-publish, reject-publish-dlx), with pika and py-amqp; RabbitMQ is the reference.

Only ready messages count; unacked ones do not. drop-head drops (and dead-letters, reason
maxlen) the oldest; reject-publish refuses the new message, which a confirm channel sees as
basic.nack; reject-publish-dlx also dead-letters it.
"""

from __future__ import annotations

import time

import amqp
import pika
import pytest
from pika.exceptions import ChannelClosedByBroker, NackError


from .helpers import (
    PRECONDITION_FAILED, amqp_connect, get, make_exchange, make_queue, message_count, wait_until,
)
from .rawamqp import publish_bulk, publish_frames, publish_frames_with_mode

pytestmark = pytest.mark.timeout(60)


def drain(ch, queue: str) -> list[bytes]:
    out = []
    while True:
        method, _, body = ch.basic_get(queue, auto_ack=True)
        if method is None:
            return out
        out.append(body)


def with_dlx(ch, cleanup, uid: str, name: str, **arguments) -> tuple[str, str]:
    dlx = make_exchange(ch, cleanup, f"ml-dlx-{name}-{uid}", "fanout")
    catch = make_queue(ch, cleanup, f"ml-catch-{name}-{uid}")
    ch.queue_bind(catch, dlx)
    q = make_queue(ch, cleanup, f"ml-{name}-{uid}", arguments={"x-dead-letter-exchange": dlx, **arguments})
    return q, catch


# --------------------------------------------------------------------------- drop-head


def test_drop_head_keeps_the_newest_messages(ch, cleanup, uid):
    q = make_queue(ch, cleanup, f"ml-drop-{uid}", arguments={"x-max-length": 2})
    for i in range(5):
        ch.basic_publish("", q, f"m{i}".encode())
    assert drain(ch, q) == [b"m3", b"m4"]


def test_drop_head_dead_letters_the_dropped_messages_with_reason_maxlen(conn, ch, cleanup, uid):
    q, catch = with_dlx(ch, cleanup, uid, "dropdl", **{"x-max-length": 1})
    for i in range(3):
        ch.basic_publish("", q, f"m{i}".encode())
    assert wait_until(lambda: message_count(conn, catch) == 2)
    _, props, body = get(ch, catch, auto_ack=True)
    assert body == b"m0"
    [death] = props.headers["x-death"]
    assert death["reason"] == "maxlen" and death["queue"] == q
    assert drain(ch, catch) == [b"m1"]
    assert drain(ch, q) == [b"m2"]


def test_max_length_bytes_counts_body_octets(ch, cleanup, uid):
    q = make_queue(ch, cleanup, f"ml-bytes-{uid}", arguments={"x-max-length-bytes": 25})
    for i in range(4):
        ch.basic_publish("", q, f"{i}".encode() * 10)  # 10 octets each
    assert drain(ch, q) == [b"2" * 10, b"3" * 10]


def test_unacked_messages_do_not_count_against_the_limit(ch, cleanup, uid):
    q = make_queue(ch, cleanup, f"ml-unacked-{uid}", arguments={"x-max-length": 1})
    ch.basic_publish("", q, b"a")
    method, _, _ = get(ch, q)  # out, unacked
    ch.basic_publish("", q, b"b")
    ch.basic_nack(method.delivery_tag, requeue=True)  # back: now two ready, over the limit until the next publish
    ch.basic_publish("", q, b"c")
    assert drain(ch, q) == [b"c"]


def test_a_limit_of_zero_still_delivers_to_a_waiting_consumer(conn, ch, cleanup, uid):
    q = make_queue(ch, cleanup, f"ml-zero-{uid}", arguments={"x-max-length": 0})
    ch.basic_publish("", q, b"dropped")
    assert message_count(conn, q) == 0
    got = []
    ch.basic_consume(q, lambda c, m, p, b: got.append(b), auto_ack=True)
    ch.basic_publish("", q, b"delivered")
    deadline = time.monotonic() + 5
    while not got and time.monotonic() < deadline:
        conn.process_data_events(0.1)
    assert got == [b"delivered"]


# --------------------------------------------------------------------------- reject-publish


def test_reject_publish_keeps_the_oldest_messages(ch, cleanup, uid):
    q = make_queue(ch, cleanup, f"ml-rej-{uid}", arguments={"x-max-length": 2, "x-overflow": "reject-publish"})
    for i in range(4):
        ch.basic_publish("", q, f"m{i}".encode())
    assert drain(ch, q) == [b"m0", b"m1"]


def test_reject_publish_nacks_a_refused_publish_on_a_confirm_channel(ch, cleanup, uid):
    q = make_queue(ch, cleanup, f"ml-nack-{uid}", arguments={"x-max-length": 1, "x-overflow": "reject-publish"})
    ch.confirm_delivery()
    ch.basic_publish("", q, b"first")  # acked
    with pytest.raises(NackError):
        ch.basic_publish("", q, b"second")
    get(ch, q, auto_ack=True)
    ch.basic_publish("", q, b"third")  # room again: acked
    assert drain(ch, q) == [b"third"]


def test_pipelined_publishes_are_each_acked_or_nacked_once_in_order(broker, ch, cleanup, uid):
    q = make_queue(ch, cleanup, f"ml-pipe-{uid}", arguments={"x-max-length": 3, "x-overflow": "reject-publish"})
    c = amqp_connect(broker)
    try:
        chan = c.channel()
        chan.confirm_select()
        events: list[tuple[str, int, bool]] = []
        chan.events["basic_ack"].add(lambda tag, multiple: events.append(("ack", tag, multiple)))
        chan.events["basic_nack"].add(lambda tag, multiple: events.append(("nack", tag, multiple)))
        for i in range(6):
            chan.basic_publish(amqp.Message(f"m{i}".encode()), exchange="", routing_key=q)
        settled: dict[int, str] = {}

        def settle():
            settled.clear()
            for kind, tag, multiple in events:
                tags = range(max(settled, default=0) + 1, tag + 1) if multiple else [tag]
                for t in tags:
                    assert t not in settled, f"publish {t} confirmed twice"
                    settled[t] = kind
            return len(settled) == 6

        deadline = time.monotonic() + 10
        while not settle() and time.monotonic() < deadline:
            try:
                c.drain_events(timeout=0.2)
            except TimeoutError:
                pass
        assert settled == {1: "ack", 2: "ack", 3: "ack", 4: "nack", 5: "nack", 6: "nack"}
    finally:
        c.close()
    assert drain(ch, q) == [b"m0", b"m1", b"m2"]


def test_reject_publish_refuses_even_when_a_consumer_is_waiting(conn, ch, cleanup, uid):
    q = make_queue(ch, cleanup, f"ml-rejcons-{uid}", arguments={"x-max-length": 0, "x-overflow": "reject-publish"})
    got = []
    ch.basic_consume(q, lambda c, m, p, b: got.append(b), auto_ack=True)
    pub = conn.channel()
    pub.confirm_delivery()
    with pytest.raises(NackError):
        pub.basic_publish("", q, b"x")
    conn.process_data_events(0.2)
    assert got == []


def test_a_publish_refused_by_one_of_its_queues_is_nacked(ch, cleanup, uid):
    ex = make_exchange(ch, cleanup, f"ml-fan-{uid}", "fanout")
    full = make_queue(ch, cleanup, f"ml-full-{uid}", arguments={"x-max-length": 0, "x-overflow": "reject-publish"})
    roomy = make_queue(ch, cleanup, f"ml-roomy-{uid}")
    ch.queue_bind(full, ex)
    ch.queue_bind(roomy, ex)
    ch.confirm_delivery()
    with pytest.raises(NackError):
        ch.basic_publish(ex, "", b"x")
    assert drain(ch, roomy) == [b"x"]  # the other queue still has it


def test_a_refused_mandatory_publish_is_not_returned(conn, ch, cleanup, uid):
    q = make_queue(ch, cleanup, f"ml-mand-{uid}", arguments={"x-max-length": 0, "x-overflow": "reject-publish"})
    returned = []
    ch.add_on_return_callback(lambda *a: returned.append(a))
    ch.basic_publish("", q, b"x", mandatory=True)
    conn.process_data_events(0.3)
    assert returned == []


def test_reject_publish_with_max_length_bytes(ch, cleanup, uid):
    q = make_queue(ch, cleanup, f"ml-rejb-{uid}", arguments={"x-max-length-bytes": 10, "x-overflow": "reject-publish"})
    ch.confirm_delivery()
    ch.basic_publish("", q, b"12345")
    ch.basic_publish("", q, b"67890")
    with pytest.raises(NackError):
        ch.basic_publish("", q, b"!")
    assert drain(ch, q) == [b"12345", b"67890"]


def test_reject_publish_dlx_dead_letters_and_nacks_the_refused_message(conn, ch, cleanup, uid):
    q, catch = with_dlx(ch, cleanup, uid, "rejdlx", **{"x-max-length": 1, "x-overflow": "reject-publish-dlx"})
    ch.confirm_delivery()
    ch.basic_publish("", q, b"kept")
    with pytest.raises(NackError):
        ch.basic_publish("", q, b"refused")
    assert wait_until(lambda: message_count(conn, catch) == 1)
    _, props, body = get(ch, catch, auto_ack=True)
    assert body == b"refused"
    assert props.headers["x-death"][0]["reason"] == "maxlen"
    assert drain(ch, q) == [b"kept"]


def test_reject_publish_does_not_dead_letter(conn, ch, cleanup, uid):
    q, catch = with_dlx(ch, cleanup, uid, "rejnodl", **{"x-max-length": 1, "x-overflow": "reject-publish"})
    ch.basic_publish("", q, b"kept")
    ch.basic_publish("", q, b"refused")
    time.sleep(0.2)
    assert message_count(conn, catch) == 0


# --------------------------------------------------------------------------- declare


@pytest.mark.parametrize("arguments", [
    {"x-overflow": "bogus"}, {"x-overflow": 1}, {"x-max-length": -1}, {"x-max-length": "10"},
    {"x-max-length-bytes": -5},
])
def test_invalid_length_arguments_are_refused_with_406(ch, uid, arguments):
    with pytest.raises(ChannelClosedByBroker) as ei:
        ch.queue_declare(f"ml-bad-{uid}", arguments=arguments)
    assert ei.value.reply_code == PRECONDITION_FAILED


def test_redeclaring_with_another_overflow_mode_is_refused_with_406(conn, ch, cleanup, uid):
    q = make_queue(ch, cleanup, f"ml-eq-{uid}", arguments={"x-max-length": 1, "x-overflow": "drop-head"})
    with pytest.raises(ChannelClosedByBroker) as ei:
        ch.queue_declare(q, arguments={"x-max-length": 1, "x-overflow": "reject-publish"})
    assert ei.value.reply_code == PRECONDITION_FAILED


# --------------------------------------------------------------------------- paging and restarts (Warren)


def test_a_paging_queue_keeps_its_length_limits(start_broker, uid):
    b = start_broker("--memory-budget", str(1024 * 1024))
    conn = pika.BlockingConnection(pika.URLParameters(b.url))
    try:
        ch = conn.channel()
        q = f"ml-paged-{uid}"
        ch.queue_declare(q, arguments={"x-max-length": 6000, "x-max-length-bytes": 6000 * 1024})
        publish_bulk(b.host, b.port, (publish_frames(1, "", q, i.to_bytes(8, "big") + b"." * 1016)
                                      for i in range(9000)))
        assert ch.queue_declare(q, passive=True).method.message_count == 6000
        method, _, body = ch.basic_get(q, auto_ack=True)
        assert int.from_bytes(body[:8], "big") == 3000
    finally:
        conn.close()


def test_a_durable_limited_queue_keeps_its_limits_after_a_restart(start_broker, tmp_path, uid):
    data = tmp_path / "ml-data"
    b = start_broker("--memory-budget", str(1024 * 1024), data_dir=data)
    conn = pika.BlockingConnection(pika.URLParameters(b.url))
    ch = conn.channel()
    ch.queue_declare("ml-durable", durable=True, arguments={"x-max-length-bytes": 4000 * 1024})
    persistent = (publish_frames_with_mode(1, "", "ml-durable", i.to_bytes(8, "big") + b"." * 1016, 2)
                  for i in range(4000))
    publish_bulk(b.host, b.port, persistent)
    conn.close()
    b.stop()
    b = start_broker("--memory-budget", str(1024 * 1024), data_dir=data)
    conn = pika.BlockingConnection(pika.URLParameters(b.url))
    try:
        ch = conn.channel()
        assert ch.queue_declare("ml-durable", passive=True).method.message_count == 4000
        for i in range(4000, 4010):  # full: each one pushes the oldest out
            ch.basic_publish("", "ml-durable", i.to_bytes(8, "big") + b"." * 1016, pika.BasicProperties(delivery_mode=2))
        assert ch.queue_declare("ml-durable", passive=True).method.message_count == 4000
        method, _, body = ch.basic_get("ml-durable", auto_ack=True)
        assert int.from_bytes(body[:8], "big") == 10
    finally:
        conn.close()
