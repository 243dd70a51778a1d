"""The HTTP API (warren.management) over a real Broker, without an AMQP server.

The broker is the real one (``warren.broker.broker.Broker``, its data folder in tmp_path, its
access store in memory): its stream queues' StreamStores are written directly, as the broker
does underneath a publish, so these tests serve the API on an ephemeral port and request it
with aiohttp's client.
"""

from __future__ import annotations

import asyncio
import base64
import threading
from urllib.parse import quote

import aiohttp
import pytest

from warren.access import AccessControl
from warren.broker.broker import Broker
from warren.broker.durability import Durability
from warren.management import RECORDS_CONTENT_TYPE, HttpServer
from warren.management.app import MAX_BYTES_CAP
from warren.codec.bulk_records import ENTRY_HEADER_SIZE
from warren.store.stream_format import parse_entries


def basic(user: str, password: str) -> dict:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


GUEST = basic("guest", "guest")
# a small segment size, so that a few records fill several segments
STREAM = {"x-queue-type": "stream", "x-stream-max-segment-size-bytes": 4096}


def users() -> AccessControl:
    """guest/guest (administrator, loopback only: a new store's default) and alice, an administrator."""
    access = AccessControl()
    access.add_user("alice", "secret", tags=("administrator",))
    return access


def rec(offset: int, size: int = 50) -> bytes:
    return (b"%d;" % offset * size)[:size]


@pytest.fixture
def broker(tmp_path):
    """vhost / with the streams "events" and "a/b c" and the classic queue "classic"; vhost "other" empty."""
    durability = Durability(tmp_path / "data", fsync=False)
    b = Broker(("/", "other"), access=users(), durability=durability)
    vhost = b.vhosts["/"]
    for name, arguments in (("events", STREAM), ("classic", {}), ("a/b c", STREAM)):
        vhost.declare_queue(None, name, False, True, False, False, dict(arguments))
    yield b
    durability.close(list(b.all_queues()))


@pytest.fixture
def stream(broker):
    """The StreamStore of the stream "events"."""
    return broker.vhosts["/"].queues["events"].store


@pytest.fixture
async def api(broker):
    server = HttpServer(broker, info=lambda: {"amqp_port": 5672, "http_port": server.port})
    port = await server.start("127.0.0.1", 0)
    async with aiohttp.ClientSession(f"http://127.0.0.1:{port}", headers=GUEST) as session:
        for n in range(3):  # three messages in the classic queue, published through the API
            async with session.post("/api/exchanges/%2F/amq.default/publish", json={
                    "properties": {}, "routing_key": "classic", "payload": f"m{n}", "payload_encoding": "string"}) as r:
                assert r.status == 200 and (await r.json())["routed"] is True
        yield session
    await server.stop()


def fill(store, n, size=50):
    for _ in range(n):
        store.append(rec(store.next_offset, size), 1_000 + store.next_offset)


async def records(session, path="/api/streams/%2F/events/records", **params):
    async with session.get(path, params={k: str(v) for k, v in params.items()}) as r:
        return r.status, r.headers, await r.read()


# --- auth ------------------------------------------------------------------------------------------

async def test_auth_required(api):
    for headers in ({"Authorization": ""}, basic("guest", "wrong"), basic("nobody", "guest"),
                    {"Authorization": "Basic !!notbase64"}, {"Authorization": "Bearer abc"},
                    {"Authorization": "Basic " + base64.b64encode(b"no colon").decode()}):
        async with api.get("/api/overview", headers=headers) as r:
            assert r.status == 401
            assert r.headers["WWW-Authenticate"].startswith("Basic")
            assert "error" in await r.json()
    async with api.get("/api/overview", headers=basic("alice", "secret")) as r:
        assert r.status == 200


# --- views -----------------------------------------------------------------------------------------

async def test_overview(api):
    async with api.get("/api/overview") as r:
        body = await r.json()
    assert body["product"] == "Warren" and body["vhosts"] == ["/", "other"]
    assert body["queues"] == 3 and body["streams"] == 2
    assert body["amqp_port"] == 5672 and body["http_port"] == api._base_url.port


async def test_stream_info(api, stream):
    async with api.get("/api/streams/%2F/events") as r:
        assert r.status == 200
        body = await r.json()
    assert body == {"vhost": "/", "name": "events", "first_offset": 0, "last_offset": -1, "next_offset": 0,
                    "messages": 0, "bytes": 0, "segments": 1, "first_timestamp": None, "last_timestamp": None}
    fill(stream, 100)
    stream.sync()
    fill(stream, 1)  # appended, not committed
    async with api.get("/api/streams/%2F/events") as r:
        body = await r.json()
    assert body["first_offset"] == 0 and body["last_offset"] == 99 and body["next_offset"] == 101
    assert body["messages"] == 101 and body["bytes"] == stream.byte_size and body["segments"] > 1
    assert body["first_timestamp"] == 1000 and body["last_timestamp"] == 1100


async def test_names_are_url_encoded(api, stream):
    async with api.get(f"/api/streams/%2F/{quote('a/b c', safe='')}") as r:
        assert r.status == 200 and (await r.json())["name"] == "a/b c"


