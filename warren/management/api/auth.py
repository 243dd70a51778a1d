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

Failed logins go through the broker's login throttle (``Broker.login_throttle``,
warren/access/login_throttle.py), the same one AMQP logins use, so guessing passwords over
HTTP is slowed as over AMQP: past a few failures from an address each 401 waits, then the
address is refused for a while without a password check. The client only ever sees
RabbitMQ's 401 "Login failed"; the user, the address and the reason go to the log. A request
without credentials is not a failed login (browsers and tools send one first).
Users, passwords and permissions are the broker's access store (``Broker.access``, warren/access).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import logging
from dataclasses import dataclass

from aiohttp import hdrs, web

from warren.management.api.common import BROKER, REALM, ApiError, not_authorised, vhost_or_404

__all__ = ["Principal", "auth_middleware", "principal", "require", "visible_vhosts", "check_vhost_access",
           "readable_vhost", "check_permission", "MANAGEMENT_TAGS"]

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
log = logging.getLogger("warren.management")

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


def _authenticate(broker, username: str, password: str, peer: str | None) -> Principal | str:
    """The principal, or the reason the login is refused (for the log only)."""
    access = broker.access
    from warren.access import LoginRefused
    access.refresh()  # --workers: a user changed through another process's API counts at once (a stat)
    try:
        user = access.authenticate(username, password, peer)
    except LoginRefused as e:
        return e.reason
    return Principal(user.name, tuple(user.tags))


def _login_failed() -> ApiError:
    return ApiError(401, "not_authorized", "Login failed", {hdrs.WWW_AUTHENTICATE: REALM})


async def _refuse_login(request: web.Request, username: str, reason: str) -> ApiError:
    """Count a failed login against its address (the login throttle), log why, and wait the
    throttle's delay before the 401 (this request only: the loop serves everyone else)."""
    host = request.remote
    throttle = request.app[BROKER].login_throttle  # None: the broker counts no failed logins
    verdict = throttle.failed(host) if throttle is not None else None
    note = ""
    if verdict is not None and verdict.blocked:
        note = f"; {verdict.failures} failed logins from {host}: refused for {throttle.block_time:g}s (login throttle)"
    elif verdict is not None and verdict.delay:
        note = f"; failed login {verdict.failures} from {host}: answered after {verdict.delay:g}s (login throttle)"
    log.warning("HTTP API login refused for user '%s' from %s (%s %s): %s%s", username, host, request.method,
                request.path, reason, note)
    if verdict is not None and verdict.delay:
        await asyncio.sleep(verdict.delay)
    return _login_failed()


@web.middleware
async def auth_middleware(request: web.Request, handler):
    creds = _basic_credentials(request.headers.get(hdrs.AUTHORIZATION, ""))
    if creds is None:
        raise _login_failed()
    broker = request.app[BROKER]
    throttle = broker.login_throttle
    blocked = throttle.blocked_for(request.remote) if throttle is not None else 0.0
    if blocked:  # refused without a password check: a flood costs no hashing
        log.warning("HTTP API login refused for user '%s' from %s: too many failed logins from %s, refused for "
                    "%.0fs more (login throttle)", creds[0], request.remote, request.remote, blocked)
        raise _login_failed()
    who = _authenticate(broker, creds[0], creds[1], request.remote)
    if not isinstance(who, Principal):
        raise await _refuse_login(request, creds[0], who)
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
    return broker.access.may_access_vhost(username, vhost)


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


def readable_vhost(request: web.Request, monitor_ok: bool = True):
    """The VirtualHost named in the path: 404 if missing, then 401 as ``check_vhost_access``."""
    vhost = vhost_or_404(request)
    check_vhost_access(request, vhost.name, monitor_ok)
    return vhost


def check_permission(request: web.Request, vhost: str, permission: str, kind: str, name: str) -> None:
    """The user's AMQP permission (configure/write/read) on a queue or exchange, as RabbitMQ's
    API checks it (it acts as that user); 401 "Access refused." otherwise."""
    who = request[_PRINCIPAL]
    perm = request.app[BROKER].access.permission(who.name, vhost)
    if kind == "exchange" and name == "":
        name = "amq.default"
    if perm is None or not perm.allows(permission, name):
        raise not_authorised(f"access to {kind} '{name}' in vhost '{vhost}' refused for user '{who.name}'")
