"""QueueBase (warren/broker/queues/base.py): what every queue type has. The stream queue derives
from it alone and holds none of the classic queue's features; the defaults every type shares work
on a queue that overrides none of them."""

from __future__ import annotations

import time

import pytest

from tests.broker.queues.helpers import FakeChannel, msg
from warren.broker.consumer import Consumer
from warren.broker.durability import Durability
from warren.broker.memory import MemoryBudget
from warren.broker.queue import Queue
from warren.broker.queues.base import QueueBase
from warren.broker.queues.consumer_choice import ConsumerChoice
from warren.broker.queues.delivery_limit import TakenMessages
from warren.broker.queues.expiry import Expiry
from warren.broker.queues.flow_marks import FlowMarks
from warren.broker.queues.length_limits import LengthLimit
from warren.broker.queues.paging import Pager
from warren.broker.queues.stream import StreamQueue
from warren.broker.vhost import VirtualHost

# the operations every queue answers, which the classic queue and the stream (or QueueBase's
# default) each answer in their own way
SHARED_WITH_THE_CLASSIC_QUEUE = {"tick", "add_consumer", "remove_consumer", "reject", "page_out", "publish_past_limit",
                                 "refuses_publishes"}


class Minimal(QueueBase):
    """A queue type that overrides none of QueueBase's defaults: it records what it is asked."""

    queue_type = "minimal"

    def __init__(self, vhost, name: str) -> None:
        super().__init__(vhost, name)
        self.published: list = []
        self.forgotten: list = []

    def publish(self, message) -> int:
        self.published.append(message)
        return 7

    def forget(self, seq: int, message) -> None:
        self.forgotten.append(seq)

    def tick(self, now: float) -> bool:
        self._ticking = False
        return False


@pytest.fixture
def vhost():
    return VirtualHost("/")


def _own_names(cls) -> set[str]:
    return {n for n in vars(cls) if not (n.startswith("__") and n.endswith("__"))}


def test_the_stream_queue_is_not_a_classic_queue():
    assert issubclass(StreamQueue, QueueBase) and issubclass(Queue, QueueBase)
    assert not issubclass(StreamQueue, Queue)
    assert StreamQueue.__mro__ == (StreamQueue, QueueBase, object)


def test_the_classic_queue_is_composed_not_inherited(vhost):
    """Each feature of the classic queue is an object it holds, with its own state; the class
    itself derives from QueueBase alone."""
    assert Queue.__mro__ == (Queue, QueueBase, object)
    q = Queue(vhost, "q", arguments={"x-max-length": 3, "x-message-ttl": 1000, "x-delivery-limit": 2})
    parts = {"expiry": Expiry, "length_limit": LengthLimit, "taken": TakenMessages, "choice": ConsumerChoice,
             "pager": Pager, "flow": FlowMarks}
    for attribute, cls in parts.items():
        assert isinstance(getattr(q, attribute), cls), attribute
    assert (q.max_length, q.message_ttl, q.delivery_limit) == (3, 1.0, 2)
    assert q.limited and q.counts_deliveries


def test_the_stream_queue_holds_none_of_the_classic_features(vhost):
    """What a stream shares by name with the classic queue is an operation every queue answers,
    and the answer is the stream's own (or QueueBase's)."""
    for attribute in ("expiry", "length_limit", "taken", "choice", "pager", "flow"):
        assert not hasattr(StreamQueue, attribute), attribute
    for name in SHARED_WITH_THE_CLASSIC_QUEUE:
        assert getattr(StreamQueue, name) is not getattr(Queue, name), name


def test_identity_and_bookkeeping_are_set_for_any_queue(vhost):
    before = time.monotonic()
    q = Minimal(vhost, "m")
    assert (q.vhost, q.name, q.durable, q.exclusive_owner, q.auto_delete, q.arguments) == (vhost, "m", False, None,
                                                                                          False, {})
    assert q.consumers == [] and q.bound_to == set() and not q.had_consumer
    assert q.store is None and q.durability is None and q.memory is None
    assert not q.deleted and not q.congested and q.effective == {}
    assert q.last_used >= before
    assert (q.stats_deliver, q.stats_get, q.stats_ack, q.stats_redeliver) == (0, 0, 0, 0)
    assert not q.is_stream


def test_the_neutral_figures_of_a_queue_that_holds_nothing_in_memory(vhost):
    """What the memory budget, the HTTP API and the metrics read of every queue."""
    q = Minimal(vhost, "m")
    assert len(q.ready) == 0 and not q.ready
    assert (q.ready_bytes, q.paged, q.paged_bytes) == (0, 0, 0)
    assert not q.single_active and not q.limited
    budget = MemoryBudget(1, lambda: [q])
    assert budget.used() == 0
    q.page_out()  # nothing to move
    assert budget.check() == 0


def test_the_common_defaults(vhost):
    q = Minimal(vhost, "m")
    assert not q.takes_runs()
    assert not q.refuses_publishes()
    m = msg("x")
    assert q.publish_past_limit(m) == 7 and q.published == [m]  # a plain publish
    q.forget_run([(1, msg("a")), (2, msg("b"))])
    assert q.forgotten == [1, 2]  # forget, one by one


def test_touch_and_exclusive_consumers(vhost):
    q = Minimal(vhost, "m")
    q.last_used = 0.0
    q.touch()
    assert q.last_used > 0
    assert not q.has_exclusive_consumer()
    q.consumers.append(Consumer("a", FakeChannel(), q, False, False, {}, 1, 0))
    assert not q.has_exclusive_consumer()
    q.consumers.append(Consumer("b", FakeChannel(), q, False, True, {}, 1, 0))
    assert q.has_exclusive_consumer()


def test_timed_joins_the_vhost_timers_once(vhost):
    q = Minimal(vhost, "m")
    q.ask_for_ticks()
    q.ask_for_ticks()
    assert q in vhost.timers and q._ticking


def test_a_stream_reads_the_figures_and_answers_the_defaults(tmp_path):
    durability = Durability(tmp_path / "data", fsync=False)
    try:
        vhost = VirtualHost("/", durability)
        s = vhost.declare_queue(None, "s", False, True, False, False, {"x-queue-type": "stream"})
        assert isinstance(s, StreamQueue) and s.is_stream and s.queue_type == "stream"
        assert (len(s.ready), s.ready_bytes, s.paged, s.paged_bytes) == (0, 0, 0, 0)
        assert not s.takes_runs() and not s.refuses_publishes() and not s.limited
        assert s.publish_past_limit(msg("x")) > 0  # appended: the sync that commits it
        s.forget_run([(0, msg("x"))])  # an ack: credit only, the stream keeps the message
        assert s.store.next_offset == 1
    finally:
        durability.close([])
