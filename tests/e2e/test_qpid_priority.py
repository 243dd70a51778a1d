"""Qpid's priority queues (``qpid.priorities`` / ``x-qpid-priorities``: levels, ring, fairshare)
declared and used through pika. RabbitMQ's ``x-max-priority`` is tests/e2e/test_priority.py.

Warren's own feature: skipped against another broker.
"""

from __future__ import annotations

import pika
import pytest

from .helpers import RABBITMQ, connect, make_queue

pytestmark = [pytest.mark.timeout(60),
              pytest.mark.skipif(RABBITMQ, reason="Qpid's queue arguments are Warren's (RabbitMQ ignores them)")]

PRIORITIES = [8, 9, 5, 1, 2, 2, 3, 4, 9, 7, 8, 9, 9, 2]


def publish(ch, queue: str, priorities, persistent: bool = False) -> None:
    for i, p in enumerate(priorities):
        ch.basic_publish("", queue, f"{p}-{i}".encode(),
                         pika.BasicProperties(priority=p, delivery_mode=2 if persistent else None))


def drain(ch, queue: str) -> list[str]:
    out = []
    while True:
        method, _, body = ch.basic_get(queue, auto_ack=True)
        if method is None:
            return out
        out.append(body.decode())


def test_five_levels_group_priorities_as_qpid_does(ch, cleanup, uid):
    q = make_queue(ch, cleanup, f"qprio-{uid}", arguments={"x-qpid-priorities": 5})
    publish(ch, q, PRIORITIES)
    ch.basic_publish("", q, b"none", pika.BasicProperties())  # no priority: Qpid's 4, level 2
    # levels: 6+ -> 4, 5 -> 3, 4 -> 2, 3 -> 1, 0-2 -> 0; arrival order within a level
    assert drain(ch, q) == ["8-0", "9-1", "9-8", "7-9", "8-10", "9-11", "9-12", "5-2", "4-7", "none", "3-6",
                            "1-3", "2-4", "2-5", "2-13"]


def test_a_full_ring_drops_the_lowest_priority_first(ch, cleanup, uid):
    q = make_queue(ch, cleanup, f"qprio-ring-{uid}",
                   arguments={"qpid.priorities": 10, "qpid.policy_type": "ring", "qpid.max_count": 5})
    publish(ch, q, PRIORITIES)
    assert drain(ch, q) == ["9-1", "9-8", "9-11", "9-12", "8-10"]


def test_fairshare_lets_lower_levels_through(ch, cleanup, uid):
    q = make_queue(ch, cleanup, f"qprio-fair-{uid}", arguments={"x-qpid-priorities": 10, "x-qpid-fairshare": 2})
    publish(ch, q, [9, 9, 9, 5, 5, 5])
    assert drain(ch, q) == ["9-0", "9-1", "5-3", "5-4", "9-2", "5-5"]


def test_x_max_priority_keeps_rabbitmq_s_cap(ch, cleanup, uid):
    q = make_queue(ch, cleanup, f"xmax-{uid}", arguments={"x-max-priority": 5})
    publish(ch, q, [4, 5, 9, 5])
    assert drain(ch, q) == ["5-1", "9-2", "5-3", "4-0"]


def test_a_durable_qpid_priority_queue_comes_back_with_its_levels(start_broker, tmp_path, uid):
    data = tmp_path / "qprio-data"
    b = start_broker(data_dir=data)
    q = f"qprio-durable-{uid}"
    c = connect(b)
    ch = c.channel()
    ch.confirm_delivery()
    ch.queue_declare(q, durable=True, arguments={"qpid.priorities": 2})
    publish(ch, q, [1, 7, 4, 5], persistent=True)
    b.proc.kill()
    b.proc.wait()
    b = start_broker(data_dir=data)
    c = connect(b)
    ch = c.channel()
    ch.queue_declare(q, durable=True, arguments={"qpid.priorities": 2})
    assert drain(ch, q) == ["7-1", "5-3", "1-0", "4-2"]  # two levels: 5 and above, 0-4
    c.close()
