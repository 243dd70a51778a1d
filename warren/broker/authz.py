"""RabbitMQ's access-control table, applied to the AMQP methods of one channel.

Which permission each operation needs, on which resource (https://www.rabbitmq.com/access-control.html,
and checked against RabbitMQ 3.10 in ``tests/e2e/test_permissions.py``):

==========================  =====================  ======================  ==================
operation                   configure              write                   read
==========================  =====================  ======================  ==================
exchange.declare            exchange               alternate-exchange (*)  exchange (*)
exchange.delete             exchange
queue.declare               queue                  dead-letter-exchange    queue (*)
                                                   (*)
queue.delete                queue
queue.bind / unbind                                queue                   exchange
exchange.bind / unbind                             destination exchange    source exchange
basic.publish                                      exchange
basic.get / consume,                                                       queue
queue.purge
==========================  =====================  ======================  ==================

(*) only when the declare creates the object and the argument is given. Passive declares
need nothing. The default exchange is checked as ``amq.default``; a server-named queue
(``amq.gen-…``) needs configure on its generated name, as in RabbitMQ. Topic permissions
apply to ``topic`` exchanges: write on the routing key at publish, read on the binding key
at queue.bind/unbind and exchange.bind/unbind (on the source). The checks come before the
object is looked up, as in RabbitMQ (a refused user learns nothing about what exists), and
after the name checks RabbitMQ makes first (reserved ``amq.`` prefixes, the default exchange),
which ``vhost.py`` raises.

Refusals are 403 ACCESS_REFUSED with RabbitMQ's texts (``access to queue 'q' in vhost 'v'
refused for user 'u'``; ``access to topic 'k' in exchange 'x' in vhost 'v' refused for user
'u'``). ``max-queues`` is checked when a declare would create a queue (406, RabbitMQ's text).

Each function takes the channel and the operation's arguments; the channel's operation
(``channel.py``) calls one at its top, whatever protocol asked for it.
Publishing goes through ``publish`` only when the channel's cache misses: the channel keeps
the exchange it last published to and the others it may publish to, by name; the broker empties
both (``forget_publish_checks``) whenever the access model changes. A publish to the same
exchange as before costs one identity comparison.
"""

from __future__ import annotations

import base64
import os

from warren.access.permissions import CONFIGURE, READ, WRITE
from warren.access.vhosts import MAX_QUEUES
from warren.broker import reply_to
from warren.broker.exchanges import EXCHANGE_TYPES
from warren.errors import AccessRefused, PreconditionFailed

__all__ = ["UNCHECKED", "forget_publish_checks", "exchange_declare", "exchange_delete", "exchange_bind", "queue_declare", "queue_delete", "queue_bind",
           "queue_read", "publish", "may_impersonate"]


UNCHECKED = object()  # a channel's publish cache before (or after forgetting) its checks


def forget_publish_checks(channel) -> None:
    """Users, vhosts or permissions changed: the channel checks its next publishes again."""
    channel.publish_allowed = UNCHECKED
    channel.publish_checked.clear()


def _refuse(ch, kind: str, name: str):
    if kind == "exchange" and name == "":
        name = "amq.default"
    return AccessRefused(f"access to {kind} '{name}' in vhost '{ch.vhost.name}' refused for user "
                         f"'{ch.session.username}'")


def _require(ch, permission: str, kind: str, name: str) -> None:
    if not ch.session.access.allowed(permission, kind, name):
        raise _refuse(ch, kind, name)


def _require_topic(ch, permission: str, exchange, routing_key: str) -> None:
    if exchange is None or exchange.TYPE != "topic":
        return
    if not ch.session.access.topic_allowed(permission, exchange.name, routing_key):
        raise AccessRefused(f"access to topic '{routing_key}' in exchange '{exchange.name}' in vhost "
                            f"'{ch.vhost.name}' refused for user '{ch.session.username}'")


# --- exchanges ---------------------------------------------------------------------------------

