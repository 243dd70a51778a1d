"""Definitions in RabbitMQ's JSON format: export the broker's, import a file exported by
RabbitMQ 3.x or by Warren. Used by ``GET/POST /api/definitions[/{vhost}]`` and by
``warren serve --definitions FILE`` (RabbitMQ's ``load_definitions``) at start-up.

What travels: ``users`` (with their password hashes and ``hashing_algorithm``, tags, and
their user limits as ``limits``), ``vhosts``, ``permissions``, ``topic_permissions``,
``parameters`` (runtime parameters and the ``vhost-limits`` component),
``global_parameters``, ``policies``, and the durable
``queues`` (with arguments), ``exchanges`` (not the ``amq.*`` nor the default one) and
``bindings`` between them. Transient and exclusive objects are left out, as RabbitMQ does.

An import applies the sections in dependency order (users, vhosts, permissions, limits and
parameters, policies, exchanges, queues, bindings); each change is durable as it is made.
An existing object with other properties is an error (RabbitMQ's equivalence check), an
equal one is left alone, so importing the same file twice changes nothing. The first error
stops the import (``DefinitionsError`` names the object), as in RabbitMQ. A per-vhost import
(``POST /api/definitions/{vhost}``) takes only the vhost's sections and puts everything in
that vhost, whatever the file says.
"""

from __future__ import annotations

import json
import logging

from warren import __version__
from warren.broker.policies import PolicyError, validate_policy
from warren.errors import AMQPError
from warren.management import policy_store
from warren.broker.directory import ADMIN, apply_change

__all__ = ["DefinitionsError", "export_definitions", "import_definitions", "load_definitions_file",
           "read_definitions_file", "import_shared_definitions", "vhosts_part", "RABBIT_VERSION",
           "import_definitions_live"]

log = logging.getLogger("warren.management")

RABBIT_VERSION = "3.10.8"  # the format version written: RabbitMQ 3.10's
VHOST_LIMITS = "vhost-limits"


class DefinitionsError(ValueError):
    """A definitions document that cannot be imported (the message says which object and why)."""


def _jsonable(value):
    from warren.management.api.common import jsonable
    return jsonable(value)


def _exported_exchange(ex) -> bool:
    return bool(ex.name) and not ex.name.startswith("amq.") and ex.durable


def _exported_queue(q) -> bool:
    return q.durable and q.exclusive_owner is None


def _bindings(vhost) -> list:
    out = []
    for ex in vhost.exchanges.values():
        if not _exported_exchange(ex):
            continue
        for b in ex.bindings.values():
            d = b.destination
            is_queue = hasattr(d, "consumers")
            if (is_queue and not _exported_queue(d)) or (not is_queue and not _exported_exchange(d)):
                continue
            out.append({"source": ex.name, "vhost": vhost.name, "destination": d.name,
                        "destination_type": "queue" if is_queue else "exchange", "routing_key": b.routing_key,
                        "arguments": _jsonable(b.arguments or {})})
    return sorted(out, key=lambda b: (b["source"], b["destination_type"], b["destination"], b["routing_key"]))


def _vhost_objects(broker, vhost_names) -> dict:
    queues, exchanges, bindings = [], [], []
    for name in vhost_names:
        vhost = broker.vhosts.get(name)
        if vhost is None:
            continue
        every = {**vhost.queues, **vhost.remote_queues}  # --worker-mode queues: other workers' too
        for qname in sorted(every):
            q = every[qname]
            if _exported_queue(q):
                queues.append({"name": q.name, "vhost": name, "durable": True, "auto_delete": q.auto_delete,
                               "arguments": _jsonable(q.arguments)})
        for ename in sorted(vhost.exchanges):
            ex = vhost.exchanges[ename]
            if _exported_exchange(ex):
                exchanges.append({"name": ex.name, "vhost": name, "type": ex.TYPE, "durable": True,
                                  "auto_delete": ex.auto_delete, "internal": ex.internal,
                                  "arguments": _jsonable(ex.arguments)})
        bindings.extend(_bindings(vhost))
    return {"queues": queues, "exchanges": exchanges, "bindings": bindings}


