"""aiormq, unmodified (issue 12 point 3): channel numbers and channel-max.

RabbitMQ lets a client open any channel number from 1 to 65535 and limits how many are open
at once to the negotiated channel-max (530 NOT_ALLOWED, a connection error, past it); aiormq
opens channel 65535 explicitly. aiormq accepts the server's channel-max in tune-ok.
"""

from __future__ import annotations

import asyncio

import aiormq
import pytest
from pamqp.commands import Basic


async def round_trip(channel, queue: str, body: bytes) -> bytes:
    await channel.basic_publish(body, routing_key=queue)  # confirmed: aiormq's channels confirm
    got = await channel.basic_get(queue, no_ack=True)
    return got.body


async def test_channel_65535_and_other_numbers_above_channel_max_work(broker, cleanup, uid):
    queue = f"aiormq-{uid}"
    cleanup["queues"].append(queue)
    conn = await aiormq.connect(broker.url)
    try:
        top = await conn.channel(65535)
        assert top.number == 65535
        await top.queue_declare(queue)
        assert await round_trip(top, queue, b"on 65535") == b"on 65535"
        for number in (40000, 2048, 1):
            ch = await conn.channel(number)
            assert await round_trip(ch, queue, f"on {number}".encode()) == f"on {number}".encode()
        await top.close()
        again = await conn.channel(65535)  # a closed number can be opened again
        assert isinstance(await again.basic_qos(prefetch_count=1), Basic.QosOk)
    finally:
        await conn.close()


async def test_more_open_channels_than_channel_max_is_530(start_broker):
    b = start_broker("--channel-max", "3")
    conn = await aiormq.connect(b.url)
    try:
        for number in (65535, 7, 300):
            await conn.channel(number)
        with pytest.raises(aiormq.exceptions.ConnectionNotAllowed) as ei:
            await asyncio.wait_for(conn.channel(8), 10)
        assert "number of channels opened (3) has reached the negotiated channel_max (3)" in str(ei.value)
    finally:
        await conn.close()
