"""A replicated quorum queue's members (warren/cluster/replicas.py), as RabbitMQ 4's management
API changes them, and Warren's status of them:

* ``POST /api/queues/quorum/{vhost}/{name}/replicas/add`` ``{"node": N}``: N becomes a member
  (``rabbitmq-queues add_member``); its leader sends it a snapshot;
* ``DELETE /api/queues/quorum/{vhost}/{name}/replicas/delete`` ``{"node": N}``: N is a member no
  more (``delete_member``); its replica goes. Not the leader;
* ``POST /api/queues/quorum/replicas/on/{node}/grow`` ``{"vhost_pattern", "queue_pattern",
  "strategy": "all"|"even"}``: the node becomes a member of every matching replicated queue
  (``grow``; ``even``: only those with an even number of members);
* ``DELETE /api/queues/quorum/replicas/on/{node}/shrink``: the node leaves every replicated queue
  it follows (``shrink``; those it leads are listed as kept);
* ``GET /api/queues/quorum/{vhost}/{name}/status``: Warren's, each member's state as
  ``rabbitmq-queues quorum_status`` prints it (asked of the queue's leader).

Administrators only. On a node that is not in a cluster there is nothing to replicate to: 400.
"""

from __future__ import annotations

import re

from aiohttp import web

from warren.management.api.auth import ADMINISTRATOR, readable_vhost, require
from warren.management.api.common import BROKER, ApiError, bad_request, no_content, not_found, read_json, reply_list

__all__ = ["add_routes"]


def _replicas(request: web.Request):
    quorum = request.app[BROKER].directory.quorum
    if quorum is None:
        raise bad_request("this node is not a node of a cluster: its quorum queues have one member, itself")
    return quorum


def _node(body: dict) -> str:
    node = body.get("node")
    if not isinstance(node, str) or not node:
        raise bad_request("node must be a node's name")
    return node


async def _change(request: web.Request, vhost: str, name: str, add=(), remove=()) -> dict:
    try:
        return await _replicas(request).change_members(vhost, name, tuple(add), tuple(remove))
    except LookupError as e:
        raise not_found(str(e)) from None
    except ValueError as e:
        raise bad_request(str(e)) from None
    except Exception as e:  # etcd out of reach or without quorum
        raise ApiError(503, "unavailable", f"the members of queue '{name}' could not be changed: {e}") from None


async def _member(request: web.Request, adding: bool) -> web.Response:
    require(request, ADMINISTRATOR)
    vhost = readable_vhost(request, monitor_ok=False)
    node = _node(await read_json(request))
    await _change(request, vhost.name, request.match_info["name"], add=[node] if adding else [],
                  remove=[] if adding else [node])
    return no_content()


async def add_member(request: web.Request) -> web.Response:
    return await _member(request, adding=True)


async def delete_member(request: web.Request) -> web.Response:
    return await _member(request, adding=False)


def _matching(replicas, body: dict) -> list[dict]:
    try:
        vhosts = re.compile(body.get("vhost_pattern") or ".*")
        queues = re.compile(body.get("queue_pattern") or ".*")
    except (re.error, TypeError) as e:
        raise bad_request(f"a pattern that is not a regular expression: {e}") from None
    return [r for r in replicas.replicated()
            if vhosts.fullmatch(r.get("vhost", "")) and queues.fullmatch(r.get("name", ""))]


async def grow(request: web.Request) -> web.Response:
    require(request, ADMINISTRATOR)
    body = await read_json(request, required=False) or {}
    strategy = body.get("strategy", "all")
    if strategy not in ("all", "even"):
        raise bad_request("strategy must be all or even")
    node, replicas = request.match_info["node"], _replicas(request)
    for record in _matching(replicas, body):
        members = record.get("members") or []
        if node in members or (strategy == "even" and len(members) % 2):
            continue
        await _change(request, record["vhost"], record["name"], add=[node])
    return no_content()


async def shrink(request: web.Request) -> web.Response:
    require(request, ADMINISTRATOR)
    node, replicas = request.match_info["node"], _replicas(request)
    for record in replicas.replicated():
        if node in (record.get("members") or []) and record.get("leader") != node:
            await _change(request, record["vhost"], record["name"], remove=[node])
    return no_content()


async def status(request: web.Request) -> web.Response:
    require(request, ADMINISTRATOR)
    vhost = readable_vhost(request)
    name = request.match_info["name"]
    try:
        rows = _replicas(request).status(vhost.name, name)
        if not isinstance(rows, list):  # asked of its leader, on another node
            rows = await rows
    except LookupError as e:
        raise not_found(str(e)) from None
    except Exception as e:  # its leader is down, or did not answer
        raise ApiError(503, "unavailable", str(e)) from None
    return reply_list(request, rows)


def add_routes(app: web.Application) -> None:
    r = app.router
    r.add_post("/api/queues/quorum/{vhost}/{name}/replicas/add", add_member)
    r.add_delete("/api/queues/quorum/{vhost}/{name}/replicas/delete", delete_member)
    r.add_post("/api/queues/quorum/replicas/on/{node}/grow", grow)
    r.add_delete("/api/queues/quorum/replicas/on/{node}/shrink", shrink)
    r.add_get("/api/queues/quorum/{vhost}/{name}/status", status)
