"""``/api/users``, ``/api/users/without-permissions``, ``/api/users/bulk-delete``,
``/api/permissions``, ``/api/topic-permissions`` and their per-user and per-vhost forms.

All of them are the access model's (``Broker.access``, warren/access), which makes every
change durable before it returns; administrators only, as in RabbitMQ. As RabbitMQ 3.10:
a PUT of a user needs ``tags`` (a list or a comma-separated string) and takes ``password`` or
``password_hash`` (+ ``hashing_algorithm``); with neither the user has no password (it may
log in only by certificate). A user is shown with its user limits (``"limits"``, as
``/api/user-limits`` sets them), and a PUT may carry ``limits`` too, set over the old ones.
Permissions on a user or vhost that does not exist are 400 ``vhost_or_user_not_found``.
"""

from __future__ import annotations

from aiohttp import web

from warren.management.api.auth import ADMINISTRATOR, require
from warren.management.api.common import (
    BROKER, bad_request, created, no_content, not_found, off_loop, read_json, reply_list, reply_object,
)

__all__ = ["add_routes", "user_json"]


def _access(request: web.Request):
    return request.app[BROKER].access


async def _call(fn, *args, **kw):
    """A change of the access model, on the node files' thread (``off_loop``: answered once
    durable, the loop free meanwhile), its refusals as RabbitMQ's API answers them."""
    from warren.access import AlreadyExists, Invalid, NotFound
    try:
        return await off_loop(fn, *args, **kw)
    except NotFound as e:
        raise not_found(str(e)) from None
    except (Invalid, AlreadyExists, ValueError) as e:
        raise bad_request(str(e)) from None


def user_json(u, limits: dict | None = None) -> dict:
    """A user as RabbitMQ 3.10 shows it, with its user limits (``{}`` without any), keys sorted
    as RabbitMQ prints them: ``{"max-channels": -1, "max-connections": 5}``."""
    return {"name": u.name, "password_hash": u.password_hash, "hashing_algorithm": u.hashing_algorithm,
            "tags": list(u.tags), "limits": dict(sorted((limits or {}).items()))}


def _users_json(access, users) -> list[dict]:
    limits = access.user_limits()  # {user: its limits}, one look for the whole list
    return sorted((user_json(u, limits.get(u.name)) for u in users), key=lambda i: i["name"])


# --- users -------------------------------------------------------------------------------------------


async def list_users(request: web.Request) -> web.Response:
    require(request, ADMINISTRATOR)
    access = _access(request)
    return reply_list(request, _users_json(access, access.users()))


async def users_without_permissions(request: web.Request) -> web.Response:
    require(request, ADMINISTRATOR)
    access = _access(request)
    return reply_list(request, _users_json(access, access.users_without_permissions()))


def _user(request: web.Request):
    u = _access(request).user(request.match_info["name"])
    if u is None:
        raise not_found()
    return u


async def get_user(request: web.Request) -> web.Response:
    require(request, ADMINISTRATOR)
    u = _user(request)
    return reply_object(request, user_json(u, _access(request).user_limits(u.name).get(u.name)))


async def put_user(request: web.Request) -> web.Response:
    require(request, ADMINISTRATOR)
    access = _access(request)
    name = request.match_info["name"]
    body = await read_json(request)
    if "tags" not in body:
        raise bad_request("tags_not_present")
    tags = body["tags"]
    if not isinstance(tags, (str, list)):
        raise bad_request("tags must be a list or a comma-separated string")
    password = body.get("password")
    password_hash = body.get("password_hash")
    if password is not None and not isinstance(password, str):
        raise bad_request("password must be a string")
    if password is not None and password_hash is not None:
        raise bad_request("give password or password_hash, not both")
    algorithm = body.get("hashing_algorithm") or "rabbit_password_hashing_sha256"
    kw = {"tags": tags, "hashing_algorithm": algorithm}
    if body.get("limits") is not None:  # RabbitMQ 3.10 sets these user limits too (over the old ones)
        kw["limits"] = body["limits"]
    if password is not None:
        kw["password"] = password
    elif password_hash is not None:
        kw["password_hash"] = password_hash
    _, new = await _call(access.put_user, name, **kw)
    return created() if new else no_content()


async def delete_user(request: web.Request) -> web.Response:
    require(request, ADMINISTRATOR)
    await _call(_access(request).delete_user, request.match_info["name"])
    return no_content()


async def bulk_delete_users(request: web.Request) -> web.Response:
    require(request, ADMINISTRATOR)
    access = _access(request)
    body = await read_json(request)
    names = body.get("users")
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise bad_request("users must be a list of names")
    from warren.access import NotFound
    for name in names:
        try:
            await off_loop(access.delete_user, name)
        except NotFound:
            pass  # RabbitMQ's bulk delete skips names that are gone
    return no_content()


