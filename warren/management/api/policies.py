"""``/api/policies``, ``/api/operator-policies``, ``/api/parameters``, ``/api/global-parameters``
and ``/api/vhost-limits``.

Policies (RabbitMQ's ``set_policy``): listed by anyone who sees the vhost, changed by
``policymaker`` users in their vhosts and by administrators; durable in ``policies.json``
before the answer and applied at once (policy_store.py). Operator policies are not kept:
listing them gives ``[]``, changing them 405.

Runtime parameters are stored and listed (parameters.py); vhost limits are the access
model's and appear as the ``vhost-limits`` component, as in RabbitMQ.
"""

from __future__ import annotations

from aiohttp import web

from warren.broker.policies import PolicyError, validate_policy
from warren.management import policy_store
from warren.management.api.auth import (
    ADMINISTRATOR, POLICYMAKER, check_vhost_access, principal, require, visible_vhosts,
)
from warren.management.api.common import (
    BROKER, ApiError, bad_request, created, no_content, not_found, off_loop, read_json, reply_list, reply_object,
    vhost_or_404,
)

__all__ = ["add_routes", "PARAMETERS", "may_change", "policy_json", "vhost_limit_parameters"]

PARAMETERS = web.AppKey("parameters", object)  # the ParameterStore
VHOST_LIMITS = "vhost-limits"


def policy_json(p) -> dict:
    return {"vhost": p.vhost, "name": p.name, "pattern": p.pattern, "apply-to": p.apply_to,
            "definition": p.definition, "priority": p.priority}


def _access(request: web.Request):
    return request.app[BROKER].access


def _known_vhost(request: web.Request, name: str):
    """404 unless the vhost exists (running)."""
    return vhost_or_404(request, name)


def may_change(request: web.Request, vhost: str) -> None:
    """Refuse unless the user may change policies and parameters of ``vhost`` (a policymaker with
    access to it): policies, parameters, and a shovel's restart (``federation.py``)."""
    require(request, POLICYMAKER)
    check_vhost_access(request, vhost, monitor_ok=principal(request).has_level(ADMINISTRATOR))


# --- policies ----------------------------------------------------------------------------------------


def _policies(request: web.Request, vhost: str | None = None) -> list[dict]:
    names = set(visible_vhosts(request)) if vhost is None else {vhost}
    items = [policy_json(p) for p in policy_store.all_policies(request.app[BROKER]) if p.vhost in names]
    return sorted(items, key=lambda i: (i["vhost"], i["name"]))


async def list_policies(request: web.Request) -> web.Response:
    return reply_list(request, _policies(request))


async def vhost_policies(request: web.Request) -> web.Response:
    vhost = _known_vhost(request, request.match_info["vhost"])
    check_vhost_access(request, vhost.name)
    return reply_list(request, _policies(request, vhost.name))


async def get_policy(request: web.Request) -> web.Response:
    vhost = _known_vhost(request, request.match_info["vhost"])
    check_vhost_access(request, vhost.name)
    for item in _policies(request, vhost.name):
        if item["name"] == request.match_info["name"]:
            return reply_object(request, item)
    raise not_found()


async def put_policy(request: web.Request) -> web.Response:
    vhost = _known_vhost(request, request.match_info["vhost"])
    may_change(request, vhost.name)
    body = await read_json(request)
    priority = body.get("priority", 0)
    if isinstance(priority, str) and priority.lstrip("-").isdigit():
        priority = int(priority)
    apply_to = body.get("apply-to") or "all"
    try:
        policy = validate_policy(vhost.name, request.match_info["name"], body.get("pattern"), apply_to, priority,
                                 body.get("definition"))
    except PolicyError as e:
        raise bad_request(f"Validation failed\n\n{e}\n") from None
    new = await off_loop(policy_store.replace_policy, request.app[BROKER], policy)  # the loop free meanwhile
    await _in_force_everywhere(request)
    return created() if new else no_content()


async def _in_force_everywhere(request: web.Request) -> None:
    """--worker-mode queues: the other workers apply the change before the answer too (each
    holds queues of every vhost; warren/spread), not at their next look at the file."""
    await request.app[BROKER].directory.files_changed()


async def delete_policy(request: web.Request) -> web.Response:
    vhost = _known_vhost(request, request.match_info["vhost"])
    may_change(request, vhost.name)
    if not await off_loop(policy_store.remove_policy, request.app[BROKER], vhost.name, request.match_info["name"]):
        raise not_found()
    await _in_force_everywhere(request)
    return no_content()


