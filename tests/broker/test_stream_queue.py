"""Stream queues on the model (warren/broker/queues/stream.py): a virtual host with a real
Durability and StreamStore in a temporary folder, syncs run by hand, and a stand-in channel
that records deliveries. The AMQP behaviour through real clients is tests/e2e/test_streams.py."""

from __future__ import annotations

import datetime
import os

import pytest

from warren.broker.consumer import Consumer
from warren.broker.durability import Durability
from warren.broker.message import Message
from warren.broker.queues.factory import queue_class
from warren.broker.queues.stream import StreamQueue
from warren.broker.queues import stream as stream_module
from warren.broker.queues.stream import READ_BATCH, delivery_message
from warren.broker.queues.stream_args import parse_duration
from warren.broker.vhost import VirtualHost
from warren.errors import NotImplemented_, PreconditionFailed
from warren.spec.amqp0_9_1 import BasicProperties
from warren.store.message import encode_message

STREAM = {"x-queue-type": "stream"}


class FakeChannel:
    """What Consumer and StreamQueue use of a channel: capacity checks and deliver; it is its
    own DeliverySink (warren/broker/delivery.py) whose transport always has room."""

    def __init__(self) -> None:
        self.sink = self
        self.closed = False
        self.deliveries: list[tuple] = []  # (consumer tag, offset, message)
        self.cancelled: list[str] = []

    def can_accept(self) -> bool:
        return True

    def stop(self) -> None:
        pass

    prefetch_count = prefetch_size = 0  # no global prefetch

    def deliver(self, consumer, queue, seq, msg, redelivered) -> None:
        consumer.unacked += 1
        self.deliveries.append((consumer.tag, seq, msg))

    def consumer_cancelled_by_broker(self, c) -> None:
        self.cancelled.append(c.tag)

    def offsets(self, tag: str | None = None) -> list[int]:
        return [o for t, o, _ in self.deliveries if tag is None or t == tag]


@pytest.fixture
def durability(tmp_path):
    d = Durability(tmp_path / "data", fsync=False)
    yield d
    d.close([])


@pytest.fixture
def vhost(durability):
    return VirtualHost("/", durability)


def sync(durability: Durability) -> None:
    """One group commit, as the server runs it (the worker part inline)."""
    job = durability.begin_sync()
    if job is not None:
        number, stores = job
        durability.sync(stores)
        durability.end_sync(number)


def declare(vhost, name="s", **arguments) -> StreamQueue:
    return vhost.declare_queue(None, name, False, True, False, False, {**STREAM, **arguments})


def publish(q, n: int, prefix: str = "m", headers=None) -> list[int]:
    props = BasicProperties(headers=headers).encode() if headers else b""
    return [q.publish(Message("ex", "rk", props, f"{prefix}{i}".encode())) for i in range(n)]


def consume(q, channel: FakeChannel, tag="c", prefetch=100, no_ack=False, **arguments) -> Consumer:
    c = Consumer(tag, channel, q, no_ack, False, arguments, prefetch, 0)
    q.add_consumer(c)
    q.dispatch()
    return c


def ack_all(q, c: Consumer) -> None:
    """What the channel does on an ack: the credit comes back, the queue dispatches."""
    c.unacked = 0
    q.dispatch()


def test_the_factory_picks_a_stream_queue_for_x_queue_type_stream():
    assert queue_class(STREAM) is StreamQueue
    assert queue_class({"x-queue-type": "classic"}) is not StreamQueue


@pytest.mark.parametrize("value, seconds", [("7D", 7 * 86400), ("1h", 3600), ("30m", 1800), ("10s", 10),
                                            ("1Y", 365 * 86400), ("2M", 60 * 86400), ("0010s", 10)])
def test_durations_are_rabbitmqs(value, seconds):
    assert parse_duration(value) == seconds


@pytest.mark.parametrize("value", ["1d", "1H", "1h30m", "1.5h", "-1h", "10", "bogus", "", 10, None])
def test_what_is_not_a_duration(value):
    assert parse_duration(value) is None


