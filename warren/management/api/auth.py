"""Who is asking, and what their tags let them do (RabbitMQ's management authorisation).

Every request carries HTTP basic credentials of a broker user (``Broker.access``, the same
login check as AMQP, loopback rule included). Then, as RabbitMQ's management plugin:

* any of ``management``, ``policymaker``, ``monitoring``, ``administrator`` may use the API;
  a user with none of them is refused ("Not management user");
* ``management`` and ``policymaker`` users see the objects of the vhosts they have
  permissions in; ``monitoring`` and ``administrator`` see every vhost's, and the node;
* ``policymaker`` manages policies and parameters of its own vhosts, ``administrator``
  everything (users, vhosts, permissions, definitions, any vhost's policies);
* operations on queues and exchanges (declare, delete, bind, publish, get, purge) need the
  user's AMQP permission on the resource, as RabbitMQ's API does them as that user.

Refusals are 401 ``not_authorised`` with RabbitMQ's reasons. Warren's own stream routes
(``/api/streams/...``, read by the Spark data source with AMQP credentials) need a login and
a permission in the vhost, but no tag.

A broker without an access model (unit tests' stand-ins with a plain ``users`` table) treats
every user who logs in as an administrator.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass

from aiohttp import hdrs, web

from warren.management.api.common import BROKER, REALM, ApiError, not_authorised

__all__ = ["Principal", "auth_middleware", "principal", "require", "visible_vhosts", "check_vhost_access",
           "check_permission", "MANAGEMENT_TAGS"]

ADMINISTRATOR, MONITORING, POLICYMAKER, MANAGEMENT = "administrator", "monitoring", "policymaker", "management"
MANAGEMENT_TAGS = frozenset({ADMINISTRATOR, MONITORING, POLICYMAKER, MANAGEMENT})
# what each level of the API needs (any of these tags)
LEVELS = {
    MANAGEMENT: MANAGEMENT_TAGS,
    POLICYMAKER: frozenset({POLICYMAKER, ADMINISTRATOR}),
    MONITORING: frozenset({MONITORING, ADMINISTRATOR}),
    ADMINISTRATOR: frozenset({ADMINISTRATOR}),
}
REFUSALS = {
    MANAGEMENT: "Not management user",
    POLICYMAKER: "Not policymaker user",
    MONITORING: "Not monitor user",
    ADMINISTRATOR: "Not administrator user",
}
_PRINCIPAL = web.RequestKey("principal", object) if hasattr(web, "RequestKey") else "warren.principal"


@dataclass(frozen=True)
class Principal:
    name: str
    tags: tuple[str, ...]

    def has_level(self, level: str) -> bool:
        return not LEVELS[level].isdisjoint(self.tags)

    @property
    def sees_all(self) -> bool:
        """monitoring and administrator see every vhost's objects."""
        return self.has_level(MONITORING)


def _basic_credentials(header: str) -> tuple[str, str] | None:
    """(user, password) of a ``Basic`` Authorization header (RFC 7617, UTF-8), or None."""
    scheme, _, encoded = header.partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        decoded = base64.b64decode(encoded.strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None
    user, colon, password = decoded.partition(":")
    return (user, password) if colon else None


def _authenticate(broker, username: str, password: str, peer: str | None) -> Principal | None:
    access = getattr(broker, "access", None)
    if access is not None:
        from warren.access import LoginRefused
        try:
            user = access.authenticate(username, password, peer)
        except LoginRefused:
            return None
        return Principal(user.name, tuple(user.tags))
    user = broker.users.authenticate(username, password, peer)
    if user is None:
        return None
    return Principal(user.name, tuple(getattr(user, "tags", (ADMINISTRATOR,))))


def _login_failed() -> ApiError:
    return ApiError(401, "not_authorized", "Login failed", {hdrs.WWW_AUTHENTICATE: REALM})


@web.middleware
async def auth_middleware(request: web.Request, handler):
    creds = _basic_credentials(request.headers.get(hdrs.AUTHORIZATION, ""))
    if creds is None:
        raise _login_failed()
    who = _authenticate(request.app[BROKER], creds[0], creds[1], request.remote)
    if who is None:
        raise _login_failed()
    request[_PRINCIPAL] = who
    if not request.path.startswith("/api/streams/") and not who.has_level(MANAGEMENT):
        raise not_authorised(REFUSALS[MANAGEMENT])
    return await handler(request)


def principal(request: web.Request) -> Principal:
    return request[_PRINCIPAL]


def require(request: web.Request, level: str) -> Principal:
    """The principal if its tags reach ``level`` (MANAGEMENT, POLICYMAKER, MONITORING,
    ADMINISTRATOR), else 401 with RabbitMQ's reason."""
    who = request[_PRINCIPAL]
    if not who.has_level(level):
        raise not_authorised(REFUSALS[level])
    return who


def _has_vhost_permission(broker, username: str, vhost: str) -> bool:
    access = getattr(broker, "access", None)
    return access is None or access.may_access_vhost(username, vhost)


def visible_vhosts(request: web.Request) -> list[str]:
    """The names of the running vhosts whose objects this user may see."""
    broker = request.app[BROKER]
    who = request[_PRINCIPAL]
    names = sorted(broker.vhosts)
    if who.sees_all:
        return names
    return [n for n in names if _has_vhost_permission(broker, who.name, n)]


def check_vhost_access(request: web.Request, vhost: str, monitor_ok: bool = True) -> None:
    """401 unless this user may see (``monitor_ok``: monitoring counts) or use ``vhost``."""
    who = request[_PRINCIPAL]
    if who.has_level(ADMINISTRATOR) and monitor_ok:
        return
    if monitor_ok and who.sees_all:
        return
    if not _has_vhost_permission(request.app[BROKER], who.name, vhost):
        raise not_authorised("User not authorised to access virtual host")


def check_permission(request: web.Request, vhost: str, permission: str, kind: str, name: str) -> None:
    """The user's AMQP permission (configure/write/read) on a queue or exchange, as RabbitMQ's
    API checks it (it acts as that user); 401 "Access refused." otherwise."""
    access = getattr(request.app[BROKER], "access", None)
    if access is None:
        return
    who = request[_PRINCIPAL]
    perm = access.permission(who.name, vhost)
    if kind == "exchange" and name == "":
        name = "amq.default"
    if perm is None or not perm.allows(permission, name):
        raise not_authorised(f"access to {kind} '{name}' in vhost '{vhost}' refused for user '{who.name}'")
