"""``/api/queues[/{vhost}[/{name}[/bindings|/contents|/get]]]``: list, show, declare (PUT),
delete (DELETE, ``if-empty``/``if-unused``), purge (DELETE .../contents) and get messages.

A queue's JSON carries what monitoring tools and autoscalers read (RabbitMQ's field names):
depth (``messages``, ``messages_ready``, ``messages_unacknowledged`` with their rates),
octets, consumers, ``consumer_utilisation``, ``idle_since``, the policy in force, and
``message_stats`` (publish, deliver, get, deliver_get, ack, redeliver with rates, stats.py).
A stream also carries Warren's offsets (``first_offset``... as ``/api/streams``).
"""

from __future__ import annotations

from aiohttp import web

from warren.broker.policies import pick
from warren.errors import AMQPError, PreconditionFailed
from warren.broker.directory import ADMIN
from warren.management.api import stats as st
from warren.management.api.auth import check_permission, check_vhost_access, readable_vhost, visible_vhosts
from warren.management.api.bindings import binding_json, queue_bindings
from warren.management.api.common import (
    BROKER, STATS, amqp_error, as_bool, bad_request, created, iso_time, jsonable, monotonic_to_wall,
    no_content, node_name, not_found, read_json, reply_list, reply_object, reply_objects,
)
from warren.management.api.connections import consumer_json
from warren.management.api.merged import RemoteRow, merged_fields
from warren.management.api.messages import check_get, get_messages

__all__ = ["add_routes", "queue_json", "queue_type", "stream_figures"]

MESSAGE_OVERHEAD = 200  # octets a queued message costs beyond its body (bench/memory.py's order)


def queue_type(q) -> str:
    """``classic``, ``quorum`` or ``stream``: what the queue's class is (queue.declare chose it)."""
    return q.queue_type


# fields of a classic queue's JSON that a stream's leaves out (RabbitMQ 3.10's stream queues have none of them)
CLASSIC_ONLY = ("message_bytes", "message_bytes_paged_out", "message_bytes_persistent", "message_bytes_ram",
                "message_bytes_ready", "message_bytes_unacknowledged", "messages_paged_out", "messages_persistent",
                "messages_ram", "messages_ready_ram", "messages_unacknowledged_ram")


def stream_figures(store) -> dict:
    return {
        "first_offset": store.first_offset,
        "last_offset": store.committed_offset,
        "next_offset": store.next_offset,
        "messages": store.message_count,
        "bytes": store.byte_size,
        "segments": store.segment_count,
        "first_timestamp": store.first_timestamp_ms,
        "last_timestamp": store.last_timestamp_ms,
    }


def _utilisation(q) -> float:
    consumers = q.consumers
    if not consumers:
        return 0
    if not q.ready:
        return 1.0  # nothing waits: every consumer keeps up
    able = sum(1 for c in consumers if c.has_capacity())
    return able / len(consumers)


def _lengths(q, unacked: dict) -> tuple[int, int, int]:
    """(messages, ready, unacknowledged) as the queue's JSON shows them (a stream: its
    retained messages, none unacknowledged)."""
    n_unacked = unacked[q][0] if q in unacked else 0
    if q.is_stream and q.store is not None:
        n = q.store.message_count
        return n, n, n_unacked
    ready = q.message_count
    return ready + n_unacked, ready, n_unacked


