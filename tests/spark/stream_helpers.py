"""Stream queues for the Spark read tests: declare, fill quickly, wait until committed.

Publishing goes without confirms (pika waits for each confirm, far too slow for 100k
messages); instead ``wait_committed`` polls the HTTP API until the stream's committed end
reaches what was published, which is what the readers need anyway.
"""

from __future__ import annotations

import datetime
import struct
import time

import pika

from tests.e2e import rawamqp
from warren.spark.read.http_api import StreamApi

EXCHANGE = "amq.topic"  # streams are bound with "<name>.#", so routing keys vary
STAMP = datetime.datetime(2024, 5, 1, 12, 0, 0, tzinfo=datetime.timezone.utc)


def api(broker) -> StreamApi:
    return StreamApi(broker.http_url, "guest", "guest", "/")


def declare_stream(broker, name: str, arguments: dict | None = None) -> None:
    conn = pika.BlockingConnection(pika.URLParameters(broker.url))
    try:
        ch = conn.channel()
        ch.queue_declare(name, durable=True, arguments={"x-queue-type": "stream", **(arguments or {})})
        ch.queue_bind(name, EXCHANGE, f"{name}.#")
    finally:
        conn.close()


def message(i: int, stream: str) -> tuple[str, bytes, pika.BasicProperties]:
    """(routing key, body, properties) of test message ``i``: a few property shapes repeat,
    one field (message_id) differs per message, every third has no headers."""
    headers = None if i % 3 == 0 else {"n": i % 7, "kind": "odd" if i % 2 else "even", "ok": bool(i % 2)}
    props = pika.BasicProperties(content_type="application/json", delivery_mode=2, headers=headers,
                                 message_id=f"id-{i}", timestamp=int(STAMP.timestamp()) if i % 5 == 0 else None)
    return f"{stream}.k{i % 4}", f'{{"i": {i}}}'.encode(), props


def expected_row(i: int, offset: int, stream: str) -> dict:
    """The row the readers must give for ``message(i)`` stored at ``offset``."""
    routing_key, body, props = message(i, stream)
    headers = None
    if props.headers is not None:
        headers = sorted((k, {True: "true", False: "false"}.get(v, str(v)) if isinstance(v, bool) else str(v))
                         for k, v in props.headers.items())
    return {
        "body": body, "routing_key": routing_key, "exchange": EXCHANGE, "headers": headers,
        "content_type": "application/json", "delivery_mode": 2, "message_id": f"id-{i}",
        "timestamp": STAMP if props.timestamp is not None else None, "offset": offset, "stream": stream,
    }


def comparable(row) -> dict:
    """A Spark Row (or dict) reduced to what ``expected_row`` gives."""
    d = row.asDict(recursive=True) if hasattr(row, "asDict") else row
    props = d["properties"]
    headers = d["headers"]
    ts = props["timestamp"]
    if ts is not None and ts.tzinfo is None:  # Spark hands timestamps back in session time (UTC)
        ts = ts.replace(tzinfo=datetime.timezone.utc)
    return {
        "body": bytes(d["body"]), "routing_key": d["routing_key"], "exchange": d["exchange"],
        "headers": sorted(headers.items()) if isinstance(headers, dict) else (sorted(headers) if headers else None),
        "content_type": props["content_type"], "delivery_mode": props["delivery_mode"],
        "message_id": props["message_id"], "timestamp": ts, "offset": d["offset"], "stream": d["stream"],
    }


def publish(broker, name: str, count: int, first: int = 0, message_fn=message) -> None:
    """Publish messages ``first`` .. ``first + count - 1`` to stream ``name`` (through EXCHANGE)."""
    conn = pika.BlockingConnection(pika.URLParameters(broker.url))
    try:
        ch = conn.channel()
        for i in range(first, first + count):
            routing_key, body, props = message_fn(i, name)
            ch.basic_publish(EXCHANGE, routing_key, body, props)
    finally:
        conn.close()


def publish_raw(broker, routing_key: str, bodies, properties: bytes, exchange: str = EXCHANGE,
                chunk: int = 5000) -> None:
    """Publish ``bodies`` (all with the encoded ``properties``) as pre-built frames, thousands per
    write: ten times pika's rate, for the tests that need 100k messages. Ends with a
    connection.close handshake, so every message has been routed when it returns."""
    publish = rawamqp.basic_publish(1, exchange, routing_key)
    with rawamqp.RawConnection(broker.host, broker.port, timeout=60) as conn:
        conn.handshake()
        conn.open_channel(1)
        frames = []
        for body in bodies:
            header = rawamqp.frame(rawamqp.FRAME_HEADER, 1, struct.pack(">HHQ", 60, 0, len(body)) + properties)
            frames.append(publish + header + (rawamqp.body_frame(1, body) if body else b""))
            if len(frames) >= chunk:
                conn.send(b"".join(frames))
                frames.clear()
        conn.send(b"".join(frames))
        conn.close_connection()


def wait_committed(broker, name: str, end: int, timeout: float = 30.0) -> None:
    """Wait until offsets below ``end`` are committed (readable by the readers)."""
    deadline = time.monotonic() + timeout
    with api(broker) as client:
        while True:
            info = client.info(name)
            if info.end >= end:
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"stream {name}: committed end {info.end} after {timeout}s, expected {end}")
            time.sleep(0.05)
