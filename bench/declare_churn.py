#!/usr/bin/env python3
"""Durable declare churn: clients declaring, binding and deleting durable queues flat out.

    python bench/declare_churn.py [--seconds 5] [--clients 1,4] [--source DIR ...] [--warren-args '...']

Every change of a durable queue or binding goes through the definitions log (warren/store/
definitions.py): written, applied, and answered once the group commit has fsynced it. Each client
(its own pika connection, on a thread) repeats: queue.declare of a durable queue of its own,
queue.bind to amq.direct, queue.delete; the row gives the changes per second over every client
(a declare, a bind and a delete are three) and the median and 99th percentile of one change's
round trip. ``--source`` (repeatable; the default is this checkout) runs the rows against those
checkouts of Warren (this one and a snapshot of an older commit, say), one broker at a time,
taking turns row by row, since the machine's load drifts. Figures, never assertions.
"""

from __future__ import annotations

import argparse
import shlex
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import pika

sys.path.insert(0, str(Path(__file__).resolve().parent))
from compare import ROOT, start_warren  # noqa: E402  (bench/ is not a package)


def churn(port: int, client: int, seconds: float, latencies: list, counts: list, start: threading.Barrier) -> None:
    conn = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", port, heartbeat=0, socket_timeout=30))
    ch = conn.channel()
    name = f"churn-{client}"
    steps = (lambda: ch.queue_declare(name, durable=True),
             lambda: ch.queue_bind(name, "amq.direct", routing_key=name),
             lambda: ch.queue_delete(name))
    mine: list[float] = []
    start.wait()
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        for step in steps:
            t0 = time.perf_counter()
            step()
            mine.append(time.perf_counter() - t0)
    conn.close()
    latencies.extend(mine)
    counts.append(len(mine))


def run_row(port: int, clients: int, seconds: float) -> tuple[float, float, float]:
    latencies: list[float] = []
    counts: list[int] = []
    start = threading.Barrier(clients + 1)
    threads = [threading.Thread(target=churn, args=(port, i, seconds, latencies, counts, start))
               for i in range(clients)]
    for t in threads:
        t.start()
    start.wait()
    t0 = time.perf_counter()
    for t in threads:
        t.join(seconds + 120)
    elapsed = time.perf_counter() - t0
    latencies.sort()
    p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
    return sum(counts) / elapsed, statistics.median(latencies) * 1e3, p99 * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--clients", default="1,4", help="comma-separated client counts, one row each")
    parser.add_argument("--source", action="append", default=[], help="a checkout of Warren to run (repeatable)")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--warren-args", default="")
    args = parser.parse_args()
    sources = [Path(s).resolve() for s in args.source] or [ROOT]
    extra = shlex.split(args.warren_args)
    print(f"{'source':<40} {'clients':>7} {'changes/s':>10} {'p50 ms':>8} {'p99 ms':>8}")
    with tempfile.TemporaryDirectory(prefix="declare-churn-") as tmp:
        for rep in range(args.repeat):
            for clients in (int(c) for c in args.clients.split(",")):
                for i, source in enumerate(sources):
                    proc, port = start_warren(Path(tmp), extra, source, tag=f"w{i}-{rep}-{clients}")
                    try:
                        rate, p50, p99 = run_row(port, clients, args.seconds)
                    finally:
                        proc.terminate()
                        proc.wait(30)
                    print(f"{str(source):<40} {clients:>7} {rate:>10.0f} {p50:>8.2f} {p99:>8.2f}", flush=True)


if __name__ == "__main__":
    main()
