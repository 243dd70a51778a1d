"""Shared by the benches that measure what a request does to the broker's loop (api_lists.py, metrics_scrape.py).

A Warren started from this checkout on ephemeral ports, a population of queues declared over
AMQP, and a probe thread that times an AMQP round trip every few milliseconds: the broker
answers a ``basic.get`` only when its loop is free, so the round trips during a request show how
long the request kept the loop from AMQP clients. Not a package (bench/ is a folder of scripts):
a script run as ``python bench/x.py`` has bench/ on its path and imports this module by name.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pika

ROOT = Path(__file__).resolve().parent.parent


def start_broker(tmp: Path, listener_args: list[str], settle: float = 0.0) -> tuple[subprocess.Popen, dict]:
    """A Warren on an ephemeral AMQP port with ``listener_args`` (its HTTP and Prometheus ports).

    Returns the process and its ready file's contents (``port``, ``http_port``, ``prometheus_port``…);
    ``settle`` seconds are waited after the ready file appears.
    """
    ready = tmp / "ready.json"
    proc = subprocess.Popen([sys.executable, "-m", "warren", "serve", "--port", "0", *listener_args,
                             "--data-dir", str(tmp / "data"), "--ready-file", str(ready), "--log-level", "warning"],
                            cwd=ROOT, stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while not ready.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise SystemExit("broker did not start")
        time.sleep(0.05)
    time.sleep(settle)
    return proc, json.loads(ready.read_text())


def stop_broker(proc: subprocess.Popen, timeout: float) -> None:
    """SIGTERM, then SIGKILL if the broker has not exited within ``timeout`` seconds."""
    proc.terminate()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def declare_queues(port: int, n: int, bind_every: int = 0) -> None:
    """``bench-q-000000``… with a 100-octet message in every tenth; with ``bind_every``, a direct
    exchange ``bench-x-…`` bound (key ``k``) to every ``bind_every``-th queue."""
    conn = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", port))
    ch = conn.channel()
    started = time.perf_counter()
    for i in range(n):
        ch.queue_declare(f"bench-q-{i:06d}")
        if i % 10 == 0:
            ch.basic_publish("", f"bench-q-{i:06d}", b"x" * 100)
        if bind_every and i % bind_every == 0:
            ch.exchange_declare(f"bench-x-{i:06d}", "direct")
            ch.queue_bind(f"bench-q-{i:06d}", f"bench-x-{i:06d}", "k")
    conn.close()
    print(f"declared {n} queues in {time.perf_counter() - started:.1f} s")


class RoundTrips(threading.Thread):
    """An AMQP round trip every ``interval`` s: how long the broker takes to answer."""

    def __init__(self, port: int, interval: float = 0.005) -> None:
        super().__init__(daemon=True)
        self.conn = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", port))
        self.ch = self.conn.channel()
        self.queue = self.ch.queue_declare("", exclusive=True).method.queue
        self.interval = interval
        self.samples: list[tuple[float, float]] = []  # (when it started, seconds)
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            t = time.perf_counter()
            self.ch.basic_get(self.queue, auto_ack=True)
            self.samples.append((t, time.perf_counter() - t))
            time.sleep(self.interval)

    def between(self, start: float, end: float, overlapping: bool = False) -> list[float]:
        """The round trips that started in [start, end]; with ``overlapping``, also one that started
        before the window but ended in it (a request's effect on one already waiting)."""
        if overlapping:
            return [d for t, d in self.samples if start <= t + d and t <= end]
        return [d for t, d in self.samples if start <= t <= end]