def queue_json(q, vhost, sampler, unacked: dict, detailed: bool = False, ranges=st.NO_RANGES) -> dict:
    n_unacked, unacked_bytes = unacked.get(q, (0, 0))
    ready = q.message_count
    stream = q.is_stream
    paged_bytes = q.paged_bytes
    ready_bytes = q.ready_bytes + paged_bytes
    paged = q.paged
    in_ram = len(q.ready)
    store = q.store
    policy = pick(vhost.policies, vhost.name, "queue", q.name)
    vec = sampler.queue_vector(q, unacked)
    exclusive_tag = next((c.tag for c in q.consumers if c.exclusive), None)
    single_active = None
    if q.single_active and q.consumers:
        single_active = q.consumers[0].tag
    last_used = q.last_used
    body = {
        "arguments": jsonable(q.arguments),
        "auto_delete": q.auto_delete,
        "backing_queue_status": {"mode": "default", "len": ready, "version": 1},
        "consumer_capacity": _utilisation(q),
        "consumer_utilisation": _utilisation(q),
        "consumers": len(q.consumers),
        "durable": q.durable,
        "effective_policy_definition": dict(policy.definition) if policy is not None else {},
        "exclusive": q.exclusive_owner is not None,
        "exclusive_consumer_tag": exclusive_tag,
        "head_message_timestamp": None,
        "idle_since": iso_time(monotonic_to_wall(last_used)),
        "memory": ready_bytes - paged_bytes + in_ram * MESSAGE_OVERHEAD + 1024,
        "message_bytes": ready_bytes + unacked_bytes,
        "message_bytes_paged_out": paged_bytes,
        "message_bytes_persistent": 0,
        "message_bytes_ram": ready_bytes - paged_bytes + unacked_bytes,
        "message_bytes_ready": ready_bytes,
        "message_bytes_unacknowledged": unacked_bytes,
        "message_stats": sampler.message_stats(q, st.QUEUE, vec, st.QUEUE_STATS, ranges),
        "messages": ready + n_unacked,
        "messages_paged_out": paged,
        "messages_persistent": len(store) if store is not None and not stream else 0,
        "messages_ram": in_ram + n_unacked,
        "messages_ready": ready,
        "messages_ready_ram": in_ram,
        "messages_unacknowledged": n_unacked,
        "messages_unacknowledged_ram": n_unacked,
        "name": q.name,
        "node": node_name(),
        "operator_policy": None,
        "policy": policy.name if policy is not None else None,
        "recoverable_slaves": None,
        "reductions": 0,
        "reductions_details": st.details(0.0),
        "single_active_consumer_tag": single_active,
        "state": "running",
        "type": queue_type(q),
        "vhost": vhost.name,
    }
    sampler.details_of(q, st.QUEUE, vec, st.LENGTHS, ranges, out=body, suffix_only=True)
    if q.queue_type in ("quorum", "stream"):  # RabbitMQ's leader, members and online: this node's, or a cluster's
        here = node_name()
        body.update(vhost.directory.quorum_members(vhost.name, q.name) or {"leader": here, "members": [here],
                                                                             "online": [here]})
    if stream and store is not None:
        body.update(stream_figures(store))
        body["messages"] = body["messages_ready"] = store.message_count
        # a classic queue's byte and memory split says nothing of a stream's log (it was 0 beside
        # the log's real size, issue 34): left out, as RabbitMQ 3.10 leaves them out of a
        # stream's JSON; the log's octets are ``bytes``
        for key in CLASSIC_ONLY:
            del body[key]
    if detailed:
        # a consumer through another worker (--worker-mode queues, proxy.py) has no connection
        # here: its channel's details are that worker's (GET /api/consumers has them)
        body["consumer_details"] = [consumer_json(c, details=hasattr(c.channel.session, "io")) for c in q.consumers]
        body["deliveries"] = []
        body["incoming"] = []
    return body


def _unacked(request: web.Request) -> dict:
    return st.unacked_by_queue(request.app[STATS].connections(), request.app[BROKER].directory)


def queue_fields(sampler, unacked: dict) -> dict:
    """Cheap getters of a queue's list fields (the values queue_json gives them), for sorting
    and ``columns`` (common.reply_objects)."""
    fields = {
        "name": lambda q: q.name,
        "vhost": lambda q: q.vhost.name,
        "type": queue_type,
        "durable": lambda q: q.durable,
        "auto_delete": lambda q: q.auto_delete,
        "exclusive": lambda q: q.exclusive_owner is not None,
        "consumers": lambda q: len(q.consumers),
        "state": lambda q: "running",
        "node": lambda q: node_name(),
        "messages": lambda q: _lengths(q, unacked)[0],
        "messages_ready": lambda q: _lengths(q, unacked)[1],
        "messages_unacknowledged": lambda q: _lengths(q, unacked)[2],
    }
    for key in st.LENGTHS:
        fields[key + "_details.rate"] = lambda q, k=key: round(sampler.rate(q, st.QUEUE, k), 1)
    for key in st.QUEUE_STATS:
        fields["message_stats." + key] = lambda q, k=key: st.QUEUE.value(sampler.queue_vector(q, unacked), k)
        fields[f"message_stats.{key}_details.rate"] = lambda q, k=key: round(sampler.rate(q, st.QUEUE, k), 1)
    return fields


