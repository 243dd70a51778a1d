"""Permissions on every AMQP operation, RabbitMQ's access-control table, row by row, allowed
and refused, against a private Warren and the session's private RabbitMQ 3.10 node
(``rabbitmq_node``, tests/rabbitmq_node.py) with the same expectations (codes and texts), so
each row is a side-by-side comparison.

The user under test has configure ``^c``, write ``^w``, read ``^r|^cr`` in a vhost of its own,
topic permissions on ``w-topic`` (write ``^{username}\\.``) and ``r-topic`` (read ``^public\\.``);
guest creates the objects the rows act on.
"""

from __future__ import annotations

import uuid

import pika
import pytest
from pika.exceptions import ChannelClosedByBroker, ConnectionClosedByBroker, ProbableAccessDeniedError

from tests.conftest import launch_broker, skip_under_cluster
from tests.e2e.access_admin import RabbitAdmin, WarrenAdmin
from tests.e2e.helpers import wait_until

PASSWORD = "pw-h6"


class Env:
    def __init__(self, admin, name: str) -> None:
        self.admin = admin
        self.name = name
        tag = uuid.uuid4().hex[:8]
        self.vhost = f"h6-perm-{tag}"
        self.user = f"h6-user-{tag}"
        self.impersonator = f"h6-imp-{tag}"
        self.stranger = f"h6-none-{tag}"

    def params(self, user: str | None = None, vhost: str | None = None, password: str = PASSWORD):
        user = user or self.user
        if user == "guest":
            password = "guest"
        return pika.ConnectionParameters(self.admin.host, self.admin.port, vhost or self.vhost,
                                         pika.PlainCredentials(user, password), connection_attempts=1,
                                         socket_timeout=10, stack_timeout=15, blocked_connection_timeout=15)

    def connect(self, user: str | None = None, vhost: str | None = None) -> pika.BlockingConnection:
        return pika.BlockingConnection(self.params(user, vhost))

    def q(self, name: str) -> str:
        return f"access to queue '{name}' in vhost '{self.vhost}' refused for user '{self.user}'"

    def x(self, name: str) -> str:
        return f"access to exchange '{name}' in vhost '{self.vhost}' refused for user '{self.user}'"

    def t(self, key: str, exchange: str) -> str:
        return (f"access to topic '{key}' in exchange '{exchange}' in vhost '{self.vhost}' refused for "
                f"user '{self.user}'")


@pytest.fixture(scope="module", params=["warren", "rabbitmq"])
def env(request, tmp_path_factory):
    if request.param == "rabbitmq":
        admin, broker = RabbitAdmin(request.getfixturevalue("rabbitmq_node")), None
    else:
        skip_under_cluster("makes its vhosts in the data folder's access.json from outside (access_admin.WarrenAdmin): node n1, where the queues go, never sees them (a cluster's vhosts and users are etcd's)")
        broker = launch_broker(tmp_path_factory.mktemp("perm"))
        admin = WarrenAdmin(broker)
    e = Env(admin, request.param)
    try:
        admin.add_vhost(e.vhost)
        admin.set_permissions("guest", e.vhost, ".*", ".*", ".*")
        admin.add_user(e.user, PASSWORD)
        admin.set_permissions(e.user, e.vhost, "^c", "^w", "^r|^cr")
        admin.add_user(e.impersonator, PASSWORD, tags="impersonator")
        admin.set_permissions(e.impersonator, e.vhost, ".*", ".*", ".*")
        admin.add_user(e.stranger, PASSWORD)
        admin.set_topic_permissions(e.user, e.vhost, "w-topic", "^{username}\\.", ".*")
        admin.set_topic_permissions(e.user, e.vhost, "r-topic", ".*", "^public\\.")
        admin.settle()
        with e.connect("guest") as c:
            ch = c.channel()
            for name, kind in (("r-x", "direct"), ("w-x", "direct"), ("w-topic", "topic"), ("r-topic", "topic")):
                ch.exchange_declare(name, kind)
            for name in ("r-q", "w-q", "cr-q"):
                ch.queue_declare(name)
        yield e
    finally:
        admin.cleanup()
        if broker is not None:
            broker.stop()