def _policies(broker, vhost_names) -> list:
    names = set(vhost_names)
    return [{"vhost": p.vhost, "name": p.name, "pattern": p.pattern, "apply-to": p.apply_to,
             "definition": p.definition, "priority": p.priority}
            for p in sorted(policy_store.all_policies(broker), key=lambda p: (p.vhost, p.name)) if p.vhost in names]


def _parameters(broker, parameters, vhost_names) -> list:
    names = set(vhost_names)
    out = [p for p in (parameters.list() if parameters is not None else []) if p["vhost"] in names]
    for name, limits in sorted(broker.access.vhost_limits().items()):
        if name in names:
            out.append({"value": limits, "vhost": name, "component": VHOST_LIMITS, "name": "limits"})
    return out


def export_definitions(broker, parameters=None, vhost: str | None = None) -> dict:
    """The broker's definitions (all of them, or one vhost's in RabbitMQ's per-vhost form)."""
    access = broker.access
    if vhost is not None:
        objects = _vhost_objects(broker, [vhost])
        for section in objects.values():
            for item in section:
                item.pop("vhost", None)
        params = _parameters(broker, parameters, [vhost])
        for p in params:
            p.pop("vhost", None)
        policies = _policies(broker, [vhost])
        for p in policies:
            p.pop("vhost", None)
        return {"rabbit_version": RABBIT_VERSION, "parameters": params, "policies": policies, **objects}
    names = sorted(set(broker.vhosts) | {v.name for v in access.vhosts()})
    user_limits = access.user_limits()  # RabbitMQ 3.10 exports them as users[].limits
    users = [{"name": u.name, "password_hash": u.password_hash, "hashing_algorithm": u.hashing_algorithm,
              "tags": list(u.tags), "limits": dict(sorted(user_limits.get(u.name, {}).items()))}
             for u in sorted(access.users(), key=lambda u: u.name)]
    vhosts = []
    for n in names:
        info = access.vhost(n)
        entry = {"name": n}
        if info is not None and (info.description or info.tags):
            entry.update(description=info.description, tags=list(info.tags),
                         metadata={"description": info.description, "tags": list(info.tags)})
        if info is not None and info.default_queue_type:
            entry["default_queue_type"] = info.default_queue_type
        vhosts.append(entry)
    permissions = [p.to_json() for p in sorted(access.permissions(), key=lambda p: (p.user, p.vhost))]
    topic_permissions = [t.to_json() for t in sorted(access.topic_permissions(),
                                                     key=lambda t: (t.user, t.vhost, t.exchange))]
    global_parameters = parameters.list_global() if parameters is not None else []
    if not any(g["name"] == "cluster_name" for g in global_parameters):
        global_parameters.append({"name": "cluster_name", "value": broker.cluster_name})
    return {
        "rabbit_version": RABBIT_VERSION,
        "rabbitmq_version": RABBIT_VERSION,
        "product_name": "Warren",
        "product_version": __version__,
        "users": users,
        "vhosts": vhosts,
        "permissions": permissions,
        "topic_permissions": topic_permissions,
        "parameters": _parameters(broker, parameters, names),
        "global_parameters": global_parameters,
        "policies": _policies(broker, names),
        **_vhost_objects(broker, names),
    }


# --- import ------------------------------------------------------------------------------------------


def _section(doc: dict, key: str) -> list:
    value = doc.get(key, [])
    if value is None:
        return []
    if not isinstance(value, list):
        raise DefinitionsError(f"'{key}' must be a list")
    for item in value:
        if not isinstance(item, dict):
            raise DefinitionsError(f"every entry of '{key}' must be an object")
    return value


def _str(item: dict, key: str, what: str, default=None) -> str:
    value = item.get(key, default)
    if not isinstance(value, str):
        raise DefinitionsError(f"{what}: '{key}' must be a string")
    return value


def _flag(item: dict, key: str, default: bool = False) -> bool:
    value = item.get(key, default)
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    if not isinstance(value, bool):
        raise DefinitionsError(f"'{key}' must be true or false")
    return value


def _vhost_of(broker, item: dict, forced: str | None, what: str):
    name = forced if forced is not None else item.get("vhost", "/")
    vhost = broker.vhosts.get(name) if isinstance(name, str) else None
    if vhost is None:
        raise DefinitionsError(f"{what}: vhost '{name}' does not exist")
    return vhost


