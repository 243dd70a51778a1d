"""Durability over 0-10: a persistent transfer to a durable queue is completed only once it is
on disk (as a publisher confirm), so every completed transfer survives kill -9; then read back
over 0-9-1 (pika) after the restart."""

from __future__ import annotations

import threading
import time

import pytest

from warren.spec import amqp0_10 as spec

from ..helpers import connect
from .client010 import Client010, ConnectionLost

pytestmark = pytest.mark.timeout(60)


def _publish_until_killed(b, queue: str, kill_after: float) -> tuple[set[int], int]:
    """Persistent transfers in windows of 25 (the last of each with sync) until the broker dies:
    (indexes of the transfers the broker completed, how many were sent)."""
    sent: dict[int, int] = {}  # command id -> index
    c = Client010(b)
    s = c.session(1)
    s.send(spec.QueueDeclare(queue=queue, durable=True))
    threading.Timer(kill_after, b.proc.kill).start()  # SIGKILL
    n = 0
    try:
        while n < 200_000:
            for _ in range(25):
                dp = spec.MessageDeliveryProperties(delivery_mode=1 if n % 10 == 9 else 2)
                sent[s.transfer("", f"m{n}".encode(), routing_key=queue, sync=False, delivery=dp)] = n
                n += 1
            s.sync(timeout=10)
    except (ConnectionLost, OSError, TimeoutError):
        pass
    finally:
        c.sock.close()
    return {i for cid, i in sent.items() if cid in s.completed}, n


def test_completed_persistent_transfers_survive_kill_9(start_broker, qname):
    b = start_broker()
    completed, sent = _publish_until_killed(b, qname, 0.8)
    assert b.proc.wait(10) is not None
    assert completed, "nothing was completed before the kill"
    restarted = start_broker(data_dir=b.data_dir)
    conn = connect(restarted)
    try:
        ch = conn.channel()
        found = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            method, _, body = ch.basic_get(qname, auto_ack=True)
            if method is None:
                break
            found.append(int(body[1:]))
    finally:
        conn.close()
    persistent_completed = {i for i in completed if i % 10 != 9}
    lost = persistent_completed - set(found)
    assert not lost, f"{len(lost)} completed persistent transfers lost of {len(persistent_completed)} (sent {sent})"
    assert not [i for i in found if i % 10 == 9], "transient messages came back after the restart"
    assert found == sorted(found) and len(found) == len(set(found))
    print(f"sent {sent}, completed {len(completed)}, found after restart {len(found)}")
