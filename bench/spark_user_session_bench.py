#!/usr/bin/env python3
"""Reading speed in the user's own session (issue 28's "How it is judged", second yardstick).

    python bench/spark_user_session_bench.py [--count 1000000] [--rounds 3] [--parallel-gc]
        [--no-lossless] [--option KEY=VALUE ...] [--conf KEY=VALUE ...]

Starts its own broker (ephemeral ports, temporary data folder) and fills a stream with --count
messages of 100 octets (``--bodies``: 100 times ``x`` by default, as the issue's ceiling;
``numbered``: the message number in front), each with a content type and a delivery mode.
Then, in a plain
``SparkSession.builder.master("local[2]").getOrCreate()`` (nothing of ``warren pipeline``'s
tuning: no JVM options, no settings but those given with --conf and the console progress bar
off, which only draws; --parallel-gc adds
``-XX:+UseParallelGC`` to the driver as the issue's second figure did), best of --rounds runs
each, alternating which goes first, after one warm-up run of each:

* ``ceiling``: a toy source yielding pre-built pyarrow batches of 10,000 rows with the five
  columns below (constant body, routing key, exchange and stream, each as the stream's; the
  offset a fresh range per batch), two partitions, written to Parquet;
* ``warren flat``: ``spark.read.format("warren").schema("body binary, routing_key string,
  exchange string, offset long, stream string").option("url", AMQP URL)`` (the HTTP API found
  from the AMQP URL, every other option its default, or --option's), written to Parquet;
* ``warren lossless``: the same stream with every column (``headers``, ``properties``,
  ``property_list`` too: what ``warren pipeline archive`` keeps), unless --no-lossless.

Prints every run with the load average at its start and the CPU time each process spent on it
(``jvm``: the driver, which runs the tasks in local mode, and ``py``: its Python workers, from
/proc; ``broker``: the broker serving the records), then the best and the median rate of each
with its median CPU times, and warren flat's rate over the ceiling's, best and by medians (the
issue's figure: 0.46; its goal: 0.9). The machine is shared: compare only figures of one run,
and mind the load printed beside them. With two cores busy, a job's rate follows the CPU time
it needs, so the CPU columns say where the difference goes even when the load makes the
wall-clock rates noisy.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
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

FLAT = "body binary, routing_key string, exchange string, offset long, stream string"
TOY_MODULE = '''
import numpy as np
import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

ROWS = 10_000
_TEMPLATE = {}


class Part(InputPartition):
    def __init__(self, start, end):
        self.start, self.end = start, end


class Reader(DataSourceReader):
    def __init__(self, options):
        self.rows, self.parts = int(options.get("rows")), int(options.get("partitions", 2))
        self.numbered = options.get("bodies") == "numbered"

    def partitions(self):
        step = -(-self.rows // self.parts)
        return [Part(a, min(a + step, self.rows)) for a in range(0, self.rows, step)]

    def read(self, part):
        if not _TEMPLATE:
            n = ROWS
            def const(value, typ):
                return pa.Array.from_buffers(typ, n, [None, pa.py_buffer(np.arange(n + 1, dtype=np.int32) * len(value)),
                                                      pa.py_buffer(value * n)])
            body = const(b"x" * 100, pa.binary())
            if self.numbered:  # the row number in front, as the stream's numbered bodies (repeating every ROWS)
                body = pa.array([b"%08d" % i + b"x" * 92 for i in range(n)], type=pa.binary())
            _TEMPLATE.update(body=body, routing_key=const(b"bench-stream", pa.string()),
                             exchange=const(b"", pa.string()), stream=const(b"bench-stream", pa.string()))
        t = _TEMPLATE
        schema = pa.schema([("body", pa.binary()), ("routing_key", pa.string()), ("exchange", pa.string()),
                            ("offset", pa.int64()), ("stream", pa.string())])
        for a in range(part.start, part.end, ROWS):
            n = min(ROWS, part.end - a)
            yield pa.RecordBatch.from_arrays(
                [t["body"].slice(0, n), t["routing_key"].slice(0, n), t["exchange"].slice(0, n),
                 pa.array(np.arange(a, a + n, dtype=np.int64)), t["stream"].slice(0, n)], schema=schema)


class UserToy(DataSource):
    @classmethod
    def name(cls):
        return "user_toy"

    def schema(self):
        return "body binary, routing_key string, exchange string, offset long, stream string"

    def reader(self, schema):
        return Reader(self.options)
'''


def fill(host: str, port: int, stream: str, count: int, bodies: str) -> None:
    """``count`` messages of 100 octets with a content type and a delivery mode, published to
    ``stream`` through the default exchange as pre-built frames."""
    props = BasicProperties(content_type="application/octet-stream", delivery_mode=2).encode()
    publish = rawamqp.basic_publish(1, "", stream)
    header = rawamqp.frame(rawamqp.FRAME_HEADER, 1, struct.pack(">HHQ", 60, 0, 100) + props)
    with rawamqp.RawConnection(host, port, timeout=120) as conn:
        conn.handshake()
        conn.open_channel(1)
        frames = []
        for i in range(count):
            body = b"%08d" % i + b"x" * 92 if bodies == "numbered" else b"x" * 100
            frames.append(publish + header + rawamqp.body_frame(1, body))
            if len(frames) >= 5000:
                conn.send(b"".join(frames))
                frames.clear()
        conn.send(b"".join(frames))
        conn.close_connection()


_TICK = os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            text = f.read()
    except OSError:
        return None
    return text[text.rindex(")") + 2:].split()  # fields from the state on (the name may hold spaces)


def cpu_seconds(pid: int, tree: bool = False) -> float:
    """CPU time (user + system) of process ``pid``; ``tree``: with its descendants' (living
    ones, and those it or they reaped)."""
    fields = _stat(pid)
    if fields is None:
        return 0.0
    total = int(fields[11]) + int(fields[12])  # utime, stime
    if tree:
        children: dict[int, list[int]] = {}
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                f = _stat(int(entry))
                if f is not None:
                    children.setdefault(int(f[1]), []).append(int(entry))
        todo = list(children.get(pid, ()))
        total += int(fields[13]) + int(fields[14])  # cutime, cstime: the reaped ones
        while todo:
            child = todo.pop()
            f = _stat(child)
            if f is not None:
                total += sum(int(x) for x in f[11:15])
            todo.extend(children.get(child, ()))
    return total / _TICK


def jvm_pid() -> int | None:
    """The JVM this process started (py4j's gateway): its child running java."""
    for entry in os.listdir("/proc"):
        f = _stat(int(entry)) if entry.isdigit() else None
        if f is not None and int(f[1]) == os.getpid():
            try:
                if "java" in open(f"/proc/{entry}/cmdline", "rb").read().split(b"\0")[0].decode():
                    return int(entry)
            except OSError:
                continue
    return None


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--parallel-gc", action="store_true")
    ap.add_argument("--no-lossless", action="store_true")
    ap.add_argument("--bodies", choices=("constant", "numbered"), default="constant",
                    help="the bodies of the stream and of the ceiling's batches: 100 times 'x' (the issue's toy), "
                         "or the message number in 8 digits then 92 'x' (as bench/spark_read_bench.py's stream)")
    ap.add_argument("--option", action="append", default=[], help="a warren read option KEY=VALUE")
    ap.add_argument("--conf", action="append", default=[], help="a session setting KEY=VALUE")
    ap.add_argument("--variant", action="append", default=[],
                    help="one more flat job with options of its own: NAME:KEY=VALUE[,KEY=VALUE...]")
    args = ap.parse_args()

    import pika

    from warren.spark.read.http_api import StreamApi

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a kill still stops the broker (finally)
    tmp = Path(tempfile.mkdtemp(prefix="warren-user-bench-"))
    proc = None
    spark = None
    try:
        proc, port, http_port = start_broker(tmp)
        url, stream = f"amqp://guest:guest@127.0.0.1:{port}/%2F", "bench-stream"
        conn = pika.BlockingConnection(pika.URLParameters(url))
        conn.channel().queue_declare(stream, durable=True, arguments={"x-queue-type": "stream"})
        conn.close()
        t0 = time.perf_counter()
        fill("127.0.0.1", port, stream, args.count, args.bodies)
        with StreamApi(f"http://127.0.0.1:{http_port}", "guest", "guest", "/") as api:
            while api.info(stream).end < args.count:
                time.sleep(0.05)
        print(f"filled {args.count:,} messages of 100 octets in {time.perf_counter() - t0:.1f} s", flush=True)

        (tmp / "toy").mkdir()
        (tmp / "toy" / "user_toy.py").write_text(TOY_MODULE)
        sys.path.insert(0, str(tmp / "toy"))
        # the Python workers import the toy from there too (they inherit the environment)
        os.environ["PYTHONPATH"] = os.pathsep.join([str(tmp / "toy"), os.environ.get("PYTHONPATH", "")])
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # as with the venv activated
        from pyspark.sql import SparkSession
        from user_toy import UserToy

        builder = SparkSession.builder.master("local[2]").config("spark.ui.showConsoleProgress", "false")
        if args.parallel_gc:
            builder = builder.config("spark.driver.extraJavaOptions", "-XX:+UseParallelGC")
        for item in args.conf:
            key, _, value = item.partition("=")
            builder = builder.config(key, value)
        spark = builder.getOrCreate()
        spark.sparkContext.setLogLevel("ERROR")
        spark.dataSource.register(UserToy)
        options = dict(item.partition("=")[::2] for item in args.option)

        def warren(schema: str | None, extra: dict | None = None):
            r = spark.read.format("warren")
            if schema is not None:
                r = r.schema(schema)
            r = r.option("url", url).option("stream", stream)
            if schema is None:  # every column
                r = r.option("includeHeaders", "true").option("includeProperties", "true") \
                    .option("includePropertyList", "true")
            for key, value in {**options, **(extra or {})}.items():
                r = r.option(key, value)
            return r.load()

        jobs = {
            "ceiling": lambda: spark.read.format("user_toy").option("rows", args.count).option("partitions", 2)
            .option("bodies", args.bodies).load(),
            "warren flat": lambda: warren(FLAT),
        }
        if not args.no_lossless:
            jobs["warren lossless"] = lambda: warren(None)
        for variant in args.variant:
            name, _, settings = variant.partition(":")
            extra = dict(item.partition("=")[::2] for item in settings.split(",") if item)
            jobs[f"flat {name}"] = lambda extra=extra: warren(FLAT, extra)

        jvm = jvm_pid()

        def cpu() -> tuple[float, float, float]:
            whole = cpu_seconds(jvm, tree=True)
            own = cpu_seconds(jvm)
            return own, whole - own, cpu_seconds(proc.pid)

        cpus: dict[str, list[list[float]]] = {label: [] for label in jobs}

        def run(label: str) -> float:
            out = str(tmp / "out")
            load = os.getloadavg()[0]
            before = cpu()
            t = time.perf_counter()
            jobs[label]().write.mode("overwrite").parquet(out)
            dt = time.perf_counter() - t
            used = [b - a for a, b in zip(before, cpu())]
            cpus[label].append(used)
            rows = spark.read.parquet(out).count()
            assert rows == args.count, f"{label}: {rows} rows, expected {args.count}"
            print(f"{label:<20} {rows:>10,} rows {dt:7.2f} s {rows / dt:12,.0f} rows/s  CPU s: jvm {used[0]:5.2f} "
                  f"py {used[1]:5.2f} broker {used[2]:5.2f}  (load {load:.1f})", flush=True)
            return rows / dt

        for label in jobs:  # warm-up: Python workers started, modules imported, the JIT warm
            run(label)
        rates: dict[str, list[float]] = {label: [] for label in jobs}
        order = list(jobs)
        for i in range(args.rounds):
            for label in (order if i % 2 == 0 else order[::-1]):
                rates[label].append(run(label))
        print()
        best = {label: max(rs) for label, rs in rates.items()}
        median = {label: statistics.median(rs) for label, rs in rates.items()}
        for label, rate in best.items():
            used = [statistics.median(c[k] for c in cpus[label][1:]) for k in range(3)]  # not the warm-up
            print(f"best {label:<20} {rate:12,.0f} rows/s, median {median[label]:12,.0f}  median CPU s: "
                  f"jvm {used[0]:.2f} py {used[1]:.2f} broker {used[2]:.2f}")
        for label, rate in best.items():
            if label != "ceiling":
                print(f"{label} / ceiling: {rate / best['ceiling']:.2f} best of {args.rounds}, "
                      f"{median[label] / median['ceiling']:.2f} by medians")
        if "warren lossless" in best:
            print(f"lossless / flat: {best['warren lossless'] / best['warren flat']:.2f}")
        print(f"load average now {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores "
              f"({'-XX:+UseParallelGC' if args.parallel_gc else 'default JVM options'}, {args.bodies} bodies)")
    finally:
        if spark is not None:
            spark.stop()
        if proc is not None:
            proc.terminate()
            proc.wait(timeout=20)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
