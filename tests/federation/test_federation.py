"""Upstream definitions and the loop rule of the x-federation-upstream exchange."""

import pytest

from warren.broker.exchanges.federation_upstream import should_forward
from warren.federation.federation import validate_upstream, validate_upstream_set


def test_should_forward_counts_hops_and_cuts_loops():
    assert should_forward(None, 1, "b", "/")
    assert should_forward({"other": 1}, 1, "b", "/")
    one_hop = {"x-received-from": [{"cluster-name": "a", "vhost": "/"}]}
    assert not should_forward(one_hop, 1, "b", "/"), "max-hops 1: a message that crossed once stops"
    assert should_forward(one_hop, 2, "b", "/")
    assert not should_forward(one_hop, 2, "a", "/"), "never back to a broker it came through"
    assert should_forward(one_hop, 2, "a", "other-vhost")
    assert not should_forward({"x-received-from": [{"cluster-name": b"a", "vhost": b"/"}]}, 5, "a", "/")


def test_upstreams():
    assert validate_upstream({"uri": "amqp://h", "max-hops": 2, "expires": 1000, "ack-mode": "on-publish"})
    for bad, word in (({}, "uri"), ({"uri": "x://"}, "scheme"), ({"uri": "amqp://", "max-hops": 0}, "max-hops"),
                      ({"uri": "amqp://", "trust-user-id": "no"}, "trust-user-id"),
                      ({"uri": "amqp://", "ack-mode": "x"}, "ack-mode"), ({"uri": "amqp://", "bogus": 1}, "Unrec")):
        with pytest.raises(ValueError, match=word):
            validate_upstream(bad)
    assert validate_upstream_set([{"upstream": "a"}, {"upstream": "b", "max-hops": 3}])
    with pytest.raises(ValueError):
        validate_upstream_set({"upstream": "a"})
    with pytest.raises(ValueError):
        validate_upstream_set([{"name": "a"}])
