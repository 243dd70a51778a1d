"""What every resource module of the HTTP API shares: the application keys, the one JSON error
path, the request body reader, authorisation by tag, and the list helper that serves
RabbitMQ's query parameters.

Errors (RabbitMQ's management plugin, 3.10): every refusal is ``ApiError`` and leaves as
``{"error": ..., "reason": ...}`` with its status (400 ``bad_request``, 401 ``not_authorised``,
404 ``Object Not Found``, 405, 413). Authorisation refusals are 401 as in RabbitMQ, not 403
(docs/compatibility.md, "HTTP API").

Lists (``reply_list``): ``sort`` (a field, dotted for nested ones, ``message_stats.publish``),
``sort_reverse``, ``columns`` (comma-separated, dotted for nested ones) always; ``page``,
``page_size`` (1..500, default 100), ``name`` and ``use_regex`` only with ``page``, whose answer
is RabbitMQ's pagination object (``items``, ``page``, ``page_count``, ``page_size``,
``item_count``, ``filtered_count``, ``total_count``). As in RabbitMQ, ``name`` without ``page``
is ignored; the name filter is a case-insensitive substring, or a case-insensitive regular
expression with ``use_regex=true``.

Lists of broker objects that may number tens of thousands (queues, exchanges, bindings,
connections, channels) go through ``reply_objects`` instead: it filters the objects by name and
sorts them on cheap per-field values (``fields``: the value the object's JSON would carry,
read straight from the object), and builds the JSON of the returned page only (of the
requested ``columns`` only, when every one has a cheap value). A sort on a field without a
cheap value builds every object's JSON first, as before. The work (reading sort keys, building
and encoding JSON) yields to the loop every ``SLICE_SECONDS`` (5 ms), so a list of 10,000
queues never holds the broker's loop for long (bench/api_lists.py; docs/management.md has the
figures).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import datetime
import functools
import json
import math
import re
import time

from aiohttp import hdrs, web

from warren.broker.broker import Broker
from warren.broker.node import node_name  # the API modules' node fields (metrics use it too)
from warren.spec.fields import MAX_TABLE_DEPTH
from warren.codec.refusals import DECODE_FAILURES, HTTP_ERROR, MALFORMED, failure_kind, http_status
from warren.errors import AMQPError
from warren.store.node_file import writer_loop

__all__ = ["BROKER", "INFO", "SERVER", "STATS", "REALM", "ApiError", "bad_request", "not_found",
           "not_authorised", "read_json", "parse_json", "as_bool", "reply_list", "reply_objects", "node_name",
           "iso_time", "vhost_or_404", "no_content", "created", "MISSING", "SLICE_SECONDS", "lookup", "off_loop",
           "definitions_durable"]

BROKER = web.AppKey("broker", Broker)   # its vhosts, access store (users), policies
INFO = web.AppKey("info", object)       # a callable: extra fields of /api/overview (ports, connections)
SERVER = web.AppKey("server", object)   # the Server (connections, config, alarms), None in unit tests
STATS = web.AppKey("stats", object)     # the rate sampler (stats.py)

REALM = 'Basic realm="RabbitMQ Management"'  # LWP-based tools (nagios checks) answer only this realm
MAX_PAGE_SIZE = 500
DEFAULT_PAGE_SIZE = 100
SLICE_SECONDS = 0.005  # reply_objects yields to the loop after this much work (JSON of ~50 queues)


# Changes of the node's files (users, vhosts, permissions, limits, policies) run here, one at a
# time in the order asked: their fsyncs hold the request that asked, never the loop
# (warren/store/node_file.py ``on_loop``)
_WRITER = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="warren-node-files")


async def off_loop(change, *args, **kw):
    """``change(*args, **kw)`` (a method of the access model or the policy store) on the node
    files' writer thread; returns (or raises) once it is durable and in force."""
    loop = asyncio.get_running_loop()

    def run():
        writer_loop.loop = loop  # what the change does to the running broker goes back to the loop
        try:
            return change(*args, **kw)
        finally:
            writer_loop.loop = None

    return await loop.run_in_executor(_WRITER, run)


async def definitions_durable(broker) -> None:
    """Once every change of the definitions log made so far is durable: after the group
    commit that fsyncs it, off the loop (warren/broker/durability.py ``after_definitions``)."""
    durability = broker.durability
    if durability is None:
        return
    done = asyncio.get_running_loop().create_future()
    durability.after_definitions(lambda: done.done() or done.set_result(None))
    await done


