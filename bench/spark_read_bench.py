#!/usr/bin/env python3
"""Reading a stream with the ``warren`` Spark source: rows/s over the bulk path and over AMQP.

    python bench/spark_read_bench.py [--count 1000000] [--size 100] [--props same|unique]
        [--master local[2]] [--skip-amqp] [--url amqp://... --http-url http://...]

Starts its own broker (ephemeral ports, temporary data folder) unless --url is given, fills a
stream with --count messages of --size octets (raw pre-built frames, so filling is quick;
``--props unique`` gives every message its own message_id, so the property cache cannot help),
then times, on the same stream:

* ``parse``: ``records.parse_bulk`` alone on the HTTP answers, one core (no Spark, no network);
* ``http read``: ``read_range_http`` (fetch + parse, the prefetch thread included), one task;
* ``amqp read``: ``read_range_amqp``, one task;
* ``spark http -> parquet`` / ``spark amqp -> parquet``: ``spark.read.format("warren")`` written
  to Parquet, whole job (planning, tasks, Parquet encoding), with --master's cores.

Prints a table; asserts nothing beyond the row counts.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.e2e import rawamqp  # noqa: E402  (the raw-frame client of the tests)
from warren.spec.amqp0_9_1 import BasicProperties  # noqa: E402


def start_broker(tmp: Path) -> tuple[subprocess.Popen, int, int]:
    ready = tmp / "ready.json"
    log = open(tmp / "broker.log", "wb")
    proc = subprocess.Popen([sys.executable, "-m", "warren", "serve", "--host", "127.0.0.1", "--port", "0",
                             "--http-port", "0", "--data-dir", str(tmp / "data"), "--ready-file", str(ready)],
                            stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 30
    while not ready.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit((tmp / "broker.log").read_text())
        time.sleep(0.02)
    info = json.loads(ready.read_text())
    return proc, info["port"], info["http_port"]


def fill(host: str, port: int, stream: str, count: int, size: int, unique: bool) -> None:
    common = BasicProperties(content_type="application/octet-stream", delivery_mode=2).encode()
    publish = rawamqp.basic_publish(1, "", stream)
    body_pad = b"x" * max(0, size - 8)
    with rawamqp.RawConnection(host, port, timeout=120) as conn:
        conn.handshake()
        conn.open_channel(1)
        frames = []
        for i in range(count):
            body = (b"%08d" % i)[:size] + body_pad
            props = BasicProperties(content_type="application/octet-stream", delivery_mode=2,
                                    message_id=f"msg-{i}").encode() if unique else common
            header = rawamqp.frame(rawamqp.FRAME_HEADER, 1, struct.pack(">HHQ", 60, 0, len(body)) + props)
            frames.append(publish + header + rawamqp.body_frame(1, body))
            if len(frames) >= 5000:
                conn.send(b"".join(frames))
                frames.clear()
        conn.send(b"".join(frames))
        conn.close_connection()


def timed(label: str, rows_expected: int, fn, results: list, count=None) -> None:
    """Time ``fn``; its result, or ``count()`` called after the clock stopped, is the row count."""
    t0 = time.perf_counter()
    rows = fn()
    dt = time.perf_counter() - t0
    if count is not None:
        rows = count()
    assert rows == rows_expected, f"{label}: {rows} rows, expected {rows_expected}"
    results.append((label, rows, dt))
    print(f"{label:<26} {rows:>10} rows {dt:8.2f} s {rows / dt:12,.0f} rows/s", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=1_000_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--props", choices=["same", "unique"], default="same")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--records-per-partition", type=int, default=None,
                    help="default: the count split over the master's cores")
    ap.add_argument("--skip-amqp", action="store_true")
    ap.add_argument("--url", default=None, help="use this broker (amqp URL) instead of starting one")
    ap.add_argument("--http-url", default=None)
    args = ap.parse_args()

    import pika

    from warren.spark.read.amqp import read_range_amqp
    from warren.spark.read.http_api import StreamApi
    from warren.spark.read.http import read_range_http
    from warren.spark.options import parse_read_options
    from warren.spark.read.planning import StreamRange
    from warren.spark.read.records import parse_bulk

    tmp = Path(tempfile.mkdtemp(prefix="warren-spark-bench-"))
    proc = None
    try:
        if args.url:
            url, http_url = args.url, args.http_url
            parts = pika.URLParameters(url)
            host, port = parts.host, parts.port
        else:
            proc, port, http_port = start_broker(tmp)
            host = "127.0.0.1"
            url, http_url = f"amqp://guest:guest@{host}:{port}/%2F", f"http://{host}:{http_port}"
        stream = f"bench-{os.getpid()}"
        conn = pika.BlockingConnection(pika.URLParameters(url))
        conn.channel().queue_declare(stream, durable=True, arguments={"x-queue-type": "stream"})
        conn.close()
        t0 = time.perf_counter()
        fill(host, port, stream, args.count, args.size, args.props == "unique")
        api = StreamApi(http_url, "guest", "guest", "/")
        while api.info(stream).end < args.count:
            time.sleep(0.05)
        print(f"filled {args.count} x {args.size} B ({args.props} properties) in {time.perf_counter() - t0:.1f} s; "
              f"stream holds {api.info(stream).bytes / 1e6:.1f} MB", flush=True)

        results: list = []
        answers = []
        offset = 0
        while offset < args.count:
            r = api.records(stream, offset, None, 100_000, 4 << 20)
            answers.append(r.data)
            offset = r.next_offset
        api.close()
        timed("parse (1 core)", args.count, lambda: sum(parse_bulk(d, stream).num_rows for d in answers), results)

        opts = parse_read_options({"url": url, "httpUrl": http_url, "stream": stream}, batch=True)
        whole = StreamRange(stream, 0, args.count)
        timed("http read (1 task)", args.count, lambda: sum(b.num_rows for b in read_range_http(opts, whole)), results)
        if not args.skip_amqp:
            timed("amqp read (1 task)", args.count, lambda: sum(b.num_rows for b in read_range_amqp(opts, whole)),
                  results)

        from warren.spark.jobs.session import build_session

        spark = build_session("warren-read-bench", args.master, {"spark.ui.enabled": "false"})
        spark.sparkContext.setLogLevel("ERROR")
        cores = spark.sparkContext.defaultParallelism
        per_partition = args.records_per_partition or -(-args.count // cores)

        def to_parquet(transport: str) -> None:
            (spark.read.format("warren").option("url", url).option("httpUrl", http_url).option("stream", stream)
             .option("transport", transport).option("recordsPerPartition", per_partition).load()
             .write.mode("overwrite").parquet(str(tmp / f"out-{transport}")))

        def written(transport: str):
            return lambda: spark.read.parquet(str(tmp / f"out-{transport}")).count()

        to_parquet("http")  # warm up: Python workers started, modules imported
        timed(f"spark http -> parquet ({cores})", args.count, lambda: to_parquet("http"), results, written("http"))
        if not args.skip_amqp:
            timed(f"spark amqp -> parquet ({cores})", args.count, lambda: to_parquet("amqp"), results,
                  written("amqp"))
        spark.stop()
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(timeout=20)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