def _access_call(what: str, fn, *args, **kw):
    from warren.access import AccessModelError
    try:
        return fn(*args, **kw)
    except (AccessModelError, ValueError) as e:
        raise DefinitionsError(f"{what}: {e}") from None


def _import_access(access, doc: dict) -> None:
    """Users, vhosts, permissions and topic permissions into the access store (warren/access)."""
    users = _section(doc, "users")
    vhosts = _section(doc, "vhosts")
    permissions = _section(doc, "permissions")
    topic_permissions = _section(doc, "topic_permissions")
    for u in users:
        name = _str(u, "name", "a user")
        what = f"user '{name}'"
        tags = u.get("tags", [])
        if not isinstance(tags, (list, str)):
            raise DefinitionsError(f"{what}: tags must be a list or a comma-separated string")
        # users[].limits (RabbitMQ 3.10's place for user limits): each one given is set over the
        # user's old value; absent or {} leaves them as they are, as RabbitMQ's import does
        limits = u.get("limits") or None
        if "password" in u and "password_hash" not in u:
            _access_call(what, access.put_user, name, password=_str(u, "password", what), tags=tags, limits=limits)
            continue
        algorithm = u.get("hashing_algorithm") or "rabbit_password_hashing_sha256"
        _access_call(what, access.put_user, name, password_hash=u.get("password_hash") or "",
                     hashing_algorithm=algorithm, tags=tags, limits=limits)
    for v in vhosts:
        name = _str(v, "name", "a vhost")
        kw = {}
        meta = v.get("metadata") if isinstance(v.get("metadata"), dict) else {}
        description = v.get("description", meta.get("description"))
        if isinstance(description, str):
            kw["description"] = description
        tags = v.get("tags", meta.get("tags"))
        if isinstance(tags, (list, str)):
            kw["tags"] = tags
        dqt = v.get("default_queue_type", meta.get("default_queue_type"))
        if isinstance(dqt, str) and dqt != "undefined":
            kw["default_queue_type"] = dqt
        _access_call(f"vhost '{name}'", access.put_vhost, name, **kw)
    for p in permissions:
        user, vhost = _str(p, "user", "a permission"), _str(p, "vhost", "a permission")
        what = f"permissions of '{user}' in vhost '{vhost}'"
        _access_call(what, access.set_permissions, user, vhost, _str(p, "configure", what),
                     _str(p, "write", what), _str(p, "read", what))
    for t in topic_permissions:
        user, vhost = _str(t, "user", "a topic permission"), _str(t, "vhost", "a topic permission")
        what = f"topic permissions of '{user}' in vhost '{vhost}'"
        _access_call(what, access.set_topic_permissions, user, vhost, _str(t, "exchange", what),
                     _str(t, "write", what, ".*"), _str(t, "read", what, ".*"))


def _import_parameters(broker, parameters, doc: dict, forced: str | None) -> None:
    access = broker.access
    for p in _section(doc, "parameters"):
        what = f"parameter {p.get('component')}/{p.get('name')}"
        component = _str(p, "component", what)
        name = _str(p, "name", what)
        vhost = _vhost_of(broker, p, forced, what)
        if "value" not in p:
            raise DefinitionsError(f"{what}: no value")
        if component == VHOST_LIMITS:
            if not isinstance(p["value"], dict):
                raise DefinitionsError(f"{what}: vhost limits need a JSON object")
            _access_call(what, access.set_vhost_limits, vhost.name, p["value"])
        elif parameters is not None:
            try:
                parameters.put(component, vhost.name, name, p["value"])
            except ValueError as e:  # refused by its component (warren/federation: shovels, upstreams)
                raise DefinitionsError(f"{what}: {e}") from None
    if forced is None and parameters is not None:
        for g in _section(doc, "global_parameters"):
            name = _str(g, "name", "a global parameter")
            if name in ("internal_cluster_id",):
                continue  # another node's identity, not ours
            parameters.put_global(name, g.get("value"))


def _import_policies(broker, doc: dict, forced: str | None) -> None:
    for p in _section(doc, "policies"):
        what = f"policy '{p.get('name')}'"
        vhost = _vhost_of(broker, p, forced, what)
        priority = p.get("priority", 0)
        if isinstance(priority, str) and priority.lstrip("-").isdigit():
            priority = int(priority)
        try:
            policy = validate_policy(vhost.name, p.get("name"), p.get("pattern"), p.get("apply-to") or "all",
                                     priority, p.get("definition"))
        except PolicyError as e:
            raise DefinitionsError(f"{what}: {e}") from None
        policy_store.replace_policy(broker, policy)


