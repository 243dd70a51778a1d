"""The HTTP routes of shovels and federation links (RabbitMQ's rabbitmq_shovel_management and
rabbitmq_federation_management paths and fields):

* ``GET /api/shovels``, ``/api/shovels/{vhost}``: each dynamic shovel's state;
* ``GET /api/shovels/vhost/{vhost}/{name}``: one shovel;
* ``DELETE /api/shovels/vhost/{vhost}/{name}/restart``: restart it (its definition again);
* ``GET /api/federation-links``, ``/api/federation-links/{vhost}``: each link's status.

Users see the vhosts they may see (as every list of the API). Without a running server (the
API over a bare broker in tests) the lists are empty.
"""

from __future__ import annotations

from aiohttp import web

from warren.management.api.auth import readable_vhost, visible_vhosts
from warren.management.api.common import BROKER, SERVER, no_content, not_found, reply_list, reply_object, vhost_or_404
from warren.management.api.policies import may_change

__all__ = ["add_routes"]


def _manager(request: web.Request):
    return getattr(request.app[SERVER], "federation", None) if request.app[SERVER] is not None else None


async def _status(request: web.Request, of: str, vhost: str | None = None) -> list[dict]:
    """The manager's ``shovel_status`` or ``link_status`` (``of``), of one vhost or all; none
    without a server. --worker-mode queues: every worker's (each runs some of them)."""
    m = _manager(request)
    rows = getattr(m, of)(vhost) if m else []
    return rows + await request.app[BROKER].directory.api_rows(of, vhost)


async def _all_visible(request: web.Request, of: str) -> web.Response:
    names = set(visible_vhosts(request))
    return reply_list(request, [i for i in await _status(request, of) if i["vhost"] in names])


async def list_shovels(request: web.Request) -> web.Response:
    return await _all_visible(request, "shovel_status")


async def vhost_shovels(request: web.Request) -> web.Response:
    return reply_list(request, await _status(request, "shovel_status", readable_vhost(request).name))


async def get_shovel(request: web.Request) -> web.Response:
    for item in await _status(request, "shovel_status", readable_vhost(request).name):
        if item["name"] == request.match_info["name"]:
            return reply_object(request, item)
    raise not_found()


async def restart_shovel(request: web.Request) -> web.Response:
    vhost = vhost_or_404(request, request.match_info["vhost"])
    may_change(request, vhost.name)
    m = _manager(request)
    name = request.match_info["name"]
    if m is None or m.parameters.get("shovel", vhost.name, name) is m.parameters.MISSING:
        raise not_found()
    if not m.restart_shovel(vhost.name, name):  # --worker-mode queues: another worker runs it
        await request.app[BROKER].directory.api_act("restart_shovel", vhost.name, name)
    return no_content()


async def list_links(request: web.Request) -> web.Response:
    return await _all_visible(request, "link_status")


async def vhost_links(request: web.Request) -> web.Response:
    return reply_list(request, await _status(request, "link_status", readable_vhost(request).name))


def add_routes(app: web.Application) -> None:
    r = app.router
    r.add_get("/api/shovels", list_shovels)
    r.add_get("/api/shovels/{vhost}", vhost_shovels)
    r.add_get("/api/shovels/vhost/{vhost}/{name}", get_shovel)
    r.add_delete("/api/shovels/vhost/{vhost}/{name}/restart", restart_shovel)
    r.add_get("/api/federation-links", list_links)
    r.add_get("/api/federation-links/{vhost}", vhost_links)
