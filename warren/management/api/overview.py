"""``/api/overview``, ``/api/nodes[/{name}]``, ``/api/whoami``, ``/api/cluster-name``,
``/api/extensions``: the node as RabbitMQ's management plugin describes it.

A single Warren is one node, named RabbitMQ's way (``rabbit@<short host name>``,
common.node_name). A node of a cluster (docs/clustering.md) is named by its ``--node-name`` and
lists every node of the cluster from ``server.cluster``, the node's view of etcd (read, never
imported): ``known``, every node that joined and was not forgotten; ``members``, those whose
lease lives, each record with its listeners and ``status``, the figures that node's own
``/api/nodes`` row shows, written by it every 5 s. A node that joined but does not run is a row
``running: false``, as RabbitMQ lists a stopped disc node.
The overview says ``product_name`` Warren with its own ``product_version``, and
``rabbitmq_version``/``management_version`` 3.10.8: the API level it implements (tools gate
features on it). Warren's own fields (``product``, ``version``, ``vhosts``, ``queues``,
``streams``, the server's ports and collector figures) come along.
"""

from __future__ import annotations

import logging
import os
import platform
import resource
import threading
import time

from aiohttp import web

from warren import __version__
from warren.access.login import mechanism_rows
from warren.config import AUTH_MECHANISMS
from warren.management.api import stats as st
from warren.management.api.auth import ADMINISTRATOR, MONITORING, principal, require, visible_vhosts
from warren.management.api.common import (
    BROKER, INFO, SERVER, STATS, ApiError, bad_request, no_content, not_found, node_name, reply_list, reply_object,
)
from warren.management.api.merged import add_figures

__all__ = ["add_routes", "API_VERSION", "EXCHANGE_TYPES"]

API_VERSION = "3.10.8"  # the RabbitMQ management API this one follows
EXCHANGE_TYPES = [
    {"name": "direct", "description": "AMQP direct exchange, as per the AMQP specification", "enabled": True},
    {"name": "fanout", "description": "AMQP fanout exchange, as per the AMQP specification", "enabled": True},
    {"name": "headers", "description": "AMQP headers exchange, as per the AMQP specification", "enabled": True},
    {"name": "topic", "description": "AMQP topic exchange, as per the AMQP specification", "enabled": True},
    {"name": "x-consistent-hash", "description": "Consistent Hashing Exchange", "enabled": True},
    {"name": "x-delayed-message", "description": "Delayed Message Exchange", "enabled": True},
    {"name": "x-local-random", "description": "One bound queue of this node, picked at random", "enabled": True},
]
log = logging.getLogger("warren.management")
SAMPLE_RETENTION = {"global": [600, 3600, 28800, 86400], "basic": [600, 3600], "detailed": [600]}


def _ports(app: web.Application) -> dict:
    return app[INFO]() or {}


def _cluster(app: web.Application):
    """This node's membership (warren/cluster/node.py ``ClusterNode``), None on a single node."""
    server = app[SERVER]
    return getattr(server, "cluster", None) if server is not None else None


def listeners(app: web.Application) -> list[dict]:
    """This node's listeners and those of every other running node of its cluster, by protocol
    (as RabbitMQ sorts them), each protocol's this node's first."""
    out = _own_listeners(app)
    cluster = _cluster(app)
    if cluster is not None:
        for name, record in sorted(cluster.members.items()):
            if name != node_name() and cluster.running(name):
                out += _member_listeners(name, record)
        out.sort(key=lambda listener: listener["protocol"])
    return out


def _member_listeners(node: str, record: dict) -> list[dict]:
    """Another node's listeners as its member record lists them (warren/cluster/node.py)."""
    host = record.get("amqp_host") or "127.0.0.1"
    out = []
    for key, protocol in (("amqp_port", "amqp"), ("amqps_port", "amqp/ssl"), ("http_port", "http"),
                          ("prometheus_port", "http/prometheus"), ("cluster_port", "clustering")):
        if record.get(key) is not None:
            opts = {"port": record[key]} if protocol.startswith("http") else {"backlog": 1024, "nodelay": True}
            out.append({"node": node, "protocol": protocol, "ip_address": host, "port": record[key],
                        "socket_opts": opts})
    return out