class ApiError(web.HTTPException):
    """A JSON error answer: ``{"error": error, "reason": reason}`` with ``status``."""

    def __init__(self, status: int, error: str, reason: str, headers: dict | None = None) -> None:
        self.status_code = status
        super().__init__(text=json.dumps({"error": error, "reason": reason}),
                         content_type="application/json", headers=headers)


def bad_request(reason: str) -> ApiError:
    return ApiError(400, "bad_request", reason)


def not_found(reason: str = "Not Found") -> ApiError:
    return ApiError(404, "Object Not Found", reason)


def not_authorised(reason: str) -> ApiError:
    return ApiError(401, "not_authorised", reason, {hdrs.WWW_AUTHENTICATE: REALM})


def no_content() -> web.Response:
    return web.Response(status=204)


def created() -> web.Response:
    return web.Response(status=201)


async def read_json(request: web.Request, required: bool = True):
    """The request's JSON body (an object), 400 ``not_json`` when it is not JSON, ``{}`` when
    empty and not required. The body size limit is the server's (aiohttp's client_max_size,
    413 through the error middleware)."""
    raw = await request.read()
    if not raw.strip():
        if required:
            raise bad_request("not_json")
        return {}
    body = parse_json(raw)
    if not isinstance(body, dict):
        raise bad_request("not_json")
    return body


# the deepest JSON body taken: an AMQP field table may nest 100 deep (MAX_TABLE_DEPTH), and a
# definitions document holds arguments 4 levels down; anything deeper is refused before the
# broker walks it (900 levels of queue arguments reached the store's recursive encoder: a 500)
JSON_DEPTH_MAX = MAX_TABLE_DEPTH + 10


def parse_json(raw: bytes):
    """A request body's JSON, or the refusal of warren/codec/refusals.py's table (400
    ``not_json``, RabbitMQ's answer) for anything that does not parse: bad syntax, bad UTF-8,
    arrays nested past the parser's recursion limit (100,000 ``[`` made a 500 before), or
    nesting past ``JSON_DEPTH_MAX``."""
    try:
        body = json.loads(raw)
    except DECODE_FAILURES as e:
        raise ApiError(http_status(failure_kind(e)), HTTP_ERROR, "not_json") from None
    why = _json_malformed(body)
    if why is not None:
        raise ApiError(http_status(MALFORMED), HTTP_ERROR, f"not_json: {why}")
    return body


def _json_malformed(value) -> str | None:
    """Why a parsed JSON value is not one the broker takes, without recursion: lists and objects
    nested past ``JSON_DEPTH_MAX``, or a string that is not Unicode text (JSON's ``\\ud800``
    escapes parse to lone surrogates, which no name, key or UTF-8 encoder takes: a binding's
    routing key with one was a 500)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return "a string holds a lone surrogate (not Unicode text)"
            continue
        if isinstance(item, dict):
            children = [*item.keys(), *item.values()]
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > JSON_DEPTH_MAX:
            return f"nested more than {JSON_DEPTH_MAX} deep"
        stack.extend((child, depth + 1) for child in children)
    return None


def as_bool(value, name: str, default: bool = False) -> bool:
    """RabbitMQ's booleans in request bodies: JSON true/false or the strings "true"/"false"
    (rabbitmqadmin sends strings)."""
    if value is None:
        return default
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise bad_request(f"{name} must be true or false, not {json.dumps(value)}")


def iso_time(wall: float) -> str:
    """RabbitMQ's timestamps (idle_since): ``2026-11-25T03:18:55.872+00:00``."""
    second = int(wall)
    return f"{_iso_second(second)}.{int((wall - second) * 1000):03d}+00:00"


@functools.lru_cache(maxsize=1024)
def _iso_second(second: int) -> str:
    # a list of queues formats many times within a few seconds: each second once
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))


def monotonic_to_wall(mono: float) -> float:
    return time.time() - (time.monotonic() - mono)


def vhost_or_404(request: web.Request, name: str | None = None):
    """The VirtualHost named in the path (``{vhost}``), 404 ``vhost_not_found`` if missing."""
    name = request.match_info["vhost"] if name is None else name
    vhost = request.app[BROKER].vhosts.get(name)
    if vhost is None:
        raise ApiError(404, "not_found", "vhost_not_found")
    return vhost


# --- lists -------------------------------------------------------------------------------------


