"""Stream records over HTTP from a real broker: publish with pika, fetch in BULK FORMAT, parse, compare."""

from __future__ import annotations

import base64
import json
import time
import urllib.error
import urllib.request

import pika
import pytest
from pika.spec import BasicProperties

from tests.conftest import EXTERNAL_URL
from warren.store.message import decode_message
from warren.store.stream_format import parse_entries

pytestmark = pytest.mark.skipif(bool(EXTERNAL_URL), reason="needs a private Warren broker (the HTTP API is Warren's)")

GUEST = {"Authorization": "Basic " + base64.b64encode(b"guest:guest").decode()}


def get(url: str):
    req = urllib.request.Request(url, headers=GUEST)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.headers, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()


def fetch_all(b, name: str, offset: int = 0, max_records: int = 1000, max_bytes: int = 1 << 20):
    """Every committed record from ``offset``: [(offset, timestamp_ms, record)], page by page."""
    out = []
    for _ in range(10_000):  # bounded: far more pages than any test here needs
        status, headers, body = get(f"{b.http_url}/api/streams/%2F/{name}/records?offset={offset}"
                                    f"&max_records={max_records}&max_bytes={max_bytes}")
        assert status == 200, body
        count = int(headers["X-Warren-Record-Count"])
        if count == 0:
            return out
        entries = parse_entries(body)
        assert len(entries) == count and entries[0][0] == int(headers["X-Warren-First-Offset"])
        out += entries
        offset = int(headers["X-Warren-Next-Offset"])
    raise AssertionError("too many pages")


def info(b, name: str) -> dict:
    status, _, body = get(f"{b.http_url}/api/streams/%2F/{name}")
    assert status == 200, body
    return json.loads(body)


def declare_stream(ch, name: str, **arguments) -> None:
    ch.queue_declare(name, durable=True, arguments={"x-queue-type": "stream", **arguments})


def publish(ch, name: str, bodies, **props) -> None:
    for body in bodies:
        ch.basic_publish("", name, body, BasicProperties(**props))


def test_published_messages_come_back_over_http(start_broker, uid):
    b = start_broker()
    name = f"stream-{uid}"
    conn = pika.BlockingConnection(pika.URLParameters(b.url))
    try:
        ch = conn.channel()
        declare_stream(ch, name)
        ch.confirm_delivery()  # every publish confirmed: committed, so served
        before = int(time.time() * 1000)
        publish(ch, name, [b"body %d" % i for i in range(500)],
                content_type="text/plain", headers={"n": 1}, delivery_mode=2)
        after = int(time.time() * 1000)
        # a classic queue is no stream
        ch.queue_declare(f"classic-{uid}")
        assert get(f"{b.http_url}/api/streams/%2F/classic-{uid}")[0] == 400
        status, _, body = get(f"{b.http_url}/api/queues/%2F/classic-{uid}")
        assert status == 200 and json.loads(body)["type"] == "classic"
    finally:
        conn.close()
    figures = info(b, name)
    assert figures["first_offset"] == 0 and figures["last_offset"] == 499 and figures["next_offset"] == 500
    assert figures["messages"] == 500 and figures["bytes"] > 500 * len(b"body 000")
    assert before <= figures["first_timestamp"] <= figures["last_timestamp"] <= after
    entries = fetch_all(b, name, max_records=64)
    assert [e[0] for e in entries] == list(range(500))
    for offset, ts, record in entries:
        exchange, routing_key, props, body = decode_message(record)
        assert (exchange, routing_key, body) == ("", name, b"body %d" % offset)
        decoded = BasicProperties()
        decoded.decode(props)
        assert decoded.content_type == "text/plain" and decoded.headers == {"n": 1}
        assert before <= ts <= after
    assert fetch_all(b, name, offset=495) == entries[495:]
    status, headers, _ = get(f"{b.http_url}/api/streams/%2F/{name}/records?offset=100&end=103")
    assert headers["X-Warren-Record-Count"] == "3" and headers["X-Warren-Next-Offset"] == "103"
    status, _, body = get(f"{b.http_url}/api/queues/%2F/{name}")
    assert json.loads(body)["type"] == "stream" and json.loads(body)["last_offset"] == 499


def test_offsets_survive_a_restart(start_broker, uid, tmp_path):
    data_dir = tmp_path / "data"
    name = f"stream-{uid}"
    b = start_broker(data_dir=data_dir)
    conn = pika.BlockingConnection(pika.URLParameters(b.url))
    ch = conn.channel()
    declare_stream(ch, name)
    ch.confirm_delivery()
    publish(ch, name, [b"first %d" % i for i in range(100)])
    conn.close()
    b.stop()
    b = start_broker(data_dir=data_dir)
    assert info(b, name)["last_offset"] == 99
    conn = pika.BlockingConnection(pika.URLParameters(b.url))
    ch = conn.channel()
    ch.confirm_delivery()
    publish(ch, name, [b"second %d" % i for i in range(10)])
    conn.close()
    entries = fetch_all(b, name)
    assert [e[0] for e in entries] == list(range(110))
    assert decode_message(entries[100][2])[3] == b"second 0"


def test_retention_moves_the_first_offset(start_broker, uid):
    b = start_broker()
    name = f"stream-{uid}"
    conn = pika.BlockingConnection(pika.URLParameters(b.url))
    try:
        ch = conn.channel()
        declare_stream(ch, name, **{"x-max-length-bytes": 20_000, "x-stream-max-segment-size-bytes": 5_000})
        ch.confirm_delivery()
        publish(ch, name, [b"%05d" % i + b"x" * 200 for i in range(400)])
    finally:
        conn.close()
    deadline = time.monotonic() + 10  # retention runs from the broker tick (every second)
    while info(b, name)["first_offset"] == 0 and time.monotonic() < deadline:
        time.sleep(0.1)
    figures = info(b, name)
    assert figures["first_offset"] > 0 and figures["bytes"] <= 20_000 + 5_000
    status, headers, body = get(f"{b.http_url}/api/streams/%2F/{name}/records?offset=0&max_records=5")
    assert int(headers["X-Warren-First-Offset"]) == figures["first_offset"]  # offset 0 is gone
    entries = fetch_all(b, name)
    assert [e[0] for e in entries] == list(range(figures["first_offset"], 400))
    assert all(decode_message(r)[3].startswith(b"%05d" % o) for o, _, r in entries)


def test_megabytes_past_the_tail_cache_come_back_whole(start_broker, uid):
    """Ranges older than the stream's tail cache (1 MiB) lie in its segment files and are sent
    with sendfile (warren/http/sendfile.py), 4 MiB a request: every record comes back as it was
    published, in pages that end where the headers say."""
    b = start_broker()
    name = f"stream-{uid}"
    bodies = [b"%06d" % i + bytes([i % 251]) * 4000 for i in range(2000)]  # 8 MB
    conn = pika.BlockingConnection(pika.URLParameters(b.url))
    try:
        ch = conn.channel()
        declare_stream(ch, name)
        ch.confirm_delivery()
        publish(ch, name, bodies)
    finally:
        conn.close()
    entries = fetch_all(b, name, max_records=10_000, max_bytes=4 << 20)
    assert [e[0] for e in entries] == list(range(2000))
    assert [decode_message(e[2])[3] for e in entries] == bodies
