"""Warren's stream routes, read by bulk readers such as the Spark data source:

* ``GET /api/streams/{vhost}/{name}``: a stream's offsets and sizes (400 if the queue is no stream);
* ``GET /api/streams/{vhost}/{name}/records?offset=&max_records=&max_bytes=[&end=]``: committed
  records in BULK FORMAT (stream_format.py), as ``StreamStore.read_raw`` returns them; with
  ``routing_key=`` or ``filter=`` only the blocks whose Bloom filter may match
  (queues/stream_filter.py), with ``property.<name>=`` or ``header.<name>=`` only the records
  whose property or header has one of the values (queues/stream_match.py);
* ``GET /api/streams/{vhost}/{name}/offset?timestamp=MS``: ``{"offset": N}``, the first offset
  stored at that time (milliseconds since the epoch) or later, the next offset if none is
  (``StreamStore.offset_for_timestamp``): readers turn a time window into an offset range.

With ``local=1``, asked from this machine (a loopback address), a range wholly in a segment file
is answered with an empty body and where the octets lie instead (``X-Warren-File``: the path,
``-Position``, ``-Length``, and ``-Id``, the file's device and inode): a reader on this machine
that may open the broker's files reads them itself, sparing the broker's copy and the socket
(``local_file_part``). A reader that cannot open it, or finds another file there (the segment
deleted by retention meanwhile), asks again without ``local``.

The records endpoint is the fast path of bulk readers: the octets come off the segment file
with one ``pread`` on an executor thread (the event loop never waits for the disk) and go to
the socket as they are, never parsed nor re-encoded; the client checks the CRCs. Where the
range starts and ends, and where to ask next, travel in headers, so the body is nothing but
entries. These routes need a login with a permission in the vhost, no management tag
(auth.py): the data source uses AMQP credentials. Under --worker-mode queues any worker's API
serves every stream: another worker's answers over the links (its answer's octets cross once).
"""

from __future__ import annotations

import asyncio
import json
import os
from urllib.parse import quote

from aiohttp import web
from multidict import MultiDict

from warren.management.api.auth import readable_vhost
from warren.management.api.common import BROKER, ApiError, bad_request
from warren.management.api.queues import stream_figures
from warren.http.sendfile import send_file_part
from warren.store.queue_store import StoreError
from warren.store.stream_store import StreamStore

__all__ = ["add_routes", "RECORDS_CONTENT_TYPE", "MAX_BYTES_CAP", "MAX_RECORDS_CAP"]

RECORDS_CONTENT_TYPE = "application/x-warren-stream-records"
MAX_BYTES_CAP = 16 * 1024 * 1024   # octets one records answer carries at most (one entry may exceed it)
MAX_RECORDS_CAP = 1_000_000
DEFAULT_MAX_BYTES = 4 * 1024 * 1024
DEFAULT_MAX_RECORDS = 100_000
JSON = "application/json"


def _stream(request: web.Request):
    """(vhost name, queue name, queue) of the path; under --worker-mode queues the queue may be
    another worker's record (``RemoteQueue``), whose owner answers."""
    vhost = readable_vhost(request, monitor_ok=False)
    name = request.match_info["name"]
    queue = vhost.queues.get(name) or vhost.remote_queues.get(name)
    if queue is None:
        raise ApiError(404, "Object Not Found", f"no queue '{name}' in vhost '{vhost.name}'")
    return vhost.name, name, queue


def _int_param(query, name: str, default: int | None, minimum: int) -> int | None:
    raw = query.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise bad_request(f"{name} must be an integer, not {raw!r}") from None
    if value < minimum:
        raise bad_request(f"{name} must be at least {minimum}")
    return value


async def _info(vhost_name: str, name: str, store, query) -> tuple[dict, bytes, str]:
    return {}, json.dumps({"vhost": vhost_name, "name": name, **stream_figures(store)}).encode(), JSON


async def _records(vhost_name: str, name: str, store, query, files: bool = False) -> tuple[dict, bytes, str]:
    """With ``files``, a range wholly in a segment file of a plain stream store (not a view
    with filters or a replica's limit: ``StreamStore.read_raw_file``) is answered as (its
    file's descriptor, position, length), which ``_reply`` sends with ``sendfile``."""
    offset = _int_param(query, "offset", 0, 0)
    max_records = min(_int_param(query, "max_records", DEFAULT_MAX_RECORDS, 1), MAX_RECORDS_CAP)
    max_bytes = min(_int_param(query, "max_bytes", DEFAULT_MAX_BYTES, 1), MAX_BYTES_CAP)
    end = _int_param(query, "end", None, 0)
    loop = asyncio.get_running_loop()
    try:
        if files and type(store) is StreamStore:  # no read here: a lookup and a dup, on the loop
            first, count, data = store.read_raw_file(offset, max_records, max_bytes, end)
        else:  # on an executor thread: a pread of up to 16 MiB must not stall every AMQP connection
            first, count, data = await loop.run_in_executor(None, store.read_raw, offset, max_records, max_bytes, end)
    except StoreError as e:  # closed under us (queue deleted, shutdown) or a failed disk
        raise ApiError(503, "service_unavailable", str(e)) from None
    headers = {
        "X-Warren-First-Offset": str(first),
        "X-Warren-Record-Count": str(count),
        "X-Warren-Next-Offset": str(first + count),
        "X-Warren-Last-Offset": str(store.committed_offset),
    }
    return headers, data, RECORDS_CONTENT_TYPE


