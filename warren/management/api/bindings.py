"""``/api/bindings[/{vhost}[/e/{source}/{q|e}/{destination}[/{props}]]]``: list, create (POST),
show and delete bindings, RabbitMQ's way.

Every queue is bound to the default exchange under its own name; those bindings are listed
first, as RabbitMQ lists them, and cannot be changed. A binding is addressed by its
``properties_key``: the routing key percent-encoded, ``~`` alone for an empty key without
arguments, and ``~`` plus a short hash of the arguments when it has some. A POST answers
201 with the new binding's key in ``Location``.
"""

from __future__ import annotations

import base64
import hashlib
import json
from urllib.parse import quote

from aiohttp import web

from warren.errors import AMQPError
from warren.management.api.auth import check_permission, check_vhost_access, readable_vhost, visible_vhosts
from warren.management.api.common import (
    BROKER, ApiError, amqp_error, bad_request, jsonable, no_content, not_found, read_json, reply_list, reply_object,
    reply_objects,
)
from warren.broker.directory import ADMIN

__all__ = ["add_routes", "binding_json", "properties_key", "queue_bindings", "sorted_bindings", "vhost_bindings",
           "exchange_name"]

DEFAULT_EXCHANGE = "amq.default"  # how paths name the default exchange ("")


def exchange_name(path_name: str) -> str:
    return "" if path_name == DEFAULT_EXCHANGE else path_name


def properties_key(routing_key: str, arguments: dict) -> str:
    key = quote(routing_key, safe="")
    if not arguments:
        return key or "~"
    digest = hashlib.sha256(json.dumps(jsonable(arguments), sort_keys=True).encode()).digest()[:6]
    return f"{key}~{base64.urlsafe_b64encode(digest).decode().rstrip('=')}"


def _kind(destination) -> str:
    return "queue" if hasattr(destination, "consumers") else "exchange"


def binding_json(vhost, b) -> dict:
    """``b``: an exchange Binding, or a queue standing for its default-exchange binding."""
    if hasattr(b, "consumers"):  # the implicit binding of a queue to the default exchange
        return {"source": "", "vhost": vhost.name, "destination": b.name, "destination_type": "queue",
                "routing_key": b.name, "arguments": {}, "properties_key": b.name}
    return {"source": b.source.name, "vhost": vhost.name, "destination": b.destination.name,
            "destination_type": _kind(b.destination), "routing_key": b.routing_key,
            "arguments": jsonable(b.arguments or {}), "properties_key": properties_key(b.routing_key, b.arguments)}


def sorted_bindings(bindings) -> list:
    return sorted(bindings, key=lambda b: (b.source.name, _kind(b.destination), b.destination.name, b.routing_key,
                                           json.dumps(jsonable(b.arguments or {}), sort_keys=True)))


def default_bindings(vhost) -> list:
    """The queues, standing for their bindings to the default exchange, by name; under
    --worker-mode queues the other workers' too (their records: every queue has that binding)."""
    queues = {**vhost.queues, **vhost.remote_queues} if vhost.remote_queues else vhost.queues
    return [queues[n] for n in sorted(queues)]


def vhost_bindings(vhost) -> list:
    """Every binding of the vhost: the default exchange's first, then by source."""
    out: list = default_bindings(vhost)
    explicit = [b for ex in vhost.exchanges.values() if ex.name for b in ex.bindings.values()]
    return out + sorted_bindings(explicit)


def queue_bindings(vhost, q) -> list:
    return [q] + sorted_bindings(q.bound_to)


def _field(getter_of_queue, getter_of_binding):
    def get(pair):
        b = pair[1]
        return getter_of_queue(b) if hasattr(b, "consumers") else getter_of_binding(b)
    return get


# cheap getters of a binding's fields, on (vhost, binding or queue) pairs (common.reply_objects)
BINDING_FIELDS = {
    "vhost": lambda pair: pair[0].name,
    "source": _field(lambda q: "", lambda b: b.source.name),
    "destination": _field(lambda q: q.name, lambda b: b.destination.name),
    "destination_type": _field(lambda q: "queue", lambda b: _kind(b.destination)),
    "routing_key": _field(lambda q: q.name, lambda b: b.routing_key),
}


async def reply_bindings(request: web.Request, pairs: list) -> web.Response:
    """(vhost, binding or queue) pairs through the list query parameters, JSON for the answer only."""
    return await reply_objects(request, pairs, lambda pair: binding_json(pair[0], pair[1]),
                               name=lambda pair: "", fields=BINDING_FIELDS)