def _object_changes(broker, doc: dict, forced: str | None):
    """The exchanges, queues and bindings of ``doc``, checked one at a time as they are taken:
    ``(what, vhost, op, args)`` in the ops and arguments of the sequencer under --worker-mode
    queues (``Spread.define``), which ``apply_change`` (warren/broker/directory.py) applies in one process."""
    for e in _section(doc, "exchanges"):
        name = _str(e, "name", "an exchange")
        what = f"exchange '{name}'"
        vhost = _vhost_of(broker, e, forced, what)
        arguments = e.get("arguments") or {}
        if not isinstance(arguments, dict):
            raise DefinitionsError(f"{what}: arguments must be an object")
        if name == "" or (name.startswith("amq.") and name in vhost.exchanges):
            continue  # the predeclared ones exist already
        yield what, vhost, "declare_exchange", (name, _str(e, "type", what, "direct"), False, _flag(e, "durable", True),
                                                _flag(e, "auto_delete"), _flag(e, "internal"), arguments)
    for q in _section(doc, "queues"):
        name = _str(q, "name", "a queue")
        what = f"queue '{name}'"
        vhost = _vhost_of(broker, q, forced, what)
        arguments = q.get("arguments") or {}
        if not isinstance(arguments, dict):
            raise DefinitionsError(f"{what}: arguments must be an object")
        yield what, vhost, "declare_queue", (name, _flag(q, "durable", True), False, _flag(q, "auto_delete"),
                                             arguments, None)
    for b in _section(doc, "bindings"):
        source = _str(b, "source", "a binding")
        destination = _str(b, "destination", "a binding")
        what = f"binding of '{destination}' to '{source}'"
        vhost = _vhost_of(broker, b, forced, what)
        routing_key = _str(b, "routing_key", what, "")
        arguments = b.get("arguments") or {}
        if not isinstance(arguments, dict):
            raise DefinitionsError(f"{what}: arguments must be an object")
        kind = b.get("destination_type", "queue")
        if kind == "queue":
            if destination not in vhost.queues and destination not in vhost.remote_queues:
                raise DefinitionsError(f"{what} in vhost '{vhost.name}': no queue '{destination}'")
            yield what, vhost, "bind_queue", (destination, source, routing_key, arguments, ADMIN)
        elif kind == "exchange":
            yield what, vhost, "bind_exchange", (destination, source, routing_key, arguments)
        else:
            raise DefinitionsError(f"{what}: destination_type must be queue or exchange")


def _import_settings(broker, doc, parameters, vhost: str | None) -> None:
    """What comes before the objects: access (a whole import), parameters and policies."""
    if not isinstance(doc, dict):
        raise DefinitionsError("definitions must be a JSON object")
    if vhost is not None:
        if vhost not in broker.vhosts:
            raise DefinitionsError(f"vhost '{vhost}' does not exist")
    else:
        _import_access(broker.access, doc)
    _import_parameters(broker, parameters, doc, vhost)
    _import_policies(broker, doc, vhost)


def import_definitions(broker, doc, parameters=None, vhost: str | None = None, apply=apply_change) -> None:
    """Apply a definitions document (see the module docstring); DefinitionsError on the first
    object that cannot be imported. ``apply(vhost, op, args)`` makes each object: in this
    process (a worker of --worker-mode queues at its start: ``Spread.define_at_start``)."""
    _import_settings(broker, doc, parameters, vhost)
    for what, v, op, args in _object_changes(broker, doc, vhost):
        try:
            apply(v, op, args)
        except AMQPError as err:
            raise DefinitionsError(f"{what} in vhost '{v.name}': {err.text}") from None