def lookup(item: dict, dotted: str):
    """``item["a"]["b"]`` for ``"a.b"``; ``MISSING`` where a part is missing."""
    value = item
    for part in dotted.split("."):
        if not isinstance(value, dict) or part not in value:
            return _MISSING
        value = value[part]
    return value


_MISSING = object()
MISSING = _MISSING  # what a cheap field getter returns for a field the object's JSON leaves out


def _sort_key(value):
    """Erlang's term order as far as JSON goes: missing, numbers, atoms (null, booleans),
    objects, lists, strings."""
    if value is _MISSING:
        return (0, 0)
    if isinstance(value, bool):
        return (2, str(value))
    if isinstance(value, (int, float)):
        return (1, value)
    if value is None:
        return (2, "")
    if isinstance(value, dict):
        return (3, json.dumps(value, sort_keys=True))
    if isinstance(value, list):
        return (4, json.dumps(value))
    return (5, str(value))


def _project(item: dict, columns: list[str]) -> dict:
    return _projected(columns, (lookup(item, col) for col in columns))


def _projected(columns: list[str], values) -> dict:
    """``columns`` (dotted: nested objects) with their ``values``, those _MISSING left out."""
    out: dict = {}
    for col, value in zip(columns, values):
        if value is _MISSING:
            continue
        parts = col.split(".")
        node = out
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = value
    return out


def _positive(raw: str | None, default: int | None) -> int | None:
    if raw is None:
        return default
    try:
        return int(raw)
    except ValueError:
        raise bad_request("Pagination parameters are invalid") from None


def _page_params(query) -> tuple[int | None, int]:
    page = _positive(query.get("page"), None)
    page_size = DEFAULT_PAGE_SIZE
    if page is not None:
        page_size = _positive(query.get("page_size"), DEFAULT_PAGE_SIZE)
        if page < 1 or not 1 <= page_size <= MAX_PAGE_SIZE:
            raise ApiError(400, "invalid_pagination_parameters",
                           f"Invalid pagination parameters: page number {page}, page size {page_size}")
    return page, page_size


def _name_filter(query):
    """The page's name filter as a predicate on a name, or None (RabbitMQ: only with ``page``)."""
    name = query.get("name")
    if not name:
        return None
    if query.get("use_regex", "").lower() == "true":
        try:
            regex = re.compile(name, re.IGNORECASE)
        except re.error:
            raise bad_request("Pagination parameters are invalid") from None
        return lambda n: regex.search(n) is not None
    lowered = name.lower()
    return lambda n: lowered in n.lower()


def _columns(query) -> list[str]:
    return [c for c in query.get("columns", "").split(",") if c]


def _paged(items: list, page: int, page_size: int, total: int) -> tuple[list, dict]:
    filtered = len(items)
    page_count = math.ceil(filtered / page_size)
    if page > max(page_count, 1):
        raise ApiError(400, "page_out_of_range",
                       f"Page out of range, page: {page} page size: {page_size}, len: {filtered}")
    chunk = items[(page - 1) * page_size:page * page_size]
    return chunk, {"filtered_count": filtered, "page": page, "page_count": page_count, "page_size": page_size,
                   "total_count": total}


def reply_list(request: web.Request, items: list[dict]) -> web.Response:
    """``items`` (already in their default order) through RabbitMQ's list query parameters."""
    query = request.query
    total = len(items)
    page, page_size = _page_params(query)
    if page is not None:
        matches = _name_filter(query)
        if matches is not None:
            items = [i for i in items if matches(str(i.get("name", "")))]
    sort = query.get("sort")
    if sort:
        keys = [k for k in sort.split(",") if k]
        items = sorted(items, key=lambda i: [_sort_key(lookup(i, k)) for k in keys])
    if query.get("sort_reverse", "").lower() == "true":
        items = list(reversed(items))
    columns = _columns(query)
    if page is None:
        if columns:
            items = [_project(i, columns) for i in items]
        return web.json_response(items)
    chunk, info = _paged(items, page, page_size, total)
    if columns:
        chunk = [_project(i, columns) for i in chunk]
    return web.json_response({"filtered_count": info["filtered_count"], "item_count": len(chunk), "items": chunk,
                              "page": page, "page_count": info["page_count"], "page_size": page_size,
                              "total_count": total})


def _project_fields(obj, columns: list[str], fields: dict) -> dict:
    return _projected(columns, (fields[col](obj) for col in columns))


