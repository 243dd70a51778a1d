"""The bulk read path's own loop (warren/spark/read/http.py), without Spark: the requests of a
range grow from an eighth of ``fetchMaxBytes``, the batches parsed ahead on the helper
thread hold what one big answer holds, and every batch still held keeps its values."""

from __future__ import annotations

import itertools

import pyarrow as pa

from tests.spark.stream_helpers import EXCHANGE, api, declare_stream, publish_raw, wait_committed
from warren.spark.options import parse_read_options
from warren.spark.read import http
from warren.spark.read.planning import StreamRange
from warren.spark.read.records import FULL_ARROW_SCHEMA, arrow_schema, parse_bulk
from warren.spec.amqp0_9_1 import BasicProperties

FLAT = arrow_schema(("body", "routing_key", "exchange", "offset", "stream"))


def test_request_sizes_start_at_an_eighth_and_double_up_to_fetch_max_bytes():
    assert list(itertools.islice(http._ramp(4 << 20), 5)) == [512 << 10, 1 << 20, 2 << 20, 4 << 20, 4 << 20]
    assert list(itertools.islice(http._ramp(100_000), 3)) == [64 << 10, 100_000, 100_000]  # the floor
    assert list(itertools.islice(http._ramp(1000), 2)) == [1000, 1000]  # never above fetchMaxBytes


def test_a_range_read_in_growing_requests_gives_the_rows_of_one_answer(broker, uid):
    stream = f"http-read-{uid}"
    declare_stream(broker, stream)
    count = 3000
    # one size and layout for the first 2,000 (the strided path), then sizes that differ
    bodies = [b"%06d" % i + b"u" * 94 for i in range(2000)] + [b"v" * (i % 300) for i in range(1000)]
    publish_raw(broker, f"{stream}.k", bodies, BasicProperties(content_type="text/plain").encode())
    wait_committed(broker, stream, count)
    with api(broker) as client:
        whole = client.records(stream, 0, count, count, 16 << 20)
    assert whole.count == count
    options = parse_read_options({"url": broker.url, "stream": stream, "fetchMaxBytes": str(128 << 10)}, batch=True)
    for schema in (FLAT, FULL_ARROW_SCHEMA):
        batches = list(http.read_range_http(options, StreamRange(stream, 0, count), schema))
        sizes = [b.num_rows for b in batches]
        assert sizes[0] < sizes[1], sizes  # 64 KiB first (the floor), then 128 KiB
        got = pa.Table.from_batches(batches).to_pylist()  # every batch held till now: none overwritten
        assert got == parse_bulk(whole.data, stream, schema=schema).to_pylist()
        assert got[0]["body"] == bodies[0] and got[0]["exchange"] == EXCHANGE
    assert http._IDLE, "the read gave its pools back for the next one"
