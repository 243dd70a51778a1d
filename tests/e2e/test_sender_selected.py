"""Sender-selected distribution: the CC and BCC headers (pika; RabbitMQ 3.10 is the reference).

Each longstr in the ``CC`` / ``BCC`` arrays is an extra routing key for the whole route (e2e
bindings and alternate exchanges included); ``BCC`` is removed before anyone sees the message.
Publishes go through a confirm channel, so routing is done when ``basic_publish`` returns.
"""

from __future__ import annotations

import pika
import pytest
from pika.exceptions import ChannelClosedByBroker, UnroutableError

from .helpers import PRECONDITION_FAILED, connect, get, make_exchange, message_count, new_queue

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def cch(conn):
    c = conn.channel()
    c.confirm_delivery()
    return c


def direct(ch, cleanup, uid, tag="x", kind="direct", **kw) -> str:
    return make_exchange(ch, cleanup, f"ss-{tag}-{uid}", kind, **kw)


def queues(ch, exchange: str, *keys: str) -> list[str]:
    out = []
    for k in keys:
        q = new_queue(ch)
        ch.queue_bind(q, exchange, k)
        out.append(q)
    return out


def headers(**h) -> pika.BasicProperties:
    return pika.BasicProperties(headers=h)


def test_cc_adds_routing_keys_and_stays_in_the_headers(conn, cch, cleanup, uid):
    x = direct(cch, cleanup, uid)
    qa, qb, qc = queues(cch, x, "a", "b", "c")
    cch.basic_publish(x, "a", b"m", headers(CC=["b"]))
    for q in (qa, qb):
        _, props, body = get(cch, q, auto_ack=True)
        assert body == b"m" and props.headers == {"CC": ["b"]}
    assert message_count(conn, qc) == 0


def test_bcc_adds_routing_keys_and_is_removed_from_the_message(conn, cch, cleanup, uid):
    x = direct(cch, cleanup, uid)
    qa, qb, qc = queues(cch, x, "a", "b", "c")
    cch.basic_publish(x, "a", b"m", headers(BCC=["c"], keep="me", n=7))
    for q in (qa, qc):
        _, props, body = get(cch, q, auto_ack=True)
        assert body == b"m" and props.headers == {"keep": "me", "n": 7}
    assert message_count(conn, qb) == 0


def test_bcc_only_header_leaves_an_empty_table(cch, cleanup, uid):
    x = direct(cch, cleanup, uid)
    qa, qb = queues(cch, x, "a", "b")
    cch.basic_publish(x, "a", b"m", pika.BasicProperties(headers={"BCC": ["b"]}, message_id="id-1",
                                                         content_type="text/plain", reply_to="r"))
    _, props, _ = get(cch, qb, auto_ack=True)
    assert not props.headers
    assert (props.message_id, props.content_type, props.reply_to) == ("id-1", "text/plain", "r")


def test_cc_and_bcc_together(conn, cch, cleanup, uid):
    x = direct(cch, cleanup, uid)
    qa, qb, qc, qd = queues(cch, x, "a", "b", "c", "d")
    cch.basic_publish(x, "a", b"m", headers(CC=["b"], BCC=["c"]))
    for q in (qa, qb, qc):
        _, props, _ = get(cch, q, auto_ack=True)
        assert props.headers == {"CC": ["b"]}
    assert message_count(conn, qd) == 0


def test_a_queue_matched_by_several_keys_gets_one_copy(conn, cch, cleanup, uid):
    x = direct(cch, cleanup, uid)
    q = new_queue(cch)
    for k in ("a", "b", "c"):
        cch.queue_bind(q, x, k)
    cch.basic_publish(x, "a", b"m", headers(CC=["b", "b"], BCC=["c", "a"]))
    assert message_count(conn, q) == 1


def test_cc_works_on_the_default_exchange(conn, cch, cleanup, uid):
    q1, q2, q3 = new_queue(cch), new_queue(cch), new_queue(cch)
    cch.basic_publish("", q1, b"m", headers(CC=[q2], BCC=[q3]))
    assert [message_count(conn, q) for q in (q1, q2, q3)] == [1, 1, 1]


