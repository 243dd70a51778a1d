"""``GET/POST /api/definitions`` and ``/api/definitions/{vhost}``: export and import in
RabbitMQ's JSON format (warren/management/definitions.py). Administrators only, as in
RabbitMQ. ``?download=FILE`` asks for the export as an attachment (RabbitMQ's UI does).
An import answers 204, or 400 ``bad_request`` naming the object that could not be imported.
"""

from __future__ import annotations

import json

from aiohttp import web

from warren.management.api.auth import ADMINISTRATOR, require
from warren.management.api.common import BROKER, bad_request, no_content, off_loop, parse_json, vhost_or_404
from warren.management.api.policies import PARAMETERS
from warren.management.definitions import (
    DefinitionsError, export_definitions, import_definitions_live,
)

__all__ = ["add_routes"]


def _answer(request: web.Request, doc: dict) -> web.Response:
    headers = {}
    download = request.query.get("download")
    if download:
        safe = "".join(c for c in download if c.isalnum() or c in "._-") or "definitions.json"
        headers["Content-Disposition"] = f'attachment; filename="{safe}"'
    return web.json_response(doc, headers=headers, dumps=lambda d: json.dumps(d, indent=None))


async def get_definitions(request: web.Request) -> web.Response:
    require(request, ADMINISTRATOR)
    return _answer(request, export_definitions(request.app[BROKER], request.app[PARAMETERS]))


async def get_vhost_definitions(request: web.Request) -> web.Response:
    require(request, ADMINISTRATOR)
    vhost = vhost_or_404(request)
    return _answer(request, export_definitions(request.app[BROKER], request.app[PARAMETERS], vhost.name))


async def _body(request: web.Request):
    raw = await request.read()
    if request.content_type == "multipart/form-data":  # RabbitMQ's UI uploads a file form
        raise bad_request("send the definitions as a JSON body")
    return parse_json(raw)


async def _import(request: web.Request, doc, vhost: str | None = None) -> web.Response:
    broker = request.app[BROKER]
    try:
        await import_definitions_live(broker, doc, request.app[PARAMETERS], vhost, off_loop)
    except DefinitionsError as e:
        raise bad_request(str(e)) from None
    return no_content()


async def post_definitions(request: web.Request) -> web.Response:
    require(request, ADMINISTRATOR)
    return await _import(request, await _body(request))


async def post_vhost_definitions(request: web.Request) -> web.Response:
    require(request, ADMINISTRATOR)
    vhost = vhost_or_404(request)
    return await _import(request, await _body(request), vhost.name)


def add_routes(app: web.Application) -> None:
    r = app.router
    r.add_get("/api/definitions", get_definitions)
    r.add_post("/api/definitions", post_definitions)
    r.add_get("/api/definitions/{vhost}", get_vhost_definitions)
    r.add_post("/api/definitions/{vhost}", post_vhost_definitions)
