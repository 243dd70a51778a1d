"""Units of the limits (warren/server/limits.py, warren/broker/limits.py, the user limits of
the access model, the Config checks); the same limits through real clients are in
tests/e2e/test_limits.py and tests/e2e/test_floods.py."""

from __future__ import annotations

import resource
from types import SimpleNamespace

import pytest

from warren.access import AccessControl, Invalid, NotFound
from warren.broker.limits import BrokerLimits
from warren.protocol.amqp0_9_1.names import check_names
from warren.config import Config
from warren.errors import FrameError, NotAllowed
from warren.server.limits import HandshakeGate, default_unauthenticated_limit, output_bound, raise_open_file_limit
from warren.spec import amqp0_9_1 as spec


def test_the_gate_counts_until_done_and_refuses_past_its_limit():
    gate = HandshakeGate(2)
    assert gate.admit("a") and gate.admit("b")
    assert not gate.admit("c") and gate.refused == 1
    gate.done()
    assert gate.admit("d")
    assert HandshakeGate(0).admit("x")  # 0: no limit


def test_the_default_unauthenticated_limit_follows_the_open_file_limit():
    assert default_unauthenticated_limit(1024) == 256
    assert default_unauthenticated_limit(1 << 20) == 4096
    assert default_unauthenticated_limit(100) == 64
    soft = raise_open_file_limit()
    assert soft == resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    assert HandshakeGate.for_config(Config(), soft).limit == default_unauthenticated_limit(soft)
    assert HandshakeGate.for_config(Config(max_unauthenticated_connections=7), soft).limit == 7


def test_the_output_bound_holds_one_message():
    assert output_bound(Config()) == 256 * 1024 * 1024
    assert output_bound(Config(max_message_size=512 * 1024 * 1024)) == 513 * 1024 * 1024


class _Session:
    """What the limits read of a session: its user, its protocol core's open channels, and
    whether it is a connection moved from another worker being replayed (warren/spread)."""

    replaying = False

    def __init__(self, user: str, channels: int) -> None:
        self.username = user
        self.conn = SimpleNamespace(channels=dict.fromkeys(range(channels)))


def _session(user: str, channels: int = 0) -> _Session:
    return _Session(user, channels)


def test_node_and_user_connection_limits():
    access = AccessControl()
    access.add_user("ann", "pw")
    access.set_user_limit("ann", "max-connections", 1)
    limits = BrokerLimits(connection_max=3)
    first = _session("ann")
    limits.admit(first, access)
    with pytest.raises(NotAllowed, match=r"connection refused for user 'ann': user connection limit \(1\) is reached"):
        limits.admit(_session("ann"), access)
    others = [_session("guest") for _ in range(2)]
    for s in others:
        limits.admit(s, access)
    with pytest.raises(NotAllowed, match=r"connection refused: node connection limit \(3\) is reached"):
        limits.admit(_session("guest"), access)
    limits.release(first)
    limits.release(first)  # twice: counted once
    assert limits.open == 2
    limits.admit(_session("ann"), access)


def test_user_channel_limit_counts_every_connection_of_the_user():
    access = AccessControl()
    access.add_user("bob", "pw")
    access.set_user_limit("bob", "max-channels", 3)
    limits = BrokerLimits()
    a, b = _session("bob", channels=2), _session("bob", channels=1)
    limits.admit(a, access)
    limits.admit(b, access)
    with pytest.raises(NotAllowed, match=r"number of channels opened for user 'bob' has reached the maximum "
                                         r"allowed user limit of \(3\)"):
        limits.admit_channel(a, access)
    access.set_user_limit("bob", "max-channels", -1)  # negative: unlimited
    limits.admit_channel(a, access)


def test_consumers_per_channel():
    limits = BrokerLimits(consumer_max_per_channel=2)
    channel = SimpleNamespace(consumers={"a": 1, "b": 2})
    with pytest.raises(NotAllowed, match=r"reached maximum \(2\) of consumers per channel"):
        limits.check_consumer(channel, "c")  # a new consumer tag
    limits.check_consumer(channel, "a")  # a tag the channel has: not a new consumer
    BrokerLimits().check_consumer(channel, "c")


def test_names_that_are_not_utf8_are_a_frame_error():
    bad = b"q\xff".decode("utf-8", "surrogateescape")  # what the codec makes of such octets
    for method in (spec.QueueDeclare(queue=bad), spec.ExchangeDeclare(exchange=bad, type="direct"),
                   spec.QueueBind(queue="q", exchange="x", routing_key=bad),
                   spec.BasicConsume(queue="q", consumer_tag=bad)):
        with pytest.raises(FrameError, match="Malformed UTF-8 in shortstr"):
            check_names(method)
    check_names(spec.QueueDeclare(queue="café-\x00"))  # UTF-8 (and NUL) is fine, as RabbitMQ
    check_names(spec.BasicPublish(exchange="", routing_key=bad))  # publish is not checked, as RabbitMQ


def test_user_limits_in_the_access_model(tmp_path):
    access = AccessControl(tmp_path / "access.json", fsync=False)
    access.add_user("cy", "pw")
    assert access.set_user_limit("cy", "max-connections", 5) == {"max-connections": 5}
    access.set_user_limit("cy", "max-channels", 10)
    with pytest.raises(Invalid):
        access.set_user_limit("cy", "max-queues", 1)
    with pytest.raises(Invalid):
        access.set_user_limit("cy", "max-channels", "10")
    with pytest.raises(NotFound):
        access.set_user_limit("nobody", "max-channels", 1)
    again = AccessControl(tmp_path / "access.json", fsync=False)  # durable
    assert again.user_limits() == {"cy": {"max-connections": 5, "max-channels": 10}}
    assert again.user_limit("cy", "max-connections") == 5 and again.user_limit("guest", "max-connections") is None
    again.clear_user_limit("cy", "max-connections")
    again.clear_user_limit("cy", "max-connections")  # absent: no error, as RabbitMQ's 204
    assert again.user_limits("cy") == {"cy": {"max-channels": 10}}
    again.delete_user("cy")
    assert again.user_limits() == {}


@pytest.mark.parametrize("bad", [
    {"connection_max": -1}, {"consumer_max_per_channel": -2}, {"max_unauthenticated_connections": -1},
    {"max_output_buffer": 1000}, {"max_message_size": 0}, {"max_message_size": 512 * 1024 * 1024 + 1},
    {"login_failure_delay": -1.0}, {"login_failure_delay": 10.0},
])
def test_config_refuses_bad_limits(bad):
    with pytest.raises(ValueError):
        Config(**bad).validate()


def test_loopback_users_from_a_comma_separated_string():
    assert Config(loopback_users="guest, admin").validate().loopback_users == ("guest", "admin")
    assert Config(loopback_users="").validate().loopback_users == ()
