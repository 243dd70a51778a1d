"""Messages through the HTTP API: ``POST /api/exchanges/{vhost}/{name}/publish`` and
``POST /api/queues/{vhost}/{name}/get``, with RabbitMQ's request and answer forms.

Publish: ``{"routing_key", "payload", "payload_encoding": "string"|"base64", "properties":
{...}}`` answers ``{"routed": bool}``; the message goes through the exchange's routing as an
AMQP publish does (``amq.default`` names the default exchange).

Get: ``{"count", "ackmode": "ack_requeue_true"|"ack_requeue_false"|"reject_requeue_true"|
"reject_requeue_false", "encoding": "auto"|"base64", "truncate"}``: up to ``count`` messages
are taken, then settled together (so ``count`` 2 with a requeue mode returns two different
messages, which come back redelivered, as in RabbitMQ). ``auto`` gives the payload as text
when it is UTF-8, base64 otherwise; ``truncate`` cuts the payload shown to that many octets
(``payload_bytes`` is always the whole size).
"""

from __future__ import annotations

import base64
import datetime

from warren.broker.message import Message
from warren.codec.properties import properties_error
from warren.errors import AMQPError
from warren.management.api.common import amqp_error, bad_request, jsonable
from warren.spec.amqp0_9_1 import BasicProperties

__all__ = ["properties_from_json", "properties_to_json", "publish", "get_messages", "ACKMODES"]

ACKMODES = ("ack_requeue_true", "ack_requeue_false", "reject_requeue_true", "reject_requeue_false")
_SHORTSTR_PROPS = ("content_type", "content_encoding", "correlation_id", "reply_to", "expiration", "message_id",
                   "type", "user_id", "app_id", "cluster_id")


def properties_from_json(props) -> bytes:
    """RabbitMQ's JSON form of the basic properties, encoded as a property list."""
    if props is None:
        props = {}
    if not isinstance(props, dict):
        raise bad_request("properties must be a JSON object")
    p = BasicProperties()
    for key, value in props.items():
        if key in _SHORTSTR_PROPS:
            if not isinstance(value, str):
                raise bad_request(f"property {key} must be a string")
            setattr(p, key, value)
        elif key in ("delivery_mode", "priority"):
            if isinstance(value, str) and value.isdigit():
                value = int(value)
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 255:
                raise bad_request(f"property {key} must be an integer 0..255")
            setattr(p, key, value)
        elif key == "headers":
            if not isinstance(value, dict):
                raise bad_request("property headers must be a JSON object")
            p.headers = value
        elif key == "timestamp":
            if isinstance(value, bool) or not isinstance(value, int):
                raise bad_request("property timestamp must be an integer (seconds)")
            p.timestamp = datetime.datetime.fromtimestamp(value, datetime.timezone.utc)
        else:
            raise bad_request(f"unknown message property '{key}'")
    try:
        encoded = p.encode()
    except (ValueError, OverflowError, TypeError, RecursionError) as e:
        raise bad_request(f"properties cannot be encoded: {e}") from None
    why = properties_error(encoded)  # what AMQP publishers are held to (too deep, a date past 9999)
    if why is not None:
        raise bad_request(f"properties cannot be encoded: {why}")
    return encoded


def properties_to_json(message: Message) -> dict:
    try:
        p = message.decoded
    except AMQPError:
        return {}
    out = {}
    for name, _ in BasicProperties.FIELDS:
        value = getattr(p, name)
        if value is not None:
            out[name] = jsonable(value)
    return out


def _payload(body: dict) -> bytes:
    payload = body.get("payload")
    if payload is None:
        raise bad_request("payload missing")
    if not isinstance(payload, str):
        raise bad_request("payload must be a string")
    encoding = body.get("payload_encoding", "string")
    if encoding == "string":
        return payload.encode("utf-8")
    if encoding == "base64":
        try:
            return base64.b64decode(payload, validate=True)
        except ValueError:
            raise bad_request("payload is not base64") from None
    raise bad_request(f"payload_encoding must be string or base64, not {encoding!r}")