def test_cc_keys_match_topic_patterns(conn, cch, cleanup, uid):
    x = direct(cch, cleanup, uid, kind="topic")
    q_stock, q_news = queues(cch, x, "stock.#", "news.*")
    cch.basic_publish(x, "weather.today", b"m", headers(CC=["stock.nyse.ibm", "news.tech"]))
    assert (message_count(conn, q_stock), message_count(conn, q_news)) == (1, 1)


def test_elements_that_are_not_strings_are_ignored_but_kept(conn, cch, cleanup, uid):
    x = direct(cch, cleanup, uid)
    qa, qb = queues(cch, x, "a", "b")
    cch.basic_publish(x, "a", b"m", headers(CC=[5, "b", True]))
    _, props, _ = get(cch, qb, auto_ack=True)
    assert props.headers == {"CC": [5, "b", True]}


def test_cc_makes_a_mandatory_message_routable(cch, cleanup, uid):
    x = direct(cch, cleanup, uid)
    queues(cch, x, "b")
    cch.basic_publish(x, "nowhere", b"m", headers(CC=["b"]), mandatory=True)
    with pytest.raises(UnroutableError):
        cch.basic_publish(x, "nowhere", b"m", headers(CC=["also-nowhere"]), mandatory=True)


def test_returned_message_has_no_bcc(cch, cleanup, uid):
    x = direct(cch, cleanup, uid)
    with pytest.raises(UnroutableError) as ei:
        cch.basic_publish(x, "nowhere", b"m", headers(BCC=["nobody"], CC=["none"]), mandatory=True)
    assert ei.value.messages[0].properties.headers == {"CC": ["none"]}


def test_cc_keys_follow_e2e_bindings(conn, cch, cleanup, uid):
    src = direct(cch, cleanup, uid, "src", kind="fanout")
    dest = direct(cch, cleanup, uid, "dest")
    cch.exchange_bind(dest, src)
    qa, qb = queues(cch, dest, "a", "b")
    cch.basic_publish(src, "a", b"m", headers(BCC=["b"]))
    assert (message_count(conn, qa), message_count(conn, qb)) == (1, 1)


def test_cc_keys_go_to_the_alternate_exchange_when_nothing_matches(conn, cch, cleanup, uid):
    alt = direct(cch, cleanup, uid, "alt", kind="direct")
    main = direct(cch, cleanup, uid, "main", arguments={"alternate-exchange": alt})
    q = new_queue(cch)
    cch.queue_bind(q, alt, "b")
    cch.basic_publish(main, "a", b"m", headers(CC=["b"]))
    assert message_count(conn, q) == 1


@pytest.mark.parametrize("name,value,typename", [("CC", "b", "longstr"), ("BCC", 5, "signedint"),
                                                 ("CC", {"k": "v"}, "table")])
def test_a_cc_or_bcc_header_that_is_not_an_array_closes_the_channel_with_406(conn, cleanup, uid,
                                                                             name, value, typename):
    ch = conn.channel()
    q = new_queue(ch)
    ch.basic_publish("", q, b"m", headers(**{name: value}))
    with pytest.raises(ChannelClosedByBroker) as ei:
        ch.queue_declare(q, passive=True)
    assert ei.value.reply_code == PRECONDITION_FAILED
    assert ei.value.reply_text == (f'PRECONDITION_FAILED - invalid message: '
                                   f'{{unacceptable_type_in_header,"{name}",{typename}}}')


def test_persistent_message_is_stored_without_bcc(start_broker, tmp_path):
    b = start_broker()
    c = connect(b)
    ch = c.channel()
    ch.confirm_delivery()
    ch.queue_declare("ss-durable-a", durable=True)
    ch.queue_declare("ss-durable-b", durable=True)
    ch.basic_publish("", "ss-durable-a", b"m", pika.BasicProperties(delivery_mode=2, headers={
        "BCC": ["ss-durable-b"], "x": 1}))
    c.close()
    b.stop()
    b2 = start_broker(data_dir=b.data_dir)
    c = connect(b2)
    ch = c.channel()
    for q in ("ss-durable-a", "ss-durable-b"):
        _, props, body = get(ch, q, auto_ack=True)
        assert body == b"m" and props.headers == {"x": 1}
    c.close()
