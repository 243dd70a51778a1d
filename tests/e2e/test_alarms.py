"""Resource alarms through real clients: a disk-free limit blocks publishers, not consumers."""

import signal
import time

import pika
import pytest

TIMEOUT = 20
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
    assert b.wait() == 0
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

