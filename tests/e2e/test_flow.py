"""Flow control (issue 5): publishers that outrun the consumers of a queue are pushed back.

While a queue that has consumers holds more ready messages than ``--queue-flow-high``, Warren
stops reading from the connections that publish to it (TCP then stops the client), and reads
them again once the queue has drained to half the mark. These tests check that a flooding
publisher really is held (the backlog stays at the mark, its socket stops taking data, the
broker's memory stays flat) while other connections are served, that nothing is lost, and the
three exceptions: a connection that consumes the queue it publishes to is never paused (that
would stop its own acks), a queue without consumers never pauses anyone (paging bounds its
memory instead), and a pause lasts at most a second per publish (a consumer that never acks
slows publishers to a trickle but cannot deadlock them).

Every test starts a private Warren (the mark is a command-line option).
"""

from __future__ import annotations

import base64
import json
import threading
import time
import urllib.request

import pytest

from tests.conftest import skip_under_cluster

from .helpers import connect
from .rawamqp import RawConnection, publish_frames

pytestmark = pytest.mark.timeout(120)

HIGH = 1000  # --queue-flow-high for these tests
TIMEOUT = 30


def _rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def _api_connections(b) -> list[dict]:
    request = urllib.request.Request(b.http_url + "/api/connections", headers={
        "Authorization": "Basic " + base64.b64encode(b"guest:guest").decode()})
    with urllib.request.urlopen(request, timeout=TIMEOUT) as answer:
        return json.loads(answer.read())


def _ready(ch, queue: str) -> int:
    return ch.queue_declare(queue, passive=True).method.message_count


# a cluster's node tells a publisher's node that its queue is congested when the messages reach
# it: the backlog passes the mark by what was on its way (docs/clustering.md); these count it exactly
FLOW_ACROSS_NODES = ("the publisher's node learns that the queue is congested a round trip late: the backlog "
                     "passes the mark by what was in flight")


def test_a_flooding_publisher_is_paused_until_a_slow_consumer_drains_the_queue(start_broker, uid):
    skip_under_cluster(FLOW_ACROSS_NODES)
    # the message mark alone: the octet mark (256 KiB by default) would hold these at 256
    b = start_broker("--queue-flow-high", str(HIGH), "--queue-flow-high-bytes", "0")
    q = f"flow-{uid}"
    n, size = 40_000, 1024  # 41 MB offered: far more than the socket buffers hold
    consumer = connect(b)
    cch = consumer.channel()
    cch.queue_declare(q)
    cch.basic_qos(prefetch_count=50)
    got: list[int] = []

    def on_message(ch, method, _props, body) -> None:
        got.append(int.from_bytes(body[:8], "big"))
        ch.basic_ack(method.delivery_tag)

    cch.basic_consume(q, on_message)  # events are not processed yet: the consumer stalls at 50

    pub = RawConnection(b.host, b.port, timeout=TIMEOUT * 3)
    pub.handshake(heartbeat=0)
    pub.open_channel(1)
    flood = b"".join(publish_frames(1, "", q, i.to_bytes(8, "big") + b"." * (size - 8)) for i in range(n))
    sent = threading.Event()

    def publish_all() -> None:
        if pub.try_send(flood):  # blocks while Warren does not read the socket
            sent.set()

    rss_before = _rss_mib(b.proc.pid)
    publisher = threading.Thread(target=publish_all, daemon=True)
    publisher.start()

    observer = connect(b)
    och = observer.channel()
    deadline = time.monotonic() + TIMEOUT
    while _ready(och, q) < HIGH and time.monotonic() < deadline:
        time.sleep(0.05)
    # Held for two seconds: the backlog stays at the mark (at most one more publish per second
    # of pause), the publisher cannot hand over the rest, and the broker answers others at once.
    samples = []
    for _ in range(20):
        t0 = time.monotonic()
        samples.append(_ready(och, q))
        assert time.monotonic() - t0 < 1.0, "the broker stopped answering other connections"
        time.sleep(0.1)
    assert HIGH <= min(samples) and max(samples) <= HIGH + 10, samples
    assert not sent.is_set(), "the publisher was never paused"
    # the HTTP API shows it held, as RabbitMQ shows a connection in credit flow
    # (read again for one publish each second: asked until seen, bounded)
    deadline, seen = time.monotonic() + TIMEOUT, False
    while not seen and time.monotonic() < deadline:
        seen = "flow" in {c["state"] for c in _api_connections(b)}
        time.sleep(0 if seen else 0.05)
    assert seen, "the held publisher's connection never showed state flow"
    assert _rss_mib(b.proc.pid) - rss_before < 40

    # The consumer drains: the publisher is read again, and every message arrives, in order.
    peak = 0.0
    deadline = time.monotonic() + 90
    while len(got) < n and time.monotonic() < deadline:
        consumer.process_data_events(time_limit=0.2)
        peak = max(peak, _rss_mib(b.proc.pid))
    publisher.join(timeout=TIMEOUT)
    assert sent.is_set()
    assert got == list(range(n))
    assert peak - rss_before < 40, f"RSS grew from {rss_before:.0f} to {peak:.0f} MiB"
    assert _ready(och, q) == 0
    observer.close()
    consumer.close()
    pub.close()