def _own_listeners(app: web.Application) -> list[dict]:
    server = app[SERVER]
    info = _ports(app)
    node = node_name()
    out = []
    amqp_port = info.get("amqp_port")
    http_port = info.get("http_port")
    host = server.config.host if server is not None else "127.0.0.1"
    http_host = (server.config.http_host or host) if server is not None else "127.0.0.1"
    if amqp_port is not None:
        out.append({"node": node, "protocol": "amqp", "ip_address": host, "port": amqp_port,
                    "socket_opts": {"backlog": 1024, "nodelay": True}})
    if info.get("amqps_port") is not None:  # AMQP over TLS (warren/server/tls.py), as RabbitMQ names it
        out.append({"node": node, "protocol": "amqp/ssl", "ip_address": host, "port": info["amqps_port"],
                    "socket_opts": {"backlog": 1024, "nodelay": True}})
    if http_port is not None:
        out.append({"node": node, "protocol": "https" if info.get("http_tls") else "http",
                    "ip_address": http_host, "port": http_port,
                    "socket_opts": {"port": http_port}})
    links = getattr(server, "node_links", None) if server is not None else None
    if links is not None and links.port is not None:  # the inter-node links (warren/cluster/links.py)
        out.append({"node": node, "protocol": "clustering", "ip_address": host, "port": links.port,
                    "socket_opts": {}})
    return out


def totals(app, names: list, sees_all: bool, ranges=st.NO_RANGES) -> tuple[dict, dict, dict, int]:
    """(message_stats, queue_totals, object_totals, streams) of this process over the vhosts
    ``names``: the overview's figures, which another worker's overview adds to its own under
    --worker-mode queues (warren/spread)."""
    broker, sampler = app[BROKER], app[STATS]
    vhosts = [broker.vhosts[n] for n in names if n in broker.vhosts]
    connections = [c for c in sampler.connections() if _conn_vhost(c) in names]
    channels = sum(len(c.session.channels) for c in connections)  # each opened a vhost: it has a session
    queues = [q for v in vhosts for q in v.queues.values()]
    unacked = st.unacked_by_queue(connections, broker.directory)
    vectors = [sampler.vhost_vector(v, unacked, connections) for v in vhosts]
    vec = sampler.overview_vector(vectors, sees_all)
    # the overview's rates and history are the node's (sampled with every vhost); a management
    # user's come from the vhosts it sees
    if sees_all:
        message_stats = sampler.message_stats(sampler, st.VHOST, vec, st.VHOST_STATS, ranges)
        queue_totals = sampler.details_of(sampler, st.VHOST, vec, st.LENGTHS, ranges)
    else:
        message_stats, queue_totals = _summed(sampler, vhosts, vectors, vec, ranges)
    object_totals = {
        "channels": channels,
        "connections": len(connections),
        "consumers": sum(len(q.consumers) for q in queues),
        "exchanges": sum(len(v.exchanges) for v in vhosts),
        "queues": len(queues),
    }
    return message_stats, queue_totals, object_totals, sum(1 for q in queues if q.is_stream)


async def overview(request: web.Request) -> web.Response:
    broker = request.app[BROKER]
    who = principal(request)
    ranges = st.parse_ranges(request.query, bad_request)
    names = visible_vhosts(request)
    message_stats, queue_totals, object_totals, streams = totals(request.app, names, who.sees_all, ranges)
    # --worker-mode queues: every worker's figures (exchanges are in each; broker/directory.py)
    for peer in await broker.directory.api_rows("totals", names, who.sees_all, ranges):
        more_stats, more_lengths, more_objects, more_streams = peer
        add_figures(message_stats, more_stats)
        add_figures(queue_totals, more_lengths)
        add_figures(object_totals, {k: v for k, v in more_objects.items() if k != "exchanges"})
        streams += more_streams
    node = node_name()
    info = _ports(request.app)
    body = {
        "management_version": API_VERSION,
        "rates_mode": "basic",
        "sample_retention_policies": SAMPLE_RETENTION,
        "exchange_types": EXCHANGE_TYPES,
        "product_version": __version__,
        "product_name": "Warren",
        "rabbitmq_version": API_VERSION,
        "cluster_name": broker.cluster_name,
        "erlang_version": f"Python {platform.python_version()}",
        "erlang_full_version": f"Python {platform.python_version()} ({platform.python_implementation()})",
        "disable_stats": False,
        "enable_queue_totals": False,
        "message_stats": message_stats,
        "queue_totals": queue_totals,
        "object_totals": object_totals,
        "statistics_db_event_queue": 0,
        "node": node,
        "listeners": listeners(request.app),
        "contexts": [{"node": node, "description": "RabbitMQ Management", "path": "/",
                      "port": str(info.get("http_port", ""))}],
        # Warren's own
        "product": "Warren",
        "version": __version__,
        "vhosts": names,
        "queues": object_totals["queues"],
        "streams": streams,
    }
    for k, v in info.items():
        body.setdefault(k, v)
    return reply_object(request, body)


