"""Exclusive queues re-declared with another ``exclusive`` flag (issue 12 point 4).

RabbitMQ checks the exclusive flag as a lock before any argument equivalence: a declare that
says exclusive needs the queue to be this connection's, one that does not needs it to be
nobody's, else 405 RESOURCE_LOCKED (which clients map to a locked-resource error, aiormq's
ChannelLockedResource) with the text below, never 406. Checked against RabbitMQ 3.10; an
exclusive queue is never durable, whatever a re-declare says (RabbitMQ: durable and not
exclusive).
"""

from __future__ import annotations

import aio_pika
import aiormq
import pytest
from pika.exceptions import ChannelClosedByBroker

from .helpers import PRECONDITION_FAILED, RESOURCE_LOCKED, connect


def locked_text(q: str) -> str:
    return (f"RESOURCE_LOCKED - cannot obtain exclusive access to locked queue '{q}' in vhost '/'. It could be "
            "originally declared on another connection or the exclusive property value does not match that of "
            "the original declaration.")


def redeclare(conn, q: str, **kw):
    ch = conn.channel()
    try:
        return ch.queue_declare(q, **kw)
    except ChannelClosedByBroker as e:
        return e


@pytest.mark.parametrize("kw", [
    {"exclusive": False},
    {"exclusive": False, "durable": True},  # also inequivalent: the lock is checked first
    {"exclusive": False, "arguments": {"x-max-length": 5}},
], ids=["not-exclusive", "not-exclusive-durable", "not-exclusive-other-args"])
def test_the_owner_redeclaring_its_exclusive_queue_not_exclusive_gets_405(conn, uid, kw):
    q = f"excl-own-{uid}"
    conn.channel().queue_declare(q, exclusive=True)
    e = redeclare(conn, q, **kw)
    assert isinstance(e, ChannelClosedByBroker)
    assert (e.reply_code, e.reply_text) == (RESOURCE_LOCKED, locked_text(q))


def test_declaring_a_shared_queue_exclusive_gets_405(conn, cleanup, uid):
    q = f"excl-shared-{uid}"
    cleanup["queues"].append(q)
    conn.channel().queue_declare(q, durable=True)
    for kw in ({"exclusive": True}, {"exclusive": True, "durable": True}):
        e = redeclare(conn, q, **kw)
        assert isinstance(e, ChannelClosedByBroker)
        assert (e.reply_code, e.reply_text) == (RESOURCE_LOCKED, locked_text(q))


def test_the_owner_may_redeclare_exclusive_and_equivalence_applies_after_the_lock(conn, uid):
    q = f"excl-same-{uid}"
    conn.channel().queue_declare(q, exclusive=True)
    assert redeclare(conn, q, exclusive=True).method.queue == q
    assert redeclare(conn, q, exclusive=True, durable=True).method.queue == q  # never durable anyway
    assert redeclare(conn, q, passive=True).method.queue == q
    e = redeclare(conn, q, exclusive=True, arguments={"x-max-length": 3})
    assert isinstance(e, ChannelClosedByBroker) and e.reply_code == PRECONDITION_FAILED
    assert "inequivalent arg 'x-max-length'" in e.reply_text


def test_another_connection_gets_405_whatever_its_flags(broker, conn, uid):
    q = f"excl-other-{uid}"
    conn.channel().queue_declare(q, exclusive=True)
    other = connect(broker)
    try:
        for kw in ({"exclusive": True}, {"exclusive": False}, {"passive": True}):
            e = redeclare(other, q, **kw)
            assert isinstance(e, ChannelClosedByBroker)
            assert (e.reply_code, e.reply_text) == (RESOURCE_LOCKED, locked_text(q))
    finally:
        other.close()


async def test_aio_pika_sees_a_locked_resource_error(broker, uid):
    conn = await aio_pika.connect(broker.url, timeout=10)
    try:
        q = f"excl-aio-{uid}"
        await (await conn.channel()).declare_queue(q, exclusive=True)
        with pytest.raises(aiormq.exceptions.ChannelLockedResource) as ei:
            await (await conn.channel()).declare_queue(q, exclusive=False)
        assert "exclusive property value does not match" in str(ei.value)
    finally:
        await conn.close()
