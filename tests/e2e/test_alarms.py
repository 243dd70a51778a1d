"""Resource alarms through real clients: a disk-free limit blocks publishers, not consumers."""

import signal
import time

import pika
import pytest

TIMEOUT = 20
from tests.conftest import skip_under_cluster

pytestmark = pytest.mark.timeout(30)


def _connect(b):
    return pika.BlockingConnection(pika.URLParameters(b.url + "?blocked_connection_timeout=30"))


def _stop_with_blocked_client(b, pub) -> None:
    """SIGTERM while the blocked client answers: the broker reads it again to hear its close-ok
    and exits at once (a client that never answers costs the whole shutdown timeout)."""
    b.signal(signal.SIGTERM)
    deadline = time.monotonic() + TIMEOUT
    with pytest.raises(pika.exceptions.ConnectionClosedByBroker, match="320"):
        while time.monotonic() < deadline:
            pub.process_data_events(time_limit=0.1)
    assert b.wait() == 0, b.log()[-3000:]
    assert "did not close in time" not in b.log()


def test_disk_alarm_blocks_a_publishing_connection_and_tells_it(start_broker, uid):
    b = start_broker("--disk-free-limit", str(10**18))  # more than any disk: the alarm is on
    blocked = []
    pub = _connect(b)
    pub.add_on_connection_blocked_callback(lambda conn, frame: blocked.append(frame.method.reason))
    ch = pub.channel()
    ch.queue_declare(f"alarm-{uid}")
    ch.basic_publish("", f"alarm-{uid}", b"first")
    deadline = time.monotonic() + TIMEOUT
    while not blocked and time.monotonic() < deadline:
        pub.process_data_events(time_limit=0.1)
    assert blocked and "disk" in blocked[0]
    assert "disk alarm raised" in b.log()

    # a connection that only reads is not blocked
    other = _connect(b)
    och = other.channel()
    assert och.queue_declare(f"alarm-{uid}", passive=True).method.queue == f"alarm-{uid}"
    other.close()
    _stop_with_blocked_client(b, pub)


def test_publisher_is_not_blocked_without_an_alarm(start_broker, uid):
    b = start_broker("--disk-free-limit", "0")
    blocked = []
    pub = _connect(b)
    pub.add_on_connection_blocked_callback(lambda conn, frame: blocked.append(frame))
    ch = pub.channel()
    ch.confirm_delivery()
    ch.queue_declare(f"noalarm-{uid}")
    for _ in range(50):
        ch.basic_publish("", f"noalarm-{uid}", b"x")
    pub.process_data_events(time_limit=0.3)
    assert not blocked
    assert ch.queue_declare(f"noalarm-{uid}", passive=True).method.message_count == 50
    pub.close()


def test_memory_alarm_blocks_a_publishing_connection(start_broker, uid):
    skip_under_cluster("reads the memory alarm in the client's node's log, where it is node n1's (whose queues hold "
                       "the messages): 'memory (node n1) alarm raised'")
    b = start_broker("--memory-high-watermark", "1000")  # 1000 octets: always above it
    blocked = []
    pub = _connect(b)
    pub.add_on_connection_blocked_callback(lambda conn, frame: blocked.append(frame.method.reason))
    ch = pub.channel()
    ch.queue_declare(f"memalarm-{uid}")
    ch.basic_publish("", f"memalarm-{uid}", b"first")
    deadline = time.monotonic() + TIMEOUT
    while not blocked and time.monotonic() < deadline:
        pub.process_data_events(time_limit=0.1)
    assert blocked and "memory" in blocked[0]
    assert "memory alarm raised" in b.log()
    _stop_with_blocked_client(b, pub)



# --- the memory alarm measures what Warren holds (warren/broker/memory.py, docs/flow-control.md)

MiB = 1 << 20
BODY = b"m" * (64 * 1024)


def _watch_blocking(conn) -> dict:
    seen = {"blocked": 0, "unblocked": 0}
    conn.add_on_connection_blocked_callback(lambda c, f: seen.__setitem__("blocked", seen["blocked"] + 1))
    conn.add_on_connection_unblocked_callback(lambda c, f: seen.__setitem__("unblocked", seen["unblocked"] + 1))
    return seen


