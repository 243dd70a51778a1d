#!/usr/bin/env python3
"""Recovery time: publish N persistent messages to a durable queue, restart Warren, time it.

    python bench/recovery.py [--messages 1000000] [--size 16]

Starts its own broker (ephemeral port, temporary data folder), publishes with pika (no
confirms; a passive declare at the end orders after every publish), stops it with SIGTERM,
starts it again and reports the broker's own "recovered ..." log line, the time until it
listens, and its RSS. Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pika


def start(data: Path, tmp: Path, extra: list[str]) -> tuple[subprocess.Popen, int, float, Path]:
    ready = tmp / f"ready-{time.monotonic_ns()}.json"
    log = tmp / f"log-{time.monotonic_ns()}.txt"
    t0 = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "warren", "serve", "--port", "0", "--data-dir", str(data),
                             "--ready-file", str(ready), *extra], stdout=open(log, "wb"), stderr=subprocess.STDOUT)
    while not ready.exists():
        if proc.poll() is not None:
            raise SystemExit(log.read_text())
        time.sleep(0.01)
    return proc, json.loads(ready.read_text())["port"], time.monotonic() - t0, log


def rss_mib(pid: int) -> float:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--messages", type=int, default=1_000_000)
    ap.add_argument("--size", type=int, default=16)
    ap.add_argument("--memory-budget", type=int, default=None)
    args = ap.parse_args()
    extra = ["--memory-budget", str(args.memory_budget)] if args.memory_budget is not None else []
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        data = tmp / "data"
        proc, port, _, _ = start(data, tmp, extra)
        conn = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", port))
        ch = conn.channel()
        ch.queue_declare("recovery-bench", durable=True)
        props = pika.BasicProperties(delivery_mode=2)
        body = b"x" * args.size
        t0 = time.monotonic()
        for _ in range(args.messages):
            ch.basic_publish("", "recovery-bench", body, props)
        count = ch.queue_declare("recovery-bench", passive=True).method.message_count
        pub_s = time.monotonic() - t0
        conn.close()
        proc.terminate()
        proc.wait()
        disk = sum(f.stat().st_size for f in data.rglob("*") if f.is_file())
        proc, port, ready_s, log = start(data, tmp, extra)
        line = next((ln for ln in log.read_text().splitlines() if "recovered" in ln), "")
        m = re.search(r"(\d+) messages in ([\d.]+)s", line)
        conn = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", port))
        after = conn.channel().queue_declare("recovery-bench", passive=True).method.message_count
        conn.close()
        rss = rss_mib(proc.pid)
        proc.terminate()
        proc.wait()
    print(f"published {count} persistent {args.size} B messages in {pub_s:.1f}s ({count / pub_s:,.0f} msg/s)")
    print(f"on disk: {disk / 1e6:.1f} MB")
    print(f"restart: listening after {ready_s:.2f}s; broker says: {line.split('warren.durability: ')[-1]}")
    if m:
        print(f"recovery: {int(m.group(1)):,} messages in {float(m.group(2)):.2f}s "
              f"({int(m.group(1)) / max(float(m.group(2)), 1e-9):,.0f} msg/s); queue reports {after:,}; RSS {rss:.0f} MiB")


if __name__ == "__main__":
    main()
