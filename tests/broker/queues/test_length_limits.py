"""x-max-length(-bytes) and x-overflow (warren/broker/queues/length_limits.py) on a queue model;
end to end through pika beside RabbitMQ: tests/e2e/test_limits.py."""

from __future__ import annotations

import pytest

from warren.broker.queue import Queue
from warren.broker.queues.length_limits import REFUSED
from warren.broker.vhost import VirtualHost

from .helpers import consumer, dead_lettering, drain, msg


def test_drop_head_keeps_the_newest_and_dead_letters_the_oldest_as_maxlen():
    q, dead = dead_lettering({"x-max-length": 2})
    for body in "abcd":
        assert q.publish(msg(body)) == 0
    assert drain(q) == ["c", "d"]
    assert drain(dead) == ["a", "b"]


@pytest.mark.parametrize("overflow", ["reject-publish", "reject-publish-dlx"])
def test_reject_publish_refuses_the_new_message_and_only_dlx_dead_letters_it(overflow):
    q, dead = dead_lettering({"x-max-length-bytes": 3, "x-overflow": overflow})
    assert q.publish(msg("ab")) == 0
    assert q.refuses_publishes() is False  # an empty message would still fit
    assert q.publish(msg("cd")) == REFUSED
    assert drain(dead) == (["cd"] if overflow.endswith("dlx") else [])
    assert q.publish_past_limit(msg("ef")) == 0  # another worker counted it taken: kept
    assert q.limited and drain(q) == ["ab", "ef"]


def test_unacked_messages_do_not_count_against_the_limit():
    q = Queue(VirtualHost("/"), "q", arguments={"x-max-length": 1, "x-overflow": "reject-publish"})
    consumer(q, "c", prefetch=5)
    assert [q.publish(msg(b)) for b in "abc"] == [0, 0, 0]  # each went to the consumer at once


def test_a_lower_limit_from_a_policy_drops_the_head_at_once():
    q = Queue(VirtualHost("/"), "q")
    for body in "abcde":
        q.publish(msg(body))
    q.apply_arguments({"x-max-length": 2})
    assert drain(q) == ["d", "e"]