def attempt(env: Env, action, user: str | None = None):
    """Run ``action(channel)`` as the user under test; None if allowed, else (code, text)."""
    with env.connect(user) as c:
        ch = c.channel()
        try:
            action(ch)
            ch.queue_declare("r-q", passive=True)  # a round trip: an asynchronous refusal shows here
        except ChannelClosedByBroker as e:
            return e.reply_code, e.reply_text.split(" - ", 1)[1] if " - " in e.reply_text else e.reply_text
    return None


def publish(exchange: str, key: str = "k", **props):
    return lambda ch: ch.basic_publish(exchange, key, b"m", pika.BasicProperties(**props))


def declare_then_delete_queue(name):
    def action(ch):
        ch.queue_declare(name)
        ch.queue_delete(name)
    return action


def declare_then_delete_exchange(name):
    def action(ch):
        ch.exchange_declare(name, "direct")
        ch.exchange_delete(name)
    return action


# (row, action, expected: None = allowed, else (code, text maker taking env))
ROWS = [
    ("queue.declare: configure on the queue", lambda ch: ch.queue_declare("c-new"), None),
    ("queue.declare refused", lambda ch: ch.queue_declare("x-new"), (403, lambda e: e.q("x-new"))),
    ("queue.declare passive needs nothing", lambda ch: ch.queue_declare("w-q", passive=True), None),
    ("exchange.declare: configure on the exchange", lambda ch: ch.exchange_declare("c-x", "direct"), None),
    ("exchange.declare refused", lambda ch: ch.exchange_declare("x-x", "direct"), (403, lambda e: e.x("x-x"))),
    ("exchange.declare passive needs nothing", lambda ch: ch.exchange_declare("r-x", passive=True), None),
    ("exchange.delete: configure", declare_then_delete_exchange("c-gone"), None),
    ("exchange.delete refused", lambda ch: ch.exchange_delete("w-x"), (403, lambda e: e.x("w-x"))),
    ("queue.delete: configure", declare_then_delete_queue("c-gone"), None),
    ("queue.delete refused", lambda ch: ch.queue_delete("r-q"), (403, lambda e: e.q("r-q"))),
    ("queue.delete of a missing queue refused first", lambda ch: ch.queue_delete("x-missing"),
     (403, lambda e: e.q("x-missing"))),
    ("queue.bind: write on queue, read on exchange", lambda ch: ch.queue_bind("w-q", "r-x", "k"), None),
    ("queue.bind without write on the queue", lambda ch: ch.queue_bind("r-q", "r-x", "k"), (403, lambda e: e.q("r-q"))),
    ("queue.bind without read on the exchange", lambda ch: ch.queue_bind("w-q", "w-x", "k"), (403, lambda e: e.x("w-x"))),
    ("queue.bind to a missing queue refused first", lambda ch: ch.queue_bind("x-nope", "r-x", "k"),
     (403, lambda e: e.q("x-nope"))),
    ("queue.unbind: write on queue, read on exchange", lambda ch: ch.queue_unbind("w-q", "r-x", "k"), None),
    ("queue.unbind without write on the queue", lambda ch: ch.queue_unbind("r-q", "r-x", "k"), (403, lambda e: e.q("r-q"))),
    ("queue.unbind without read on the exchange", lambda ch: ch.queue_unbind("w-q", "w-x", "k"), (403, lambda e: e.x("w-x"))),
    ("exchange.bind: write on destination, read on source", lambda ch: ch.exchange_bind("w-x", "r-x", "k"), None),
    ("exchange.bind without write on the destination", lambda ch: ch.exchange_bind("r-x", "r-x", "k"),
     (403, lambda e: e.x("r-x"))),
    ("exchange.bind without read on the source", lambda ch: ch.exchange_bind("w-x", "w-x", "k"), (403, lambda e: e.x("w-x"))),
    ("exchange.unbind: write on destination, read on source", lambda ch: ch.exchange_unbind("w-x", "r-x", "k"), None),
    ("exchange.unbind without read on the source", lambda ch: ch.exchange_unbind("w-x", "w-x", "k"),
     (403, lambda e: e.x("w-x"))),
    ("basic.publish: write on the exchange", publish("w-x"), None),
    ("basic.publish refused", publish("r-x"), (403, lambda e: e.x("r-x"))),
    ("basic.publish to the default exchange is amq.default", publish(""), (403, lambda e: e.x("amq.default"))),
    ("basic.publish to a missing exchange refused first", publish("x-nope"), (403, lambda e: e.x("x-nope"))),
    ("basic.get: read on the queue", lambda ch: ch.basic_get("r-q"), None),
    ("basic.get refused", lambda ch: ch.basic_get("w-q"), (403, lambda e: e.q("w-q"))),
    ("basic.get of a missing queue refused first", lambda ch: ch.basic_get("x-nope"), (403, lambda e: e.q("x-nope"))),
    ("basic.consume: read on the queue", lambda ch: ch.basic_consume("r-q", lambda *a: None), None),
    ("basic.consume refused", lambda ch: ch.basic_consume("w-q", lambda *a: None), (403, lambda e: e.q("w-q"))),
    ("queue.purge: read on the queue", lambda ch: ch.queue_purge("r-q"), None),
    ("queue.purge refused", lambda ch: ch.queue_purge("w-q"), (403, lambda e: e.q("w-q"))),
    ("queue.declare with a DLX: read on the queue, write on the DLX",
     lambda ch: ch.queue_declare("cr-dlq", arguments={"x-dead-letter-exchange": "w-x"}), None),
    ("queue.declare with a DLX it may not write", lambda ch: ch.queue_declare(
        "cr-dlq2", arguments={"x-dead-letter-exchange": "r-x"}), (403, lambda e: e.x("r-x"))),
    ("queue.declare with a DLX, no read on the queue", lambda ch: ch.queue_declare(
        "c-dlq", arguments={"x-dead-letter-exchange": "w-x"}), (403, lambda e: e.q("c-dlq"))),
    ("queue.declare with the default exchange as DLX", lambda ch: ch.queue_declare(
        "cr-dlq3", arguments={"x-dead-letter-exchange": ""}), (403, lambda e: e.x("amq.default"))),
    ("exchange.declare with an AE: read on it, write on the AE", lambda ch: ch.exchange_declare(
        "cr-ae", "direct", arguments={"alternate-exchange": "w-x"}), None),
    ("exchange.declare with an AE it may not write", lambda ch: ch.exchange_declare(
        "cr-ae2", "direct", arguments={"alternate-exchange": "r-x"}), (403, lambda e: e.x("r-x"))),
    ("exchange.declare with an AE, no read on the exchange", lambda ch: ch.exchange_declare(
        "c-ae", "direct", arguments={"alternate-exchange": "w-x"}), (403, lambda e: e.x("c-ae"))),
    ("topic: publish with a routing key the write pattern allows", lambda ch: ch.basic_publish(
        "w-topic", ch.connection._impl.params.credentials.username + ".x", b"m"), None),
    ("topic: publish with another routing key", publish("w-topic", "other.x"), (403, lambda e: e.t("other.x", "w-topic"))),
    ("topic: bind with a key the read pattern allows", lambda ch: ch.queue_bind("w-q", "r-topic", "public.x"), None),
    ("topic: bind with another key", lambda ch: ch.queue_bind("w-q", "r-topic", "secret"),
     (403, lambda e: e.t("secret", "r-topic"))),
    ("topic: unbind with another key", lambda ch: ch.queue_unbind("w-q", "r-topic", "secret"),
     (403, lambda e: e.t("secret", "r-topic"))),
    ("topic: exchange.bind checks read on the source's key", lambda ch: ch.exchange_bind("w-x", "r-topic", "secret"),
     (403, lambda e: e.t("secret", "r-topic"))),
    ("topic: exchange.bind does not check the destination's key", lambda ch: ch.exchange_bind("w-topic", "r-x", "zz"),
     None),
    ("user_id: the connection's own user", lambda ch: ch.basic_publish(
        "w-x", "k", b"m", pika.BasicProperties(user_id=ch.connection._impl.params.credentials.username)), None),
    ("user_id: another user", publish("w-x", user_id="someone-else"),
     (406, lambda e: f"user_id property set to 'someone-else' but authenticated user was '{e.user}'")),
]


