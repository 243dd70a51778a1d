"""Quorum queues (warren.broker.queues.quorum, quorum_args) on the model, with a real store where
durability matters. Real-client behaviour is tests/e2e/test_quorum.py."""

from __future__ import annotations

import pytest

from warren.broker.durability import Durability
from warren.broker.message import Message
from warren.broker.queues.length_limits import REFUSED
from warren.broker.queues.factory import queue_class, queue_type
from warren.broker.queues.quorum import QuorumQueue
from warren.broker.queues.quorum import DEFAULT_DELIVERY_LIMIT, QuorumReady
from warren.broker.queues.quorum_args import check_queue_type, check_quorum_declare
from warren.broker.vhost import VirtualHost
from warren.errors import PreconditionFailed
from warren.spec.amqp0_9_1 import BasicProperties
from warren.store.queue_store import QueueStore

WHERE = "queue 'q' in vhost '/'"


def msg(body: str, priority=None, mode=None) -> Message:
    return Message("", "q", BasicProperties(priority=priority, delivery_mode=mode).encode(), body.encode())


def bodies(ready) -> list[str]:
    out = []
    while ready:
        out.append(ready.popleft()[1].body.decode())
    return out


def test_the_factory_and_the_type_name():
    assert queue_class({"x-queue-type": "quorum"}) is QuorumQueue
    vh = VirtualHost("/")
    q = vh.declare_queue(None, "qq", False, True, False, False, {"x-queue-type": "quorum"})
    assert isinstance(q, QuorumQueue) and queue_type(q) == "quorum"
    assert queue_type(vh.declare_queue(None, "cq", False, True, False, False, {})) == "classic"


def test_two_levels_two_high_then_the_older_head():
    r = QuorumReady()
    for seq, p in enumerate([0, 9, 1, 5, None, 7, 4, 6]):
        r.append((seq, msg(str(seq), p), False, 0))
    assert len(r) == 8 and r[0][0] == 1 and r[-1][0] == 7
    assert bodies(r) == ["1", "3", "0", "5", "7", "2", "4", "6"]


def test_only_one_level_is_plain_fifo_and_requeues_go_back_in_place():
    r = QuorumReady()
    entries = [(seq, msg(str(seq)), False, 0) for seq in range(4)]
    for e in entries:
        r.append(e)
    first, second = r.popleft(), r.popleft()
    r.put_back([first, second])
    assert bodies(r) == ["0", "1", "2", "3"]


@pytest.mark.parametrize("value, text", [
    ("lazy", "\"unsupported queue type 'lazy'\""), (1, "{unacceptable_type,signedint}"),
    (b"quorum", "{unacceptable_type,binary}"),
])
def test_unknown_queue_types(value, text):
    with pytest.raises(PreconditionFailed) as ei:
        check_queue_type(WHERE, {"x-queue-type": value})
    assert ei.value.text == f"invalid arg 'x-queue-type' for {WHERE}: {text}"
    for ok in ("classic", "quorum", "stream"):
        check_queue_type(WHERE, {"x-queue-type": ok})


def test_quorum_declare_order_values_then_other_types_arguments_then_properties():
    with pytest.raises(PreconditionFailed, match="invalid_dlx_strategy"):
        check_quorum_declare(WHERE, False, True, True, {"x-max-priority": 1, "x-dead-letter-strategy": "x"})
    with pytest.raises(PreconditionFailed, match="'x-queue-mode' .* of queue type rabbit_quorum_queue"):
        check_quorum_declare(WHERE, False, True, True, {"x-queue-mode": "lazy", "x-max-priority": 1})
    with pytest.raises(PreconditionFailed, match="invalid property 'auto-delete'"):
        check_quorum_declare(WHERE, False, True, True, {})
    check_quorum_declare(WHERE, True, False, False, {"x-delivery-limit": "anything", "x-custom": 1})


def test_delivery_limit_default_none_and_reject_publish_dlx_falls_back():
    vh = VirtualHost("/")
    q = vh.declare_queue(None, "a", False, True, False, False, {"x-queue-type": "quorum"})
    assert q.delivery_limit == DEFAULT_DELIVERY_LIMIT == 20
    q = vh.declare_queue(None, "b", False, True, False, False, {"x-queue-type": "quorum", "x-delivery-limit": -1})
    assert q.delivery_limit > 10**9
    q = vh.declare_queue(None, "c", False, True, False, False,
                         {"x-queue-type": "quorum", "x-overflow": "reject-publish-dlx", "x-max-length": 1})
    assert q.overflow == "drop-head"
    for i in range(3):
        assert q.publish(msg(str(i))) != REFUSED
    assert bodies(q.ready) == ["2"]


def test_reject_publish_takes_one_past_the_limit_then_refuses_until_80_percent():
    vh = VirtualHost("/")
    q = vh.declare_queue(None, "rp", False, True, False, False,
                         {"x-queue-type": "quorum", "x-overflow": "reject-publish", "x-max-length": 5})
    assert [q.publish(msg(str(i))) != REFUSED for i in range(7)] == [True] * 6 + [False]
    q.take(no_ack=True)  # 5 ready: above 4 (80 %)
    assert q.publish(msg("x")) == REFUSED
    q.take(no_ack=True)  # 4 ready
    assert q.publish(msg("y")) != REFUSED


def test_returns_are_kept_in_the_store_across_a_reopen(tmp_path):
    s = QueueStore(tmp_path / "q", fsync=False)
    for seq in (1, 2, 3):
        s.append(seq, b"rec")
    s.mark_delivered(1)
    s.mark_returned(1)
    s.mark_returned(1)
    s.mark_delivered(1)  # out again when the store closes
    s.mark_returned(2)
    s.ack(2)  # acked: its count is forgotten
    s.close()
    s = QueueStore(tmp_path / "q", fsync=False)
    assert s.returned(1) == 2 and s.returned(2) == 0 and s.returned(3) == 0
    assert dict(s.unacked()) == {1: True, 3: False}  # the delivered mark after the returns holds
    s.close()


def _sync(d: Durability) -> None:
    work = d.begin_sync()
    if work is not None:
        number, stores = work
        d.sync(stores)
        d.end_sync(number)


def test_at_least_once_acks_the_source_only_after_the_target_has_it(tmp_path):
    d = Durability(tmp_path / "data", fsync=False)
    vh = VirtualHost("/", d)
    src = vh.declare_queue(None, "src", False, True, False, False, {
        "x-queue-type": "quorum", "x-dead-letter-exchange": "dlx", "x-overflow": "reject-publish",
        "x-dead-letter-strategy": "at-least-once"})
    assert src.dead_letter_strategy == "at-least-once"
    src.publish(msg("dies", mode=1))
    _sync(d)
    seq, m, _, _ = src.take()
    src.reject(seq, m)  # no DLX yet: the message waits in the store, not ready
    assert src.dead_letters_waiting == 1 and src.message_count == 0 and seq in src.store
    vh.declare_exchange("dlx", "fanout", False, True, False, False, {})
    target = vh.declare_queue(None, "target", False, True, False, False, {"x-queue-type": "quorum"})
    vh.bind_queue(target, "dlx", "", {})
    src.tick(10**9)  # the retry: routed, stored in the target, not yet synced
    assert target.message_count == 1 and src.dead_letters_waiting == 1 and seq in src.store
    _sync(d)  # the target's copy is on disk: the source lets go
    assert src.dead_letters_waiting == 0 and seq not in src.store
