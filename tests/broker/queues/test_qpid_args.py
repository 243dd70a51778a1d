"""Qpid's queue arguments (warren.broker.queues.qpid_args): values, combinations, limits."""

from __future__ import annotations

import pytest

from warren.broker.queue import Queue
from warren.broker.queues.factory import new_queue, queue_class
from warren.broker.queues.last_value import LastValueQueue
from warren.broker.queues.message_groups import GroupQueue
from warren.broker.queues.priority import PriorityQueue, QpidPriorityQueue
from warren.broker.queues.qpid_args import QpidLimits, check, fairshare_limits, with_limits
from warren.broker.vhost import VirtualHost
from warren.errors import PreconditionFailed

from .helpers import msg


@pytest.mark.parametrize("args", [
    {"qpid.max_count": -1}, {"qpid.max_size": -1}, {"qpid.max_size": "foo"}, {"qpid.max_count": "foo"},
    {"qpid.max_size": 3.14159}, {"qpid.max_count": "2222222.22222"}, {"qpid.max_count": True},
    {"qpid.policy_type": "sometimes"}, {"qpid.priorities": 0}, {"qpid.priorities": 11}, {"x-qpid-priorities": "x"},
    {"qpid.last_value_queue_key": ""}, {"qpid.group_header_key": 5},
    {"qpid.priorities": 5, "x-qpid-fairshare": -2}, {"x-qpid-fairshare": 3},
    {"qpid.priorities": 5, "x-qpid-fairshare-x": 3},
    {"qpid.last_value_queue_key": "k", "qpid.group_header_key": "g"},
    {"qpid.group_header_key": "g", "qpid.priorities": 10},
    {"qpid.last_value_queue_key": "k", "x-queue-type": "quorum"},
])
def test_bad_values_and_combinations_are_refused_before_the_queue_exists(args):
    with pytest.raises(PreconditionFailed) as e:
        new_queue(VirtualHost("/"), "q", arguments=args)
    assert e.value.reply_code == 406 and "queue 'q'" in str(e.value)


@pytest.mark.parametrize("args", [
    {"qpid.max_count": "3"}, {"qpid.max_count": "3", "qpid.max_size": "0"}, {"qpid.max_size": 0},
    {"qpid.policy_type": "flow_to_disk", "qpid.max_count": 5}, {"x-qpid-priorities": 10, "qpid.fairshare-9": 2},
    {"qpid.last_value_queue_key": "k", "qpid.max_count": 10, "qpid.policy_type": "ring_strict"},
])
def test_values_qpid_accepts_are_accepted(args):
    check(args, "queue 'q'")
    assert new_queue(VirtualHost("/"), "q", arguments=args) is not None


def test_limits_read_as_rabbitmq_s_with_qpid_s_default_policy():
    assert with_limits({"qpid.max_count": "3"})["x-max-length"] == 3
    assert with_limits({"qpid.max_count": 3})["x-overflow"] == "reject-publish"  # no policy: Qpid rejects
    assert with_limits({"qpid.max_count": 3, "qpid.policy_type": "ring"})["x-overflow"] == "drop-head"
    assert with_limits({"qpid.max_size": 100, "qpid.policy_type": "reject"})["x-max-length-bytes"] == 100
    assert "x-max-length-bytes" not in with_limits({"qpid.max_size": 0})  # 0: no limit
    assert "x-max-length" not in with_limits({"qpid.max_count": 5, "qpid.policy_type": "flow_to_disk"})
    assert with_limits({"qpid.max_count": 3, "x-max-length": 7, "x-overflow": "drop-head"})["x-max-length"] == 7


def test_a_queue_with_qpid_limits_is_its_kind_reading_them():
    cls = queue_class({"qpid.max_count": 2, "qpid.policy_type": "ring"})
    assert issubclass(cls, QpidLimits) and issubclass(cls, Queue) and cls.__name__ == "Queue"
    assert queue_class({"qpid.max_count": 2}) is cls  # made once per kind
    assert issubclass(queue_class({"qpid.last_value_queue_key": "k", "qpid.max_count": 2}), LastValueQueue)
    assert issubclass(queue_class({"qpid.group_header_key": "g", "qpid.max_size": 2}), GroupQueue)
    assert issubclass(queue_class({"qpid.priorities": 3, "qpid.max_count": 2}), QpidPriorityQueue)
    assert issubclass(queue_class({"x-max-priority": 3, "qpid.max_count": 2}), PriorityQueue)
    assert queue_class({"x-max-length": 2}) is Queue  # nothing of Qpid's: the plain class
    q = new_queue(VirtualHost("/"), "ring", arguments={"qpid.max_count": 2, "qpid.policy_type": "ring"})
    for i in range(4):
        q.publish(msg(f"m{i}"))
    assert [e[1].body for e in q.ready] == [b"m2", b"m3"]
    assert (q.max_length, q.overflow) == (2, "drop-head")


def test_fairshare_limits_per_level_override_the_default():
    assert fairshare_limits({"x-qpid-fairshare": 5}, 3) == [5, 5, 5]
    assert fairshare_limits({"qpid.fairshare": 5, "qpid.fairshare-1": 0}, 3) == [5, 0, 5]
    assert fairshare_limits({"x-qpid-fairshare-2": 4}, 3) == [0, 0, 4]
    assert fairshare_limits({"x-qpid-fairshare": 0}, 3) is None and fairshare_limits({}, 3) is None
