"""RabbitMQ's v2 and v1 AMQP 1.0 addresses."""

import pytest

from warren.protocol.amqp1_0.addresses import Address, AddressError, parse_source, parse_target


@pytest.mark.parametrize("address, want", [
    ("/queues/q", Address("", "q", "q")),
    ("/queues/a%2Fb", Address("", "a/b", "a/b")),
    ("/exchanges/amq.topic", Address("amq.topic", None)),
    ("/exchanges/x/k.%2A", Address("x", "k.*")),
    ("/amq/queue/q", Address("", "q", "q")),
    ("/queue/q", Address("", "q", "q", declare=True)),
    ("/queue", Address("", None)),
    ("/exchange/x/k", Address("x", "k")),
    ("/exchange/x", Address("x", None)),
    ("/topic/a.b", Address("amq.topic", "a.b")),
    ("plain", Address("", "plain", "plain")),
])
def test_targets(address, want):
    assert parse_target(address) == want


@pytest.mark.parametrize("address, want", [
    ("/queues/q", Address(None, None, "q")),
    ("/amq/queue/q", Address(None, None, "q")),
    ("/queue/q", Address(None, None, "q", declare=True)),
    ("/exchange/x/k", Address("x", "k", bind=True)),
    ("/topic/k", Address("amq.topic", "k", bind=True)),
])
def test_sources(address, want):
    assert parse_source(address) == want


@pytest.mark.parametrize("address", ["/nowhere/q", "/queues/", "/queues/a/b", "/exchanges/"])
def test_unknown_targets_are_refused(address):
    with pytest.raises(AddressError):
        parse_target(address)


@pytest.mark.parametrize("address", ["/exchanges/x", "/exchanges/x/k", "/topic"])
def test_v2_sources_are_queues_only(address):
    with pytest.raises(AddressError):
        parse_source(address)
