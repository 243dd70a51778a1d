"""``/api/vhosts[/{name}[/permissions|/topic-permissions]]``: list, show, create (PUT) and
delete virtual hosts.

A vhost is the access model's (warren/access: durable before the answer); the broker follows
the model, creating the running vhost or closing its connections and removing its queues and
exchanges. As in RabbitMQ, the user who creates a vhost through the API is given full
permissions in it (``.*`` ``.*`` ``.*``). Deleting one also drops its policies and runtime
parameters.
"""

from __future__ import annotations

from aiohttp import web

from warren.management import policy_store
from warren.management.api import stats as st
from warren.management.api.auth import ADMINISTRATOR, check_vhost_access, require, visible_vhosts
from warren.management.api.common import (
    BROKER, STATS, ApiError, as_bool, bad_request, created, no_content, node_name, not_found, read_json,
    reply_list, reply_object,
)
from warren.management.api.connections import open_connections

__all__ = ["add_routes", "vhost_json"]


def vhost_json(request: web.Request, vhost, unacked: dict) -> dict:
    access = getattr(request.app[BROKER], "access", None)
    info = access.vhost(vhost.name) if access is not None else None
    description = info.description if info is not None else ""
    tags = list(info.tags) if info is not None else []
    sampler = request.app[STATS]
    rates = sampler.rates(vhost)
    ready = sum(q.message_count for q in vhost.queues.values())
    n_unacked = sum(unacked[q][0] for q in vhost.queues.values() if q in unacked)
    recv = send = 0
    conn_rates = {"recv_oct": 0.0, "send_oct": 0.0}
    for conn in open_connections(request):
        if conn.session.vhost is vhost:
            recv += conn.recv_oct
            send += conn.send_oct
            r = sampler.rates(conn)
            for k in conn_rates:
                conn_rates[k] += r.get(k, 0.0)
    return {
        "name": vhost.name,
        "description": description,
        "tags": tags,
        "default_queue_type": (getattr(info, "default_queue_type", None) or "undefined"),
        "metadata": {"description": description, "tags": tags},
        "tracing": False,
        "cluster_state": {node_name(): "running"},
        "send_oct": send,
        "send_oct_details": st.details(conn_rates["send_oct"]),
        "recv_oct": recv,
        "recv_oct_details": st.details(conn_rates["recv_oct"]),
        "messages_ready": ready,
        "messages_ready_details": st.details(rates.get("messages_ready", 0.0)),
        "messages_unacknowledged": n_unacked,
        "messages_unacknowledged_details": st.details(rates.get("messages_unacknowledged", 0.0)),
        "messages": ready + n_unacked,
        "messages_details": st.details(rates.get("messages", 0.0)),
        "message_stats": st.message_stats(sampler.vhost(vhost), rates, st.VHOST_STATS),
    }


async def list_vhosts(request: web.Request) -> web.Response:
    broker = request.app[BROKER]
    unacked = st.unacked_by_queue(request.app[STATS].connections())
    return reply_list(request, [vhost_json(request, broker.vhosts[n], unacked) for n in visible_vhosts(request)])


def _vhost(request: web.Request):
    vhost = request.app[BROKER].vhosts.get(request.match_info["name"])
    if vhost is None:
        raise not_found()
    check_vhost_access(request, vhost.name)
    return vhost


async def get_vhost(request: web.Request) -> web.Response:
    vhost = _vhost(request)
    unacked = st.unacked_by_queue(request.app[STATS].connections())
    return reply_object(request, vhost_json(request, vhost, unacked))


def _access(request: web.Request):
    access = getattr(request.app[BROKER], "access", None)
    if access is None:
        raise ApiError(405, "Method Not Allowed", "this broker's vhosts are fixed at start-up", {"Allow": "GET, HEAD"})
    return access


async def put_vhost(request: web.Request) -> web.Response:
    who = require(request, ADMINISTRATOR)
    access = _access(request)
    name = request.match_info["name"]
    body = await read_json(request, required=False)
    kw = {}
    if "description" in body:
        if not isinstance(body["description"], str):
            raise bad_request("description must be a string")
        kw["description"] = body["description"]
    if "tags" in body:
        kw["tags"] = body["tags"]
    if body.get("default_queue_type") is not None:
        kw["default_queue_type"] = body["default_queue_type"]
    as_bool(body.get("tracing"), "tracing")
    from warren.access import Invalid
    try:
        _, new = access.put_vhost(name, **kw)
        if new:
            access.set_permissions(who.name, name, ".*", ".*", ".*")
    except (Invalid, ValueError) as e:
        raise bad_request(str(e)) from None
    return created() if new else no_content()


async def delete_vhost(request: web.Request) -> web.Response:
    require(request, ADMINISTRATOR)
    access = _access(request)
    name = request.match_info["name"]
    from warren.access import NotFound
    try:
        access.delete_vhost(name)
    except NotFound:
        raise not_found() from None
    broker = request.app[BROKER]
    policy_store.remove_vhost_policies(broker, name)
    from warren.management.api.policies import PARAMETERS
    request.app[PARAMETERS].delete_vhost(name)
    return no_content()


async def vhost_permissions(request: web.Request) -> web.Response:
    require(request, ADMINISTRATOR)
    vhost = _vhost(request)
    perms = _access(request).permissions(vhost=vhost.name)
    return reply_list(request, sorted((p.to_json() for p in perms), key=lambda i: i["user"]))


async def vhost_topic_permissions(request: web.Request) -> web.Response:
    require(request, ADMINISTRATOR)
    vhost = _vhost(request)
    perms = _access(request).topic_permissions(vhost=vhost.name)
    return reply_list(request, sorted((p.to_json() for p in perms), key=lambda i: (i["user"], i["exchange"])))


async def start_vhost(request: web.Request) -> web.Response:
    require(request, ADMINISTRATOR)
    _vhost(request)
    return no_content()  # a vhost of this node is running whenever it exists


def add_routes(app: web.Application) -> None:
    r = app.router
    r.add_get("/api/vhosts", list_vhosts)
    r.add_get("/api/vhosts/{name}", get_vhost)
    r.add_put("/api/vhosts/{name}", put_vhost)
    r.add_delete("/api/vhosts/{name}", delete_vhost)
    r.add_get("/api/vhosts/{name}/permissions", vhost_permissions)
    r.add_get("/api/vhosts/{name}/topic-permissions", vhost_topic_permissions)
    r.add_post("/api/vhosts/{name}/start/{node}", start_vhost)
