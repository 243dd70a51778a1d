"""The aiohttp application of the HTTP API: RabbitMQ's management API (3.10's paths, methods,
JSON field names and status codes) plus Warren's stream routes, on the broker's own loop.

One module per resource under ``api/`` (overview and nodes, queues, exchanges, bindings,
connections/channels/consumers, vhosts, users, permissions, policies and parameters,
definitions, health checks, streams), each adding its routes; ``api/common.py`` holds the
shared list helper and error form, ``api/auth.py`` who may do what, ``api/stats.py`` the
sampled rates. This module puts them together with these middlewares:

* errors: every answer that is not a success is RabbitMQ's JSON ``{"error", "reason"}``, also
  aiohttp's own 404/405/413, and a handler's unexpected exception (500, logged with its
  traceback and the request);
* auth: HTTP basic credentials of a broker user on every request (401 with
  ``WWW-Authenticate: Basic realm="RabbitMQ Management"``), then the tag checks;
* shared files, under ``--worker-mode queues``: a change of vhosts, users, permissions or limits
  reaches every worker before the answer.

A path under ``/api/`` that ends in one "/" is routed as without it when it finds no route as
it is (``DELETE /api/vhosts/NAME/`` is ``DELETE /api/vhosts/NAME``), as RabbitMQ's router
(cowboy's) drops a trailing empty segment; a "//" inside a path stays an empty name.

Names in paths are percent-decoded once by the router (``%2F`` is ``/``, ``%252F`` the three
characters ``%2F``) and only ever looked up in the broker's dicts: no path reaches the disk.
"""

from __future__ import annotations

import asyncio
import logging
import os

from aiohttp import hdrs, web
from yarl import URL

from warren.management.api import (
    bindings, connections, definitions, exchanges, federation, health, overview, policies, queues, streams, users,
    vhosts,
)
from warren.management.api import quorum, user_limits
from warren.management.api.auth import auth_middleware
from warren.management.api.common import BROKER, INFO, SERVER, STATS, ApiError, not_found
from warren.management.api.stats import INTERVAL, Sampler
from warren.management.api.streams import MAX_BYTES_CAP, MAX_RECORDS_CAP, RECORDS_CONTENT_TYPE
from warren.management import ui

__all__ = ["build_app", "BROKER", "INFO", "SERVER", "STATS", "RECORDS_CONTENT_TYPE", "MAX_BYTES_CAP",
           "MAX_RECORDS_CAP"]

log = logging.getLogger("warren.management")

RESOURCES = (overview, health, connections, queues, exchanges, bindings, vhosts, users, policies, definitions,
             streams, federation)  # federation: /api/shovels, /api/federation-links
RESOURCES += (user_limits,)  # /api/user-limits (warren/management/api/user_limits.py)
RESOURCES += (quorum,)  # /api/queues/quorum/...: a replicated quorum queue's members (warren/management/api/quorum.py)


@web.middleware
async def _json_errors(request: web.Request, handler):
    try:
        return await handler(request)
    except ApiError:
        raise
    except web.HTTPException as e:
        if e.status < 400 or e.content_type == "application/json":
            raise
        if e.status == 404:
            raise not_found() from None
        if e.status == 405:
            allow = e.headers.get(hdrs.ALLOW, "")
            raise ApiError(405, "Method Not Allowed", f"{request.method} is not allowed here (allowed: {allow})",
                           {hdrs.ALLOW: allow}) from None
        if e.status == 413:
            raise ApiError(413, "Request Entity Too Large", e.text or "request body too large") from None
        raise ApiError(e.status, e.reason or "error", e.text or e.reason or "") from None
    except (asyncio.CancelledError, ConnectionResetError):
        raise
    except Exception:
        log.exception("HTTP API: %s %s failed", request.method, request.rel_url)
        raise ApiError(500, "internal_error", "the request failed inside the broker (see its log)") from None


# --worker-mode queues: what these change lives in the node's shared files (access.json: vhosts,
# users, permissions, limits), which every worker holds a copy of
SHARED_FILE_PATHS = ("/api/vhosts/", "/api/users", "/api/permissions/", "/api/topic-permissions/",
                     "/api/user-limits/", "/api/vhost-limits/", "/api/parameters/vhost-limits/")


@web.middleware
async def _shared_files_everywhere(request: web.Request, handler):
    """--worker-mode queues (warren/spread): after a change of the shared files, every other worker
    reads them again before the answer, so that the next request, to any worker, finds it (a vhost
    just created takes queues). One process and the vhosts mode: nothing more than a test."""
    response = await handler(request)
    if (request.method in ("PUT", "DELETE", "POST") and response.status < 400
            and request.path.startswith(SHARED_FILE_PATHS)):
        await request.app[BROKER].directory.files_changed()
    return response


def _ignore_one_trailing_slash(router) -> None:
    """RabbitMQ's HTTP API reads ``/api/vhosts/NAME/`` as ``/api/vhosts/NAME``: cowboy's router,
    which its management plugin uses, splits a path into segments and drops one trailing empty
    segment (``cowboy_router:split_path``; its own tests match ``/path/123/`` to ``/path/123``).
    Here: a path under /api/ that ends in "/" and finds no route is resolved once more without
    that "/" (percent-encoded as it came: ``%2F`` stays a name). What resolves as it is (the
    web UI's paths) is untouched, and only one "/" goes, as in cowboy."""
    resolve = router.resolve

    async def resolve_without_trailing_slash(request: web.Request):
        match = await resolve(request)
        exc = match.http_exception
        raw = request.rel_url.raw_path
        if exc is None or exc.status != 404 or not raw.endswith("/") or not raw.startswith("/api/") or raw == "/api/":
            return match
        retry = await resolve(request.clone(rel_url=URL.build(
            path=raw[:-1], query_string=request.rel_url.raw_query_string, encoded=True)))
        return match if retry.http_exception is not None else retry

    router.resolve = resolve_without_trailing_slash


async def _start_sampler(app: web.Application) -> None:
    app[STATS].start(asyncio.get_running_loop())


async def _stop_sampler(app: web.Application) -> None:
    app[STATS].stop()


def statistics_interval() -> float:
    """Seconds between two samples of the rates: RabbitMQ's ``collect_statistics_interval``
    (milliseconds) from ``$WARREN_COLLECT_STATISTICS_INTERVAL``, 5000 by default (the tests
    shorten it; at least 100)."""
    raw = os.environ.get("WARREN_COLLECT_STATISTICS_INTERVAL", "")
    try:
        return max(100, int(raw)) / 1000 if raw.strip() else INTERVAL
    except ValueError:
        log.warning("WARREN_COLLECT_STATISTICS_INTERVAL=%r is not a number of milliseconds: 5000 used", raw)
        return INTERVAL


def build_app(broker, info=None, server=None) -> web.Application:
    """The application over ``broker`` (a warren.broker.broker.Broker: its vhosts, access store, policies).

    ``info`` returns extra fields for /api/overview (the server adds its ports); ``server``
    (the running Server: its connections, config and alarms) is None where there is no AMQP side.
    """
    app = web.Application(middlewares=[_json_errors, auth_middleware, _shared_files_everywhere])
    app[BROKER] = broker
    app[INFO] = info or dict
    app[SERVER] = server
    app[STATS] = Sampler(broker, server, statistics_interval())
    app.on_startup.append(_start_sampler)
    app.on_cleanup.append(_stop_sampler)
    for resource in RESOURCES:
        resource.add_routes(app)
    ui.add_routes(app)  # the web UI at / (warren/management/ui): its own middleware, before errors and auth
    _ignore_one_trailing_slash(app.router)
    return app