def _flood_until_blocked(conn, ch, queue: str, seen: dict, most: int) -> int:
    """Publish 64 KiB messages until the broker says blocked (or ``most`` octets); returns octets sent.
    Paced (2 ms between publishes, 32 MB/s): a flood that kept the socket buffers full when the
    alarm stopped the broker's reads left pika inside its next publish, which it writes whole
    before returning, so it never saw the connection.blocked (1 CI run in about 30, vhosts mode)."""
    sent = 0
    start = seen["blocked"]
    while seen["blocked"] == start and sent < most:
        ch.basic_publish("", queue, BODY)
        sent += len(BODY)
        conn.process_data_events(time_limit=0.002)
    deadline = time.monotonic() + TIMEOUT
    while seen["blocked"] == start and time.monotonic() < deadline:
        conn.process_data_events(time_limit=0.1)
    return sent


def _wait_for(conn, seen: dict, key: str, count: int) -> None:
    deadline = time.monotonic() + TIMEOUT
    while seen[key] < count and time.monotonic() < deadline:
        conn.process_data_events(time_limit=0.1)
    assert seen[key] >= count, f"no connection.{key} ({seen})"


def test_memory_alarm_fires_within_the_flood_and_clears_when_the_queue_is_deleted(start_broker, uid):
    skip_under_cluster("reads the memory alarm in the client's node's log, where it is node n1's (whose queues hold "
                       "the messages): 'memory (node n1) alarm raised'")
    """Paging off: the queue's bytes raise the alarm during the flood (not a second later: the
    queue holds no more than the watermark), and deleting the queue clears it, cycle after
    cycle (it used to latch, as the process kept its resident memory)."""
    watermark = 32 * MiB
    b = start_broker("--memory-high-watermark", str(watermark), "--memory-budget", "0")
    pub = _connect(b)
    seen = _watch_blocking(pub)
    ch = pub.channel()
    other = _connect(b)  # never publishes: never blocked
    och = other.channel()
    for cycle in range(1, 4):
        queue = f"memflood-{uid}-{cycle}"
        och.queue_declare(queue)
        sent = _flood_until_blocked(pub, ch, queue, seen, 20 * watermark)
        assert seen["blocked"] == cycle, f"cycle {cycle}: not blocked after {sent} octets"
        held = och.queue_declare(queue, passive=True).method.message_count * len(BODY)
        assert held <= watermark, f"cycle {cycle}: {held} octets queued before the alarm"
        och.queue_delete(queue)
        _wait_for(pub, seen, "unblocked", cycle)
    log = b.log()
    assert log.count("memory alarm raised") == 3 and log.count("memory alarm cleared") == 3
    other.close()
    pub.close()


def test_memory_alarm_clears_when_a_consumer_catches_up(start_broker, uid):
    watermark = 32 * MiB
    b = start_broker("--memory-high-watermark", str(watermark), "--memory-budget", "0")
    pub = _connect(b)
    seen = _watch_blocking(pub)
    ch = pub.channel()
    queue = f"memdrain-{uid}"
    ch.queue_declare(queue)
    _flood_until_blocked(pub, ch, queue, seen, 20 * watermark)
    assert seen["blocked"] == 1
    consumer = _connect(b)
    cch = consumer.channel()
    deadline = time.monotonic() + TIMEOUT
    while seen["unblocked"] == 0 and time.monotonic() < deadline:
        method, _, _ = cch.basic_get(queue, auto_ack=True)
        if method is None:
            consumer.process_data_events(time_limit=0.05)
        pub.process_data_events(time_limit=0)
    assert seen["unblocked"] == 1
    # what the publisher's client still had buffered flows in once unblocked, and could raise the
    # alarm again (a blocked connection is not read: its close-ok would never come); none of it
    # is queued once the queue is gone
    cch.queue_delete(queue)
    consumer.close()
    pub.close()


def test_queues_page_to_disk_before_the_memory_alarm(start_broker, uid):
    """The default memory budget is half the watermark: a flood with no consumer pages out and
    the alarm never fires; every message is kept."""
    watermark = 96 * MiB
    b = start_broker("--memory-high-watermark", str(watermark))
    pub = _connect(b)
    seen = _watch_blocking(pub)
    ch = pub.channel()
    ch.confirm_delivery()
    queue = f"mempage-{uid}"
    ch.queue_declare(queue)
    n = (2 * watermark) // len(BODY)
    for _ in range(n):
        ch.basic_publish("", queue, BODY)
    assert seen["blocked"] == 0
    assert ch.queue_declare(queue, passive=True).method.message_count == n
    assert "memory alarm raised" not in b.log()
    ch.queue_delete(queue)
    pub.close()