def _queue(request: web.Request):
    """(vhost, queue) named in the path: the queue, or the handle of one that lives elsewhere
    (--worker-mode queues, broker/directory.py); 404 if there is none."""
    vhost = readable_vhost(request)
    q = request.app[BROKER].directory.find_queue(vhost, request.match_info["name"])
    if q is None or q.deleted:
        raise not_found()
    return vhost, q


# --- --worker-mode queues: every worker's queues (warren/spread) -------------------------------------


def local_rows(app, vhost_names: list, name: str | None = None, detailed: bool = False,
               ranges=st.NO_RANGES) -> list[dict]:
    """This worker's queues (of ``vhost_names``, or the one named), as its API shows them: what
    the other workers ask for their merged lists (``Spread``'s ``api_queues``), with the history
    ``ranges`` asks for."""
    broker, sampler = app[BROKER], app[STATS]
    unacked = st.unacked_by_queue(sampler.connections(), broker.directory)
    rows = []
    for vname in vhost_names:
        vhost = broker.vhosts.get(vname)
        if vhost is None:
            continue
        queues = [vhost.queues[name]] if name is not None and name in vhost.queues else (
            [] if name is not None else [vhost.queues[n] for n in sorted(vhost.queues)])
        rows.extend(queue_json(q, vhost, sampler, unacked, detailed=detailed, ranges=ranges)
                    for q in queues if not q.deleted)
    return rows


# --- handlers --------------------------------------------------------------------------------------


async def _list(request: web.Request, vhosts) -> web.Response:
    sampler = request.app[STATS]
    ranges = st.parse_ranges(request.query, bad_request, listing=True)
    unacked = _unacked(request)
    objects = []
    for vhost in vhosts:
        queues = vhost.queues
        objects.extend(queues[name] for name in sorted(queues))
    fields = queue_fields(sampler, unacked)
    # --worker-mode queues: the other workers' queues too, as their owners show them; their
    # histories as far as kept (the owner builds every row, not the page's: none starts one)
    kept = st.Ranges(ranges.msg_rates, ranges.lengths, ranges.data_rates, start=False)
    directory = request.app[BROKER].directory
    rows = [RemoteRow(r) for r in await directory.api_rows("queues", [v.name for v in vhosts], None, False, kept)]
    if not rows:
        return await reply_objects(request, objects,
                                   lambda q: queue_json(q, q.vhost, sampler, unacked, ranges=ranges), fields=fields)
    objects = sorted(objects + rows, key=lambda o: (o.json.get("vhost") if type(o) is RemoteRow else o.vhost.name,
                                                    o.name))
    fields = merged_fields(fields)
    return await reply_objects(request, objects, lambda o: o.json if type(o) is RemoteRow else queue_json(
        o, o.vhost, sampler, unacked, ranges=ranges), fields=fields)


async def list_queues(request: web.Request) -> web.Response:
    broker = request.app[BROKER]
    return await _list(request, [broker.vhosts[n] for n in visible_vhosts(request)])


async def vhost_queues(request: web.Request) -> web.Response:
    vhost = readable_vhost(request)
    return await _list(request, [vhost])


async def get_queue(request: web.Request) -> web.Response:
    vhost, q = _queue(request)
    ranges = st.parse_ranges(request.query, bad_request)
    if not q.is_here:  # another worker's queue, as its owner shows it
        rows = await request.app[BROKER].directory.api_rows("queues", [vhost.name], q.name, True, ranges,
                                                            only=q.owner)
        if not rows:
            raise not_found()
        return reply_object(request, rows[0])
    return reply_object(request, queue_json(q, vhost, request.app[STATS], _unacked(request), detailed=True,
                                            ranges=ranges))