@pytest.mark.parametrize("kw, text", [
    (dict(durable=False), "invalid property 'non-durable' for queue 's' in vhost '/'"),
    (dict(exclusive=True), "invalid property 'exclusive-owner' for queue 's' in vhost '/'"),
    (dict(auto_delete=True), "invalid property 'auto-delete' for queue 's' in vhost '/'"),
    (dict(durable=False, auto_delete=True), "invalid property 'auto-delete'"),
    (dict(args={"x-max-length": 1}), "invalid arg 'x-max-length' for queue 's' in vhost '/' of queue type "
                                     "rabbit_stream_queue"),
    (dict(args={"x-message-ttl": "a"}), "invalid arg 'x-message-ttl' for queue 's' in vhost '/' of queue type"),
    (dict(args={"x-max-length": 1, "x-max-age": "1x"}), "invalid arg 'x-max-age' for queue 's' in vhost '/': "
                                                        "invalid_max_age"),
    (dict(args={"x-max-age": 5}), "{unacceptable_type,signedint}"),
    (dict(args={"x-max-age": "0s"}), "invalid_max_age"),
    (dict(args={"x-max-length-bytes": "a", "x-max-age": "1x"}), "'x-max-length-bytes' for queue 's' in vhost "
                                                                "'/': \"expected integer, got longstr\""),
    (dict(args={"x-stream-max-segment-size-bytes": 3_000_000_001}), "Exceeded max value for "
                                                                    "x-stream-max-segment-size-bytes"),
    (dict(args={"x-initial-cluster-size": 0}), "{value_zero,0}"),
    (dict(args={"x-queue-leader-locator": "x"}), "invalid_queue_locator_arg"),
    (dict(name=""), "Cannot declare a server-named queue for type rabbit_stream_queue"),
])
def test_declare_refusals_are_rabbitmqs(vhost, kw, text):
    with pytest.raises(PreconditionFailed) as e:
        vhost.declare_queue(None, kw.get("name", "s"), False, kw.get("durable", True), kw.get("exclusive", False),
                            kw.get("auto_delete", False), {**STREAM, **kw.get("args", {})})
    assert text in e.value.text
    assert "s" not in vhost.queues


def test_accepted_arguments_and_unknown_ones(vhost):
    q = declare(vhost, **{"x-max-age": "7D", "x-max-length-bytes": 0, "x-stream-max-segment-size-bytes": 0,
                          "x-initial-cluster-size": 3, "x-queue-leader-locator": "balanced", "x-foo": 1})
    assert q.is_stream and vhost.queues["s"] is q
    assert (q.max_bytes, q.max_age_s) == (0, 7 * 86400.0)
    assert q.store.segment_size == 64  # 0 means as small as the store allows


def test_a_message_is_seen_only_once_a_sync_committed_it(vhost, durability):
    q = declare(vhost)
    ch = FakeChannel()
    consume(q, ch, **{"x-stream-offset": "first"})
    needs = publish(q, 3)
    assert needs == [durability.next_sync] * 3  # confirms wait for the next sync
    assert ch.deliveries == [] and q.message_count == 0
    sync(durability)
    assert ch.offsets() == [0, 1, 2] and q.message_count == 3
    tag, offset, msg = ch.deliveries[1]
    assert msg.body == b"m1" and (msg.exchange, msg.routing_key) == ("ex", "rk")
    assert BasicProperties.decode(msg.properties, 0)[0].headers == {"x-stream-offset": 1}


def test_transient_and_persistent_messages_are_all_kept(vhost, durability):
    q = declare(vhost)
    q.publish(Message("", "s", BasicProperties(delivery_mode=1).encode(), b"t"))
    q.publish(Message("", "s", BasicProperties(delivery_mode=2).encode(), b"p"))
    sync(durability)
    assert q.message_count == 2
    ch = FakeChannel()
    consume(q, ch, **{"x-stream-offset": "first"})
    assert [m.body for _, _, m in ch.deliveries] == [b"t", b"p"]


def test_consumers_read_independently_and_reading_removes_nothing(vhost, durability):
    q = declare(vhost)
    publish(q, 5)
    sync(durability)
    ch = FakeChannel()
    consume(q, ch, "a", **{"x-stream-offset": "first"})
    consume(q, ch, "b", **{"x-stream-offset": 3})
    assert ch.offsets("a") == [0, 1, 2, 3, 4] and ch.offsets("b") == [3, 4]
    assert q.message_count == 5
    publish(q, 1)
    sync(durability)
    assert ch.offsets("a")[-1] == 5 and ch.offsets("b")[-1] == 5


def test_prefetch_is_credit_and_acks_give_it_back(vhost, durability):
    q = declare(vhost)
    publish(q, 25)
    sync(durability)
    ch = FakeChannel()
    c = consume(q, ch, prefetch=10, **{"x-stream-offset": "first"})
    assert ch.offsets() == list(range(10))
    q.requeue([(0, None)])  # a nack with requeue: nothing comes back, and no credit either
    assert len(ch.deliveries) == 10
    ack_all(q, c)
    assert ch.offsets() == list(range(20))
    ack_all(q, c)
    assert ch.offsets() == list(range(25))
    assert q.message_count == 25