async def import_definitions_live(broker, doc, parameters=None, vhost: str | None = None, off_loop=None) -> None:
    """``import_definitions`` into a running broker (the HTTP API): every process sharing its
    vhosts reads the shared files (users, vhosts, policies) again, then every exchange, queue
    and binding is a change through the broker's directory, as a client's declare would be, in
    the document's order (--worker-mode queues: ordered by worker 0, broker/directory.py).
    ``off_loop``: the HTTP API's writer thread (api/common.py), which writes the users,
    parameters and policies, so that their fsyncs never hold the loop."""
    if off_loop is None:
        _import_settings(broker, doc, parameters, vhost)
    else:
        await off_loop(_import_settings, broker, doc, parameters, vhost)
    directory = broker.directory
    await directory.files_changed()
    for what, v, op, args in _object_changes(broker, doc, vhost):
        try:
            await directory.define(v.name, op, args)
        except AMQPError as err:
            raise DefinitionsError(f"{what} in vhost '{v.name}': {err.text}") from None


def read_definitions_file(path) -> dict:
    """The JSON document of a definitions file, or a DefinitionsError naming it."""
    try:
        with open(path, "rb") as f:
            doc = json.loads(f.read())
    except OSError as e:
        raise DefinitionsError(f"{path}: {e.strerror or e}") from None
    except ValueError as e:
        raise DefinitionsError(f"{path}: not JSON: {e}") from None
    if not isinstance(doc, dict):
        raise DefinitionsError(f"{path}: definitions must be a JSON object")
    return doc


def load_definitions_file(broker, path, parameters=None, apply=apply_change) -> None:
    """``--definitions FILE`` at start-up: the whole file or a DefinitionsError naming it."""
    doc = read_definitions_file(path)
    try:
        import_definitions(broker, doc, parameters, apply=apply)
    except DefinitionsError as e:
        raise DefinitionsError(f"{path}: {e}") from None
    log.info("definitions loaded from %s", path)


# --- --workers N: the shared part in the supervisor, each vhost's objects in its worker -----------
#
# With --workers the supervisor imports what every process shares (users, vhosts, permissions,
# topic permissions, user and vhost limits into access.json; policies into the one
# policies.json) before it starts the workers, and gives each worker a document with the
# runtime parameters, exchanges, queues and bindings of the vhosts it owns (global parameters
# to every worker: each is a node of its own), which the worker imports as a single process
# imports a whole file. The result is the same objects as a single-process import.


def import_shared_definitions(access, policy_path, doc: dict) -> None:
    """The shared part of ``doc`` (see above) into the access store and the policies file;
    DefinitionsError on the first object that cannot be imported, as ``import_definitions``."""
    _import_access(access, doc)
    known = {v.name for v in access.vhosts()}

    def vhost_of(item: dict, what: str) -> str:
        name = item.get("vhost", "/")
        if name not in known:
            raise DefinitionsError(f"{what}: vhost '{name}' does not exist")
        return name

    for p in _section(doc, "parameters"):
        if p.get("component") == VHOST_LIMITS:
            what = f"parameter {VHOST_LIMITS}/{p.get('name')}"
            if not isinstance(p.get("value"), dict):
                raise DefinitionsError(f"{what}: vhost limits need a JSON object")
            _access_call(what, access.set_vhost_limits, vhost_of(p, what), p["value"])
    policies = []
    for p in _section(doc, "policies"):
        what = f"policy '{p.get('name')}'"
        priority = p.get("priority", 0)
        if isinstance(priority, str) and priority.lstrip("-").isdigit():
            priority = int(priority)
        try:
            policies.append(validate_policy(vhost_of(p, what), p.get("name"), p.get("pattern"),
                                            p.get("apply-to") or "all", priority, p.get("definition")))
        except PolicyError as e:
            raise DefinitionsError(f"{what}: {e}") from None
    try:
        policy_store.replace_policies_in_file(policy_path, policies)
    except PolicyError as e:
        raise DefinitionsError(str(e)) from None


def vhosts_part(doc: dict, vhosts) -> dict:
    """What a worker owning ``vhosts`` imports of ``doc``: their runtime parameters (not the
    vhost limits: shared), exchanges, queues and bindings, and the global parameters."""
    names = set(vhosts)
    mine = lambda key: [i for i in _section(doc, key) if i.get("vhost", "/") in names]  # noqa: E731
    return {
        "parameters": [p for p in mine("parameters") if p.get("component") != VHOST_LIMITS],
        "global_parameters": _section(doc, "global_parameters"),
        "exchanges": mine("exchanges"),
        "queues": mine("queues"),
        "bindings": mine("bindings"),
    }
