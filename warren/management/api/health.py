"""Health checks, RabbitMQ's: ``/api/health/checks/...``, ``/api/aliveness-test/{vhost}``,
``/api/healthchecks/node``. A passing check answers 200 ``{"status": "ok"}``, a failing one
503 ``{"status": "failed", "reason": ...}`` (what load balancers and nagios checks read).

The aliveness test declares the queue ``aliveness-test`` in the vhost (left there, as
RabbitMQ does), publishes a message to it through the default exchange and gets it back.
"""

from __future__ import annotations

from aiohttp import web

from warren.broker.message import Message
from warren.errors import AMQPError
from warren.management.api.auth import readable_vhost
from warren.management.api.common import BROKER, INFO, SERVER, bad_request, node_name
from warren.management.api.messages import properties_from_json

__all__ = ["add_routes"]

ALIVENESS_QUEUE = "aliveness-test"
ALIVENESS_BODY = b"test_message"


def _ok(**extra) -> web.Response:
    return web.json_response({"status": "ok", **extra})


def _failed(reason: str, **extra) -> web.Response:
    return web.json_response({"status": "failed", "reason": reason, **extra}, status=503)


def _alarms(request: web.Request, cluster_wide: bool = False) -> list[dict]:
    """This node's alarms; ``cluster_wide``, the other nodes' of its cluster too."""
    server = request.app[SERVER]
    if server is None:
        return []
    found = [{"node": node_name(), "resource": name} for name in sorted(server.alarms.resources())]
    if cluster_wide:
        found += [{"node": node, "resource": resource} for node, resource in server.alarms.elsewhere()]
    return found


async def alarms(request: web.Request) -> web.Response:
    found = _alarms(request, cluster_wide=True)
    if found:
        return _failed("resource alarm(s) in effect in the cluster", alarms=found)
    return _ok()


async def local_alarms(request: web.Request) -> web.Response:
    found = _alarms(request)
    if found:
        return _failed("resource alarm(s) in effect on the node", alarms=found)
    return _ok()


def _listening(request: web.Request) -> dict[str, int]:
    info = request.app[INFO]() or {}
    out = {}
    if info.get("amqp_port") is not None:
        out["amqp"] = info["amqp_port"]
    if info.get("amqps_port") is not None:
        out["amqp/ssl"] = info["amqps_port"]
    if info.get("http_port") is not None:
        out["https" if info.get("http_tls") else "http"] = info["http_port"]
    return out


async def port_listener(request: web.Request) -> web.Response:
    raw = request.match_info["port"]
    try:
        port = int(raw)
    except ValueError:
        raise bad_request(f"invalid port {raw!r}") from None
    ports = sorted(_listening(request).values())
    if port in ports:
        return _ok(port=port)
    return _failed("No active listener", missing=port, ports=ports)


async def protocol_listener(request: web.Request) -> web.Response:
    protocol = request.match_info["protocol"].lower()
    listening = _listening(request)
    aliases = {"amqp091": "amqp", "amqp0-9-1": "amqp", "amqp": "amqp", "http": "http",
               "amqps": "amqp/ssl", "amqp/ssl": "amqp/ssl", "https": "https"}  # TLS (warren/server/tls.py)
    if aliases.get(protocol) in listening:
        return _ok(protocol=protocol)
    return _failed("No active listener", missing=protocol, protocols=sorted(listening))


async def virtual_hosts(request: web.Request) -> web.Response:
    return _ok()  # every vhost of this node runs in the broker's process: none can be down alone


async def store_damage(request: web.Request) -> web.Response:
    """Warren's own: fails while a queue or stream of this node lost records to damaged files when
    it was opened (warren/store/damage.py), naming each with the seqs or offsets lost; passes
    again after a start that found no damage (the damaged files stay in the quarantine folder)."""
    server = request.app[SERVER]
    durability = getattr(server, "durability", None)
    found = [d.to_json() for d in (durability.damage if durability is not None else ())]
    if found:
        lost = sum(d["records"] for d in found)
        return _failed(f"{lost} messages or stream entries of {len(found)} queue(s) or stream(s) were lost to "
                       f"damaged files at start-up; the files are kept in the data folder's quarantine folder",
                       damaged=found)
    return _ok()


async def always_ok(request: web.Request) -> web.Response:
    return _ok()


async def aliveness(request: web.Request) -> web.Response:
    vhost = readable_vhost(request, monitor_ok=False)
    try:
        q = vhost.declare_queue(None, ALIVENESS_QUEUE, False, False, False, False, {})
        msg = Message("", ALIVENESS_QUEUE, properties_from_json({}), ALIVENESS_BODY)
        q.publish(msg)
        entry = q.take(True)
    except AMQPError as e:
        return _failed(e.text)
    if entry is None or bytes(entry[1].body) != ALIVENESS_BODY:
        return _failed("aliveness test failed: the message did not come back")
    return _ok()


async def node_health(request: web.Request) -> web.Response:
    if "node" in request.match_info and request.match_info["node"] != node_name():
        return _failed(f"node {request.match_info['node']} is not this node")
    if request.app[BROKER] is None:
        return _failed("no broker")
    return _ok()


def add_routes(app: web.Application) -> None:
    r = app.router
    r.add_get("/api/health/checks/alarms", alarms)
    r.add_get("/api/health/checks/local-alarms", local_alarms)
    r.add_get("/api/health/checks/port-listener/{port}", port_listener)
    r.add_get("/api/health/checks/protocol-listener/{protocol}", protocol_listener)
    r.add_get("/api/health/checks/virtual-hosts", virtual_hosts)
    r.add_get("/api/health/checks/store-damage", store_damage)
    r.add_get("/api/health/checks/node-is-mirror-sync-critical", always_ok)
    r.add_get("/api/health/checks/node-is-quorum-critical", always_ok)
    r.add_get("/api/health/checks/certificate-expiration/{within}/{unit}", always_ok)
    r.add_get("/api/aliveness-test/{vhost}", aliveness)
    r.add_get("/api/healthchecks/node", node_health)
    r.add_get("/api/healthchecks/node/{node}", node_health)