async def put_queue(request: web.Request) -> web.Response:
    vhost = readable_vhost(request, monitor_ok=False)
    name = request.match_info["name"]
    body = await read_json(request)
    check_permission(request, vhost.name, "configure", "queue", name)
    durable = as_bool(body.get("durable"), "durable", False)
    auto_delete = as_bool(body.get("auto_delete"), "auto_delete", False)
    arguments = body.get("arguments") or {}
    if not isinstance(arguments, dict):
        raise bad_request("arguments must be a JSON object")
    if as_bool(body.get("exclusive"), "exclusive", False):
        raise bad_request("an exclusive queue belongs to a connection: it cannot be declared over HTTP")
    directory = request.app[BROKER].directory
    existed = directory.find_queue(vhost, name) is not None
    try:
        await directory.define(vhost.name, "declare_queue", (name, durable, False, auto_delete, arguments, ADMIN))
    except AMQPError as e:
        raise amqp_error(e) from None
    return no_content() if existed else created()


async def delete_queue(request: web.Request) -> web.Response:
    vhost, q = _queue(request)
    check_vhost_access(request, vhost.name, monitor_ok=False)
    check_permission(request, vhost.name, "configure", "queue", q.name)
    query = request.query
    try:  # --worker-mode queues: the owner deletes it, every worker forgets it (broker/directory.py)
        await request.app[BROKER].directory.define(vhost.name, "delete_queue", (
            q.name, query.get("if-unused", "").lower() == "true", query.get("if-empty", "").lower() == "true", ADMIN))
    except PreconditionFailed as e:
        raise bad_request(e.text) from None
    except AMQPError as e:
        raise amqp_error(e) from None
    return no_content()


async def purge_queue(request: web.Request) -> web.Response:
    vhost, q = _queue(request)
    check_vhost_access(request, vhost.name, monitor_ok=False)
    check_permission(request, vhost.name, "read", "queue", q.name)
    try:
        await request.app[BROKER].directory.purge(q)  # another worker's: its owner purges it
    except AMQPError as e:
        raise amqp_error(e) from None
    return no_content()


async def get_from_queue(request: web.Request) -> web.Response:
    vhost, q = _queue(request)
    check_vhost_access(request, vhost.name, monitor_ok=False)
    body = await read_json(request)
    check_permission(request, vhost.name, "read", "queue", q.name)
    if not q.is_here:  # its owner takes them (the body's refusals are ours to give first)
        check_get(body)
        return web.json_response(await request.app[BROKER].directory.owner_api(q, "get", (vhost.name, q.name, body)))
    return web.json_response(get_messages(q, body))


def local_get(app, vhost: str, name: str, body: dict) -> list[dict]:
    """What another worker's ``/get`` asked of our queue (an ApiError travels as its text)."""
    q = app[BROKER].vhosts[vhost].queues.get(name)
    if q is None:
        raise not_found()
    return get_messages(q, body)


async def bindings_of_queue(request: web.Request) -> web.Response:
    vhost, q = _queue(request)  # every worker holds every binding, to its record of a remote queue too
    return reply_list(request, [binding_json(vhost, b) for b in queue_bindings(vhost, q)])


def add_routes(app: web.Application) -> None:
    r = app.router
    r.add_get("/api/queues", list_queues)
    r.add_get("/api/queues/{vhost}", vhost_queues)
    r.add_get("/api/queues/{vhost}/{name}", get_queue)
    r.add_put("/api/queues/{vhost}/{name}", put_queue)
    r.add_delete("/api/queues/{vhost}/{name}", delete_queue)
    r.add_delete("/api/queues/{vhost}/{name}/contents", purge_queue)
    r.add_post("/api/queues/{vhost}/{name}/get", get_from_queue)
    r.add_get("/api/queues/{vhost}/{name}/bindings", bindings_of_queue)
