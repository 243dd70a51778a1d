#!/usr/bin/env python3
"""A 1 % selective read pushed down to the broker, against the same query reading everything.

    python bench/spark_filter_bench.py [--count 500000] [--keys 100] [--run 1000] [--rounds 3]
        [--master local[2]] [--on routing_key|header|property]

Starts its own broker (ephemeral ports, temporary data folder) and fills a stream with --count
messages of 100 octets whose routing keys come in runs: --run messages with key ``k000``, then
--run with ``k001``, … cycling through --keys keys, so one key is 1/keys of the stream (1 % by
default) in runs, as events of one source or region arrive in bursts. Each message of key
``k<j>`` also carries the header ``region`` = ``r<j>`` (and an integer header ``seq``) and the
app id ``a<j>``. Then, alternating which goes first, --rounds times after a warm-up of each:

* ``full read``: the filter (``--on``: ``routing_key = 'k007'``, ``headers.region = 'r007'``
  with ``headers`` read as a struct of that header, or ``properties.app_id = 'a007'``) without
  pushdown: every record crosses the HTTP API and Spark drops 99 % of them;
* ``pushed``: the same with ``pushFilters=true``: for the routing key the broker sends only the
  blocks of 128 offsets whose Bloom filter may hold the key (warren/broker/queues/stream_filter.py);
  for a header or a property only the matching records, checked one by one where they are read
  (warren/broker/queues/stream_match.py).

Both must count the same rows. Also prints how many records the broker sent for the pushed
filter (one HTTP pass, no Spark) against the stream's size, and the load average before and
after: the machine is shared, compare only figures of one run.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import struct
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.spark_read_bench import start_broker  # noqa: E402
from tests.e2e import rawamqp  # noqa: E402
from warren.spec.amqp0_9_1 import BasicProperties  # noqa: E402

EXCHANGE = "filter-bench"


def fill(host: str, port: int, stream: str, count: int, keys: int, run: int) -> None:
    """Message i: routing key k<j>, header ``region`` r<j> and app id a<j>, j = (i // run) % keys."""
    props = [BasicProperties(content_type="application/octet-stream", delivery_mode=2, app_id=f"a{j:03d}",
                             headers={"region": f"r{j:03d}", "seq": j}).encode() for j in range(keys)]
    with rawamqp.RawConnection(host, port, timeout=120) as conn:
        conn.handshake()
        conn.open_channel(1)
        frames = []
        for i in range(count):
            body = b"%08d" % i + b"x" * 92
            j = (i // run) % keys
            key = f"k{j:03d}"
            props_j = props[j]
            header = rawamqp.frame(rawamqp.FRAME_HEADER, 1, struct.pack(">HHQ", 60, 0, len(body)) + props_j)
            frames.append(rawamqp.basic_publish(1, EXCHANGE, key) + header + rawamqp.body_frame(1, body))
            if len(frames) >= 5000:
                conn.send(b"".join(frames))
                frames.clear()
        conn.send(b"".join(frames))
        conn.close_connection()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=500_000)
    ap.add_argument("--keys", type=int, default=100)
    ap.add_argument("--run", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--on", choices=("routing_key", "header", "property"), default="routing_key",
                    help="what the filter tests: the routing key (blocks skipped by the Bloom filters), the "
                         "header region read as a struct field, or the app_id property (record by record)")
    args = ap.parse_args()

    import pika

    from warren.spark.read.http_api import StreamApi

    tmp = Path(tempfile.mkdtemp(prefix="warren-filter-bench-"))
    proc, port, http_port = start_broker(tmp)
    url, http_url, stream = f"amqp://guest:guest@127.0.0.1:{port}/%2F", f"http://127.0.0.1:{http_port}", "events"
    try:
        conn = pika.BlockingConnection(pika.URLParameters(url))
        ch = conn.channel()
        ch.exchange_declare(EXCHANGE, "topic", durable=True)
        ch.queue_declare(stream, durable=True, arguments={"x-queue-type": "stream"})
        ch.queue_bind(stream, EXCHANGE, "#")
        conn.close()
        t0 = time.perf_counter()
        fill("127.0.0.1", port, stream, args.count, args.keys, args.run)
        with StreamApi(http_url, "guest", "guest", "/") as api:
            while api.info(stream).end < args.count:
                time.sleep(0.1)
            print(f"filled {args.count:,} messages in {time.perf_counter() - t0:.1f} s", flush=True)
            where, wanted = {
                "routing_key": ("routing_key = 'k007'", {"routing_keys": frozenset({"k007"})}),
                "header": ("headers.region = 'r007'", {"matches": (("header.region", frozenset({"r007"})),)}),
                "property": ("properties.app_id = 'a007'", {"matches": (("property.app_id", frozenset({"a007"})),)}),
            }[args.on]
            sent, offset, t0 = 0, 0, time.perf_counter()
            while offset < args.count:
                answer = api.records(stream, offset, args.count, 100_000, 16 << 20, **wanted)
                sent += answer.count
                offset = answer.next_offset
            dt = time.perf_counter() - t0
        expected = sum(1 for i in range(args.count) if (i // args.run) % args.keys == 7)
        print(f"the broker sends {sent:,} records for {where} of {args.count:,} "
              f"({sent / args.count:.2%}; {expected:,} match) in {dt:.2f} s over HTTP", flush=True)
        from warren.spark.schema import PROPERTIES_DDL

        schema = {"routing_key": None,
                  "header": "body binary, routing_key string, offset long, headers struct<region: string>",
                  "property": f"body binary, routing_key string, offset long, properties {PROPERTIES_DDL}"}[args.on]

        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        from pyspark.sql import SparkSession

        from warren.spark import register

        spark = (SparkSession.builder.master(args.master).appName("warren-filter-bench")
                 .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
                 .config("spark.sql.python.filterPushdown.enabled", "true").getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")
        register(spark)

        def query(pushed: bool) -> int:
            reader = spark.read.format("warren")
            if schema is not None:
                reader = reader.schema(schema)
            return (reader.option("url", url).option("httpUrl", http_url)
                    .option("stream", stream).option("pushFilters", "true" if pushed else "false").load()
                    .where(where).count())

        load_before = os.getloadavg()[0]
        times: dict[str, list[float]] = {"full read": [], "pushed": []}
        order = [("full read", False), ("pushed", True)]
        for label, pushed in order:  # warm-up
            assert query(pushed) == expected
        for r in range(args.rounds):
            for label, pushed in (order if r % 2 == 0 else order[::-1]):
                t = time.perf_counter()
                rows = query(pushed)
                dt = time.perf_counter() - t
                assert rows == expected, f"{label}: {rows} rows, expected {expected}"
                times[label].append(dt)
                print(f"{label:<10} {rows:>8} rows of {args.count:,} in {dt:6.2f} s", flush=True)
        load_after = os.getloadavg()[0]
        full, pushed = statistics.median(times["full read"]), statistics.median(times["pushed"])
        print(f"medians: full read {full:.2f} s, pushed {pushed:.2f} s: {full / pushed:.1f}x "
              f"(load average {load_before:.1f} before, {load_after:.1f} after)", flush=True)
        spark.stop()
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