def _summed(sampler, vhosts, vectors, vec, ranges) -> tuple[dict, dict]:
    """message_stats and queue_totals over ``vhosts`` (a management user's overview): the
    rates summed, the history of each vhost's summed point by point."""
    keys = st.VHOST_STATS + st.LENGTHS
    rates: dict = {}
    for v in vhosts:
        for k, r in sampler.rates(v, st.VHOST, keys).items():
            rates[k] = rates.get(k, 0.0) + r
    out: dict = {}
    for k in keys:
        d = {"rate": round(rates.get(k, 0.0), 1)}
        rng = ranges.for_key(k) if ranges else None
        if rng is not None:
            parts = [sampler.details_of(v, st.VHOST, one, (k,), ranges)[k + "_details"]
                     for v, one in zip(vhosts, vectors)]
            if parts:
                samples = [{"sample": sum(p["samples"][i]["sample"] for p in parts),
                            "timestamp": parts[0]["samples"][i]["timestamp"]} for i in range(len(parts[0]["samples"]))]
                d["samples"] = samples
                if len(samples) > 1:
                    d["avg_rate"] = sum(p["avg_rate"] for p in parts)
                    d["avg"] = sum(p["avg"] for p in parts)
        out[k] = st.VHOST.value(vec, k)
        out[k + "_details"] = d
    message_stats = {k: out[k] for key in st.VHOST_STATS for k in (key, key + "_details")}
    queue_totals = {k: out[k] for key in st.LENGTHS for k in (key, key + "_details")}
    return message_stats, queue_totals


def _conn_vhost(conn) -> str | None:
    session = conn.session  # None until a protocol header arrived
    vhost = session.vhost if session is not None else None
    return vhost.name if vhost is not None else None


def _fd_counts() -> tuple[int, int]:
    try:
        used = len(os.listdir("/proc/self/fd"))
    except OSError:
        used = 0
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return used, soft if soft != resource.RLIM_INFINITY else 1 << 20


def _rss() -> int:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return 0


def node_info(app: web.Application) -> dict:
    """This node's row of /api/nodes."""
    server = app[SERVER]
    sampler = app[STATS]
    fd_used, fd_total = _fd_counts()
    alarms = server.alarms if server is not None else None
    raised = alarms.raised if alarms is not None else set()
    mem_limit = alarms.memory_limit if alarms is not None else 0
    disk_free_limit = alarms.disk_free_limit if alarms is not None else 0
    try:
        disk_free = alarms.disk_free() if alarms is not None else 0
    except OSError:
        disk_free = 0
    node = node_name()
    info = _ports(app)
    return {
        "name": node,
        "type": "disc",
        "running": True,
        "being_drained": False,
        "os_pid": str(os.getpid()),
        "mem_used": _rss(),
        "mem_used_details": st.details(0.0),
        "mem_limit": mem_limit or os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"),  # 0 = no alarm: all RAM
        "mem_alarm": "memory" in raised,
        "mem_calculation_strategy": "rss",
        "disk_free": disk_free,
        "disk_free_details": st.details(0.0),
        "disk_free_limit": disk_free_limit,
        "disk_free_alarm": "disk" in raised,
        "fd_used": fd_used,
        "fd_used_details": st.details(0.0),
        "fd_total": fd_total,
        # the listening sockets count too (RabbitMQ counts connections only): an idle node is
        # not "0 sockets", which nagios' check_rabbitmq_server reads as "unable to get values"
        "sockets_used": len(sampler.connections()) + len(_own_listeners(app)),
        "sockets_used_details": st.details(0.0),
        "sockets_total": int(fd_total * 0.9),
        "proc_used": threading.active_count(),
        "proc_used_details": st.details(0.0),
        "proc_total": 1048576,
        "run_queue": 0,
        "processors": os.cpu_count() or 1,
        "uptime": int((time.time() - sampler.started_at) * 1000),
        "partitions": [],
        "net_ticktime": 60,
        "rates_mode": "basic",
        "exchange_types": EXCHANGE_TYPES,
        # RabbitMQ's rows: each mechanism known, enabled as auth_mechanisms says (warren/access/login.py)
        "auth_mechanisms": mechanism_rows(server.config.auth_mechanisms if server is not None else AUTH_MECHANISMS),
        "applications": [{"name": "warren", "description": "Warren", "version": __version__}],
        "contexts": [{"node": node, "description": "RabbitMQ Management", "path": "/",
                      "port": str(info.get("http_port", ""))}],
        "enabled_plugins": ["rabbitmq_management"],
        # the inter-node links to the other nodes (warren/cluster/links.py), RabbitMQ's distribution links
        "cluster_links": _cluster_links(server),
        "config_files": [],
        "log_files": [],
        "db_dir": str(server.config.data_dir) if server is not None else "",
    }