async def operator_policies(request: web.Request) -> web.Response:
    return reply_list(request, [])


async def operator_policy_refused(request: web.Request) -> web.Response:
    raise ApiError(405, "Method Not Allowed", "operator policies are not kept by Warren", {"Allow": "GET, HEAD"})


# --- vhost limits ------------------------------------------------------------------------------------


def vhost_limit_parameters(access, vhost: str | None = None) -> list[dict]:
    return [{"value": limits, "vhost": name, "component": VHOST_LIMITS, "name": "limits"}
            for name, limits in sorted(access.vhost_limits(vhost).items())]


async def list_vhost_limits(request: web.Request) -> web.Response:
    names = set(visible_vhosts(request))
    items = [{"vhost": p["vhost"], "value": p["value"]} for p in vhost_limit_parameters(_access(request))
             if p["vhost"] in names]
    return reply_list(request, items)


async def vhost_limits_of(request: web.Request) -> web.Response:
    vhost = _known_vhost(request, request.match_info["vhost"])
    check_vhost_access(request, vhost.name)
    items = [{"vhost": p["vhost"], "value": p["value"]} for p in vhost_limit_parameters(_access(request), vhost.name)]
    return reply_list(request, items)


async def _access_call(fn, *args):
    from warren.access import Invalid, NotFound
    try:
        return await off_loop(fn, *args)  # durable, the loop free meanwhile (common.py)
    except NotFound as e:
        raise not_found(str(e)) from None
    except Invalid as e:
        raise bad_request(str(e)) from None


async def put_vhost_limit(request: web.Request) -> web.Response:
    require(request, ADMINISTRATOR)
    vhost = _known_vhost(request, request.match_info["vhost"])
    body = await read_json(request)
    if "value" not in body:
        raise bad_request("value missing")
    value = body["value"]
    if isinstance(value, str) and value.lstrip("-").isdigit():
        value = int(value)
    await _access_call(_access(request).set_vhost_limit, vhost.name, request.match_info["name"], value)
    return no_content()


async def delete_vhost_limit(request: web.Request) -> web.Response:
    require(request, ADMINISTRATOR)
    vhost = _known_vhost(request, request.match_info["vhost"])
    await _access_call(_access(request).clear_vhost_limit, vhost.name, request.match_info["name"])
    return no_content()


# --- runtime parameters ----------------------------------------------------------------------------


def _parameters(request: web.Request, component: str | None = None, vhost: str | None = None) -> list[dict]:
    names = set(visible_vhosts(request)) if vhost is None else {vhost}
    items = [p for p in request.app[PARAMETERS].list(component, vhost) if p["vhost"] in names]
    if component in (None, VHOST_LIMITS):
        items += [p for p in vhost_limit_parameters(_access(request), vhost) if p["vhost"] in names]
    return sorted(items, key=lambda p: (p["component"], p["vhost"], p["name"]))


async def list_parameters(request: web.Request) -> web.Response:
    require(request, POLICYMAKER)
    return reply_list(request, _parameters(request))


async def component_parameters(request: web.Request) -> web.Response:
    require(request, POLICYMAKER)
    return reply_list(request, _parameters(request, request.match_info["component"]))


async def vhost_component_parameters(request: web.Request) -> web.Response:
    require(request, POLICYMAKER)
    vhost = _known_vhost(request, request.match_info["vhost"])
    check_vhost_access(request, vhost.name)
    return reply_list(request, _parameters(request, request.match_info["component"], vhost.name))


async def get_parameter(request: web.Request) -> web.Response:
    require(request, POLICYMAKER)
    vhost = _known_vhost(request, request.match_info["vhost"])
    check_vhost_access(request, vhost.name)
    for p in _parameters(request, request.match_info["component"], vhost.name):
        if p["name"] == request.match_info["name"]:
            return reply_object(request, p)
    raise not_found()


async def put_parameter(request: web.Request) -> web.Response:
    vhost = _known_vhost(request, request.match_info["vhost"])
    may_change(request, vhost.name)
    component, name = request.match_info["component"], request.match_info["name"]
    body = await read_json(request)
    if "value" not in body:
        raise bad_request("value missing")
    if component == VHOST_LIMITS:
        if not isinstance(body["value"], dict):
            raise bad_request("vhost-limits needs a JSON object of limits")
        await _access_call(_access(request).set_vhost_limits, vhost.name, body["value"])
        return no_content()
    try:
        new = await off_loop(request.app[PARAMETERS].put, component, vhost.name, name, body["value"])
    except ValueError as e:  # a component's validator refused it (warren/federation: shovels, upstreams)
        raise bad_request(f"Validation failed\n\n{e}\n") from None
    await _in_force_everywhere(request)
    return created() if new else no_content()


