#!/usr/bin/env python3
"""Spark → exchange write throughput of the ``warren`` data source, with publisher confirms.

What it measures
----------------
For each message size (``--sizes``, default 100 and 1000 bytes):

* **spark**: ``df.write.format("warren")`` of ``--rows`` rows (``--partitions`` tasks) into a fresh
  queue through the default exchange; rows/s = rows / wall time of ``save()``. The DataFrame
  (body, routing_key) is cached and counted first, so generating it is not timed; the
  deduplication header and message id are set on every message as in real use. Afterwards
  the queue must hold exactly ``--rows`` messages (checked).
* **drain**: the queue the Spark write filled, read back by ``mode=drain`` (``--partitions``
  consumers) into Spark's ``noop`` sink; the queue must be empty afterwards (checked).
* **publisher**: the same messages through ``ConfirmPublisher`` alone (no Spark), one
  connection, for each ``--windows`` value: what one task can do at most.
* **pika**: pika's BlockingConnection with confirms, one publish at a time (``--pika-rows``
  messages): the baseline the confirm window replaces.
* **ceiling** (``--perf``): the broker's own publish ceiling under confirms, measured with the
  shared C load generator (``/work/shared/perf/amqp-perf.c``, built into a temporary folder
  with ``cc`` and librabbitmq): ``--partitions`` publishers, no consumer, window
  ``--perf-window``, same body size. With ``--rounds N`` the Spark write and the ceiling run
  alternately N times and the medians are printed with the load average (the machine is
  shared: only figures from the same run compare).

With ``--cpu`` each Spark write also reports where the CPU went, per row: Spark's JVM (driver
and executor are one JVM under ``local[N]``), its Python workers (the writer's tasks) and, with
``--start-warren``, the broker (from /proc, cumulative CPU of each process before and after the
write; a process that exits during the write is missed, none does here).

The broker is ``--url``, or with ``--start-warren`` a Warren started here on an ephemeral port
(its data in a temporary directory, stopped at the end). Queues are named
``warren-spark-bench-<hex>`` and deleted afterwards. Spark runs ``--master`` (default
``local[2]``), UI off. Numbers depend on the broker as much as on the client: compare runs on
the same machine.

    .venv/bin/python bench/spark_write_bench.py --start-warren [--rows 200000] [--sizes 100,1000]
    .venv/bin/python bench/spark_write_bench.py --url amqp://guest:guest@127.0.0.1:5672/%2F  # e.g. RabbitMQ
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from warren.spark.write.publisher import ConfirmPublisher  # noqa: E402
from warren.spec import amqp0_9_1 as spec  # noqa: E402


def start_warren(tmp: Path) -> tuple[subprocess.Popen, str]:
    ready = tmp / "ready.json"
    proc = subprocess.Popen([sys.executable, "-m", "warren", "serve", "--host", "127.0.0.1", "--port", "0",
                             "--http-port", "-1", "--data-dir", str(tmp / "data"), "--ready-file", str(ready)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + 60  # a loaded machine starts slowly
    while not ready.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise SystemExit("warren did not start")
        time.sleep(0.05)
    port = json.loads(ready.read_text())["port"]
    return proc, f"amqp://guest:guest@127.0.0.1:{port}/%2F"


class Queues:
    """Fresh queues through pika; each run's count is checked, then the queue deleted."""

    def __init__(self, url: str) -> None:
        import pika

        self.conn = pika.BlockingConnection(pika.URLParameters(url))
        self.ch = self.conn.channel()

    def fresh(self) -> str:
        name = f"warren-spark-bench-{uuid.uuid4().hex[:8]}"
        self.ch.queue_declare(name)
        return name

    def finish(self, name: str, expected: int) -> None:
        count = self.ch.queue_declare(name, passive=True).method.message_count
        self.ch.queue_delete(name)
        if count != expected:
            raise SystemExit(f"queue {name} holds {count} messages, expected {expected}")

    def close(self) -> None:
        self.conn.close()