def node_rows(app: web.Application) -> list[dict]:
    """Every node of the cluster by name (this one alone on a single node): this node's row
    fresh, a running node's as it last wrote it, a stopped one's as RabbitMQ shows a stopped
    disc node."""
    own = node_info(app)
    cluster = _cluster(app)
    if cluster is None:
        return [own]
    rows = []
    for name in sorted(set(cluster.known) | set(cluster.members)):
        if name == own["name"]:
            rows.append(own)
        elif cluster.running(name):
            status = cluster.members[name].get("status")
            rows.append({**(status if isinstance(status, dict) else {}), "name": name, "type": "disc",
                         "running": True})
        else:
            rows.append(_stopped_row(name))
    return rows


def _stopped_row(name: str) -> dict:
    """A node that joined and is not running: exactly what RabbitMQ 3.10 shows of one."""
    return {"name": name, "type": "disc", "running": False, "cluster_links": []}


async def nodes(request: web.Request) -> web.Response:
    require(request, MONITORING)
    return reply_list(request, node_rows(request.app))


async def node(request: web.Request) -> web.Response:
    require(request, MONITORING)
    for row in node_rows(request.app):
        if row["name"] == request.match_info["node"]:
            return reply_object(request, row)
    raise not_found()


def _cluster_links(server) -> list:
    links = getattr(server, "node_links", None) if server is not None else None
    return links.status() if links is not None else []


async def forget_node(request: web.Request) -> web.Response:
    """``DELETE /api/nodes/{node}``: Warren's own (RabbitMQ's API has no such route; its
    ``rabbitmqctl forget_cluster_node`` goes over Erlang distribution, ``warren ctl``'s over
    this). A running node or an unknown one is refused; etcd out of reach answers 503."""
    require(request, ADMINISTRATOR)
    cluster = _cluster(request.app)
    name = request.match_info["node"]
    if cluster is None:
        raise bad_request(f"node {node_name()} is not a node of a cluster: there is no node to forget")
    if name == node_name() or cluster.running(name):
        raise ApiError(409, "conflict", f"node {name} is running: it must be stopped before it can be removed")
    if name not in cluster.known:
        raise not_found()
    try:
        await cluster.forget(name)
    except Exception as e:  # etcd out of reach or without quorum (warren/cluster/etcd.py), or raced
        log.warning("HTTP API: forgetting node %s failed for %s: %s", name, principal(request).name, e)
        raise ApiError(503, "unavailable", f"could not forget node {name}: {e}") from None
    log.info("HTTP API: node %s forgotten by %s", name, principal(request).name)
    return no_content()


async def whoami(request: web.Request) -> web.Response:
    who = principal(request)
    return web.json_response({"name": who.name, "tags": list(who.tags)})


async def cluster_name(request: web.Request) -> web.Response:
    return web.json_response({"name": request.app[BROKER].cluster_name})


async def extensions(request: web.Request) -> web.Response:
    return web.json_response([])


async def _report_to_cluster(app: web.Application) -> None:
    """In a cluster, this node's /api/nodes row is what it writes into its member record for
    the other nodes to show (warren/cluster/node.py ``status_of``)."""
    cluster = _cluster(app)
    if cluster is not None:
        cluster.status_of = lambda: node_info(app)


def add_routes(app: web.Application) -> None:
    app.on_startup.append(_report_to_cluster)
    r = app.router
    r.add_get("/api/overview", overview)
    r.add_get("/api/nodes", nodes)
    r.add_get("/api/nodes/{node}", node)
    r.add_delete("/api/nodes/{node}", forget_node)
    r.add_get("/api/whoami", whoami)
    r.add_get("/api/cluster-name", cluster_name)
    r.add_get("/api/extensions", extensions)
