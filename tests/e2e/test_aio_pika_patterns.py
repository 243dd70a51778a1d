"""aio-pika's RPC and JsonRPC patterns (``aio_pika.patterns``) end to end (issue 12 point 2).

Each pattern instance has an auto-delete reply queue bound to the ``rpc.dlx`` headers exchange.
On close it cancels its reply consumer (which deletes the auto-delete queue) and then unbinds
the queue that is gone: RabbitMQ answers unbind-ok, and so must we, or the user sees errors on
close. Calls, errors raised by the remote method, the expiration time-out (the call expires in
the method's queue and comes back through the dead-letter exchange) and close are checked,
and nothing may be logged by aio-pika or aiormq at warning level or above.
"""

from __future__ import annotations

import asyncio
import logging

import aio_pika
import pytest
from aio_pika.patterns import RPC, JsonRPC
from aio_pika.patterns.rpc import JsonRPCError


@pytest.mark.parametrize("rpc_class", [RPC, JsonRPC])
async def test_rpc_pattern_call_error_timeout_and_close(broker, cleanup, uid, caplog, rpc_class):
    caplog.set_level(logging.WARNING)
    add, fail, slow = (f"{what}-{rpc_class.__name__}-{uid}" for what in ("add", "fail", "slow"))
    cleanup["queues"].extend([add, fail, slow])
    loop = asyncio.get_running_loop()
    started = asyncio.Event()

    async def do_add(*, a, b):
        return a + b

    async def do_fail(*, why):
        raise ValueError(why)

    async def do_slow(*, seconds):
        started.set()
        await asyncio.sleep(seconds)
        return "done"

    conn = await aio_pika.connect(broker.url, timeout=10)
    try:
        callee_channel = await conn.channel()
        await callee_channel.set_qos(prefetch_count=1)  # one call at a time: the next one waits
        callee = await rpc_class.create(callee_channel)
        for name, func in ((add, do_add), (fail, do_fail), (slow, do_slow)):
            await callee.register(name, func, auto_delete=True)
        caller = await rpc_class.create(await conn.channel())

        assert await asyncio.wait_for(caller.call(add, {"a": 2, "b": 40}), 10) == 42

        if rpc_class is JsonRPC:
            with pytest.raises(JsonRPCError) as ei:
                await asyncio.wait_for(caller.call(fail, {"why": "bad input"}), 10)
            assert ei.value.args[1]["error"]["type"] == "ValueError"
            assert ei.value.args[1]["error"]["args"] == ["bad input"]
        else:
            with pytest.raises(ValueError, match="bad input"):
                await asyncio.wait_for(caller.call(fail, {"why": "bad input"}), 10)

        # the callee is busy with one call; the next expires in the queue and is dead-lettered
        # back to the caller's reply queue: asyncio.TimeoutError("Message timed-out")
        first = asyncio.ensure_future(caller.call(slow, {"seconds": 1.5}))
        await asyncio.wait_for(started.wait(), 10)
        t0 = loop.time()
        with pytest.raises(asyncio.TimeoutError) as ei:
            await caller.call(slow, {"seconds": 0}, expiration=1)
        assert "Message timed-out" in ei.value.args
        assert loop.time() - t0 < 8
        assert await asyncio.wait_for(first, 10) == "done"

        # close: cancel the reply consumer (the auto-delete queue goes), unbind it, delete it
        await asyncio.wait_for(caller.close(), 10)
        await asyncio.wait_for(callee.close(), 10)
        assert not callee_channel.is_closed  # no channel error on the way
    finally:
        await conn.close()
    logged = [f"{r.name}: {r.getMessage()}" for r in caplog.records
              if r.name.startswith(("aio_pika", "aiormq")) and r.levelno >= logging.WARNING]
    assert logged == []