def _cpu_seconds(pid: int) -> float:
    """User + system CPU of one process so far (0 if it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _descendants(pid: int) -> list[int]:
    found, frontier = [], [pid]
    while frontier:
        parent = frontier.pop()
        kids = []
        try:
            for task in os.listdir(f"/proc/{parent}/task"):
                with open(f"/proc/{parent}/task/{task}/children") as f:
                    kids += [int(k) for k in f.read().split()]
        except OSError:
            pass
        found += kids
        frontier += kids
    return found


class CpuSplit:
    """CPU of Spark's JVM, its Python workers and the broker between ``start`` and ``stop``."""

    def __init__(self, spark, broker_pid: int | None) -> None:
        self.jvm = spark.sparkContext._gateway.proc.pid  # spark-submit exec's the JVM in place
        self.broker = broker_pid

    def _snapshot(self) -> dict:
        python = {pid: _cpu_seconds(pid) for pid in _descendants(self.jvm)}
        return {"jvm": _cpu_seconds(self.jvm), "python": python,
                "broker": _cpu_seconds(self.broker) if self.broker else 0.0}

    def start(self) -> None:
        self.before = self._snapshot()

    def stop(self) -> dict:
        after = self._snapshot()
        python = sum(cpu - self.before["python"].get(pid, 0.0) for pid, cpu in after["python"].items())
        return {"jvm": after["jvm"] - self.before["jvm"], "python": python,
                "broker": after["broker"] - self.before["broker"]}


def bench_spark(spark, url: str, queues: Queues, rows: int, size: int, partitions: int,
                cpu: CpuSplit | None = None, drain: bool = True) -> tuple[float, float | None]:
    df = spark.range(0, rows, numPartitions=partitions).selectExpr(
        f"cast(repeat('x', {size}) as binary) as body").cache()
    df.count()
    queue = queues.fresh()
    if cpu is not None:
        cpu.start()
    started = time.perf_counter()
    df.write.format("warren").mode("append").option("url", url).option("exchange", "") \
        .option("routingKey", queue).save()
    elapsed = time.perf_counter() - started
    if cpu is not None:
        split = cpu.stop()
        print(f"  CPU per row (us): JVM {split['jvm'] / rows * 1e6:.2f}, Python workers "
              f"{split['python'] / rows * 1e6:.2f}, broker {split['broker'] / rows * 1e6:.2f}; "
              f"wall {elapsed / rows * 1e6:.2f}", flush=True)
    df.unpersist()
    count = queues.ch.queue_declare(queue, passive=True).method.message_count
    if count != rows:
        raise SystemExit(f"queue {queue} holds {count} messages after the write, expected {rows}")
    if not drain:
        queues.ch.queue_purge(queue)
        queues.finish(queue, 0)
        return rows / elapsed, None
    started = time.perf_counter()
    drained = spark.read.format("warren").option("mode", "drain").option("url", url).option("queue", queue) \
        .option("numPartitions", str(partitions)).load().write.format("noop").mode("overwrite").save()
    drain_elapsed = time.perf_counter() - started
    queues.finish(queue, 0)  # the drain left it empty
    del drained
    return rows / elapsed, rows / drain_elapsed


def bench_publisher(url: str, queues: Queues, rows: int, size: int, window: int) -> float:
    queue = queues.fresh()
    body = b"x" * size
    started = time.perf_counter()
    with ConfirmPublisher(url, window=window) as publisher:
        for i in range(rows):
            mid = f"bench:0:0:{i}"
            props = spec.BasicProperties(headers={"x-deduplication-header": mid}, message_id=mid).encode()
            publisher.publish("", queue, props, body)
        publisher.finish()
    elapsed = time.perf_counter() - started
    queues.finish(queue, rows)
    return rows / elapsed


def bench_pika(url: str, queues: Queues, rows: int, size: int) -> float:
    import pika

    queue = queues.fresh()
    conn = pika.BlockingConnection(pika.URLParameters(url))
    ch = conn.channel()
    ch.confirm_delivery()
    body = b"x" * size
    started = time.perf_counter()
    for i in range(rows):
        ch.basic_publish("", queue, body, pika.BasicProperties(message_id=str(i)))
    elapsed = time.perf_counter() - started
    conn.close()
    queues.finish(queue, rows)
    return rows / elapsed


def build_perf(tmp: Path) -> str | None:
    """The shared load generator, compiled here (None when it cannot be)."""
    source = Path("/work/shared/perf/amqp-perf.c")
    binary = tmp / "amqp-perf"
    if not source.exists():
        return None
    r = subprocess.run(["cc", "-O2", "-o", str(binary), str(source), "-lrabbitmq", "-pthread"],
                       capture_output=True, text=True)
    return str(binary) if r.returncode == 0 else None


def bench_ceiling(perf: str, url: str, size: int, publishers: int, window: int, seconds: int) -> float:
    """Messages/s the broker confirms from ``publishers`` C publishers (amqp-perf, no consumer)."""
    import pika

    params = pika.URLParameters(url)
    queue = f"warren-spark-bench-perf-{uuid.uuid4().hex[:8]}"
    r = subprocess.run([perf, "-H", params.host, "-p", str(params.port), "-x", str(publishers), "-y", "0",
                        "-s", str(size), "-c", str(window), "-d", str(seconds), "-W", "1", "-q", queue],
                       capture_output=True, text=True, timeout=seconds + 120)
    if r.returncode != 0:
        raise SystemExit(f"amqp-perf failed: {r.stderr or r.stdout}")
    result = json.loads(r.stdout.strip().splitlines()[-1])
    return result["confirmed_per_s"]


