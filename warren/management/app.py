"""The aiohttp application of the HTTP API: routes, basic auth, and the stream records endpoint.

Routes (all GET, JSON unless said otherwise; ``{vhost}`` URL-encoded, ``%2F`` for ``/``):

* ``/api/overview``: product, version, ports, counts;
* ``/api/queues/{vhost}/{name}``: one queue (type, messages, consumers; a stream's offsets);
* ``/api/streams/{vhost}/{name}``: a stream's offsets and sizes (400 if the queue is no stream);
* ``/api/streams/{vhost}/{name}/records?offset=&max_records=&max_bytes=[&end=]``: committed
  records in BULK FORMAT (stream_format.py), as ``StreamStore.read_raw`` returns them.

The records endpoint is the fast path of bulk readers: the octets come off the segment file
with one ``pread`` on an executor thread (the event loop never waits for the disk) and go to
the socket as they are, never parsed nor re-encoded; the client checks the CRCs. Where the
range starts and ends, and where to ask next, travel in headers, so the body is nothing but
entries.

Every request needs HTTP basic auth with a broker user (``Broker.users``, the same check as an
AMQP login, loopback rule included); errors are ``{"error": ...}`` with the status.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import logging

from aiohttp import hdrs, web

from warren import __version__
from warren.store.queue_store import StoreError

__all__ = ["build_app", "BROKER", "INFO", "RECORDS_CONTENT_TYPE", "MAX_BYTES_CAP", "MAX_RECORDS_CAP"]

log = logging.getLogger("warren.management")

RECORDS_CONTENT_TYPE = "application/x-warren-stream-records"
MAX_BYTES_CAP = 16 * 1024 * 1024   # octets one records answer carries at most (one entry may exceed it)
MAX_RECORDS_CAP = 1_000_000
DEFAULT_MAX_BYTES = 4 * 1024 * 1024
DEFAULT_MAX_RECORDS = 100_000
REALM = 'Basic realm="Warren"'

BROKER = web.AppKey("broker", object)   # vhosts + users, as warren.broker.broker.Broker
INFO = web.AppKey("info", object)       # a callable: extra fields of /api/overview (ports, connections)


def _error(cls, message: str, **kw) -> web.HTTPException:
    return cls(text=json.dumps({"error": message}), content_type="application/json", **kw)


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


@web.middleware
async def _basic_auth(request: web.Request, handler):
    creds = _basic_credentials(request.headers.get(hdrs.AUTHORIZATION, ""))
    user = None
    if creds is not None:
        user = request.app[BROKER].users.authenticate(creds[0], creds[1], request.remote)
    if user is None:
        raise _error(web.HTTPUnauthorized, "authentication required (HTTP basic, a broker user)",
                     headers={hdrs.WWW_AUTHENTICATE: REALM})
    return await handler(request)


def _queue(request: web.Request):
    vhost_name = request.match_info["vhost"]
    name = request.match_info["name"]
    vhost = request.app[BROKER].vhosts.get(vhost_name)
    if vhost is None:
        raise _error(web.HTTPNotFound, f"no vhost '{vhost_name}'")
    queue = vhost.queues.get(name)
    if queue is None:
        raise _error(web.HTTPNotFound, f"no queue '{name}' in vhost '{vhost_name}'")
    return vhost_name, name, queue


def _stream(request: web.Request):
    vhost_name, name, queue = _queue(request)
    if not getattr(queue, "is_stream", False):
        raise _error(web.HTTPBadRequest, f"queue '{name}' in vhost '{vhost_name}' is not a stream")
    return vhost_name, name, queue


def _stream_figures(store) -> dict:
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


def _int_param(query, name: str, default: int | None, minimum: int) -> int | None:
    raw = query.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise _error(web.HTTPBadRequest, f"{name} must be an integer, not {raw!r}") from None
    if value < minimum:
        raise _error(web.HTTPBadRequest, f"{name} must be at least {minimum}")
    return value


async def overview(request: web.Request) -> web.Response:
    broker = request.app[BROKER]
    queues = [q for vhost in broker.vhosts.values() for q in vhost.queues.values()]
    body = {
        "product": "Warren",
        "version": __version__,
        "vhosts": sorted(broker.vhosts),
        "queues": len(queues),
        "streams": sum(1 for q in queues if getattr(q, "is_stream", False)),
    }
    body.update(request.app[INFO]())
    return web.json_response(body)


async def queue_info(request: web.Request) -> web.Response:
    vhost_name, name, queue = _queue(request)
    stream = getattr(queue, "is_stream", False)
    body = {
        "vhost": vhost_name,
        "name": name,
        "type": "stream" if stream else "classic",
        "durable": queue.durable,
        "messages": queue.message_count,
        "consumers": len(queue.consumers),
    }
    if stream:
        body.update(_stream_figures(queue.store))
    return web.json_response(body)


async def stream_info(request: web.Request) -> web.Response:
    vhost_name, name, queue = _stream(request)
    return web.json_response({"vhost": vhost_name, "name": name, **_stream_figures(queue.store)})


async def stream_records(request: web.Request) -> web.Response:
    _, _, queue = _stream(request)
    query = request.query
    offset = _int_param(query, "offset", 0, 0)
    max_records = min(_int_param(query, "max_records", DEFAULT_MAX_RECORDS, 1), MAX_RECORDS_CAP)
    max_bytes = min(_int_param(query, "max_bytes", DEFAULT_MAX_BYTES, 1), MAX_BYTES_CAP)
    end = _int_param(query, "end", None, 0)
    store = queue.store
    loop = asyncio.get_running_loop()
    try:
        # on an executor thread: a pread of up to 16 MiB must not stall every AMQP connection
        first, count, data = await loop.run_in_executor(None, store.read_raw, offset, max_records, max_bytes, end)
    except StoreError as e:  # closed under us (queue deleted, shutdown) or a failed disk
        raise _error(web.HTTPServiceUnavailable, str(e)) from None
    headers = {
        "X-Warren-First-Offset": str(first),
        "X-Warren-Record-Count": str(count),
        "X-Warren-Next-Offset": str(first + count),
        "X-Warren-Last-Offset": str(store.committed_offset),
    }
    return web.Response(body=data, headers=headers, content_type=RECORDS_CONTENT_TYPE)


def build_app(broker, info=None) -> web.Application:
    """The application over ``broker`` (``vhosts``: name -> object with ``queues``; ``users``).

    ``info`` returns extra fields for /api/overview (the server adds its ports).
    """
    app = web.Application(middlewares=[_basic_auth])
    app[BROKER] = broker
    app[INFO] = info or dict
    app.router.add_get("/api/overview", overview)
    app.router.add_get("/api/queues/{vhost}/{name}", queue_info)
    app.router.add_get("/api/streams/{vhost}/{name}", stream_info)
    app.router.add_get("/api/streams/{vhost}/{name}/records", stream_records)
    return app