async def user_permissions(request: web.Request) -> web.Response:
    require(request, ADMINISTRATOR)
    u = _user(request)
    return reply_list(request, _permissions(_access(request).permissions(user=u.name)))


async def user_topic_permissions(request: web.Request) -> web.Response:
    require(request, ADMINISTRATOR)
    u = _user(request)
    return reply_list(request, _permissions(_access(request).topic_permissions(user=u.name)))


# --- permissions -------------------------------------------------------------------------------------


def _permissions(perms) -> list[dict]:
    return sorted((p.to_json() for p in perms), key=lambda i: (i["user"], i["vhost"], i.get("exchange", "")))


async def list_permissions(request: web.Request) -> web.Response:
    require(request, ADMINISTRATOR)
    return reply_list(request, _permissions(_access(request).permissions()))


async def get_permission(request: web.Request) -> web.Response:
    require(request, ADMINISTRATOR)
    p = _access(request).permission(request.match_info["user"], request.match_info["vhost"])
    if p is None:
        raise not_found()
    return reply_object(request, p.to_json())


def _exists(access, user: str, vhost: str) -> None:
    if access.user(user) is None or access.vhost(vhost) is None:
        raise bad_request("vhost_or_user_not_found")


async def put_permission(request: web.Request) -> web.Response:
    require(request, ADMINISTRATOR)
    access = _access(request)
    user, vhost = request.match_info["user"], request.match_info["vhost"]
    body = await read_json(request)
    patterns = []
    for key in ("configure", "write", "read"):
        value = body.get(key)
        if not isinstance(value, str):
            raise bad_request(f"{key} must be a string (a regular expression)")
        patterns.append(value)
    _exists(access, user, vhost)
    new = access.permission(user, vhost) is None
    await _call(access.set_permissions, user, vhost, *patterns)
    return created() if new else no_content()


async def delete_permission(request: web.Request) -> web.Response:
    require(request, ADMINISTRATOR)
    await _call(_access(request).clear_permissions, request.match_info["user"], request.match_info["vhost"])
    return no_content()


async def list_topic_permissions(request: web.Request) -> web.Response:
    require(request, ADMINISTRATOR)
    return reply_list(request, _permissions(_access(request).topic_permissions()))


async def get_topic_permissions(request: web.Request) -> web.Response:
    require(request, ADMINISTRATOR)
    perms = _access(request).topic_permissions(user=request.match_info["user"], vhost=request.match_info["vhost"])
    if not perms:
        raise not_found()
    return reply_list(request, _permissions(perms))


async def put_topic_permission(request: web.Request) -> web.Response:
    require(request, ADMINISTRATOR)
    access = _access(request)
    user, vhost = request.match_info["user"], request.match_info["vhost"]
    body = await read_json(request)
    exchange = body.get("exchange")
    if not isinstance(exchange, str) or not exchange:
        raise bad_request("exchange must be the name of a topic exchange")
    write, read = body.get("write", ".*"), body.get("read", ".*")
    if not isinstance(write, str) or not isinstance(read, str):
        raise bad_request("write and read must be strings (regular expressions)")
    _exists(access, user, vhost)
    new = not access.topic_permissions(user=user, vhost=vhost, exchange=exchange)
    await _call(access.set_topic_permissions, user, vhost, exchange, write, read)
    return created() if new else no_content()


async def delete_topic_permissions(request: web.Request) -> web.Response:
    require(request, ADMINISTRATOR)
    exchange = request.query.get("exchange")
    await _call(_access(request).clear_topic_permissions, request.match_info["user"], request.match_info["vhost"],
          exchange)
    return no_content()


def add_routes(app: web.Application) -> None:
    r = app.router
    r.add_get("/api/users", list_users)
    r.add_get("/api/users/without-permissions", users_without_permissions)
    r.add_post("/api/users/bulk-delete", bulk_delete_users)
    r.add_get("/api/users/{name}", get_user)
    r.add_put("/api/users/{name}", put_user)
    r.add_delete("/api/users/{name}", delete_user)
    r.add_get("/api/users/{name}/permissions", user_permissions)
    r.add_get("/api/users/{name}/topic-permissions", user_topic_permissions)
    r.add_get("/api/permissions", list_permissions)
    r.add_get("/api/permissions/{vhost}/{user}", get_permission)
    r.add_put("/api/permissions/{vhost}/{user}", put_permission)
    r.add_delete("/api/permissions/{vhost}/{user}", delete_permission)
    r.add_get("/api/topic-permissions", list_topic_permissions)
    r.add_get("/api/topic-permissions/{vhost}/{user}", get_topic_permissions)
    r.add_put("/api/topic-permissions/{vhost}/{user}", put_topic_permission)
    r.add_delete("/api/topic-permissions/{vhost}/{user}", delete_topic_permissions)
