"""The broker's directory (warren/broker/directory.py): every kind answers the whole interface.

The broker, the adapters, the HTTP API and the metrics call a directory without asking which
kind it is, so a kind that lacks a method, or takes other arguments, fails only when that path
runs under its mode. ``LocalDirectory`` states the interface; each other kind must match it.
What the methods do is tested through clients against brokers in each mode (tests/spread,
tests/management and the worker-mode CI runs)."""

from __future__ import annotations

import inspect

import pytest

from warren.broker.broker import Broker
from warren.broker.connection import BrokerConnection
from warren.broker.directory import ADMIN, LocalDirectory
from warren.errors import NotFound, PreconditionFailed
from warren.spread import Spread

from .helpers import QuietChannel, RecordingSink

INTERFACE = sorted(name for name, value in vars(LocalDirectory).items()
                   if not name.startswith("_") and callable(value))


def _arity(fn) -> list:
    return [p.kind for p in inspect.signature(fn).parameters.values()]


@pytest.mark.parametrize("kind", [Spread], ids=lambda k: k.__name__)
@pytest.mark.parametrize("name", INTERFACE)
def test_each_kind_of_directory_answers_every_method(kind, name):
    mine = getattr(kind, name, None)
    assert callable(mine), f"{kind.__name__} has no {name}(): a path calling it fails in that mode"
    assert inspect.iscoroutinefunction(mine) == inspect.iscoroutinefunction(getattr(LocalDirectory, name)), name
    assert _arity(mine) == _arity(getattr(LocalDirectory, name)), f"{kind.__name__}.{name} takes other arguments"


def test_a_broker_alone_has_the_local_directory_and_its_vhosts_share_it():
    broker = Broker(("/", "other"))
    assert type(broker.directory) is LocalDirectory and broker.directory.broker is broker
    assert all(v.directory is broker.directory for v in broker.vhosts.values())


async def test_changes_apply_at_once_with_the_refusals_of_one_process():
    broker = Broker()
    d = broker.directory
    name, messages, consumers = await d.define("/", "declare_queue", ("q", False, False, False, {}, ADMIN))
    assert (name, messages, consumers) == ("q", 0, 0)
    await d.define("/", "declare_exchange", ("x", "direct", False, False, False, False, {}))
    await d.define("/", "bind_queue", ("q", "x", "k", {}, ADMIN))
    vhost = broker.vhosts["/"]
    assert d.find_queue(vhost, "q") is vhost.queues["q"] and vhost.queues["q"].is_here
    assert [b.routing_key for b in vhost.queues["q"].bound_to] == ["k"]
    with pytest.raises(NotFound):
        await d.define("nowhere", "declare_exchange", ("x", "direct", False, False, False, False, {}))
    with pytest.raises(NotFound):
        await d.define("/", "bind_queue", ("missing", "x", "k", {}, ADMIN))
    await d.define("/", "unbind_queue", ("q", "x", "k", {}, ADMIN))
    assert not vhost.queues["q"].bound_to
    assert await d.define("/", "delete_queue", ("q", False, False, ADMIN)) == 0
    assert d.find_queue(vhost, "q") is None
    assert await d.define("/", "delete_queue", ("q", False, False, ADMIN)) == 0  # idempotent, as RabbitMQ 3.x


async def test_a_delete_if_empty_is_refused_with_the_text_the_http_api_shows():
    broker = Broker()
    conn = BrokerConnection(broker, ("127.0.0.1", 1), None)
    conn.username = "guest"
    conn.open_vhost("/")
    ch = conn.channels[1] = QuietChannel(conn, 1, RecordingSink())
    d = broker.directory
    await d.define("/", "declare_queue", ("full", False, False, False, {}, ADMIN))
    ch.publish("", "full", b"\x00\x00", b"one", False)
    with pytest.raises(PreconditionFailed, match="queue 'full' in vhost '/' is not empty"):
        await d.define("/", "delete_queue", ("full", False, True, ADMIN))
    assert await d.purge(broker.vhosts["/"].queues["full"]) == 1
    assert await d.define("/", "delete_queue", ("full", False, True, ADMIN)) == 0