async def _offset(vhost_name: str, name: str, store, query) -> tuple[dict, bytes, str]:
    raw = query.get("timestamp")
    if raw is None:
        raise bad_request("timestamp (milliseconds since the epoch) is required")
    try:
        timestamp_ms = int(raw)
    except ValueError:
        raise bad_request(f"timestamp must be an integer, not {raw!r}") from None
    loop = asyncio.get_running_loop()
    try:  # may read a block of a segment file: on an executor thread
        offset = await loop.run_in_executor(None, store.offset_for_timestamp, timestamp_ms)
    except StoreError as e:
        raise ApiError(503, "service_unavailable", str(e)) from None
    return {}, json.dumps({"offset": offset, "timestamp": timestamp_ms}).encode(), JSON


ROUTES = {"info": _info, "records": _records, "offset": _offset}


async def _answer(vhost_name: str, name: str, queue, route: str, query, files: bool = False) -> tuple[dict, bytes, str]:
    """(headers, body, content type) of ``route`` (a key of ``ROUTES``) for our ``queue``;
    ``files``: records may come as a file part (``_records``)."""
    if not queue.is_stream:
        raise bad_request(f"queue '{name}' in vhost '{vhost_name}' is not a stream")
    try:
        view = queue.bulk_view(query)  # filters: queues/stream_filter.py, stream_match.py
    except ValueError as e:
        raise bad_request(str(e)) from None
    if route == "records":
        return await _records(vhost_name, name, view, query, files)
    return await ROUTES[route](vhost_name, name, view, query)


async def local_answer(app, vhost_name: str, name: str, route: str, query: list) -> tuple:
    """What another worker's API asks of our stream: ("ok", headers, body, content type), or
    ("error", status, error, reason) for its ApiError (the links carry AMQP errors only).
    ``query``: the request's parameters as (name, value) pairs, a name repeated for each of
    its values (``routing_key``, ``header.<name>``: any of them)."""
    query = MultiDict(query)
    queue = app[BROKER].vhosts[vhost_name].queues.get(name)
    try:
        if queue is None:
            raise ApiError(404, "Object Not Found", f"no queue '{name}' in vhost '{vhost_name}'")
        return ("ok", *await _answer(vhost_name, name, queue, route, query))
    except ApiError as e:
        err = json.loads(e.text)
        return ("error", e.status, err["error"], err["reason"])


async def _reply(request: web.Request, route: str) -> web.Response:
    vhost_name, name, queue = _stream(request)
    here = queue.reads_here()  # the queue, a copy of it here (a stream's replica), or None
    if here is None:  # --worker-mode queues, or a cluster: its owner (its leader) reads it
        try:
            answer = await request.app[BROKER].directory.owner_api(queue, "stream",
                                                                   (vhost_name, name, route, list(request.query.items())))
        except ConnectionError as e:  # its node gone (a replicated stream between leaders): try again
            raise ApiError(503, "service_unavailable", f"the node of stream '{name}' in vhost '{vhost_name}' "
                                                       f"cannot be reached now ({e}): try again") from None
        if answer[0] == "error":
            raise ApiError(*answer[1:])
        headers, body, content_type = answer[1:]
    else:
        headers, body, content_type = await _answer(vhost_name, name, here, route, request.query, True)
        if type(body) is tuple and request.query.get("local") == "1" and request.remote in LOOPBACK:
            headers.update(local_file_part(*body))
            return web.Response(body=b"", headers=headers, content_type=content_type)
        if type(body) is tuple:  # (descriptor, position, length) of a segment file's part
            response = web.StreamResponse(headers=headers)
            response.content_type = content_type
            return await send_file_part(request, response, *body)
    return web.Response(body=body, headers=headers, content_type=content_type,
                        charset="utf-8" if content_type == JSON else None)  # as web.json_response


LOOPBACK = frozenset(("127.0.0.1", "::1", "::ffff:127.0.0.1"))  # (the last: IPv4 on a dual-stack socket)


def local_file_part(fd: int, position: int, length: int) -> dict:
    """The headers that tell a reader on this machine where a file part lies (module doc);
    ``fd`` is closed."""
    try:
        st = os.fstat(fd)
        path = os.readlink(f"/proc/self/fd/{fd}")
    finally:
        os.close(fd)
    return {"X-Warren-File": quote(path), "X-Warren-File-Position": str(position), "X-Warren-File-Length": str(length),
            "X-Warren-File-Id": f"{st.st_dev}:{st.st_ino}"}


async def stream_info(request: web.Request) -> web.Response:
    return await _reply(request, "info")


async def stream_records(request: web.Request) -> web.Response:
    return await _reply(request, "records")


async def stream_offset(request: web.Request) -> web.Response:
    return await _reply(request, "offset")


def add_routes(app: web.Application) -> None:
    app.router.add_get("/api/streams/{vhost}/{name}", stream_info)
    app.router.add_get("/api/streams/{vhost}/{name}/records", stream_records)
    app.router.add_get("/api/streams/{vhost}/{name}/offset", stream_offset)
