"""warren/server/pacing.py: which loop turns give the core away. On a real event loop; the
system call is counted instead of made (what it does to the scheduler is not observable from a
test: bench/compare.py's confirm row measures it, docs/performance.md, session 12). Through a
real client with the yield on (the default): tests/e2e/test_confirms_tx.py; off: below."""

from __future__ import annotations

import asyncio

import pika

from tests.conftest import launch_broker
from warren.server import pacing
from warren.server.pacing import YIELD_BELOW, TurnPacer


def turns(monkeypatch, *turn_plans) -> list[int]:
    """Run one loop turn per plan (reads: octets of each read; confirmed: whether a flush wrote
    confirms during it) and count the yields at each turn's end."""
    yields = []
    monkeypatch.setattr(pacing, "_sched_yield", lambda: yields.append(1))
    loop = asyncio.new_event_loop()
    try:
        pacer = TurnPacer(loop)
        counts = []
        for reads, confirmed in turn_plans:
            before = len(yields)

            def turn(reads=reads, confirmed=confirmed):
                for n in reads:
                    pacer.read(n)
                pacer.confirmed = pacer.confirmed or confirmed

            loop.call_soon(turn)
            loop.run_until_complete(asyncio.sleep(0))  # the turn, then the pacer's end of it
            loop.run_until_complete(asyncio.sleep(0))
            counts.append(len(yields) - before)
        return counts
    finally:
        loop.close()


def test_a_light_turn_that_confirmed_yields_once(monkeypatch):
    assert turns(monkeypatch, ([3000, 40, 40], True)) == [1]


def test_a_turn_that_confirmed_nothing_keeps_the_core(monkeypatch):
    assert turns(monkeypatch, ([3000], False), ([40], False)) == [0, 0]


def test_a_turn_that_read_a_backlog_keeps_the_core(monkeypatch):
    # behind its publishers already: yielding would only put it further behind
    assert turns(monkeypatch, ([YIELD_BELOW // 2, YIELD_BELOW // 2], True), ([YIELD_BELOW - 1], True)) == [0, 1]


def test_each_turn_is_counted_afresh(monkeypatch):
    assert turns(monkeypatch, ([YIELD_BELOW], True), ([100], False), ([100], True)) == [0, 0, 1]


def test_a_broker_without_the_yield_confirms_as_before(tmp_path):
    b = launch_broker(tmp_path, "--no-yield-after-confirms")
    try:
        conn = pika.BlockingConnection(pika.ConnectionParameters(b.host, b.port))
        ch = conn.channel()
        ch.confirm_delivery()
        ch.queue_declare("paced")
        for i in range(50):
            ch.basic_publish("", "paced", b"%d" % i)  # each waits for its confirm
        assert ch.queue_declare("paced", passive=True).method.message_count == 50
        conn.close()
    finally:
        b.stop()