@pytest.mark.parametrize("spec, expected", [
    ("first", [0, 1, 2, 3, 4, 5]), ("next", []), ("last", [3, 4, 5]), (4, [4, 5]), (-1, [0, 1, 2, 3, 4, 5]),
    (100, []), ("1h", [0, 1, 2, 3, 4, 5]),
])
def test_start_offsets(vhost, durability, spec, expected):
    q = declare(vhost)
    publish(q, 3)
    sync(durability)
    publish(q, 3)  # the last committed batch: offsets 3..5
    sync(durability)
    ch = FakeChannel()
    consume(q, ch, **{"x-stream-offset": spec})
    assert ch.offsets() == expected
    publish(q, 1)
    sync(durability)
    assert ch.offsets() == expected + [6] if spec != 100 else ch.offsets() == []


def test_timestamps_and_intervals_pick_by_publish_time(vhost, durability, monkeypatch):
    now = [1_700_000_000_000]
    monkeypatch.setattr(stream_module, "_now_ms", lambda: now[0])
    q = declare(vhost)
    for i in range(6):
        now[0] += 60_000  # one message a minute
        publish(q, 1, f"t{i}")
    sync(durability)
    ch = FakeChannel()
    now[0] += 30_000
    consume(q, ch, "interval", **{"x-stream-offset": "3m"})  # the last three minutes: t3, t4, t5
    at = datetime.datetime.fromtimestamp((now[0] - 90_000) / 1000, datetime.timezone.utc)
    consume(q, ch, "timestamp", **{"x-stream-offset": at})  # at or after t4's time: t4, t5
    future = datetime.datetime.fromtimestamp(now[0] / 1000 + 3600, datetime.timezone.utc)
    consume(q, ch, "future", **{"x-stream-offset": future})
    assert ch.offsets("interval") == [3, 4, 5]
    assert ch.offsets("timestamp") == [4, 5]
    assert ch.offsets("future") == []


@pytest.mark.parametrize("spec, shown", [("bogus", '{longstr,<<"bogus">>}'), ("1x", '{longstr,<<"1x">>}'),
                                         (True, "{bool,true}"), (b"x", '{binary,<<"x">>}')])
def test_an_invalid_offset_is_refused(vhost, spec, shown):
    q = declare(vhost)
    with pytest.raises(PreconditionFailed) as e:
        consume(q, FakeChannel(), **{"x-stream-offset": spec})
    assert e.value.text == f"invalid arg 'x-stream-offset' for queue 's' in vhost '/': " \
                           f"{{invalid_stream_offset_arg,{shown}}}"
    assert not q.consumers and not q.cursors


def test_consumer_rules(vhost):
    q = declare(vhost)
    with pytest.raises(PreconditionFailed, match="consumer prefetch count is not set for 'queue 's' in vhost '/''"):
        consume(q, FakeChannel(), prefetch=0)
    with pytest.raises(PreconditionFailed, match="consumer prefetch count is not set"):
        consume(q, FakeChannel(), prefetch=0, no_ack=True)  # RabbitMQ checks the prefetch first
    with pytest.raises(NotImplemented_, match="automatic acknowledgement not supported by stream queues queue 's'"):
        consume(q, FakeChannel(), no_ack=True)
    with pytest.raises(PreconditionFailed, match="invalid arg 'x-priority' for queue 's' in vhost '/' of queue type"):
        consume(q, FakeChannel(), **{"x-priority": 1})
    assert not q.consumers


def test_get_and_purge_are_not_implemented(vhost, durability):
    q = declare(vhost)
    publish(q, 1)
    sync(durability)
    with pytest.raises(NotImplemented_, match="basic.get not supported by stream queues queue 's' in vhost '/'"):
        q.take(True)
    with pytest.raises(NotImplemented_, match="queue.purge not supported by stream queues queue 's'"):
        q.purge()
    assert q.message_count == 1


def test_retention_by_bytes_moves_lagging_cursors_to_the_first_retained(vhost, durability):
    q = declare(vhost, **{"x-max-length-bytes": 2000, "x-stream-max-segment-size-bytes": 500})
    ch = FakeChannel()
    c = consume(q, ch, prefetch=1, **{"x-stream-offset": "first"})
    for _ in range(10):
        publish(q, 10, "x" * 50)
        sync(durability)  # a rotation then a sync: retention runs
    assert ch.offsets() == [0]
    assert q.store.byte_size <= 2000 and q.store.first_offset > 50
    assert q.message_count == 100 - q.store.first_offset
    first = q.store.first_offset
    ack_all(q, c)
    assert ch.offsets() == [0, first]  # continues from the first retained offset