# --- handlers --------------------------------------------------------------------------------------


async def list_bindings(request: web.Request) -> web.Response:
    broker = request.app[BROKER]
    pairs = []
    for name in visible_vhosts(request):
        vhost = broker.vhosts[name]
        pairs.extend((vhost, b) for b in vhost_bindings(vhost))
    return await reply_bindings(request, pairs)


async def list_vhost_bindings(request: web.Request) -> web.Response:
    vhost = readable_vhost(request)
    return await reply_bindings(request, [(vhost, b) for b in vhost_bindings(vhost)])


def _ends(request: web.Request):
    """(vhost, source exchange, destination, its kind) of a binding path; 404 if any is missing."""
    vhost = readable_vhost(request)
    source = vhost.exchanges.get(exchange_name(request.match_info["source"]))
    kind = "queue" if request.match_info["dtype"] == "q" else "exchange"
    pool = vhost.queues if kind == "queue" else vhost.exchanges
    dest_name = request.match_info["destination"]
    destination = pool.get(exchange_name(dest_name) if kind == "exchange" else dest_name)
    if destination is None and kind == "queue":  # --worker-mode queues: another worker's (its record)
        destination = vhost.remote_queues.get(dest_name)
    if source is None or destination is None:
        raise not_found()
    return vhost, source, destination, kind


def _between(vhost, source, destination) -> list:
    if source.name == "" and hasattr(destination, "consumers"):
        return [destination]
    return sorted_bindings(b for b in source.bindings.values() if b.destination is destination)


async def list_between(request: web.Request) -> web.Response:
    vhost, source, destination, _ = _ends(request)
    return reply_list(request, [binding_json(vhost, b) for b in _between(vhost, source, destination)])


async def create_binding(request: web.Request) -> web.Response:
    vhost, source, destination, kind = _ends(request)
    check_vhost_access(request, vhost.name, monitor_ok=False)
    body = await read_json(request, required=False)
    routing_key = body.get("routing_key", "")
    arguments = body.get("arguments") or {}
    if not isinstance(routing_key, str):
        raise bad_request("routing_key must be a string")
    if not isinstance(arguments, dict):
        raise bad_request("arguments must be a JSON object")
    check_permission(request, vhost.name, "write", kind, destination.name)
    check_permission(request, vhost.name, "read", "exchange", source.name)
    try:
        await request.app[BROKER].directory.define(vhost.name, *(
            ("bind_queue", (destination.name, source.name, routing_key, arguments, ADMIN)) if kind == "queue"
            else ("bind_exchange", (destination.name, source.name, routing_key, arguments))))
    except AMQPError as e:
        raise amqp_error(e) from None
    key = properties_key(routing_key, arguments)
    return web.Response(status=201, headers={"Location": key})


def _one(request: web.Request):
    vhost, source, destination, kind = _ends(request)
    key = request.match_info["props"]
    for b in _between(vhost, source, destination):
        if binding_json(vhost, b)["properties_key"] == key:
            return vhost, source, destination, kind, b
    raise not_found()


async def get_binding(request: web.Request) -> web.Response:
    vhost, _, _, _, b = _one(request)
    return reply_object(request, binding_json(vhost, b))


async def delete_binding(request: web.Request) -> web.Response:
    vhost, source, destination, kind, b = _one(request)
    check_vhost_access(request, vhost.name, monitor_ok=False)
    if hasattr(b, "consumers"):  # the default exchange's bindings are not the user's to change
        raise ApiError(401, "not_authorised", "Access refused.")
    check_permission(request, vhost.name, "write", kind, destination.name)
    check_permission(request, vhost.name, "read", "exchange", source.name)
    try:
        await request.app[BROKER].directory.define(vhost.name, *(
            ("unbind_queue", (destination.name, source.name, b.routing_key, b.arguments, ADMIN))
            if kind == "queue" else
            ("unbind_exchange", (destination.name, source.name, b.routing_key, b.arguments))))
    except AMQPError as e:
        raise amqp_error(e) from None
    return no_content()


def add_routes(app: web.Application) -> None:
    r = app.router
    r.add_get("/api/bindings", list_bindings)
    r.add_get("/api/bindings/{vhost}", list_vhost_bindings)
    path = "/api/bindings/{vhost}/e/{source}/{dtype:[qe]}/{destination}"
    r.add_get(path, list_between)
    r.add_post(path, create_binding)
    r.add_get(path + "/{props}", get_binding)
    r.add_delete(path + "/{props}", delete_binding)
