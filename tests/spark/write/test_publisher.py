"""The confirm-window publisher without Spark: against a scripted server for what a real broker
will not do on demand (confirms out of order, a silent broker, a channel closed mid-stream),
and against the test broker for credentials and multi-frame bodies."""

from __future__ import annotations

import socket
import time
from collections import deque

import pytest
from hypothesis import given, settings, strategies as st

from tests.spark.fake_broker import FakeBroker
from tests.spark.pika_admin import admin, wait_for_count
from warren.spark.amqp_link import parse_url
from warren.spark.write.publisher import ConfirmPublisher, PublishError, PublishNacked, PublishTimeout
from warren.spec import amqp0_9_1 as spec

PROPS = spec.BasicProperties(message_id="m").encode()


def test_confirms_out_of_order_and_multiple_are_all_counted():
    script = {3: [spec.BasicAck(3, False), spec.BasicAck(1, False)], 5: [spec.BasicAck(5, True)]}
    with FakeBroker(lambda n: script.get(n, [])) as fake, ConfirmPublisher(fake.url, confirm_timeout=5) as p:
        for i in range(5):
            p.publish("", "q", PROPS, b"x")
        assert p.finish() == 5
        assert p.unconfirmed == 0 and fake.published == 5


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(1, 40), min_size=1, max_size=8), st.lists(st.booleans(), min_size=8, max_size=8),
       st.lists(st.tuples(st.integers(1, 200), st.booleans()), max_size=40))
def test_runs_of_unconfirmed_tags_count_as_one_entry_per_tag_would(chunks, merge, confirms):
    """The runs of unconfirmed tags (one entry per batch of publishes, not per publish) count
    confirms as a set of tags would: each tag once, whatever the order, singles and multiples."""
    p = ConfirmPublisher.__new__(ConfirmPublisher)  # only its bookkeeping, no socket
    p.published = p.confirmed = 0
    p._pending, p._early = deque(), set()
    for size, same_run in zip(chunks, merge):
        p._add_pending(p.published + 1, p.published + size)
        p.published += size
        if not same_run and p._pending:
            p._pending[-1][2] -= 1.0  # an older run: the next chunk starts a run of its own
    confirmed: set[int] = set()
    for tag, multiple in confirms:
        new = (set(range(1, tag + 1)) if multiple else {tag}) & set(range(1, p.published + 1))
        assert p._confirm(tag, multiple) == len(new - confirmed)
        confirmed |= new
        assert p.confirmed == len(confirmed)
        unconfirmed = sorted(set(range(1, p.published + 1)) - confirmed)
        assert (p._pending[0][0] if p._pending else None) == (unconfirmed[0] if unconfirmed else None)
    assert sum(run[1] - run[0] + 1 for run in p._pending) - len(p._early) == p.published - len(confirmed)


def test_window_bounds_unconfirmed_publishes():
    with FakeBroker(lambda n: [spec.BasicAck(n, False)] if n % 7 == 0 else []) as fake:
        # acks come every 7 publishes (multiple=False for the 7th only): the rest stay unconfirmed
        # until the time-out, so the publisher must stop at the window and then fail
        with ConfirmPublisher(fake.url, window=10, confirm_timeout=0.5) as p:
            with pytest.raises(PublishTimeout) as excinfo:
                for _ in range(100):
                    p.publish("", "q", PROPS, b"x")
                    assert p.unconfirmed < 10
            assert "publish #1 " in str(excinfo.value) and "not confirmed within 0.5s" in str(excinfo.value)
            assert fake.published <= 11


def test_silent_broker_times_out():
    with FakeBroker() as fake, ConfirmPublisher(fake.url, confirm_timeout=0.3) as p:
        p.publish("", "q", PROPS, b"x")
        started = time.monotonic()
        with pytest.raises(PublishTimeout):
            p.finish()
        assert time.monotonic() - started < 3
        with pytest.raises(PublishTimeout):  # the publisher stays failed
            p.publish("", "q", PROPS, b"x")


def test_nack_fails_with_counts():
    with FakeBroker(lambda n: [spec.BasicAck(1, False), spec.BasicNack(2, False, False)] if n == 2 else []) as fake:
        with ConfirmPublisher(fake.url, confirm_timeout=5) as p:
            p.publish("", "q", PROPS, b"x")
            p.publish("", "q", PROPS, b"x")
            with pytest.raises(PublishNacked, match=r"refused \(basic.nack\) 1 publish\(es\) up to #2 of 2"):
                p.finish()


def test_channel_closed_by_the_broker_fails_clearly():
    close = spec.ChannelClose(404, "NOT_FOUND - no exchange 'nope' in vhost '/'", 60, 40)
    with FakeBroker(lambda n: [close] if n == 1 else []) as fake, ConfirmPublisher(fake.url, confirm_timeout=5) as p:
        p.publish("nope", "q", PROPS, b"x")
        with pytest.raises(PublishError, match="closed the channel: 404 NOT_FOUND - no exchange 'nope'"):
            p.finish()
        deadline = time.monotonic() + 5  # the fake broker reads on its own thread
        while not any(isinstance(m, spec.ChannelCloseOk) for m in fake.received) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert any(isinstance(m, spec.ChannelCloseOk) for m in fake.received)  # answered, as AMQP wants


def test_unreachable_broker_fails_at_open():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, not listening: connection refused
        with pytest.raises(PublishError, match="cannot connect"):
            ConfirmPublisher(f"amqp://guest:guest@127.0.0.1:{port}/%2F", connect_timeout=2).open()


def test_wrong_password_is_named(broker):
    url = broker.url.replace("guest:guest", "guest:wrong")
    with pytest.raises(PublishError, match="wrong user name or password|ACCESS_REFUSED|403"):
        ConfirmPublisher(url, connect_timeout=5).open()


def test_large_bodies_are_split_into_frames(broker, uid):
    queue = f"sp-large-{uid}"
    body = bytes(range(256)) * 4096  # 1 MiB: several frames at frame-max 128 KiB
    with admin(broker) as ch:
        ch.queue_declare(queue)
        with ConfirmPublisher(broker.url) as p:
            for _ in range(3):
                p.publish("", queue, PROPS, body)
            assert p.finish() == 3
        # at once in one process; under --worker-mode queues a transient message forwarded to its
        # queue's owner is confirmed as it leaves (docs/compatibility.md) and counted a moment later
        assert wait_for_count(ch, queue, 3) == 3
        _method, _props, got = ch.basic_get(queue, auto_ack=True)
        assert got == body
        ch.queue_delete(queue)


@pytest.mark.parametrize("url, vhost", [
    ("amqp://u:p@h:1/%2F", "/"), ("amqp://u:p@h:1/", "/"), ("amqp://u:p@h:1", "/"), ("amqp://u:p@h:1/v%2Fx", "v/x"),
])
def test_parse_url(url, vhost):
    address = parse_url(url)
    assert (address.host, address.port, address.username, address.password, address.virtual_host) == \
        ("h", 1, "u", "p", vhost)
    assert "p@" not in str(address)  # the password never reaches error messages


def test_parse_url_refuses_tls():
    with pytest.raises(ValueError, match="only amqp://"):
        parse_url("amqps://h/")


def test_unknown_virtual_host_is_named(broker):
    url = broker.url.rsplit("/", 1)[0] + "/no-such-vhost"
    with pytest.raises(PublishError) as excinfo:
        ConfirmPublisher(url, connect_timeout=5).open()
    text = str(excinfo.value)
    assert "530" in text or "virtual host" in text  # Warren and RabbitMQ: connection.close 530 NOT_ALLOWED