def test_retention_by_age_on_the_tick(vhost, durability, monkeypatch):
    now = [1_700_000_000_000]
    monkeypatch.setattr(stream_module, "_now_ms", lambda: now[0])
    q = declare(vhost, **{"x-max-age": "10s", "x-stream-max-segment-size-bytes": 200})
    assert q in vhost.timers  # the broker tick drives retention
    for _ in range(8):
        publish(q, 2, "y" * 40)
        sync(durability)
    publish(q, 1, "z" * 120)  # a segment of its own: the newest, which retention never deletes
    sync(durability)
    assert q.store.first_offset == 0 and q.store.segment_count == 9
    now[0] += 11_000
    assert q.tick(1e9) is True
    assert q.store.first_offset == 16 and q.message_count == 1


def test_restart_keeps_messages_and_offsets_continue(tmp_path):
    d = Durability(tmp_path / "data", fsync=False)
    v = VirtualHost("/", d)
    q = declare(v)
    publish(q, 7)
    sync(d)
    d.close(list(v.queues.values()))
    d2 = Durability(tmp_path / "data", fsync=False)
    v2 = VirtualHost("/", d2)
    d2.restore(type("B", (), {"vhosts": {"/": v2}})())
    q2 = v2.queues["s"]
    assert isinstance(q2, StreamQueue) and q2.message_count == 7
    publish(q2, 1, "after")
    sync(d2)
    ch = FakeChannel()
    consume(q2, ch, **{"x-stream-offset": "last"})  # after a restart: the last message
    assert ch.offsets() == [7] and ch.deliveries[0][2].body == b"after0"
    d2.close(list(v2.queues.values()))


def test_delete_removes_the_files_and_cancels_consumers(vhost, durability):
    q = declare(vhost)
    publish(q, 3)
    sync(durability)
    ch = FakeChannel()
    consume(q, ch)
    directory = q.store.directory
    assert os.listdir(directory)
    assert vhost.delete_queue(q) == 3
    assert not os.path.exists(directory) and "s" not in vhost.queues
    assert ch.cancelled == ["c"] and q.store not in durability.sync_listeners
    assert durability.definitions.load().queues == []


def test_a_consumer_far_behind_reads_in_bounded_batches(vhost, durability):
    q = declare(vhost)
    publish(q, 3000)
    sync(durability)
    asked = []
    read = q.store.read
    q.store.read = lambda offset, n, size, committed_only=False: asked.append(n) or read(offset, n, size, committed_only)
    ch = FakeChannel()
    consume(q, ch, prefetch=5000, **{"x-stream-offset": "first"})
    assert ch.offsets() == list(range(3000))
    assert max(asked) == READ_BATCH and len(asked) >= 3000 // READ_BATCH


def test_delivery_message_slices_the_record():
    props = BasicProperties(content_type="text/plain", headers={"k": "v"}).encode()
    msg = delivery_message(encode_message("ex\u00e9", "key", props, b"body"), 42)
    assert msg.exchange_ss == b"\x04ex\xc3\xa9" and msg.routing_key_ss == b"\x03key"
    assert (msg.exchange, msg.routing_key, msg.body) == ("ex\u00e9", "key", b"body")
    p = BasicProperties.decode(msg.properties, 0)[0]
    assert p.content_type == "text/plain" and p.headers == {"k": "v", "x-stream-offset": 42}


def test_policies_set_retention_and_the_segment_size(vhost, durability):
    from warren.broker.policies import Policy
    q = declare(vhost, "logs.s")
    assert (q.max_bytes, q.max_age_s) == (None, None) and q not in vhost.timers
    vhost.set_policies([Policy("/", "p", "^logs\\.", "queues", 0, {
        "max-age": "1h", "max-length-bytes": 10_000, "stream-max-segment-size-bytes": 4096})])
    assert (q.max_bytes, q.max_age_s) == (10_000, 3600.0)
    assert (q.store.max_bytes, q.store.max_age_s, q.store.segment_size) == (10_000, 3600.0, 4096)
    assert q in vhost.timers
    vhost.set_policies([])
    assert (q.store.max_bytes, q.store.max_age_s, q.store.segment_size) == (None, None, 16 * 1024 * 1024)
