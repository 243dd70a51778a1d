"""``/api/connections``, ``/api/channels``, ``/api/consumers`` (and their per-vhost and
per-connection forms): the AMQP side of the node, and closing a connection.

A connection is named as RabbitMQ names it, ``<peer host>:<peer port> -> <host>:<port>``, and
a channel ``<connection name> (<number>)``. ``DELETE /api/connections/{name}`` sends the
client ``connection.close`` 320 ``CONNECTION_FORCED - <reason>``, the reason from the
``X-Reason`` header ("Closed via management plugin" without it), and closes the socket if
the client does not answer within a second.
"""

from __future__ import annotations

from aiohttp import web

from warren.management.api import stats as st
from warren.management.api.auth import (
    ADMINISTRATOR, principal, readable_vhost, visible_vhosts,
)
from warren.management.api.common import (
    BROKER, STATS, ApiError, bad_request, jsonable, no_content, node_name, not_authorised, not_found, reply_list,
    reply_object, reply_objects,
)
from warren.management.api.merged import RemoteRow, merged_fields

__all__ = ["add_routes", "channel_name", "channel_details", "open_connections", "consumer_json"]

DEFAULT_CLOSE_REASON = "Closed via management plugin"


def channel_name(ch) -> str:
    return f"{ch.session.io.api_name()} ({ch.number})"


def open_connections(request) -> list:
    """The AMQP connections that have opened a vhost (the handshake is over). ``request`` may be
    the application itself (what another worker asks: warren/management/api/merged.py)."""
    app = request if isinstance(request, web.Application) else request.app
    out = []
    for conn in app[STATS].connections():
        session = conn.session  # None until a protocol header arrived
        if session is not None and session.vhost is not None and not session.closed:
            out.append(conn)
    return out


def _visible_connections(request: web.Request, vhost: str | None = None) -> list:
    who = principal(request)
    names = set(visible_vhosts(request))
    out = []
    for conn in open_connections(request):
        vname = conn.session.vhost.name
        if vhost is not None and vname != vhost:
            continue
        # a management user sees its own connections only (RabbitMQ); monitoring sees all
        if who.sees_all or (vname in names and conn.session.username == who.name):
            out.append(conn)
    return out


def _protocol(conn) -> str:
    """AMQP 0-9-1, 0-9, 0-8, Qpid's 0-91 or 0-10: each protocol core's ``dialect.title``."""
    return conn.conn.dialect.title


def _ssl_protocol(conn) -> str | None:
    """RabbitMQ's spelling of the TLS version ("tlsv1.3"), None on a plain connection."""
    return conn.tls.protocol.lower() if conn.tls is not None else None


def connection_json(conn, sampler, ranges=st.NO_RANGES) -> dict:
    session = conn.session
    amqp = conn.conn
    (ph, pp), (lh, lp) = conn.peer_address(), conn.local_address()
    body = {
        "auth_mechanism": session.mechanism,
        "channel_max": amqp.channel_max,
        "channels": len(session.channels),
        "client_properties": jsonable(session.client_properties),
        "connected_at": int(conn.connected_at * 1000),
        "frame_max": amqp.frame_max,
        "host": lh,
        "name": conn.api_name(),
        "node": node_name(),
        "peer_cert_issuer": None,
        "peer_cert_subject": None,
        "peer_cert_validity": None,
        "peer_host": ph,
        "peer_port": pp,
        "port": lp,
        "protocol": _protocol(conn),
        "recv_cnt": 0,
        "send_cnt": 0,
        "send_pend": 0,
        "ssl": conn.tls is not None,
        "ssl_cipher": conn.tls.cipher if conn.tls is not None else None,  # OpenSSL's name (docs/compatibility.md)
        "ssl_hash": None,
        "ssl_key_exchange": None,
        "ssl_protocol": _ssl_protocol(conn),
        "state": connection_state(conn),
        "timeout": amqp.heartbeat,
        "type": "network",
        "user": session.username,
        "user_who_performed_action": session.username,
        "vhost": session.vhost.name,
    }
    worker = conn.server.broker.directory.index
    if worker is not None:  # --worker-mode queues: which worker process holds it (Warren's own field)
        body["worker"] = worker
    sampler.details_of(conn, st.CONNECTION, sampler.connection_vector(conn), st.DATA, ranges, out=body)
    return body


def connection_state(conn) -> str:
    """RabbitMQ's connection states: "blocked" by a resource alarm, "flow" while a congested
    queue holds its publishes (RabbitMQ's credit flow; Warren's flow marks), else "running"."""
    return "blocked" if conn.blocked else "flow" if conn.throttled else "running"


