"""End-to-end tests of publisher confirms (confirm class) and transactions (tx class).

pika, aio-pika and py-amqp over TCP; RabbitMQ is the reference.
"""

from __future__ import annotations

import asyncio
import time

import aio_pika
from pamqp.commands import Basic as PamqpBasic
import amqp
import pika
import pytest
from pika.exceptions import ChannelClosedByBroker, UnroutableError

from .helpers import (
    NO_ROUTE, PRECONDITION_FAILED, amqp_connect, get, make_exchange, make_queue, message_count,
    wait_until,
)

pytestmark = pytest.mark.timeout(60)


# --------------------------------------------------------------------------- confirms


def test_a_thousand_publishes_on_a_pika_confirm_channel_are_each_confirmed(conn, ch, cleanup, uid):
    q = make_queue(ch, cleanup, f"conf-pika-{uid}")
    ch.confirm_delivery()  # raises unless confirm.select-ok comes back
    deadline = time.monotonic() + 30
    for i in range(1000):
        # On a confirm channel BlockingChannel.basic_publish waits for the broker's ack and raises
        # NackError / UnroutableError otherwise.
        ch.basic_publish("", q, str(i).encode(), mandatory=True)
        assert time.monotonic() < deadline, f"only {i} publishes confirmed within 30s"
    assert message_count(conn, q) == 1000


def test_confirm_select_is_answered_with_select_ok_and_may_be_repeated(broker):
    c = amqp_connect(broker)
    try:
        chan = c.channel()
        chan.confirm_select()
        chan.confirm_select()  # idempotent
        assert chan.is_open
    finally:
        c.close()


def test_confirm_delivery_tags_count_publishes_from_one(broker, ch, cleanup, uid):
    q = make_queue(ch, cleanup, f"conf-tags-{uid}")
    c = amqp_connect(broker)
    try:
        chan = c.channel()
        chan.confirm_select()
        acked: set[int] = set()
        nacked: list[int] = []

        def on_ack(tag, multiple):
            if multiple:
                acked.update(range(1, tag + 1))
            else:
                assert tag not in acked, f"delivery tag {tag} confirmed twice"
                acked.add(tag)

        chan.events["basic_ack"].add(on_ack)
        chan.events["basic_nack"].add(lambda tag, multiple: nacked.append(tag))
        for i in range(50):
            chan.basic_publish(amqp.Message(str(i).encode()), exchange="", routing_key=q)
        deadline = time.monotonic() + 15
        while len(acked) < 50 and time.monotonic() < deadline:
            try:
                c.drain_events(timeout=0.2)
            except TimeoutError:
                pass
        assert acked == set(range(1, 51))
        assert nacked == []
    finally:
        c.close()


async def test_a_thousand_gathered_aio_pika_publishes_with_publisher_confirms_are_all_acked(broker, uid):
    connection = await aio_pika.connect(broker.url, timeout=10)
    async with connection:
        channel = await connection.channel(publisher_confirms=True)
        queue = await channel.declare_queue(f"conf-aio-{uid}", auto_delete=False)
        try:
            confirmations = await asyncio.wait_for(
                asyncio.gather(*[
                    channel.default_exchange.publish(aio_pika.Message(str(i).encode()), routing_key=queue.name)
                    for i in range(1000)
                ]),
                timeout=30,
            )
            assert len(confirmations) == 1000
            assert all(isinstance(c, PamqpBasic.Ack) for c in confirmations)
            declared = await channel.declare_queue(queue.name, passive=True)
            assert declared.declaration_result.message_count == 1000
        finally:
            await queue.delete(if_unused=False, if_empty=False)


def test_a_mandatory_unroutable_publish_on_a_confirm_channel_is_returned_before_it_is_acked(broker, uid):
    c = amqp_connect(broker)
    try:
        chan = c.channel()
        ex = f"conf-ret-{uid}"
        chan.exchange_declare(ex, "direct", auto_delete=False)
        try:
            chan.confirm_select()
            events: list[tuple] = []
            chan.events["basic_return"].add(
                lambda exc, exchange, routing_key, message: events.append(("return", exc.reply_code, message.body)))
            chan.events["basic_ack"].add(lambda tag, multiple: events.append(("ack", tag)))
            chan.events["basic_nack"].add(lambda tag, multiple: events.append(("nack", tag)))
            chan.basic_publish(amqp.Message(b"bounce"), exchange=ex, routing_key="nowhere", mandatory=True)
            deadline = time.monotonic() + 10
            while len(events) < 2 and time.monotonic() < deadline:
                try:
                    c.drain_events(timeout=0.2)
                except TimeoutError:
                    pass
            # Unroutable mandatory messages are confirmed (acked, not nacked) -- after the return.
            assert events == [("return", NO_ROUTE, b"bounce"), ("ack", 1)]
        finally:
            chan.exchange_delete(ex)
    finally:
        c.close()


def test_pika_raises_unroutable_error_for_a_returned_mandatory_publish_on_a_confirm_channel(ch, cleanup, uid):
    # pika only reports UnroutableError if the basic.return arrived before the basic.ack.
    ex = make_exchange(ch, cleanup, f"conf-unr-{uid}", "fanout")
    ch.confirm_delivery()
    with pytest.raises(UnroutableError) as ei:
        ch.basic_publish(ex, "", b"bounce", mandatory=True)
    assert [m.method.reply_code for m in ei.value.messages] == [NO_ROUTE]
    assert ch.is_open