def test_the_default_octet_mark_holds_a_backlog_of_4_kib_messages_at_256_kib(start_broker, uid):
    """The default marks: 4 KiB messages pass the octet mark (256 KiB: 64 of them) long
    before the message mark (5,000), so a stalled consumer's queue stops growing there."""
    skip_under_cluster(FLOW_ACROSS_NODES)
    b = start_broker()
    q = f"flow-bytes-{uid}"
    n, size = 5_000, 4096  # 20 MB offered: more than the socket buffers hold
    consumer = connect(b)
    cch = consumer.channel()
    cch.queue_declare(q)
    cch.basic_qos(prefetch_count=10)
    got: list[int] = []
    cch.basic_consume(q, lambda ch, m, _p, body: (got.append(int.from_bytes(body[:8], "big")),
                                                   ch.basic_ack(m.delivery_tag)))
    pub = RawConnection(b.host, b.port, timeout=TIMEOUT * 3)
    pub.handshake(heartbeat=0)
    pub.open_channel(1)
    flood = b"".join(publish_frames(1, "", q, i.to_bytes(8, "big") + b"." * (size - 8)) for i in range(n))
    sent = threading.Event()
    publisher = threading.Thread(target=lambda: pub.try_send(flood) and sent.set(), daemon=True)
    publisher.start()
    observer = connect(b)
    och = observer.channel()
    mark = (256 << 10) // size
    deadline = time.monotonic() + TIMEOUT
    while _ready(och, q) <= mark and time.monotonic() < deadline:
        time.sleep(0.05)
    samples = []
    for _ in range(10):
        samples.append(_ready(och, q))
        time.sleep(0.1)
    assert mark < min(samples) and max(samples) <= mark + 10, samples  # at most one publish per second of pause
    assert not sent.is_set(), "the publisher was never paused"
    deadline = time.monotonic() + 60
    while len(got) < n and time.monotonic() < deadline:
        consumer.process_data_events(time_limit=0.2)
    publisher.join(timeout=TIMEOUT)
    assert sent.is_set() and got == list(range(n))
    observer.close()
    consumer.close()
    pub.close()


def test_a_connection_that_consumes_the_queue_it_publishes_to_is_not_paused(start_broker, uid):
    b = start_broker("--queue-flow-high", "100")
    q = f"flow-self-{uid}"
    c = connect(b)
    ch = c.channel()
    ch.queue_declare(q)
    ch.basic_qos(prefetch_count=10)
    ch.basic_consume(q, lambda *_: None)  # takes 10 and never acks
    t0 = time.monotonic()
    for _ in range(1000):
        ch.basic_publish("", q, b"x")
    assert _ready(ch, q) == 990  # answered on the same connection: it was read all along
    assert time.monotonic() - t0 < 10  # paused, each publish past the mark would take a second
    c.close()


def test_a_queue_without_consumers_never_pauses_its_publishers(start_broker, uid):
    b = start_broker("--queue-flow-high", "100")
    q = f"flow-noconsumer-{uid}"
    c = connect(b)
    ch = c.channel()
    ch.confirm_delivery()
    ch.queue_declare(q)
    t0 = time.monotonic()
    for _ in range(2000):
        ch.basic_publish("", q, b"x")  # each waits for its confirm
    assert time.monotonic() - t0 < 15
    assert _ready(ch, q) == 2000
    c.close()


def test_a_pause_lasts_at_most_a_second_per_publish(start_broker, uid):
    """A consumer that never acks keeps the queue over the mark for good: the publisher is
    still read, one publish per pause of about a second."""
    skip_under_cluster(FLOW_ACROSS_NODES)
    b = start_broker("--queue-flow-high", "100")
    q = f"flow-stuck-{uid}"
    stuck = connect(b)
    sch = stuck.channel()
    sch.queue_declare(q)
    sch.basic_qos(prefetch_count=1)
    sch.basic_consume(q, lambda *_: None)  # holds one message, never acks
    pub = connect(b)
    ch = pub.channel()
    ch.confirm_delivery()
    durations = []
    for _ in range(105):
        t0 = time.monotonic()
        ch.basic_publish("", q, b"x")  # returns once confirmed
        durations.append(time.monotonic() - t0)
    slow = [d for d in durations if d > 0.5]
    # 1 delivered + 100 ready, then publish 102 passes the mark; 103-105 each wait for a pause
    assert len(slow) >= 3 and all(d < 5 for d in slow), durations
    assert sum(1 for d in durations[:100] if d > 0.5) == 0, durations
    assert _ready(ch, q) == 104
    pub.close()
    stuck.close()