async def delete_parameter(request: web.Request) -> web.Response:
    vhost = _known_vhost(request, request.match_info["vhost"])
    may_change(request, vhost.name)
    component, name = request.match_info["component"], request.match_info["name"]
    if component == VHOST_LIMITS:
        access = _access(request)
        if not access.vhost_limits(vhost.name):
            raise not_found()
        await _access_call(access.set_vhost_limits, vhost.name, {})
        return no_content()
    if not await off_loop(request.app[PARAMETERS].delete, component, vhost.name, name):
        raise not_found()
    await _in_force_everywhere(request)
    return no_content()


def _global_parameters(request: web.Request) -> list[dict]:
    broker = request.app[BROKER]
    stored = request.app[PARAMETERS].list_global()
    names = {g["name"] for g in stored}
    if "cluster_name" not in names:
        stored.append({"name": "cluster_name", "value": broker.cluster_name})
    return sorted(stored, key=lambda g: g["name"])


async def list_global_parameters(request: web.Request) -> web.Response:
    require(request, ADMINISTRATOR)
    return reply_list(request, _global_parameters(request))


async def get_global_parameter(request: web.Request) -> web.Response:
    require(request, ADMINISTRATOR)
    for g in _global_parameters(request):
        if g["name"] == request.match_info["name"]:
            return reply_object(request, g)
    raise not_found()


async def put_global_parameter(request: web.Request) -> web.Response:
    require(request, ADMINISTRATOR)
    body = await read_json(request)
    if "value" not in body:
        raise bad_request("value missing")
    new = await off_loop(request.app[PARAMETERS].put_global, request.match_info["name"], body["value"])
    await _in_force_everywhere(request)
    return created() if new else no_content()


async def delete_global_parameter(request: web.Request) -> web.Response:
    require(request, ADMINISTRATOR)
    if not await off_loop(request.app[PARAMETERS].delete_global, request.match_info["name"]):
        raise not_found()
    await _in_force_everywhere(request)
    return no_content()


def add_routes(app: web.Application) -> None:
    from warren.management.api.common import SERVER
    from warren.management.parameters import ParameterStore
    server = app[SERVER]
    broker = app[BROKER]
    data_dir = server.config.data_dir if server is not None else (
        broker.durability.data_dir if broker.durability is not None else None)
    # the server's own store when there is one (shovels and federation listen to it; it is
    # None before the server's startup made it)
    own = server.parameters if server is not None else None
    app[PARAMETERS] = own if own is not None else ParameterStore.in_data_dir(data_dir)
    r = app.router
    r.add_get("/api/policies", list_policies)
    r.add_get("/api/policies/{vhost}", vhost_policies)
    r.add_get("/api/policies/{vhost}/{name}", get_policy)
    r.add_put("/api/policies/{vhost}/{name}", put_policy)
    r.add_delete("/api/policies/{vhost}/{name}", delete_policy)
    r.add_get("/api/operator-policies", operator_policies)
    r.add_get("/api/operator-policies/{vhost}", operator_policies)
    r.add_route("*", "/api/operator-policies/{vhost}/{name}", operator_policy_refused)
    r.add_get("/api/vhost-limits", list_vhost_limits)
    r.add_get("/api/vhost-limits/{vhost}", vhost_limits_of)
    r.add_put("/api/vhost-limits/{vhost}/{name}", put_vhost_limit)
    r.add_delete("/api/vhost-limits/{vhost}/{name}", delete_vhost_limit)
    r.add_get("/api/parameters", list_parameters)
    r.add_get("/api/parameters/{component}", component_parameters)
    r.add_get("/api/parameters/{component}/{vhost}", vhost_component_parameters)
    r.add_get("/api/parameters/{component}/{vhost}/{name}", get_parameter)
    r.add_put("/api/parameters/{component}/{vhost}/{name}", put_parameter)
    r.add_delete("/api/parameters/{component}/{vhost}/{name}", delete_parameter)
    r.add_get("/api/global-parameters", list_global_parameters)
    r.add_get("/api/global-parameters/{name}", get_global_parameter)
    r.add_put("/api/global-parameters/{name}", put_global_parameter)
    r.add_delete("/api/global-parameters/{name}", delete_global_parameter)
