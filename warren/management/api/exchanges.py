"""``/api/exchanges[/{vhost}[/{name}[/bindings/source|destination|/publish]]]``: list, show,
declare (PUT), delete (DELETE, ``if-unused``), their bindings, and publishing a message.

``amq.default`` in a path names the default exchange (listed with the name ``""``).
"""

from __future__ import annotations

from aiohttp import web

from warren.broker.policies import pick
from warren.errors import AMQPError
from warren.management.api import stats as st
from warren.management.api.auth import check_permission, check_vhost_access, principal, readable_vhost, visible_vhosts
from warren.management.api.bindings import (
    binding_json, default_bindings, exchange_name, reply_bindings, sorted_bindings,
)
from warren.management.api.common import (
    BROKER, STATS, amqp_error, as_bool, bad_request, created, jsonable, no_content, not_found, read_json,
    reply_list, reply_object, reply_objects,
)
from warren.management.api.messages import publish

__all__ = ["add_routes", "exchange_json"]


def exchange_json(ex, vhost, sampler, ranges=st.NO_RANGES) -> dict:
    policy = pick(vhost.policies, vhost.name, "exchange", ex.name) if ex.name else None
    body = {
        "arguments": jsonable(ex.arguments),
        "auto_delete": ex.auto_delete,
        "durable": ex.durable if ex.name else True,
        "internal": ex.internal,
        "name": ex.name,
        "type": ex.TYPE or "direct",
        "user_who_performed_action": "",
        "vhost": vhost.name,
        "message_stats": sampler.message_stats(ex, st.EXCHANGE, sampler.exchange_vector(ex), st.EXCHANGE_STATS,
                                               ranges),
    }
    if policy is not None:
        body["policy"] = policy.name
    return body


def _exchange(request: web.Request):
    vhost = readable_vhost(request)
    ex = vhost.exchanges.get(exchange_name(request.match_info["name"]))
    if ex is None:
        raise not_found()
    return vhost, ex


def exchange_fields(sampler, vhost_of: dict) -> dict:
    """Cheap getters of an exchange's list fields, for sorting and ``columns``."""
    fields = {
        "name": lambda ex: ex.name,
        "vhost": lambda ex: vhost_of[ex].name,
        "type": lambda ex: ex.TYPE or "direct",
        "durable": lambda ex: ex.durable if ex.name else True,
        "auto_delete": lambda ex: ex.auto_delete,
        "internal": lambda ex: ex.internal,
    }
    for key in st.EXCHANGE_STATS:
        fields["message_stats." + key] = lambda ex, k=key: st.EXCHANGE.value(sampler.exchange_vector(ex), k)
        fields[f"message_stats.{key}_details.rate"] = lambda ex, k=key: round(sampler.rate(ex, st.EXCHANGE, k), 1)
    return fields


async def _list(request: web.Request, vhosts) -> web.Response:
    sampler = request.app[STATS]
    ranges = st.parse_ranges(request.query, bad_request, listing=True)
    vhost_of: dict = {}
    objects = []
    for vhost in vhosts:
        exchanges = vhost.exchanges
        for name in sorted(exchanges):
            ex = exchanges[name]
            vhost_of[ex] = vhost
            objects.append(ex)
    return await reply_objects(request, objects, lambda ex: exchange_json(ex, vhost_of[ex], sampler, ranges),
                               fields=exchange_fields(sampler, vhost_of))


async def list_exchanges(request: web.Request) -> web.Response:
    broker = request.app[BROKER]
    return await _list(request, [broker.vhosts[n] for n in visible_vhosts(request)])


async def vhost_exchanges(request: web.Request) -> web.Response:
    vhost = readable_vhost(request)
    return await _list(request, [vhost])


async def get_exchange(request: web.Request) -> web.Response:
    vhost, ex = _exchange(request)
    body = exchange_json(ex, vhost, request.app[STATS], st.parse_ranges(request.query, bad_request))
    body["incoming"] = []
    body["outgoing"] = []
    return reply_object(request, body)


async def put_exchange(request: web.Request) -> web.Response:
    vhost = readable_vhost(request, monitor_ok=False)
    name = exchange_name(request.match_info["name"])
    body = await read_json(request)
    check_permission(request, vhost.name, "configure", "exchange", name)
    type_ = body.get("type", "direct")
    if not isinstance(type_, str):
        raise bad_request("type must be a string")
    arguments = body.get("arguments") or {}
    if not isinstance(arguments, dict):
        raise bad_request("arguments must be a JSON object")
    durable = as_bool(body.get("durable"), "durable", False)
    auto_delete = as_bool(body.get("auto_delete"), "auto_delete", False)
    internal = as_bool(body.get("internal"), "internal", False)
    existed = name in vhost.exchanges
    try:
        await request.app[BROKER].directory.define(vhost.name, "declare_exchange",
                                                   (name, type_, False, durable, auto_delete, internal, arguments))
    except AMQPError as e:
        if e.reply_code == 503:  # an unknown type: RabbitMQ's API says so as 400
            raise bad_request(f"unknown exchange type '{type_}'") from None
        raise amqp_error(e) from None
    return no_content() if existed else created()


async def delete_exchange(request: web.Request) -> web.Response:
    vhost, ex = _exchange(request)
    check_vhost_access(request, vhost.name, monitor_ok=False)
    check_permission(request, vhost.name, "configure", "exchange", ex.name)
    if_unused = request.query.get("if-unused", "").lower() == "true"
    try:
        await request.app[BROKER].directory.define(vhost.name, "delete_exchange", (ex.name, if_unused))
    except AMQPError as e:
        raise amqp_error(e) from None
    return no_content()


async def source_bindings(request: web.Request) -> web.Response:
    vhost, ex = _exchange(request)
    if ex.name == "":  # every queue: many
        return await reply_bindings(request, [(vhost, q) for q in default_bindings(vhost)])
    return reply_list(request, [binding_json(vhost, b) for b in sorted_bindings(ex.bindings.values())])


async def destination_bindings(request: web.Request) -> web.Response:
    vhost, ex = _exchange(request)
    return reply_list(request, [binding_json(vhost, b) for b in sorted_bindings(ex.bound_to)])


async def publish_message(request: web.Request) -> web.Response:
    vhost, ex = _exchange(request)
    check_vhost_access(request, vhost.name, monitor_ok=False)
    body = await read_json(request)
    check_permission(request, vhost.name, "write", "exchange", ex.name)
    routed = publish(vhost, ex, body, principal(request).name)
    request.app[STATS].published_over_http(vhost.name)  # the vhost's publish count (no channel counts it)
    return web.json_response({"routed": routed})


def add_routes(app: web.Application) -> None:
    r = app.router
    r.add_get("/api/exchanges", list_exchanges)
    r.add_get("/api/exchanges/{vhost}", vhost_exchanges)
    r.add_get("/api/exchanges/{vhost}/{name}", get_exchange)
    r.add_put("/api/exchanges/{vhost}/{name}", put_exchange)
    r.add_delete("/api/exchanges/{vhost}/{name}", delete_exchange)
    r.add_get("/api/exchanges/{vhost}/{name}/bindings/source", source_bindings)
    r.add_get("/api/exchanges/{vhost}/{name}/bindings/destination", destination_bindings)
    r.add_post("/api/exchanges/{vhost}/{name}/publish", publish_message)