async def test_not_found_and_not_a_stream(api):
    for path, status in (("/api/streams/%2F/nope", 404), ("/api/streams/nope/events", 404),
                         ("/api/streams/other/events/records", 404), ("/api/streams/%2F/classic", 400),
                         ("/api/streams/%2F/classic/records", 400), ("/api/queues/%2F/nope", 404)):
        async with api.get(path) as r:
            assert r.status == status, path
            assert "error" in await r.json()


async def test_queue_info(api, stream):
    fill(stream, 5)
    stream.sync()
    async with api.get("/api/queues/%2F/classic") as r:
        body = await r.json()
    assert {k: body[k] for k in ("vhost", "name", "type", "durable", "messages", "messages_ready", "consumers")} == {
        "vhost": "/", "name": "classic", "type": "classic", "durable": True, "messages": 3, "messages_ready": 3,
        "consumers": 0}
    async with api.get("/api/queues/%2F/events") as r:
        body = await r.json()
    assert body["type"] == "stream" and body["last_offset"] == 4 and body["next_offset"] == 5


# --- records ---------------------------------------------------------------------------------------

async def test_records_round_trip(api, stream):
    fill(stream, 300)
    stream.sync()
    fill(stream, 5)  # not committed: never served
    got, offset = [], 0
    while True:
        status, headers, body = await records(api, offset=offset, max_records=70, max_bytes=1 << 20)
        assert status == 200 and headers["Content-Type"] == RECORDS_CONTENT_TYPE
        count = int(headers["X-Warren-Record-Count"])
        assert int(headers["X-Warren-Last-Offset"]) == 299
        if count == 0:
            assert body == b"" and int(headers["X-Warren-Next-Offset"]) == offset
            break
        entries = parse_entries(body)
        assert len(entries) == count <= 70
        assert entries[0][0] == int(headers["X-Warren-First-Offset"]) == offset
        assert int(headers["X-Warren-Next-Offset"]) == offset + count
        got += entries
        offset += count
    assert got == [(o, 1000 + o, rec(o)) for o in range(300)]


async def test_records_limits_and_end(api, stream):
    fill(stream, 50)
    stream.sync()
    entry = ENTRY_HEADER_SIZE + 50
    _, h, body = await records(api, offset=10, max_records=100, max_bytes=3 * entry)
    assert h["X-Warren-Record-Count"] == "3" and len(body) == 3 * entry
    _, h, body = await records(api, offset=10, max_records=100, max_bytes=1)  # at least one record
    assert h["X-Warren-Record-Count"] == "1" and len(body) == entry
    _, h, body = await records(api, offset=10, max_records=2, max_bytes=1 << 20)
    assert [e[0] for e in parse_entries(body)] == [10, 11]
    _, h, body = await records(api, offset=10, max_records=100, max_bytes=1 << 20, end=13)
    assert [e[0] for e in parse_entries(body)] == [10, 11, 12] and h["X-Warren-Next-Offset"] == "13"
    _, h, body = await records(api, offset=10, end=10)
    assert body == b"" and h["X-Warren-Record-Count"] == "0"
    _, h, body = await records(api)  # defaults: from the first offset
    assert h["X-Warren-First-Offset"] == "0" and int(h["X-Warren-Record-Count"]) > 0
    _, h, body = await records(api, offset=500)
    assert body == b"" and h["X-Warren-Next-Offset"] == "500"
    _, h, _ = await records(api, offset=0, max_bytes=10 * MAX_BYTES_CAP)  # capped, not refused
    assert h["X-Warren-First-Offset"] == "0"


async def test_records_after_retention(api, stream):
    fill(stream, 300)
    stream.sync()
    stream.set_retention(8192, None)
    stream.enforce_retention(0)
    assert stream.first_offset > 0
    _, h, body = await records(api, offset=0, max_records=10)
    assert int(h["X-Warren-First-Offset"]) == stream.first_offset  # the start was removed: later
    assert parse_entries(body)[0][0] == stream.first_offset


@pytest.mark.parametrize("params", [
    {"offset": "x"}, {"offset": "-1"}, {"max_records": "0"}, {"max_bytes": "0"}, {"max_bytes": "1.5"},
    {"end": "-3"},
])
async def test_bad_parameters(api, params):
    status, headers, body = await records(api, **params)
    assert status == 400 and b"error" in body


async def test_reads_do_not_block_the_loop(api, stream, monkeypatch):
    """A range in a segment file is looked up on the loop and sent by sendfile on an executor
    thread (warren/http/sendfile.py): the loop keeps serving while that copy is stuck."""
    import warren.http.sendfile as sendfile
    fill(stream, 30_000)  # 2 MB: the oldest records are past the 1 MiB tail cache, in the file
    stream.sync()
    release, started = threading.Event(), threading.Event()
    real = sendfile._send

    def slow(*args):
        started.set()
        release.wait(5)
        return real(*args)

    monkeypatch.setattr(sendfile, "_send", slow)
    pending = asyncio.ensure_future(records(api, offset=0, max_records=10))
    while not started.is_set():  # (bounded by pending's own time-out: it fails if the copy never starts)
        assert not pending.done(), pending
        await asyncio.sleep(0.01)
    async with api.get("/api/streams/%2F/events") as r:  # answered while the copy waits
        assert r.status == 200
    assert not pending.done()
    release.set()
    status, headers, body = await pending
    assert status == 200 and len(parse_entries(body)) == 10


async def test_closed_store_is_unavailable(api, stream):
    stream.close()
    status, _, body = await records(api, offset=0)
    assert status == 503 and b"closed" in body