def exchange_declare(ch, name: str, type_: str, passive: bool, arguments: dict) -> None:
    if passive or name == "" or type_ not in EXCHANGE_TYPES:
        return  # passive needs nothing; the default exchange (403) and unknown types (503) come first
    _require(ch, CONFIGURE, "exchange", name)
    if name in ch.vhost.exchanges:
        return
    ae = arguments.get("alternate-exchange") if arguments else None
    if isinstance(ae, str):
        _require(ch, READ, "exchange", name)
        _require(ch, WRITE, "exchange", ae)


def exchange_delete(ch, name: str) -> None:
    if name == "" or name.startswith("amq."):
        return  # refused by the vhost whatever the permissions, as RabbitMQ does first
    _require(ch, CONFIGURE, "exchange", name)


def exchange_bind(ch, destination: str, source: str, routing_key: str) -> None:
    """exchange.bind and exchange.unbind."""
    _require(ch, WRITE, "exchange", destination)
    if destination == "" or source == "":
        return  # "operation not permitted on the default exchange" (vhost.py)
    _require(ch, READ, "exchange", source)
    _require_topic(ch, READ, ch.vhost.exchanges.get(source), routing_key)


# --- queues ------------------------------------------------------------------------------------

def queue_declare(ch, name: str, passive: bool, arguments: dict) -> None:
    if passive:
        return
    if not name:
        # configure on the generated name, as RabbitMQ; its random part never decides a pattern
        name = "amq.gen-" + base64.urlsafe_b64encode(os.urandom(16)).rstrip(b"=").decode()
    elif name.startswith("amq."):
        return  # reserved prefix: refused by the vhost first, as RabbitMQ
    _require(ch, CONFIGURE, "queue", name)
    vhost = ch.vhost
    if name in vhost.queues or name in vhost.remote_queues:
        return
    info = ch.session.broker.access.vhost(vhost.name)
    limit = info.limit(MAX_QUEUES) if info is not None else None
    # --worker-mode queues: every worker holds a record of the others' queues (warren/spread)
    if limit is not None and len(vhost.queues) + len(vhost.remote_queues) >= limit:
        raise PreconditionFailed(f"cannot declare queue '{name}': queue limit in vhost '{vhost.name}' "
                                 f"({limit}) is reached")
    dlx = arguments.get("x-dead-letter-exchange") if arguments else None
    if isinstance(dlx, str):
        _require(ch, READ, "queue", name)
        _require(ch, WRITE, "exchange", dlx)


def queue_delete(ch, queue: str) -> None:
    _require(ch, CONFIGURE, "queue", queue or ch.last_queue)


def queue_bind(ch, queue: str, exchange: str, routing_key: str) -> None:
    """queue.bind and queue.unbind."""
    _require(ch, WRITE, "queue", queue or ch.last_queue)
    if exchange == "":
        return  # "operation not permitted on the default exchange" (vhost.py)
    _require(ch, READ, "exchange", exchange)
    _require_topic(ch, READ, ch.vhost.exchanges.get(exchange), routing_key)


def queue_read(ch, queue: str) -> None:
    """basic.get, basic.consume and queue.purge: read on the queue."""
    name = queue or ch.last_queue
    if name.startswith(reply_to.REPLY_TO):
        return  # direct reply-to is a pseudo-queue of the connection itself
    _require(ch, READ, "queue", name)


# --- publishing --------------------------------------------------------------------------------

def publish(ch, exchange: str, routing_key: str) -> None:
    """The slow path of the publish check, taken when the exchange is not in the channel's cache
    (or the access model changed): write on the exchange, then the topic permission. Fills the
    cache unless a topic permission covers the exchange (then every routing key is checked,
    from the connection's own cache)."""
    access = ch.session.access
    _require(ch, WRITE, "exchange", exchange)
    ex = ch.vhost.exchanges.get(exchange)
    if ex is None or ex.internal:
        return  # 404 / internal refused by the channel; nothing cached
    if ex.TYPE == "topic" and access.has_topic_permission(exchange):
        _require_topic(ch, WRITE, ex, routing_key)
        return
    ch.publish_checked[exchange] = ex
    ch.publish_allowed = ex


def may_impersonate(ch) -> bool:
    """May this connection publish with another user's ``user_id`` (tag ``impersonator``)?"""
    user = ch.session.access.user
    return user is not None and user.is_impersonator
