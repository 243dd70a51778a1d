"""RabbitMQ's consumer_timeout (``--consumer-timeout`` milliseconds) through pika, on a private
broker with a 600 ms timeout (RabbitMQ's is a server setting of 30 minutes: nothing to compare
in a test's time, so these need a private Warren)."""

from __future__ import annotations

import time

import pytest

from .helpers import PRECONDITION_FAILED, connect, get, wait_until

pytestmark = pytest.mark.timeout(60)

TIMEOUT_MS = 600


@pytest.fixture
def timed(start_broker):
    return start_broker("--consumer-timeout", str(TIMEOUT_MS))


def closed_reason(chan, deadline_s: float):
    """Pump `chan`'s connection until the broker closes the channel: (code, text), or None."""
    deadline = time.monotonic() + deadline_s
    while chan.is_open and time.monotonic() < deadline:
        chan.connection.process_data_events(time_limit=0.05)
    if chan.is_open:
        return None
    reason = chan._impl._closing_reason  # pika keeps the broker's channel.close here
    return reason.reply_code, reason.reply_text


def test_an_unacked_delivery_closes_its_channel_with_406_and_comes_back(timed):
    conn = connect(timed)
    setup = conn.channel()
    setup.queue_declare("ct-q", durable=True, arguments={"x-queue-type": "quorum"})
    setup.basic_publish("", "ct-q", b"slow")
    chan = conn.channel()
    chan.basic_consume("ct-q", lambda *a: None)  # never acks
    t0 = time.monotonic()
    reason = closed_reason(chan, 5)
    took = time.monotonic() - t0
    assert reason == (PRECONDITION_FAILED,
                      f"PRECONDITION_FAILED - delivery acknowledgement on channel {chan.channel_number} timed out. "
                      f"Timeout value used: {TIMEOUT_MS} ms. This timeout value can be configured, see consumers "
                      "doc guide to learn more")
    assert TIMEOUT_MS / 1000 <= took < TIMEOUT_MS / 1000 + 2.0
    method, props, body = get(setup, "ct-q")  # back in its queue, redelivered, counted
    assert body == b"slow" and method.redelivered and props.headers["x-delivery-count"] == 1
    setup.basic_ack(method.delivery_tag)
    assert conn.is_open  # a channel error, not a connection error
    assert "consumer timeout on connection" in timed.log()
    conn.close()


def test_deliveries_acked_in_time_keep_the_channel_open(timed):
    conn = connect(timed)
    chan = conn.channel()
    q = chan.queue_declare("", exclusive=True).method.queue
    chan.basic_qos(prefetch_count=1)
    for i in range(8):
        chan.basic_publish("", q, str(i).encode())
    got = []

    def on_message(ch, method, props, body):
        got.append(body)
        time.sleep(0.35)  # each one well within the timeout, all of them well beyond it
        ch.basic_ack(method.delivery_tag)

    chan.basic_consume(q, on_message)
    assert wait_until(lambda: conn.process_data_events(time_limit=0.02) or len(got) == 8, timeout=10)
    assert chan.is_open and got == [str(i).encode() for i in range(8)]
    conn.close()


def test_a_basic_get_left_unacked_times_out_too(timed):
    conn = connect(timed)
    chan = conn.channel()
    q = chan.queue_declare("", exclusive=False, auto_delete=False).method.queue
    chan.basic_publish("", q, b"got")
    method, _, _ = get(chan, q)
    assert method is not None
    code = closed_reason(chan, 5)
    assert code is not None and code[0] == PRECONDITION_FAILED
    other = conn.channel()
    assert get(other, q)[2] == b"got"
    other.queue_delete(q)
    conn.close()


def test_zero_turns_the_timeout_off(start_broker):
    b = start_broker("--consumer-timeout", "0")
    conn = connect(b)
    chan = conn.channel()
    q = chan.queue_declare("", exclusive=True).method.queue
    chan.basic_publish("", q, b"x")
    assert get(chan, q)[0] is not None
    conn.process_data_events(time_limit=1.5)
    assert chan.is_open
    conn.close()
