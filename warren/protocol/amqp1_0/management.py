"""RabbitMQ 4's AMQP 1.0 management node: HTTP over AMQP on the ``/management`` link pair.

RabbitMQ's AMQP 1.0 clients declare, bind, purge and delete through it. The client attaches a
sender whose target is ``/management`` and a receiver whose source is ``/management`` (both with
the link property ``paired``); each request is a message with ``message-id``, ``to`` the path,
``subject`` the method and an ``amqp-value`` body (a map, or null), and each response goes back
on the receiver with ``correlation-id`` the request's id, ``subject`` the status code as text
and an ``amqp-value`` body. The operations are the channel's (``BrokerChannel``), with its
permissions and rules, so a declare here is a declare over 0-9-1:

======================================  =======================================================
request                                 answer
======================================  =======================================================
PUT /queues/Q {durable, exclusive,      201 (created) or 200 (existed) with the queue's info;
auto_delete, arguments}                 409 when it exists with other properties
GET /queues/Q                           200 with the queue's info, 404
DELETE /queues/Q                        200 {message_count}
DELETE /queues/Q/messages               200 {message_count} (purged)
PUT /exchanges/X {type, durable,        204 (RabbitMQ 4's answer whether or not it existed);
auto_delete, internal, arguments}       409 when it exists with other properties
DELETE /exchanges/X                     204
POST /bindings {source, binding_key,    204; 400 when the bind itself is refused (a missing
destination_queue | destination_        queue or exchange, a key or destination the exchange
exchange, arguments}                    type refuses), as RabbitMQ 4 answers
DELETE /bindings/src=X;dstq=Q;key=K;    204 (``dste=`` for an exchange; ``dstq=`` naming an
args=H                                  exchange is taken too: RabbitMQ's Python client sends it),
                                        also when no such binding exists; ``H`` empty: the
                                        binding without arguments, else the one whose arguments
                                        have that hash (a listing's ``location``)
GET /bindings?src=X&dstq=Q&key=K        200 with the list of bindings from X to Q (``dste=`` an
                                        exchange) with key K, each a map of ``source``,
                                        ``destination_queue`` or ``destination_exchange``,
                                        ``binding_key``, ``arguments`` and ``location`` (the path
                                        its DELETE takes); other query fields are not read
======================================  =======================================================

A binding's arguments hash (``args=`` of a location) is Warren's own: the first four octets
of BLAKE2b over the arguments, in URL-safe base 64 without padding, empty for no arguments.
RabbitMQ hashes with Erlang's ``phash2``, so a location is only good for the broker that gave
it, which is how RabbitMQ's clients use it (they list, then delete what the list says).

Refusals map to statuses as RabbitMQ's do: not found 404, precondition failed 409, access
refused 403 (the default exchange as a binding's source too), anything else the broker refuses
400 (and a bind's or unbind's refusals, above); an unknown path or method 400 or 405.
"""

from __future__ import annotations

import base64
import hashlib
from urllib.parse import parse_qsl, quote, unquote

from warren.broker import authz
from warren.broker.exchanges.base import Exchange, freeze
from warren.broker.later import run, settled
from warren.codec.amqp1_0 import types as t
from warren.errors import AccessRefused, AMQPError, NotFound, PreconditionFailed
from warren.spec import amqp1_0 as spec

__all__ = ["NODE_ADDRESS", "args_hash", "handle_request", "response"]

NODE_ADDRESS = "/management"


class _Status(Exception):
    def __init__(self, code: int, text: str) -> None:
        super().__init__(text)
        self.code, self.text = code, text


def response(correlation_id, code: int, body) -> bytes:
    """The encoded response message."""
    return (t.encode(spec.Properties(correlation_id=correlation_id, subject=str(code)))
            + t.encode(t.Described(t.ULong(0x77), body)))