@pytest.mark.parametrize("row,action,expected", ROWS, ids=[r[0] for r in ROWS])
def test_access_table(env, row, action, expected):
    got = attempt(env, action)
    if expected is None:
        assert got is None, f"{row}: refused on {env.name}: {got}"
    else:
        code, text = expected
        assert got == (code, text(env)), f"{row} on {env.name}"


def test_server_named_queues_need_configure_on_their_generated_name(env):
    code, text = attempt(env, lambda ch: ch.queue_declare(""))
    assert code == 403
    assert text.startswith("access to queue 'amq.gen-") and text.endswith(
        f"' in vhost '{env.vhost}' refused for user '{env.user}'")


def test_an_impersonator_may_publish_with_another_user_id(env):
    assert attempt(env, publish("w-x", user_id="someone-else"), user=env.impersonator) is None


def test_a_user_without_permissions_in_the_vhost_cannot_open_it(env):
    with pytest.raises(ProbableAccessDeniedError) as e:
        env.connect(env.stranger)
    assert "530" in str(e.value)
    assert f"NOT_ALLOWED - access to vhost '{env.vhost}' refused for user '{env.stranger}'" in str(e.value)


def _refused_on(c, action, expected_text: str):
    """Run ``action`` on a new channel of ``c``: True if refused with ``expected_text`` (403)."""
    ch = c.channel()
    try:
        action(ch)
        ch.queue_declare("r-q", passive=True)
    except ChannelClosedByBroker as e:
        assert (e.reply_code, e.reply_text) == (403, "ACCESS_REFUSED - " + expected_text)
        return True
    ch.close()
    return False


