#!/usr/bin/env python3
"""Reading a stream with the ``warren`` Spark source, against the ceiling of Spark's Python
data source path measured in the same run.

    python bench/spark_read_bench.py [--count 1000000] [--size 100] [--props same|unique|headers]
        [--rounds 3] [--master local[2]] [--full] [--lossless] [--skip-amqp] [--skip-parts]

Starts its own broker (ephemeral ports, temporary data folder), fills a stream with --count
messages of --size octets (raw pre-built frames, so filling is quick): ``same`` properties on
every message (content type + delivery mode), ``unique`` a message id per message, ``headers``
a message id and a headers table of its own per message. Then, on the same stream:

* ``parse``: ``records.parse_bulk`` alone on the HTTP answers, one core (no Spark, no network);
* ``http read``: ``read_range_http`` (fetch + parse, the prefetch thread included), one task;
* ``amqp read``: ``read_range_amqp``, one task (unless --skip-amqp);
* the Spark jobs, whole job (planning, tasks, Parquet encoding) with --master's cores,
  ``--rounds`` times, alternating which runs first, after one warm-up run of each:
  ``toy -> parquet``: ``bench/spark_toy_source.py``, pre-built Arrow batches with the same
  columns as the warren source's default schema (the ceiling); ``warren -> parquet``: the
  ``warren`` source, default (flat) schema; with ``--full`` also ``warren full -> parquet``
  (``includeHeaders`` and ``includeProperties``), with ``--lossless`` ``warren lossless -> parquet``
  (those and ``property_list``: what ``warren pipeline archive`` keeps by default).

Prints each run, then the medians, the warren/toy ratio and the load average seen during the
Spark runs (the machine is shared: compare only figures from the same run).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
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


def fill(host: str, port: int, stream: str, count: int, size: int, props: str) -> None:
    common = BasicProperties(content_type="application/octet-stream", delivery_mode=2).encode()
    publish = rawamqp.basic_publish(1, "", stream)
    body_pad = b"x" * max(0, size - 8)
    with rawamqp.RawConnection(host, port, timeout=120) as conn:
        conn.handshake()
        conn.open_channel(1)
        frames = []
        for i in range(count):
            body = (b"%08d" % i)[:size] + body_pad
            if props == "same":
                encoded = common
            else:
                encoded = BasicProperties(
                    content_type="application/octet-stream", delivery_mode=2, message_id=f"msg-{i}",
                    headers={"seq": i, "source": "bench"} if props == "headers" else None).encode()
            header = rawamqp.frame(rawamqp.FRAME_HEADER, 1, struct.pack(">HHQ", 60, 0, len(body)) + encoded)
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


def median_line(label: str, rates: list[float]) -> str:
    return f"{label:<28} median {statistics.median(rates):12,.0f} rows/s  (runs: " + \
        ", ".join(f"{r:,.0f}" for r in rates) + ")"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=1_000_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--props", choices=["same", "unique", "headers"], default="same")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--full", action="store_true", help="also time the full schema (headers and properties)")
    ap.add_argument("--lossless", action="store_true",
                    help="also time the lossless schema warren pipeline archive keeps (every column, property_list too)")
    ap.add_argument("--records-per-partition", type=int, default=None,
                    help="default: the count split over the master's cores")
    ap.add_argument("--skip-amqp", action="store_true")
    ap.add_argument("--skip-parts", action="store_true", help="only the Spark jobs")
    ap.add_argument("--jvm-options", default=None,
                    help="driver JVM options instead of warren pipeline's (warren/spark/jobs/session.py), e.g. "
                         "--jvm-options='-XX:TieredStopAtLevel=1 -XX:+UseSerialGC' (the tests' quick-start JIT)")
    args = ap.parse_args()

    import pika

    from warren.spark.options import parse_read_options
    from warren.spark.read.amqp import read_range_amqp
    from warren.spark.read.http import read_range_http
    from warren.spark.read.http_api import StreamApi
    from warren.spark.read.planning import StreamRange
    from warren.spark.read.records import parse_bulk

    tmp = Path(tempfile.mkdtemp(prefix="warren-spark-bench-"))
    proc = None
    try:
        proc, port, http_port = start_broker(tmp)
        host = "127.0.0.1"
        url, http_url = f"amqp://guest:guest@{host}:{port}/%2F", f"http://{host}:{http_port}"
        stream = f"bench-{os.getpid()}"
        conn = pika.BlockingConnection(pika.URLParameters(url))
        conn.channel().queue_declare(stream, durable=True, arguments={"x-queue-type": "stream"})
        conn.close()
        t0 = time.perf_counter()
        fill(host, port, stream, args.count, args.size, args.props)
        api = StreamApi(http_url, "guest", "guest", "/")
        while api.info(stream).end < args.count:
            time.sleep(0.05)
        print(f"filled {args.count} x {args.size} B ({args.props} properties) in {time.perf_counter() - t0:.1f} s; "
              f"stream holds {api.info(stream).bytes / 1e6:.1f} MB", flush=True)

        results: list = []
        if not args.skip_parts:
            answers = []
            offset = 0
            while offset < args.count:
                r = api.records(stream, offset, None, 100_000, 4 << 20)
                answers.append(r.data)
                offset = r.next_offset
            timed("parse (1 core)", args.count, lambda: sum(parse_bulk(d, stream).num_rows for d in answers),
                  results)
            opts = parse_read_options({"url": url, "httpUrl": http_url, "stream": stream}, batch=True)
            whole = StreamRange(stream, 0, args.count)
            timed("http read (1 task)", args.count, lambda: sum(b.num_rows for b in read_range_http(opts, whole)),
                  results)
            if not args.skip_amqp:
                timed("amqp read (1 task)", args.count,
                      lambda: sum(b.num_rows for b in read_range_amqp(opts, whole)), results)
        api.close()

        # the workers import the toy source from bench/ (the JVM, and so they, inherit this)
        os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT / "bench"), str(ROOT), os.environ.get("PYTHONPATH", "")])
        from spark_toy_source import ToySource

        from warren.spark.jobs.session import build_session

        conf = {"spark.ui.enabled": "false", "spark.local.dir": str(tmp / "spark")}
        if args.jvm_options is not None:
            conf["spark.driver.extraJavaOptions"] = args.jvm_options
        spark = build_session("warren-read-bench", args.master, conf)
        spark.sparkContext.setLogLevel("ERROR")
        spark.dataSource.register(ToySource)
        cores = spark.sparkContext.defaultParallelism
        per_partition = args.records_per_partition or -(-args.count // cores)

        def warren_df(full: bool, lossless: bool = False):
            r = (spark.read.format("warren").option("url", url).option("httpUrl", http_url).option("stream", stream)
                 .option("recordsPerPartition", per_partition))
            if full or lossless:
                r = r.option("includeHeaders", "true").option("includeProperties", "true")
            if lossless:
                r = r.option("includePropertyList", "true")
            return r.load()

        jobs = {
            "toy -> parquet": lambda: spark.read.format("warren_toy").option("rows", args.count)
            .option("partitions", -(-args.count // per_partition)).option("size", args.size).load(),
            "warren -> parquet": lambda: warren_df(False),
        }
        if args.full:
            jobs["warren full -> parquet"] = lambda: warren_df(True)
        if args.lossless:
            jobs["warren lossless -> parquet"] = lambda: warren_df(True, lossless=True)

        def run(label: str) -> float:
            out = str(tmp / "out")
            t0 = time.perf_counter()
            jobs[label]().write.mode("overwrite").parquet(out)
            dt = time.perf_counter() - t0
            rows = spark.read.parquet(out).count()
            assert rows == args.count, f"{label}: {rows} rows, expected {args.count}"
            print(f"{label:<28} {rows:>10} rows {dt:8.2f} s {rows / dt:12,.0f} rows/s  "
                  f"(load {os.getloadavg()[0]:.1f})", flush=True)
            return rows / dt

        for label in jobs:  # warm-up: Python workers started, modules imported, JIT warm
            run(label)
        rates: dict[str, list[float]] = {label: [] for label in jobs}
        loads = []
        order = list(jobs)
        for i in range(args.rounds):
            for label in (order if i % 2 == 0 else order[::-1]):
                loads.append(os.getloadavg()[0])
                rates[label].append(run(label))
        spark.stop()
        print()
        for label, rs in rates.items():
            print(median_line(label, rs))
        toy = statistics.median(rates["toy -> parquet"])
        for label in rates:
            if label != "toy -> parquet":
                print(f"{label}: {100 * statistics.median(rates[label]) / toy:.0f} % of the toy source "
                      f"({cores} cores, {args.props} properties, {args.size} B bodies)")
        print(f"load average (1 min) during the Spark runs: median {statistics.median(loads):.1f}, "
              f"min {min(loads):.1f}, max {max(loads):.1f} on {os.cpu_count()} cores")
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(timeout=20)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