def test_a_non_mandatory_unroutable_publish_on_a_confirm_channel_is_simply_acked(ch, cleanup, uid):
    ex = make_exchange(ch, cleanup, f"conf-nm-{uid}", "fanout")
    ch.confirm_delivery()
    ch.basic_publish(ex, "", b"dropped")  # raises NackError if nacked
    assert ch.is_open


# --------------------------------------------------------------------------- tx


def test_tx_commit_delivers_published_messages_and_not_before(conn, ch, cleanup, uid):
    q = make_queue(ch, cleanup, f"tx-commit-{uid}")
    ok = ch.tx_select()
    assert isinstance(ok.method, pika.spec.Tx.SelectOk)
    for i in range(3):
        ch.basic_publish("", q, str(i).encode())
    ch.basic_qos(prefetch_count=0)  # a round trip: the publishes have reached the broker
    time.sleep(0.2)
    assert message_count(conn, q) == 0, "transactional publishes visible before commit"
    ok = ch.tx_commit()
    assert isinstance(ok.method, pika.spec.Tx.CommitOk)
    assert message_count(conn, q) == 3
    assert [get(ch, q, auto_ack=True)[2] for _ in range(3)] == [b"0", b"1", b"2"]


def test_tx_rollback_discards_published_messages(conn, ch, cleanup, uid):
    q = make_queue(ch, cleanup, f"tx-rollback-{uid}")
    ch.tx_select()
    for i in range(5):
        ch.basic_publish("", q, f"discard-{i}".encode())
    ok = ch.tx_rollback()
    assert isinstance(ok.method, pika.spec.Tx.RollbackOk)
    time.sleep(0.2)
    assert message_count(conn, q) == 0
    # The channel stays transactional: a later commit delivers only what came after.
    ch.basic_publish("", q, b"kept")
    ch.tx_commit()
    assert message_count(conn, q) == 1
    assert get(ch, q, auto_ack=True)[2] == b"kept"


def test_each_commit_starts_a_new_transaction(conn, ch, cleanup, uid):
    q = make_queue(ch, cleanup, f"tx-multi-{uid}")
    ch.tx_select()
    ch.basic_publish("", q, b"first")
    ch.tx_commit()
    ch.basic_publish("", q, b"second")
    ch.tx_rollback()
    ch.basic_publish("", q, b"third")
    ch.tx_commit()
    assert message_count(conn, q) == 2
    assert [get(ch, q, auto_ack=True)[2] for _ in range(2)] == [b"first", b"third"]


def test_acks_inside_a_transaction_take_effect_only_on_commit(conn, ch, cleanup, uid):
    q = make_queue(ch, cleanup, f"tx-ack-{uid}")
    for i in range(3):
        ch.basic_publish("", q, str(i).encode())
    assert wait_until(lambda: message_count(conn, q) == 3)

    txch = conn.channel()
    txch.tx_select()
    tags = [txch.basic_get(q, auto_ack=False)[0].delivery_tag for _ in range(3)]
    txch.basic_ack(tags[-1], multiple=True)
    txch.tx_rollback()
    # RabbitMQ: the rollback discards the pending acks; the messages stay unacked (they are not
    # requeued, and are not redelivered until the channel closes or recovers).
    assert message_count(conn, q) == 0
    # The delivery tags are still valid: ack them again, this time for real.
    txch.basic_ack(tags[0])
    txch.tx_commit()
    txch.close()  # the two still-unacked messages go back to the queue
    assert wait_until(lambda: message_count(conn, q) == 2)
    assert [get(ch, q, auto_ack=True)[2] for _ in range(2)] == [b"1", b"2"]


def test_an_ack_in_an_uncommitted_transaction_is_lost_when_the_channel_closes(conn, ch, cleanup, uid):
    q = make_queue(ch, cleanup, f"tx-ackclose-{uid}")
    ch.basic_publish("", q, b"m")
    assert wait_until(lambda: message_count(conn, q) == 1)
    txch = conn.channel()
    txch.tx_select()
    method, _, _ = txch.basic_get(q, auto_ack=False)
    txch.basic_ack(method.delivery_tag)
    txch.close()
    assert wait_until(lambda: message_count(conn, q) == 1)
    method, _, body = get(ch, q, auto_ack=True)
    assert (body, method.redelivered) == (b"m", True)


def test_tx_select_on_a_confirm_channel_fails_with_406(ch):
    ch.confirm_delivery()
    with pytest.raises(ChannelClosedByBroker) as ei:
        ch.tx_select()
    assert ei.value.reply_code == PRECONDITION_FAILED


def test_confirm_select_on_a_transactional_channel_fails_with_406(ch):
    ch.tx_select()
    with pytest.raises(ChannelClosedByBroker) as ei:
        ch.confirm_delivery()
    assert ei.value.reply_code == PRECONDITION_FAILED


def test_tx_commit_without_tx_select_fails_with_406(ch):
    with pytest.raises(ChannelClosedByBroker) as ei:
        ch.tx_commit()
    assert ei.value.reply_code == PRECONDITION_FAILED


def test_tx_rollback_without_tx_select_fails_with_406(ch):
    with pytest.raises(ChannelClosedByBroker) as ei:
        ch.tx_rollback()
    assert ei.value.reply_code == PRECONDITION_FAILED
