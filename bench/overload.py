#!/usr/bin/env python3
"""Overload: publishers flat out beside a slower consumer, Warren's memory over time.

    python bench/overload.py [--seconds 60] [--publishers 2] [--size 1024] [--every 5]
                             [--warren-args '--memory-budget 67108864']

Why: flow control (issue 5) has to keep memory bounded when publishers outrun consumers, and
the way to show it is RSS over a long run, not one figure at the end. Starts Warren on an
ephemeral port (temporary data folder), runs the shared load generator
(``../shared/perf/amqp-perf``, built in a temporary folder) with ``--publishers`` publishers
and one acking consumer on one queue, and every ``--every`` seconds prints Warren's RSS, the
queue's ready messages (queue.declare passive on a connection of our own) and the size of the
data folder (paged-out messages go there). Then amqp-perf's rates. Figures, never assertions.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from compare import PERF, build_perf, start_warren  # noqa: E402  (bench/ is not a package)
from memory import Blocking, rss_kib  # noqa: E402

QUEUE = "overload"


def folder_bytes(path: Path) -> int:
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            try:
                total += os.path.getsize(os.path.join(root, f))
            except OSError:
                pass
    return total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=int, default=60)
    ap.add_argument("--publishers", type=int, default=2)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--every", type=float, default=5)
    ap.add_argument("--warren-args", default="", help="extra 'warren serve' options")
    args = ap.parse_args()
    if not PERF.is_dir():
        raise SystemExit(f"{PERF} not found: this script needs ../shared/perf beside the checkout")
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; "
          f"warren {args.warren_args or '(defaults)'}", flush=True)
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        perf = build_perf(tmp)
        proc, port = start_warren(tmp, args.warren_args.split())
        try:
            gen = subprocess.Popen([str(perf / "amqp-perf"), "-p", str(port), "-x", str(args.publishers), "-y", "1",
                                    "-s", str(args.size), "-d", str(args.seconds), "-W", "1", "-q", QUEUE],
                                   stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            time.sleep(1.5)  # amqp-perf declares the queue first
            watcher = Blocking("127.0.0.1", port)
            print(f"{'t s':>5} {'RSS MiB':>8} {'ready msgs':>11} {'data MB':>8}", flush=True)
            started = time.monotonic()
            peak = 0
            while gen.poll() is None:
                rss = rss_kib(proc.pid) / 1024
                peak = max(peak, rss)
                try:
                    ready = watcher.declare(QUEUE, durable=False, passive=True)
                except (ConnectionError, OSError):
                    ready = -1  # the queue is gone: the run is over
                print(f"{time.monotonic() - started:5.0f} {rss:8.0f} {ready:11,} "
                      f"{folder_bytes(tmp / 'warren-data') / 1e6:8.1f}", flush=True)
                if ready < 0:
                    break
                time.sleep(args.every)
            out, _ = gen.communicate(timeout=args.seconds + 120)
            watcher.close()
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    lines = out.strip().splitlines()
    r = json.loads(lines[-1]) if lines else {}
    lat = r.get("latency_us") or {}
    print(f"\npublished {r.get('published_per_s', 0):,.0f} msg/s, consumed {r.get('consumed_per_s', 0):,.0f} msg/s, "
          f"backlog at the end {r.get('backlog_at_end', 0):,}, latency p50 {lat.get('p50', 0) / 1000:.0f} ms "
          f"p99 {lat.get('p99', 0) / 1000:.0f} ms; peak RSS {peak:.0f} MiB")
    print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