def test_permission_changes_apply_to_open_connections(env):
    """A change applies to the connections already open: on their new channels in RabbitMQ
    (whose channels keep the answers of resources they used lately) and in Warren; Warren's
    channels that used the resource already follow at once too (docs/compatibility.md)."""
    with env.connect() as c:
        used = c.channel()
        used.basic_get("r-q")
        used.basic_publish("w-x", "k", b"m")
        try:
            env.admin.set_permissions(env.user, env.vhost, "^c", "^w", "")  # no more read
            assert wait_until(lambda: _refused_on(c, lambda ch: ch.basic_get("r-q"), env.q("r-q")), 10, 0.1)
            env.admin.set_permissions(env.user, env.vhost, "^c", "^nothing", "^r|^cr")  # no more write
            assert wait_until(lambda: _refused_on(c, lambda ch: ch.basic_publish("w-x", "k", b"m"), env.x("w-x")),
                              10, 0.1)
            if env.name == "warren":  # the channel that published before is refused as well
                with pytest.raises(ChannelClosedByBroker) as e:
                    used.basic_publish("w-x", "k", b"m")
                    used.queue_declare("r-q", passive=True)
                assert e.value.reply_text == "ACCESS_REFUSED - " + env.x("w-x")
        finally:
            env.admin.set_permissions(env.user, env.vhost, "^c", "^w", "^r|^cr")
            env.admin.settle()


@pytest.mark.parametrize("dialect", ["0-8", "0-9"])
def test_0_8_and_0_9_connections_are_checked_the_same_way(env, dialect):
    if env.name != "warren":
        pytest.skip("Warren's own 0-8/0-9 client mode is run against Warren only")
    from warren.spec import amqp0_9_1 as spec
    from warren.protocol.client import Closed
    from tests.e2e.clientmode import SocketClient

    broker = env.admin.broker
    with SocketClient(broker, dialect, username=env.user, password=PASSWORD, virtual_host=env.vhost) as c:
        ch = c.channel(1)
        c.send(ch, spec.QueueDeclare(0, "x-new"))
        close = c.wait(spec.ChannelClose, ch).method
        assert (close.reply_code, close.reply_text) == (403, "ACCESS_REFUSED - " + env.q("x-new"))
        ch = c.channel(2)
        c.publish(ch, "r-x", "k", b"m")
        close = c.wait(spec.ChannelClose, ch).method
        assert (close.reply_code, close.reply_text) == (403, "ACCESS_REFUSED - " + env.x("r-x"))
        ch = c.channel(3)
        c.call(ch, spec.QueuePurge(0, "r-q"), spec.QueuePurgeOk)  # read on r-q: allowed
    c = SocketClient(broker, dialect, handshake=False, username=env.stranger, password=PASSWORD,
                     virtual_host=env.vhost)
    try:
        closed = c.wait(Closed)
        assert (closed.reply_code, closed.reply_text) == (
            530, f"NOT_ALLOWED - access to vhost '{env.vhost}' refused for user '{env.stranger}'")
    finally:
        c.close_socket()
