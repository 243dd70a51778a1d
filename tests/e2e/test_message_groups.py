"""Message groups (Qpid's ``qpid.group_header_key``) declared and consumed through pika.

Warren's own feature (RabbitMQ has no equivalent: its single active consumer is per queue):
skipped against another broker.
"""

from __future__ import annotations

import pika
import pytest

from .helpers import RABBITMQ, connect, make_queue, round_trip

pytestmark = [pytest.mark.timeout(60),
              pytest.mark.skipif(RABBITMQ, reason="Qpid's queue arguments are Warren's (RabbitMQ ignores them)")]

GROUPS = {"qpid.group_header_key": "THE-GROUP", "qpid.shared_msg_group": 1}


def publish(ch, queue: str, groups: str, persistent: bool = False) -> None:
    for i, g in enumerate(groups):
        headers = None if g == "-" else {"THE-GROUP": g}
        ch.basic_publish("", queue, f"{g}-{i}".encode(),
                         pika.BasicProperties(headers=headers, delivery_mode=2 if persistent else None))


class Receiver:
    """One consumer with prefetch 1 on its own channel; ``next()`` is its next delivery or None."""

    def __init__(self, conn, queue: str) -> None:
        self.ch = conn.channel()
        self.ch.basic_qos(prefetch_count=1)
        self.deliveries = self.ch.consume(queue, inactivity_timeout=0.3)
        self.tags: dict[str, int] = {}

    def next(self) -> str | None:
        method, _, body = next(self.deliveries)
        if method is None:
            return None
        self.tags[body.decode()] = method.delivery_tag
        return body.decode()

    def ack(self, body: str) -> None:
        self.ch.basic_ack(self.tags.pop(body))

    def release(self, body: str) -> None:
        self.ch.basic_nack(self.tags.pop(body), requeue=True)


def test_a_group_goes_to_one_consumer_at_a_time_until_its_messages_are_acked(conn, ch, cleanup, uid):
    q = make_queue(ch, cleanup, f"groups-{uid}", arguments=GROUPS)
    publish(ch, q, "AAABBBCCC")
    c1, c2 = Receiver(conn, q), Receiver(conn, q)
    first, second = c1.next(), c2.next()
    assert {first, second} == {"A-0", "B-3"}  # one consumer each: A is held, the other gets B
    owner_a, owner_b = (c1, c2) if first == "A-0" else (c2, c1)
    owner_a.ack("A-0")
    assert owner_a.next() == "A-1"  # A was free again; its next message goes to whoever has room
    owner_b.ack("B-3")
    assert owner_b.next() == "B-4"  # A is held by the other consumer: skipped
    owner_a.ack("A-1")
    owner_b.ack("B-4")
    got = {owner_a.next(), owner_b.next()}
    assert got == {"A-2", "B-5"}
    round_trip(conn)


def test_messages_without_the_header_form_one_group(conn, ch, cleanup, uid):
    q = make_queue(ch, cleanup, f"groups-default-{uid}", arguments=GROUPS)
    publish(ch, q, "--X")
    c1 = Receiver(conn, q)
    c2 = Receiver(conn, q)
    got = {c1.next(), c2.next()}
    assert got == {"--0", "X-2"}  # "--1" waits for the owner of the default group


def test_a_closed_channel_releases_its_groups_in_order(conn, ch, cleanup, uid):
    q = make_queue(ch, cleanup, f"groups-close-{uid}", arguments=GROUPS)
    publish(ch, q, "AABB")
    c1 = Receiver(conn, q)
    assert c1.next() == "A-0"
    c2 = Receiver(conn, q)
    assert c2.next() == "B-2"
    c2.ack("B-2")
    assert c2.next() == "B-3"
    c2.ack("B-3")
    assert c2.next() is None  # A is c1's
    c1.ch.close()  # its unacked A-0 is requeued and A is free
    assert c2.next() == "A-0"
    c2.ack("A-0")
    assert c2.next() == "A-1"


def test_a_nack_with_requeue_frees_the_group_and_basic_get_skips_held_groups(conn, ch, cleanup, uid):
    q = make_queue(ch, cleanup, f"groups-get-{uid}", arguments=GROUPS)
    publish(ch, q, "AAB")
    c1 = Receiver(conn, q)
    assert c1.next() == "A-0"
    method, _, body = ch.basic_get(q)
    assert body == b"B-2"  # A-1 belongs to c1's group
    assert ch.basic_get(q)[0] is None  # B is held by the get until it is acked
    ch.basic_ack(method.delivery_tag)
    c1.ch.cancel()  # no consumer left; its unacked A-0 still holds A
    assert ch.basic_get(q)[0] is None
    c1.release("A-0")  # A free again, and A-0 back in its place
    assert [ch.basic_get(q, auto_ack=True)[2] for _ in range(3)] == [b"A-0", b"A-1", None]


def test_persistent_grouped_messages_of_a_durable_queue_survive_kill_9(start_broker, tmp_path, uid):
    data = tmp_path / "groups-data"
    b = start_broker(data_dir=data)
    q = f"groups-durable-{uid}"
    c = connect(b)
    ch = c.channel()
    ch.confirm_delivery()
    ch.queue_declare(q, durable=True, arguments=GROUPS)
    publish(ch, q, "ABAB", persistent=True)
    held = Receiver(c, q)
    assert held.next() == "A-0"  # unacked when the broker dies: back, redelivered, group free
    b.proc.kill()
    b.proc.wait()
    b = start_broker(data_dir=data)
    c = connect(b)
    ch = c.channel()
    assert ch.queue_declare(q, durable=True, arguments=GROUPS).method.message_count == 4
    c1, c2 = Receiver(c, q), Receiver(c, q)
    assert {c1.next(), c2.next()} == {"A-0", "B-1"}  # still grouped: one A and one B
    c.close()