def connection_fields(sampler) -> dict:
    """Cheap getters of a connection's list fields, for sorting and ``columns``."""
    fields = {
        "name": lambda c: c.api_name(),
        "vhost": lambda c: c.session.vhost.name,
        "user": lambda c: c.session.username,
        "channels": lambda c: len(c.session.channels),
        "peer_host": lambda c: c.peer_address()[0],
        "peer_port": lambda c: c.peer_address()[1],
        "state": connection_state,
        "connected_at": lambda c: int(c.connected_at * 1000),
        "protocol": _protocol,
        "ssl": lambda c: c.tls is not None,
        "ssl_protocol": _ssl_protocol,
        "node": lambda c: node_name(),
        "recv_oct": lambda c: c.recv_oct,
        "send_oct": lambda c: c.send_oct,
    }
    for key in st.DATA:
        fields[key + "_details.rate"] = lambda c, k=key: round(sampler.rate(c, st.CONNECTION, k), 1)
    return fields


def channel_details(ch) -> dict:
    conn = ch.session.io
    ph, pp = conn.peer_address()
    return {"connection_name": conn.api_name(), "name": channel_name(ch), "node": node_name(),
            "number": ch.number, "peer_host": ph, "peer_port": pp, "user": ch.session.username}


def channel_json(ch, sampler, ranges=st.NO_RANGES) -> dict:
    conn = ch.session.io
    ph, pp = conn.peer_address()
    body = {
        "acks_uncommitted": sum(len(e) for e, _ in ch.tx_settles),
        "confirm": ch.confirm_mode,
        "connection_details": {"name": conn.api_name(), "peer_host": ph, "peer_port": pp},
        "consumer_count": ch.consumer_count(),
        "global_prefetch_count": ch.prefetch_count,
        "messages_unacknowledged": len(ch.unacked),
        "messages_uncommitted": len(ch.tx_publishes),
        "messages_unconfirmed": max(0, ch.publish_seq - ch.confirmed_upto),
        "name": channel_name(ch),
        "node": node_name(),
        "number": ch.number,
        "pending_raft_commands": 0,
        "prefetch_count": ch.consumer_prefetch_count,
        "state": "running" if ch.flow_active else "flow",
        "transactional": ch.tx_mode,
        "user": ch.session.username,
        "user_who_performed_action": ch.session.username,
        "vhost": ch.vhost.name,
        "message_stats": sampler.message_stats(ch, st.CHANNEL, sampler.channel_vector(ch), st.CHANNEL_STATS, ranges),
    }
    return body


def channel_fields(sampler) -> dict:
    """Cheap getters of a channel's list fields, for sorting and ``columns``."""
    fields = {
        "name": channel_name,
        "number": lambda ch: ch.number,
        "vhost": lambda ch: ch.vhost.name,
        "user": lambda ch: ch.session.username,
        "node": lambda ch: node_name(),
        "connection_details.name": lambda ch: ch.session.io.api_name(),
        "consumer_count": lambda ch: ch.consumer_count(),
        "messages_unacknowledged": lambda ch: len(ch.unacked),
        "messages_unconfirmed": lambda ch: max(0, ch.publish_seq - ch.confirmed_upto),
        "prefetch_count": lambda ch: ch.consumer_prefetch_count,
        "global_prefetch_count": lambda ch: ch.prefetch_count,
        "confirm": lambda ch: ch.confirm_mode,
        "transactional": lambda ch: ch.tx_mode,
        "state": lambda ch: "running" if ch.flow_active else "flow",
    }
    for key in st.CHANNEL_STATS:
        fields["message_stats." + key] = lambda ch, k=key: st.CHANNEL.value(sampler.channel_vector(ch), k)
        fields[f"message_stats.{key}_details.rate"] = lambda ch, k=key: round(sampler.rate(ch, st.CHANNEL, k), 1)
    return fields


def consumer_json(c, details: bool = True) -> dict:
    body = {
        "arguments": jsonable(c.arguments or {}),
        "ack_required": not c.no_ack,
        "active": True,
        "activity_status": "up",
        "consumer_tag": c.tag,
        "exclusive": c.exclusive,
        "prefetch_count": c.prefetch_count,
        "queue": {"name": c.queue.name, "vhost": c.queue.vhost.name},
    }
    if details:
        body["channel_details"] = channel_details(c.channel)
    return body


def _find_connection(request: web.Request):
    name = request.match_info["name"]
    for conn in open_connections(request):
        if conn.api_name() == name:
            return conn
    raise not_found()


def _check_own(request: web.Request, conn) -> None:
    who = principal(request)
    if not who.sees_all and conn.session.username != who.name:
        raise not_authorised("User not authorised to access this connection")


# --- handlers --------------------------------------------------------------------------------------


