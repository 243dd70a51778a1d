"""10,000 messages published, consumed and acked in order through pika, aio-pika and kombu.

Each test has a 30 s budget for the whole round trip, enforced by deadline checks in every
loop, so a slow or stuck broker fails the test with a progress report instead of hanging.
"""

from __future__ import annotations

import asyncio
import socket
import time

import aio_pika
import kombu
import pika
import pytest

from .helpers import connect

pytestmark = pytest.mark.timeout(90)

N = 10_000
BUDGET_S = 30.0
PREFETCH = 500


def declare(broker, cleanup, name: str) -> str:
    c = connect(broker)
    try:
        c.channel().queue_declare(name)
    finally:
        c.close()
    cleanup["queues"].append(name)
    return name


def counts(broker, queue: str) -> tuple[int, int]:
    c = connect(broker)
    try:
        ok = c.channel().queue_declare(queue, passive=True)
        return ok.method.message_count, ok.method.consumer_count
    finally:
        c.close()


def assert_drained(broker, queue: str) -> None:
    """Nothing left in the queue, and (since our connection is closed) nothing was left unacked."""
    deadline = time.monotonic() + 5
    while counts(broker, queue) != (0, 0) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert counts(broker, queue) == (0, 0)


def test_pika_publishes_consumes_and_acks_ten_thousand_messages_in_order(broker, cleanup, uid):
    q = declare(broker, cleanup, f"tp-pika-{uid}")
    deadline = time.monotonic() + BUDGET_S
    c = connect(broker)
    try:
        ch = c.channel()
        for i in range(N):
            ch.basic_publish("", q, str(i).encode(), pika.BasicProperties(delivery_mode=1))
            if i % 1000 == 999:
                c.process_data_events(time_limit=0)
                assert time.monotonic() < deadline, f"published only {i + 1}/{N} within {BUDGET_S}s"

        ch.basic_qos(prefetch_count=PREFETCH)
        received: list[int] = []
        redelivered: list[int] = []

        def on_message(chan, method, _props, body):
            n = int(body)
            received.append(n)
            if method.redelivered:
                redelivered.append(n)
            chan.basic_ack(method.delivery_tag)

        ch.basic_consume(q, on_message)
        while len(received) < N:
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"consumed only {len(received)}/{N} within {BUDGET_S}s"
            c.process_data_events(time_limit=min(0.2, remaining))
        assert received == list(range(N)), "messages arrived out of order"
        assert redelivered == []
        ch.close()
    finally:
        if c.is_open:
            c.close()
    assert_drained(broker, q)


async def test_aio_pika_publishes_consumes_and_acks_ten_thousand_messages_in_order(broker, cleanup, uid):
    q = declare(broker, cleanup, f"tp-aio-{uid}")
    deadline = time.monotonic() + BUDGET_S

    async def run() -> list[int]:
        connection = await aio_pika.connect(broker.url, timeout=10)
        async with connection:
            pub = await connection.channel(publisher_confirms=False)
            for i in range(N):
                # Sequential awaits keep the publish order well defined.
                await pub.default_exchange.publish(aio_pika.Message(str(i).encode()), routing_key=q)
            cons = await connection.channel()
            await cons.set_qos(prefetch_count=PREFETCH)
            queue = await cons.declare_queue(q, passive=True)
            received: list[int] = []
            async with queue.iterator() as it:
                async for message in it:
                    received.append(int(message.body))
                    assert not message.redelivered
                    await message.ack()
                    if len(received) == N:
                        break
            return received

    try:
        received = await asyncio.wait_for(run(), timeout=max(1.0, deadline - time.monotonic()))
    except asyncio.TimeoutError:
        pytest.fail(f"aio-pika round trip of {N} messages did not finish within {BUDGET_S}s")
    assert received == list(range(N)), "messages arrived out of order"
    assert_drained(broker, q)


def test_kombu_publishes_consumes_and_acks_ten_thousand_messages_in_order(broker, cleanup, uid):
    q = declare(broker, cleanup, f"tp-kombu-{uid}")
    deadline = time.monotonic() + BUDGET_S
    with kombu.Connection(hostname=broker.host, port=broker.port, userid="guest", password="guest",
                          virtual_host="/", transport="pyamqp", connect_timeout=10) as conn:
        queue = kombu.Queue(q, no_declare=True)
        with conn.channel() as pub_channel:
            producer = kombu.Producer(pub_channel, routing_key=q, serializer="json")  # default exchange
            for i in range(N):
                producer.publish({"i": i}, routing_key=q, retry=False)
                if i % 1000 == 999:
                    assert time.monotonic() < deadline, f"published only {i + 1}/{N} within {BUDGET_S}s"

        received: list[int] = []
        redelivered: list[int] = []

        def on_message(body, message):
            received.append(body["i"])
            if message.delivery_info.get("redelivered"):
                redelivered.append(body["i"])
            message.ack()

        with conn.channel() as cons_channel:
            consumer = kombu.Consumer(cons_channel, queues=[queue], callbacks=[on_message],
                                      accept=["json"], prefetch_count=PREFETCH)
            with consumer:
                while len(received) < N:
                    remaining = deadline - time.monotonic()
                    assert remaining > 0, f"consumed only {len(received)}/{N} within {BUDGET_S}s"
                    try:
                        conn.drain_events(timeout=min(1.0, remaining))
                    except socket.timeout:
                        pass
        assert received == list(range(N)), "messages arrived out of order"
        assert redelivered == []
    assert_drained(broker, q)