def _plain(v):
    """A request value with Python's plain types (symbol keys as str)."""
    if isinstance(v, dict):
        return {str(k): _plain(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_plain(x) for x in v]
    if isinstance(v, t.Symbol):
        return str(v)
    if isinstance(v, int) and not isinstance(v, bool):
        return int(v)
    return v


async def _queue_info(channel, name: str, node: str) -> dict:
    """The management node's answer about queue ``name`` (the channel's ``queue_info``)."""
    info = await settled(channel.queue_info(name))
    args = {}
    for k, v in info["arguments"].items():
        args[k] = v if isinstance(v, (str, int, float, bool, bytes)) or v is None else str(v)
    return {"name": info["name"], "vhost": channel.vhost.name, "durable": bool(info["durable"]),
            "auto_delete": bool(info["auto_delete"]), "exclusive": info["exclusive"], "type": str(info["type"]),
            "arguments": args, "message_count": t.ULong(info["messages"]), "consumer_count": t.UInt(info["consumers"]),
            "leader": node, "replicas": [node]}


async def _queue_exists(channel, name: str) -> bool:
    """A passive declare's answer (the channel's own operation, as a 0-9-1 client would ask)."""
    try:
        await settled(channel.declare_queue(name, True, False, False, False, {}))
    except NotFound:
        return False
    return True


def _segments(path: str) -> tuple[list[str], dict[str, str]]:
    """The path's segments (still percent-encoded) and its query's fields (decoded)."""
    if not path.startswith("/"):
        raise _Status(400, f"path '{path}' does not begin with /")
    path, _, query = path.partition("?")
    return path[1:].split("/"), dict(parse_qsl(query, keep_blank_values=True))


def _binding_key(spec_text: str) -> dict:
    """src=X;dstq=Q;key=K;args= -> its parts, percent-decoded."""
    out = {}
    for part in spec_text.split(";"):
        name, _, value = part.partition("=")
        out[name] = unquote(value)
    return out


def args_hash(arguments: dict) -> str:
    """A binding's arguments as a location names them: empty for none (see the module docstring)."""
    if not arguments:
        return ""
    digest = hashlib.blake2b(repr(freeze(arguments)).encode(), digest_size=4).digest()
    return base64.urlsafe_b64encode(digest).decode().rstrip("=")


def _location(b) -> str:
    kind = "e" if isinstance(b.destination, Exchange) else "q"
    return (f"/bindings/src={quote(b.source.name, safe='')};dst{kind}={quote(b.destination.name, safe='')};"
            f"key={quote(b.routing_key, safe='')};args={args_hash(b.arguments)}")


def _value(v):
    """A binding argument as the management node answers it: the 1.0 types that map plainly,
    maps and lists of them, the text of anything else (a decimal, a timestamp)."""
    if isinstance(v, dict):
        return {str(k): _value(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_value(x) for x in v]
    if v is None or isinstance(v, (str, int, float, bool, bytes)):
        return v
    return str(v)


def _bindings(channel, source: str, kind: str, destination: str, key: str) -> list:
    """The bindings from exchange ``source`` to the queue (``kind`` "q") or exchange ("e")
    ``destination`` with binding key ``key``: none when either is missing, as RabbitMQ answers.
    Read where they are: every process holds every exchange and its bindings."""
    if source == "":
        raise AccessRefused("operation not permitted on the default exchange")
    if kind == "q":
        authz.queue_bind(channel, destination, source, key)
    else:
        authz.exchange_bind(channel, destination, source, key)
    ex = channel.vhost.exchanges.get(source)
    if ex is None:
        return []
    return [b for b in ex.bindings.values()
            if b.routing_key == key and b.destination.name == destination
            and isinstance(b.destination, Exchange) == (kind == "e")]


def _binding_map(b) -> dict:
    kind = "destination_exchange" if isinstance(b.destination, Exchange) else "destination_queue"
    return {"source": b.source.name, kind: b.destination.name, "binding_key": b.routing_key,
            "arguments": {str(k): _value(v) for k, v in b.arguments.items()}, "location": _location(b)}


def handle_request(channel, method: str, path: str, body, node: str):
    """(status, response body) of one request on ``channel`` (a ``BrokerChannel``); ``node``
    is the node's name (a queue's leader and replica). Now, or an awaitable of it when the
    queue or the definitions are in another process (warren/broker/later.py)."""
    return run(_answer(channel, method, path, body, node))


async def _answer(channel, method: str, path: str, body, node: str) -> tuple[int, object]:
    try:
        parts, query = _segments(path)
        return await _dispatch(channel, method.upper(), parts, query, _plain(body), node)
    except _Status as s:
        return s.code, s.text
    except NotFound as e:
        return 404, e.text
    except PreconditionFailed as e:
        return 409, e.text
    except AccessRefused as e:
        return 403, e.text
    except AMQPError as e:
        return 400, e.text


async def _dispatch(channel, method: str, parts: list[str], query: dict, body, node: str) -> tuple[int, object]:
    body = body if isinstance(body, dict) else {}
    vhost = channel.vhost
    if parts[0] == "queues" and len(parts) in (2, 3) and parts[1]:
        name = unquote(parts[1])
        if len(parts) == 3:
            if parts[2] != "messages" or method != "DELETE":
                raise _Status(400, "only DELETE /queues/Q/messages (purge) is served under a queue")
            return 200, {"message_count": t.ULong(await settled(channel.purge_queue(name)))}
        if method == "PUT":
            existed = await _queue_exists(channel, name)
            arguments = body.get("arguments") or {}
            await settled(channel.declare_queue(name, False, bool(body.get("durable", True)),
                                                bool(body.get("exclusive", False)), bool(body.get("auto_delete", False)),
                                                dict(arguments)))
            return (200 if existed else 201), await _queue_info(channel, name, node)
        if method == "GET":
            try:
                return 200, await _queue_info(channel, name, node)
            except NotFound:  # RabbitMQ 4's words
                raise NotFound(f"queue '{name}' in vhost '{vhost.name}' not found") from None
        if method == "DELETE":
            n, held = await settled(channel.delete_queue(name, False, False))
            for ch, tag in held:
                ch.notify_cancel(tag)
            return 200, {"message_count": t.ULong(n)}
        raise _Status(405, f"{method} is not served on a queue")
    if parts[0] == "exchanges" and len(parts) == 2 and parts[1]:
        name = unquote(parts[1])
        if method == "PUT":
            await settled(channel.declare_exchange(name, str(body.get("type", "direct")), False,
                                                   bool(body.get("durable", True)), bool(body.get("auto_delete", False)),
                                                   bool(body.get("internal", False)), dict(body.get("arguments") or {})))
            return 204, None
        if method == "DELETE":
            await settled(channel.delete_exchange(name, False))
            return 204, None
        raise _Status(405, f"{method} is not served on an exchange")
    if parts[0] == "bindings":
        if method == "POST" and len(parts) == 1:
            source, key = str(body.get("source", "")), str(body.get("binding_key", ""))
            arguments = dict(body.get("arguments") or {})
            try:
                if "destination_queue" in body:
                    await settled(channel.bind_queue(str(body["destination_queue"]), source, key, arguments))
                elif "destination_exchange" in body:
                    await settled(channel.bind_exchange(str(body["destination_exchange"]), source, key, arguments))
                else:
                    raise _Status(400, "a binding needs destination_queue or destination_exchange")
            except (NotFound, PreconditionFailed) as e:  # RabbitMQ 4: any refusal of the bind itself
                raise _Status(400, e.text) from None
            return 204, None
        if method == "GET" and len(parts) == 1:
            if "src" not in query or "key" not in query:
                raise _Status(400, "a binding listing names src= and key= in its query")
            if "dste" in query:
                kind, destination = "e", query["dste"]
            elif "dstq" in query:
                kind, destination = "q", query["dstq"]
            else:
                raise _Status(400, "a binding listing names dstq= or dste= in its query")
            return 200, [_binding_map(b) for b in _bindings(channel, query["src"], kind, destination, query["key"])]
        if method == "DELETE" and len(parts) == 2:
            b = _binding_key(parts[1])
            source, key, hashed = b.get("src", ""), b.get("key", ""), b.get("args", "")
            if "dste" in b or ("dstq" in b and not await _queue_exists(channel, b["dstq"])):
                kind, destination = "e", b.get("dste", b.get("dstq", ""))
            elif "dstq" in b:
                kind, destination = "q", b["dstq"]
            else:
                raise _Status(400, "a binding path names dstq= or dste=")
            arguments: dict = {}
            if hashed:  # the binding with arguments of that hash, if there is one
                found = [x for x in _bindings(channel, source, kind, destination, key)
                         if args_hash(x.arguments) == hashed]
                if not found:
                    return 204, None
                arguments = dict(found[0].arguments)
            try:
                if kind == "e":
                    await settled(channel.unbind_exchange(destination, source, key, arguments))
                else:
                    await settled(channel.unbind_queue(destination, source, key, arguments))
            except NotFound:  # RabbitMQ 4: no such binding (or source, or destination) is no error
                pass
            except PreconditionFailed as e:
                raise _Status(400, e.text) from None
            return 204, None
        raise _Status(405, f"{method} is not served on bindings")
    raise _Status(400, f"path '/{'/'.join(parts)}' is not served by the management node")