async def _reply_connections(request: web.Request, conns: list, vhost: str | None = None) -> web.Response:
    sampler = request.app[STATS]
    ranges = st.parse_ranges(request.query, bad_request, listing=True)
    fields = connection_fields(sampler)
    rows = await _remote_rows(request, "connections", vhost)
    if not rows:
        conns = sorted(conns, key=lambda c: c.api_name())
        return await reply_objects(request, conns, lambda c: connection_json(c, sampler, ranges),
                                   name=lambda c: c.api_name(), fields=fields)
    objects = sorted(conns + rows, key=lambda o: o.name if type(o) is RemoteRow else o.api_name())
    return await reply_objects(request, objects, lambda o: o.json if type(o) is RemoteRow else connection_json(
        o, sampler, ranges), name=lambda o: o.name if type(o) is RemoteRow else o.api_name(),
        fields=merged_fields(fields))


async def _remote_rows(request: web.Request, kind: str, vhost: str | None = None) -> list:
    """--worker-mode queues: the other workers' connections or channels this principal sees,
    as ``RemoteRow``s; none in one process (broker/directory.py)."""
    who = principal(request)
    names = set(visible_vhosts(request))
    return [RemoteRow(r) for r in await request.app[BROKER].directory.api_rows(kind)
            if (vhost is None or r.get("vhost") == vhost)
            and (who.sees_all or (r.get("vhost") in names and r.get("user") == who.name))]


def local_connection_rows(app) -> list[dict]:
    """Our connections' JSON, for another worker's merged list."""
    sampler = app[STATS]
    return [connection_json(c, sampler) for c in open_connections(app)]


def local_channel_rows(app) -> list[dict]:
    sampler = app[STATS]
    return [channel_json(ch, sampler) for ch in _channels(open_connections(app))]


def close_local(app, name: str, reason: str) -> bool:
    """Close our connection so named (another worker's API was asked); False if we have none."""
    for conn in open_connections(app):
        if conn.api_name() == name:
            conn.session.shutdown(reason)
            conn.close_soon()
            return True
    return False


async def list_connections(request: web.Request) -> web.Response:
    return await _reply_connections(request, _visible_connections(request))


async def vhost_connections(request: web.Request) -> web.Response:
    vhost = readable_vhost(request)
    return await _reply_connections(request, _visible_connections(request, vhost.name), vhost.name)


async def _remote_connection(request: web.Request) -> dict:
    """--worker-mode queues: the connection named in the path, held by another worker."""
    name = request.match_info["name"]
    for row in await _remote_rows(request, "connections"):
        if row.name == name:
            return row.json
    raise not_found()


async def get_connection(request: web.Request) -> web.Response:
    try:
        conn = _find_connection(request)
    except ApiError:  # --worker-mode queues: another worker's, or 404
        return reply_object(request, await _remote_connection(request))
    _check_own(request, conn)
    return reply_object(request, connection_json(conn, request.app[STATS], st.parse_ranges(request.query, bad_request)))


async def close_connection(request: web.Request) -> web.Response:
    who = principal(request)
    reason = request.headers.get("X-Reason") or DEFAULT_CLOSE_REASON
    try:
        conn = _find_connection(request)
    except ApiError:  # --worker-mode queues: another worker's, or 404
        row = await _remote_connection(request)
        if not who.has_level(ADMINISTRATOR) and row.get("user") != who.name:
            raise not_authorised("User not authorised to access this connection")
        await request.app[BROKER].directory.api_act("close_connection", row["name"], reason)
        return no_content()
    if not who.has_level(ADMINISTRATOR) and conn.session.username != who.name:
        raise not_authorised("User not authorised to access this connection")
    conn.session.shutdown(reason)
    conn.close_soon()  # close-ok closes it at once; a silent client is cut after the grace time
    return no_content()


def _channels(conns) -> list:
    return [ch for conn in conns for ch in list(conn.session.channels.values())]


async def _reply_channels(request: web.Request, conns: list, vhost: str | None = None,
                          remote: bool = True) -> web.Response:
    sampler = request.app[STATS]
    ranges = st.parse_ranges(request.query, bad_request, listing=True)
    channels = sorted(_channels(conns), key=lambda ch: (ch.session.io.api_name(), ch.number))
    rows = await _remote_rows(request, "channels", vhost) if remote else None
    if not rows:
        return await reply_objects(request, channels, lambda ch: channel_json(ch, sampler, ranges),
                                   name=channel_name, fields=channel_fields(sampler))
    objects = sorted(channels + rows, key=lambda o: (
        (o.json["connection_details"]["name"], o.json["number"]) if type(o) is RemoteRow
        else (o.session.io.api_name(), o.number)))
    return await reply_objects(request, objects, lambda o: o.json if type(o) is RemoteRow else channel_json(
        o, sampler, ranges), name=lambda o: o.name if type(o) is RemoteRow else channel_name(o),
        fields=merged_fields(channel_fields(sampler)))