def spark_session(master: str):
    from warren.spark.jobs.session import build_session

    spark = build_session("warren spark write bench", master, {"spark.ui.enabled": "false"})
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--url", default="amqp://guest:guest@127.0.0.1:5672/%2F")
    ap.add_argument("--start-warren", action="store_true", help="start a private Warren on an ephemeral port")
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--sizes", default="100,1000")
    ap.add_argument("--partitions", type=int, default=2)
    ap.add_argument("--windows", default="100,1000,5000")
    ap.add_argument("--pika-rows", type=int, default=3000)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--skip-spark", action="store_true")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--perf", action="store_true", help="alternate the Spark write with the broker's ceiling")
    ap.add_argument("--perf-window", type=int, default=1000)
    ap.add_argument("--perf-seconds", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--cpu", action="store_true", help="split each Spark write's CPU per row: JVM, Python, broker")
    ap.add_argument("--no-extras", action="store_true", help="only the Spark write and the ceiling (no drain, "
                    "publisher, pika)")
    args = ap.parse_args()

    proc = None
    tmp = tempfile.TemporaryDirectory()
    url = args.url
    if args.start_warren:
        proc, url = start_warren(Path(tmp.name))
    results = []
    try:
        queues = Queues(url)
        perf = build_perf(Path(tmp.name)) if args.perf else None
        if args.perf and perf is None:
            print("amqp-perf could not be built (cc and librabbitmq-dev needed): no ceiling", flush=True)
        spark = None if args.skip_spark else spark_session(args.master)
        cpu = CpuSplit(spark, proc.pid if proc is not None else None) if args.cpu and spark is not None else None
        for size in (int(s) for s in args.sizes.split(",")):
            if spark is not None:
                bench_spark(spark, url, queues, min(args.rows, 20_000), size, args.partitions,
                            drain=not args.no_extras)  # warm-up
                writes, drains, ceilings, loads = [], [], [], []
                for i in range(args.rounds):
                    order = ["spark", "perf"] if i % 2 == 0 else ["perf", "spark"]
                    for what in order:
                        loads.append(os.getloadavg()[0])
                        if what == "spark":
                            rate, drain_rate = bench_spark(spark, url, queues, args.rows, size, args.partitions,
                                                           cpu, drain=not args.no_extras)
                            writes.append(rate)
                            drains.append(drain_rate)
                            print(f"spark write {size} B: {rate:,.0f} rows/s (load {loads[-1]:.1f})", flush=True)
                        elif perf is not None:
                            ceilings.append(bench_ceiling(perf, url, size, args.partitions, args.perf_window,
                                                          args.perf_seconds))
                            print(f"ceiling {size} B: {ceilings[-1]:,.0f} msg/s (load {loads[-1]:.1f})", flush=True)
                med = statistics.median
                results.append({"what": f"spark write ({args.partitions} tasks)", "size": size, "rows": args.rows,
                                "per_s": med(writes), "runs": writes, "load": med(loads)})
                if not args.no_extras:
                    results.append({"what": f"spark drain ({args.partitions} tasks)", "size": size,
                                    "rows": args.rows, "per_s": med(drains), "runs": drains})
                if ceilings:
                    results.append({"what": f"ceiling: amqp-perf x{args.partitions} w{args.perf_window}",
                                    "size": size, "rows": 0, "per_s": med(ceilings), "runs": ceilings,
                                    "load": med(loads)})
            if args.no_extras:
                continue
            for window in (int(w) for w in args.windows.split(",")):
                rate = bench_publisher(url, queues, args.rows, size, window)
                results.append({"what": f"publisher window={window}", "size": size, "rows": args.rows, "per_s": rate})
            rate = bench_pika(url, queues, args.pika_rows, size)
            results.append({"what": "pika blocking, confirm each", "size": size, "rows": args.pika_rows, "per_s": rate})
        if spark is not None:
            spark.stop()
        queues.close()
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(10)
        tmp.cleanup()
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print(f"{'what':32} {'size B':>7} {'rows':>8} {'msg/s':>9}  runs / load")
    for r in results:
        extra = ""
        if "runs" in r:
            extra = " ".join(f"{x:,.0f}" for x in r["runs"]) + (f"  load {r['load']:.1f}" if "load" in r else "")
        print(f"{r['what']:32} {r['size']:>7} {r['rows']:>8} {r['per_s']:>9.0f}  {extra}")
    print(f"(medians; {os.cpu_count()} cores)")


if __name__ == "__main__":
    main()
