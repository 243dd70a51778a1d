"""Plain helpers shared by the end-to-end tests (the fixtures are in conftest.py).

Connections (pika and py-amqp), declaring queues and exchanges that the `cleanup` fixture
deletes afterwards, publishing and getting messages, and polling until a condition holds.
"""

from __future__ import annotations

import os
import time
import uuid

import amqp
import pika
from pika.exceptions import ChannelClosedByBroker

# Reply codes (AMQP 0-9-1 constants), as RabbitMQ sends them.
NO_ROUTE = 312
ACCESS_REFUSED = 403
NOT_FOUND = 404
RESOURCE_LOCKED = 405
PRECONDITION_FAILED = 406
NOT_ALLOWED = 530

# True when the tests run against another broker (RabbitMQ) rather than a Warren they started.
RABBITMQ = bool(os.environ.get("WARREN_TEST_BROKER_URL"))


# --------------------------------------------------------------------------- connections


def params(b, **kw) -> pika.ConnectionParameters:
    """pika parameters for broker `b` as guest on vhost "/", with short timeouts; `kw` overrides."""
    kw.setdefault("credentials", pika.PlainCredentials("guest", "guest"))
    kw.setdefault("virtual_host", "/")
    kw.setdefault("socket_timeout", 5)
    kw.setdefault("stack_timeout", 10)
    kw.setdefault("blocked_connection_timeout", 10)
    kw.setdefault("connection_attempts", 1)
    return pika.ConnectionParameters(b.host, b.port, **kw)


def connect(broker, **extra) -> pika.BlockingConnection:
    """A pika BlockingConnection with the more lenient timeouts of the class-level tests."""
    extra.setdefault("socket_timeout", 10)
    extra.setdefault("stack_timeout", 15)
    extra.setdefault("blocked_connection_timeout", 15)
    return pika.BlockingConnection(params(broker, **extra))


def amqp_connect(broker) -> amqp.Connection:
    """A connected py-amqp connection (it sends things pika will not, such as empty consumer tags)."""
    c = amqp.Connection(host=f"{broker.host}:{broker.port}", userid="guest", password="guest",
                        virtual_host="/", connect_timeout=10)
    c.connect()
    return c


def delete_all(broker, names: dict[str, list[str]]) -> None:
    """Best-effort delete of names["queues"], then names["exchanges"], on a fresh connection."""
    try:
        c = connect(broker)
    except Exception:  # pragma: no cover - broker gone
        return
    try:
        for kind, method in (("queues", "queue_delete"), ("exchanges", "exchange_delete")):
            for name in names[kind]:
                chan = c.channel()
                try:
                    getattr(chan, method)(name)
                    chan.close()
                except Exception:
                    pass
    finally:
        if c.is_open:
            c.close()


# --------------------------------------------------------------------------- declaring


def make_queue(ch, cleanup, name: str, **kw) -> str:
    """Declare queue `name` (with queue_declare keywords `kw`) and register it for cleanup."""
    ch.queue_declare(name, **kw)
    cleanup["queues"].append(name)
    return name


def new_queue(ch) -> str:
    """A fresh server-named exclusive queue."""
    return ch.queue_declare("", exclusive=True).method.queue


def make_exchange(ch, cleanup, name: str, kind: str, **kw) -> str:
    """Declare exchange `name` of type `kind` (exchange_declare keywords `kw`); register it for cleanup."""
    ch.exchange_declare(name, exchange_type=kind, **kw)
    cleanup["exchanges"].append(name)
    return name


def new_exchange(ch, cleanup, kind: str, uid: str) -> str:
    """Declare a fresh uniquely named exchange of type `kind` and register it for cleanup."""
    return make_exchange(ch, cleanup, f"rt-{kind}-{uid}-{uuid.uuid4().hex[:6]}", kind)


def probe(conn, kind: str, name: str) -> int:
    """200 if a passive declare of `name` (kind "queue" or "exchange") succeeds on a new channel
    of `conn`, else the channel-close reply code."""
    chan = conn.channel()
    declare = chan.queue_declare if kind == "queue" else chan.exchange_declare
    try:
        declare(name, passive=True)
    except ChannelClosedByBroker as e:
        return e.reply_code
    chan.close()
    return 200


def exists(conn, kind: str, name: str) -> bool:
    """Whether queue or exchange `name` exists (any answer but 200 or 404 NOT_FOUND fails)."""
    code = probe(conn, kind, name)
    assert code in (200, NOT_FOUND), code
    return code == 200


def passive_counts(conn, name: str) -> tuple[int, int]:
    """(message count, consumer count) of queue `name`, from a passive declare on a new channel."""
    chan = conn.channel()
    ok = chan.queue_declare(name, passive=True)
    chan.close()
    return ok.method.message_count, ok.method.consumer_count


def message_count(conn, queue: str) -> int:
    return passive_counts(conn, queue)[0]


def sync(chan) -> None:
    """A cheap synchronous round trip, so an asynchronous channel error surfaces as an exception."""
    chan.exchange_declare("amq.direct", passive=True)


# --------------------------------------------------------------------------- messages


def publish_n(ch, queue: str, n: int, prefix: str = "", exchange: str = "") -> None:
    """Publish n messages with bodies f"{prefix}{i}" (i = 0 .. n-1) to `queue`."""
    for i in range(n):
        ch.basic_publish(exchange, queue, f"{prefix}{i}".encode())


def get(ch, queue: str, auto_ack: bool = False, timeout: float = 5.0, interval: float = 0.02):
    """basic.get, retrying briefly while the queue is empty; (None, None, None) if it stays empty."""
    deadline = time.monotonic() + timeout
    while True:
        method, props, body = ch.basic_get(queue, auto_ack=auto_ack)
        if method is not None or time.monotonic() >= deadline:
            return method, props, body
        time.sleep(interval)


def get_body(chan, queue: str, timeout: float = 5.0) -> bytes | None:
    """basic.get with a short retry loop (routing is synchronous, but be lenient on slow brokers)."""
    return get(chan, queue, auto_ack=True, timeout=timeout, interval=0.05)[2]


def round_trip(conn: pika.BlockingConnection, body: bytes = b"ping") -> None:
    """Publish to a fresh exclusive queue and get the message back on the same connection."""
    ch = conn.channel()
    q = new_queue(ch)
    ch.basic_publish("", q, body)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        method, _props, got = ch.basic_get(q, auto_ack=True)
        if method is not None:
            assert got == body
            ch.close()
            return
        time.sleep(0.02)
    raise AssertionError("published message never arrived")


# --------------------------------------------------------------------------- waiting


def wait_until(predicate, timeout: float = 5.0, interval: float = 0.05) -> bool:
    """Poll `predicate` until it is true or `timeout` passes; returns its last value."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return predicate()


def wait_for_count(conn, queue: str, n: int, timeout: float = 5.0) -> int:
    """Wait until `queue` holds at least n messages; returns the count it holds then."""
    wait_until(lambda: message_count(conn, queue) >= n, timeout)
    return message_count(conn, queue)