async def list_channels(request: web.Request) -> web.Response:
    return await _reply_channels(request, _visible_connections(request))


async def vhost_channels(request: web.Request) -> web.Response:
    vhost = readable_vhost(request)
    return await _reply_channels(request, _visible_connections(request, vhost.name), vhost.name)


async def connection_channels(request: web.Request) -> web.Response:
    try:
        conn = _find_connection(request)
    except ApiError:  # --worker-mode queues: another worker's, or 404
        name = (await _remote_connection(request))["name"]
        rows = [r for r in await _remote_rows(request, "channels") if r.json["connection_details"]["name"] == name]
        return reply_list(request, [r.json for r in sorted(rows, key=lambda r: r.json["number"])])
    _check_own(request, conn)
    return await _reply_channels(request, [conn], remote=False)


async def get_channel(request: web.Request) -> web.Response:
    name = request.match_info["channel"]
    for conn in _visible_connections(request):
        for ch in list(conn.session.channels.values()):
            if channel_name(ch) == name:
                body = channel_json(ch, request.app[STATS], st.parse_ranges(request.query, bad_request))
                body["consumer_details"] = [consumer_json(c) for c in ch.consumers.values()]
                return reply_object(request, body)
    for row in await _remote_rows(request, "channels") or ():  # --worker-mode queues: another worker's
        if row.name == name:
            return reply_object(request, row.json)
    raise not_found()


async def consumer_rows(app, vhost_names) -> list[dict]:
    """The consumers of our connections' channels in ``vhost_names``. Under --worker-mode queues
    a channel's consumer of a queue another worker owns is a record here (``remote_consumers``)
    and a consumer on that worker (proxy.py): its figures come from there, its channel's from here."""
    names = set(vhost_names)
    out, remote = [], {}  # remote: owner -> [(channel, consumer tag)]
    for conn in open_connections(app):
        if conn.session.vhost.name not in names:
            continue
        for ch in list(conn.session.channels.values()):
            out.extend(consumer_json(c) for c in list(ch.consumers.values()))
            for rc in (ch.remote_consumers or {}).values():
                remote.setdefault(rc.owner, []).append((ch, rc.tag))
    directory = app[BROKER].directory
    for owner, items in remote.items():
        keys = [(id(ch.session), ch.number, tag) for ch, tag in items]
        facts = await directory.api_rows("proxy_consumers", directory.index, keys, only=owner)
        out.extend({**f, "channel_details": channel_details(ch)} for (ch, _), f in zip(items, facts) if f)
    return out


def proxy_consumer_rows(app, worker: int, keys: list) -> list[dict | None]:
    """What worker ``worker``'s ``consumer_rows`` asks of its consumers of our queues, by
    (session id, channel number, tag) there: each one's JSON without its channel's, or None."""
    spread = app[BROKER].directory  # only asked under --worker-mode queues (warren/spread)
    out = []
    for session_id, number, tag in keys:
        ch = spread.proxy_channel(worker, session_id, number)
        c = ch.consumers.get(tag) if ch is not None else None
        out.append(None if c is None else consumer_json(c, details=False))
    return out


async def _consumers(request: web.Request, vhost: str | None = None) -> list[dict]:
    names = [vhost] if vhost is not None else visible_vhosts(request)
    out = await consumer_rows(request.app, names)
    out += await request.app[BROKER].directory.api_rows("consumers", names)  # --worker-mode queues: the others' too
    return sorted(out, key=lambda i: (i["queue"]["vhost"], i["queue"]["name"], i["consumer_tag"]))


async def list_consumers(request: web.Request) -> web.Response:
    return reply_list(request, await _consumers(request))


async def vhost_consumers(request: web.Request) -> web.Response:
    vhost = readable_vhost(request)
    return reply_list(request, await _consumers(request, vhost.name))


def add_routes(app: web.Application) -> None:
    r = app.router
    r.add_get("/api/connections", list_connections)
    r.add_get("/api/connections/{name}", get_connection)
    r.add_delete("/api/connections/{name}", close_connection)
    r.add_get("/api/connections/{name}/channels", connection_channels)
    r.add_get("/api/vhosts/{vhost}/connections", vhost_connections)
    r.add_get("/api/vhosts/{vhost}/channels", vhost_channels)
    r.add_get("/api/channels", list_channels)
    r.add_get("/api/channels/{channel}", get_channel)
    r.add_get("/api/consumers", list_consumers)
    r.add_get("/api/consumers/{vhost}", vhost_consumers)