class _Slicer:
    """Yields to the loop once the work since the last yield took ``SLICE_SECONDS``."""

    __slots__ = ("since",)

    def __init__(self) -> None:
        self.since = time.perf_counter()

    def due(self) -> bool:
        return time.perf_counter() - self.since >= SLICE_SECONDS

    async def pause(self) -> None:
        await asyncio.sleep(0)
        self.since = time.perf_counter()

    async def tick(self) -> None:
        if time.perf_counter() - self.since >= SLICE_SECONDS:
            await self.pause()


async def reply_objects(request: web.Request, objects: list, build, name=None, fields: dict | None = None
                        ) -> web.Response:
    """Broker objects (in their default order) through RabbitMQ's list query parameters, the
    JSON built (by ``build(obj)``) only for the objects answered.

    ``name(obj)`` is the name the page filter matches (default: ``obj.name``); ``fields`` maps a
    dotted field to a getter of the value ``build(obj)`` would give it (or ``MISSING``), used to
    sort and to answer ``columns`` without building the whole JSON."""
    query = request.query
    fields = fields or {}
    name = name or (lambda o: o.name)
    total = len(objects)
    page, page_size = _page_params(query)
    slicer = _Slicer()
    built: dict = {}  # id(obj) -> its JSON, when a sort needed it

    async def full_json(objs) -> None:
        for o in objs:
            if id(o) not in built:
                built[id(o)] = build(o)
                await slicer.tick()

    if page is not None:
        matches = _name_filter(query)
        if matches is not None:
            kept = []
            for o in objects:
                if matches(str(name(o))):
                    kept.append(o)
            objects = kept
    sort = query.get("sort")
    if sort:
        keys = [k for k in sort.split(",") if k]
        getters = [fields.get(k) for k in keys]
        keyed = []
        if all(getters):
            for o in objects:
                keyed.append(([_sort_key(g(o)) for g in getters], o))
                await slicer.tick()
        else:  # a field without a cheap value: from the full JSON of every object
            await full_json(objects)
            for o in objects:
                item = built[id(o)]
                keyed.append(([_sort_key(lookup(item, k)) for k in keys], o))
        keyed.sort(key=lambda pair: pair[0])
        objects = [o for _, o in keyed]
    if query.get("sort_reverse", "").lower() == "true":
        objects = objects[::-1]
    info = None
    if page is not None:
        objects, info = _paged(objects, page, page_size, total)
    columns = _columns(query)
    if columns and all(c in fields for c in columns):
        def render(o):
            return _project_fields(o, columns, fields)
    else:
        def render(o):
            item = built.get(id(o))
            if item is None:
                item = build(o)
            return _project(item, columns) if columns else item
    # built and encoded a slice at a time, between the broker's own work
    parts, chunk = [], []
    for o in objects:
        chunk.append(render(o))
        if slicer.due():
            parts.append(json.dumps(chunk)[1:-1])
            chunk = []
            await slicer.pause()
    if chunk or not parts:
        parts.append(json.dumps(chunk)[1:-1])
    items_text = "[" + ", ".join(p for p in parts if p) + "]"
    if info is None:
        return web.Response(text=items_text, content_type="application/json")
    head = json.dumps({"filtered_count": info["filtered_count"], "item_count": len(objects)})
    tail = json.dumps({"page": page, "page_count": info["page_count"], "page_size": page_size,
                       "total_count": total})
    return web.Response(text=f'{head[:-1]}, "items": {items_text}, {tail[1:]}', content_type="application/json")


def reply_object(request: web.Request, item: dict) -> web.Response:
    """One object, through ``columns`` as lists are."""
    columns = [c for c in request.query.get("columns", "").split(",") if c]
    return web.json_response(_project(item, columns) if columns else item)


def jsonable(value):
    """A field-table value (queue arguments, message headers) as JSON: octets as text, decimals
    as numbers, timestamps as seconds, tables and arrays through."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).decode("utf-8", "replace")
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return value
    if isinstance(value, datetime.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=datetime.timezone.utc)
        return int(value.timestamp())
    try:
        import decimal
        if isinstance(value, decimal.Decimal):
            return float(value)
    except ImportError:  # pragma: no cover
        pass
    return str(value)


def amqp_error(e: AMQPError) -> ApiError:
    """An AMQP refusal raised by the broker model, as RabbitMQ's API answers it: access refused
    401, not found 404, anything else 400 with the refusal's text."""
    if e.reply_code == 403:
        return ApiError(401, "not_authorised", "Access refused.")
    if e.reply_code == 404:
        return not_found(e.text or "Not Found")
    return bad_request(e.text or str(e))
