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
    BROKER, STATS, as_bool, bad_request, created, definitions_durable, no_content, node_name, not_found, off_loop,
    read_json, reply_list, reply_object,
)
from warren.management.api.connections import open_connections
from warren.management.api.merged import add_figures

__all__ = ["add_routes", "vhost_json"]


def vhost_json(app, vhost, unacked: dict, ranges=st.NO_RANGES, connections=None) -> dict:
    info = app[BROKER].access.vhost(vhost.name)  # None: deleted meanwhile
    description = info.description if info is not None else ""
    tags = list(info.tags) if info is not None else []
    sampler = app[STATS]
    vec = sampler.vhost_vector(vhost, unacked, connections)
    body = {
        "name": vhost.name,
        "description": description,
        "tags": tags,
        "default_queue_type": (info.default_queue_type if info is not None else None) or "undefined",
        "metadata": {"description": description, "tags": tags},
        "tracing": False,
        "cluster_state": {node_name(): "running"},
    }
    sampler.details_of(vhost, st.VHOST, vec, st.DATA + st.LENGTHS, ranges, out=body)
    body["message_stats"] = sampler.message_stats(vhost, st.VHOST, vec, st.VHOST_STATS, ranges)
    return body


def local_vhost_rows(app, names: list, ranges=st.NO_RANGES) -> list[dict]:
    """The JSON of the vhosts ``names`` (those we hold) with this process's figures."""
    broker = app[BROKER]
    connections = open_connections(app)
    unacked = st.unacked_by_queue(connections, broker.directory)
    return [vhost_json(app, broker.vhosts[n], unacked, ranges, connections) for n in names if n in broker.vhosts]


async def _vhost_rows(request: web.Request, names: list) -> list[dict]:
    ranges = st.parse_ranges(request.query, bad_request)
    rows = local_vhost_rows(request.app, names, ranges)
    by_name = {r["name"]: r for r in rows}
    # --worker-mode queues: every worker's queues and channels count (broker/directory.py)
    for more in await request.app[BROKER].directory.api_rows("vhosts", names, ranges):
        if more["name"] in by_name:
            add_figures(by_name[more["name"]], more)
    return rows


async def list_vhosts(request: web.Request) -> web.Response:
    return reply_list(request, await _vhost_rows(request, visible_vhosts(request)))


def _vhost(request: web.Request):
    vhost = request.app[BROKER].vhosts.get(request.match_info["name"])
    if vhost is None:
        raise not_found()
    check_vhost_access(request, vhost.name)
    return vhost


async def get_vhost(request: web.Request) -> web.Response:
    vhost = _vhost(request)
    rows = await _vhost_rows(request, [vhost.name])
    if not rows:
        raise not_found()  # deleted meanwhile
    return reply_object(request, rows[0])


def _access(request: web.Request):
    return request.app[BROKER].access


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
        _, new = await off_loop(access.put_vhost, name, **kw)  # durable, the loop free meanwhile
        if new:
            await off_loop(access.set_permissions, who.name, name, ".*", ".*", ".*")
    except (Invalid, ValueError) as e:
        raise bad_request(str(e)) from None
    return created() if new else no_content()


async def delete_vhost(request: web.Request) -> web.Response:
    require(request, ADMINISTRATOR)
    access = _access(request)
    name = request.match_info["name"]
    from warren.access import NotFound
    broker = request.app[BROKER]
    try:
        await off_loop(access.delete_vhost, name)
    except NotFound:
        raise not_found() from None
    # its queues' and exchanges' deletes, made on the loop meanwhile (Broker.vhost_deleted), are
    # fsynced by the group commit: 204 once they are durable
    await definitions_durable(broker)
    request.app[STATS].forget_vhost(name)  # its message_stats start again at 0 if it comes back
    # every process holding it deletes it too, then forgets its counts (broker/directory.py)
    await broker.directory.files_changed()
    await broker.directory.api_act("forget_vhost", name)
    await off_loop(policy_store.remove_vhost_policies, broker, name)
    from warren.management.api.policies import PARAMETERS
    await off_loop(request.app[PARAMETERS].delete_vhost, name)
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
