"""RabbitMQ's user limits over HTTP: ``/api/user-limits`` (``max-connections``, ``max-channels``).

As RabbitMQ 3.10 answers them (checked against the reference broker):

* ``GET /api/user-limits``: ``[{"user": name, "value": {limit: n}}]`` for users with limits;
* ``GET /api/user-limits/{user}``: the same list for one user (404 for an unknown user);
* ``PUT /api/user-limits/{user}/{name}`` with ``{"value": n}``: 204; 400 for an unknown user
  (``["no_such_user", name]``), an unknown limit, a value that is not an integer, or no value;
* ``DELETE /api/user-limits/{user}/{name}``: 204, set or not.

Administrators only. The limits live in the access model (``AccessControl.set_user_limit``)
and are enforced at connection.open and channel.open (``warren/broker/limits.py``).
"""

from __future__ import annotations

from aiohttp import web

from warren.management.api.auth import ADMINISTRATOR, require
from warren.management.api.common import BROKER, bad_request, no_content, not_found, off_loop, read_json, reply_list

__all__ = ["add_routes"]


def _access(request: web.Request):
    return request.app[BROKER].access


def _rows(limits: dict[str, dict]) -> list[dict]:
    return [{"user": name, "value": value} for name, value in sorted(limits.items())]


async def list_user_limits(request: web.Request) -> web.Response:
    require(request, ADMINISTRATOR)
    return reply_list(request, _rows(_access(request).user_limits()))


async def user_limits_of(request: web.Request) -> web.Response:
    require(request, ADMINISTRATOR)
    access = _access(request)
    user = request.match_info["user"]
    if access.user(user) is None:
        raise not_found()
    return reply_list(request, _rows(access.user_limits(user)))


async def put_user_limit(request: web.Request) -> web.Response:
    from warren.access import Invalid, NotFound
    require(request, ADMINISTRATOR)
    user, name = request.match_info["user"], request.match_info["name"]
    body = await read_json(request)
    if not isinstance(body, dict) or "value" not in body:
        raise bad_request("[{key_missing,value}]")
    try:
        await off_loop(_access(request).set_user_limit, user, name, body["value"])  # the loop free meanwhile
    except NotFound:
        raise bad_request(["no_such_user", user]) from None
    except Invalid as e:
        raise bad_request(str(e)) from None
    return no_content()


async def delete_user_limit(request: web.Request) -> web.Response:
    require(request, ADMINISTRATOR)
    await off_loop(_access(request).clear_user_limit, request.match_info["user"], request.match_info["name"])
    return no_content()


def add_routes(app: web.Application) -> None:
    r = app.router
    r.add_get("/api/user-limits", list_user_limits)
    r.add_get("/api/user-limits/{user}", user_limits_of)
    r.add_put("/api/user-limits/{user}/{name}", put_user_limit)
    r.add_delete("/api/user-limits/{user}/{name}", delete_user_limit)
