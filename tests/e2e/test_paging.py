"""Queues larger than the memory budget page to disk and still deliver everything in order."""

import pika
import pytest

from .rawamqp import publish_bulk, publish_frames_with_mode

pytestmark = pytest.mark.timeout(90)

N = 30_000
BODY = 1024


def _rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def _publish(b, queue: str, n: int, persistent_every: int) -> None:
    # Raw frames on their own connection (pika's per-message cost made this most of the test);
    # no confirms: publish_bulk returns after a close handshake, so all n have been routed.
    frames = (publish_frames_with_mode(1, "", queue, i.to_bytes(8, "big") + b"." * (BODY - 8),
                                       2 if i % persistent_every == 0 else 1) for i in range(n))
    publish_bulk(b.host, b.port, frames)


def _drain(ch, queue: str, expected: int) -> list[int]:
    seen = []
    ch.basic_qos(prefetch_count=500)
    for method, _props, body in ch.consume(queue, inactivity_timeout=10):
        if method is None:
            break
        seen.append(int.from_bytes(body[:8], "big"))
        ch.basic_ack(method.delivery_tag)
        if len(seen) == expected:
            break
    ch.cancel()
    return seen


@pytest.mark.parametrize("durable", [True, False], ids=["durable-queue", "transient-queue"])
def test_a_queue_past_the_memory_budget_pages_and_delivers_in_order(start_broker, uid, durable):
    b = start_broker("--memory-budget", str(4 * 1024 * 1024))
    conn = pika.BlockingConnection(pika.URLParameters(b.url))
    ch = conn.channel()
    q = f"paging-{uid}"
    ch.queue_declare(q, durable=durable)
    _publish(b, q, N, persistent_every=3)
    assert ch.queue_declare(q, passive=True).method.message_count == N
    # 30 MB of bodies sit in the queue, but the broker holds only about the budget of them
    assert _rss_kib(b.proc.pid) < 90 * 1024
    assert _drain(ch, q, N) == list(range(N))
    assert ch.queue_declare(q, passive=True).method.message_count == 0
    conn.close()


def test_a_paged_durable_queue_comes_back_after_a_restart_in_order(start_broker, tmp_path, uid):
    data = tmp_path / "paged-data"
    b = start_broker("--memory-budget", str(4 * 1024 * 1024), data_dir=data)
    conn = pika.BlockingConnection(pika.URLParameters(b.url))
    ch = conn.channel()
    q = f"paged-restart-{uid}"
    ch.queue_declare(q, durable=True)
    _publish(b, q, N, persistent_every=1)
    conn.close()
    b.stop()
    b = start_broker("--memory-budget", str(4 * 1024 * 1024), data_dir=data)
    conn = pika.BlockingConnection(pika.URLParameters(b.url))
    ch = conn.channel()
    assert ch.queue_declare(q, passive=True).method.message_count == N
    assert _drain(ch, q, N) == list(range(N))
    conn.close()