def publish(vhost, exchange, body: dict, username: str) -> bool:
    """Publish as ``username`` through ``exchange``; True if some queue took the message."""
    routing_key = body.get("routing_key")
    if not isinstance(routing_key, str):
        raise bad_request("routing_key missing")
    properties = properties_from_json(body.get("properties"))
    payload = _payload(body)
    if exchange.internal:
        raise bad_request(f"cannot publish to internal exchange '{exchange.name}' in vhost '{vhost.name}'")
    msg = Message(exchange.name, routing_key, properties, payload)
    try:
        if msg.decoded.expiration is not None:
            msg.check_expiration()
        user_id = msg.decoded.user_id
        if user_id is not None and user_id != username:
            raise bad_request(f"user_id property set to '{user_id}' but authenticated user was '{username}'")
        exchange.stats_publish_in += 1
        reached, _ = exchange.enqueue(msg)
    except AMQPError as e:
        raise amqp_error(e) from None
    return reached > 0


def _int(value, name: str, default: int | None) -> int | None:
    if value is None:
        return default
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise bad_request(f"{name} must be an integer")
    return value


def check_get(body: dict) -> None:
    """The refusals of ``get_messages``'s body alone (400), before any queue is touched: what a
    worker checks before it asks the owner of another worker's queue (warren/spread)."""
    get_messages(None, body, check_only=True)


def get_messages(queue, body: dict, check_only: bool = False) -> list[dict]:
    count = _int(body.get("count"), "count", 1)
    if count < 1:
        raise bad_request("count must be at least 1")
    ackmode = body.get("ackmode")
    if ackmode is None and "requeue" in body:  # the form of RabbitMQ before 3.7
        ackmode = "ack_requeue_true" if str(body["requeue"]).lower() == "true" else "ack_requeue_false"
    if ackmode not in ACKMODES:
        raise bad_request(f"ackmode must be one of {', '.join(ACKMODES)}")
    encoding = body.get("encoding", "auto")
    if encoding not in ("auto", "base64"):
        raise bad_request("encoding must be auto or base64")
    truncate = _int(body.get("truncate"), "truncate", None)
    if check_only:
        return []
    no_ack = ackmode == "ack_requeue_false"
    taken = []
    out = []
    try:
        for _ in range(count):
            entry = queue.take(no_ack)
            if entry is None:
                break
            seq, msg, redelivered, _ = entry
            queue.stats_get += 1
            if redelivered:
                queue.stats_redeliver += 1
            taken.append((seq, msg))
            out.append(_message_json(msg, redelivered, queue.message_count, encoding, truncate))
    except AMQPError as e:
        raise amqp_error(e) from None
    if taken:
        if ackmode in ("ack_requeue_true", "reject_requeue_true"):
            queue.requeue(taken)
        elif ackmode == "reject_requeue_false":
            for seq, msg in taken:
                queue.reject(seq, msg)
        else:
            queue.stats_ack += len(taken)
    return out


def _message_json(msg: Message, redelivered: bool, remaining: int, encoding: str, truncate: int | None) -> dict:
    body = bytes(msg.body)
    shown = body[:truncate] if truncate is not None and truncate >= 0 else body
    if encoding == "auto":
        try:
            payload, payload_encoding = shown.decode("utf-8"), "string"
        except UnicodeDecodeError:
            payload, payload_encoding = base64.b64encode(shown).decode(), "base64"
    else:
        payload, payload_encoding = base64.b64encode(shown).decode(), "base64"
    return {"payload_bytes": len(body), "redelivered": redelivered, "exchange": msg.exchange,
            "routing_key": msg.routing_key, "message_count": remaining, "properties": properties_to_json(msg),
            "payload": payload, "payload_encoding": payload_encoding}
