"""The measurable pieces of a Warren cluster's cost (docs/clustering.md), on this machine.

1. A definition change written to etcd (Debian's etcd-server, one member, its own temporary
   data folder and ephemeral ports): the latency of a put of a ~1 KB definitions document
   through etcd's v3 JSON gateway, p50/p99 over N puts, against the same change written by
   Warren today (``ParameterStore.put``: temporary file, fsync, rename, folder fsync).
2. A replication round trip over loopback: a 1 KB persistent message published to a Warren
   and its confirm received, one at a time (what a leader waiting for one follower's
   acknowledgement adds per write), with and without fsync, and the same through a shovel
   (Warren -> Warren, on-confirm): the end-to-end delay of a message forwarded to a replica.

    .venv/bin/python bench/cluster_costs.py [--n 300]

Prints one line per figure. etcd is skipped, with the reason, where it is not installed.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

DEFINITION = {"value": {"src-uri": "amqp://user:pass@upstream.example:5672/%2F", "src-queue": "orders",
                        "dest-uri": "amqp://", "dest-queue": "orders", "ack-mode": "on-confirm",
                        "src-prefetch-count": 1000, "padding": "x" * 800}}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _summary(name: str, samples: list[float]) -> None:
    samples = sorted(samples)
    p50 = statistics.median(samples) * 1000
    p99 = samples[min(len(samples) - 1, int(len(samples) * 0.99))] * 1000
    print(f"{name}: p50 {p50:.2f} ms, p99 {p99:.2f} ms, mean {statistics.fmean(samples) * 1000:.2f} ms "
          f"(n={len(samples)})")


def bench_etcd(n: int) -> None:
    etcd = shutil.which("etcd")
    if etcd is None:
        print("etcd: skipped (etcd-server is not installed: apt install etcd-server)")
        return
    base = Path(tempfile.mkdtemp(prefix="warren-etcd-"))
    client, peer = _free_port(), _free_port()
    proc = subprocess.Popen([etcd, "--name", "bench", "--data-dir", str(base / "data"),
                             "--listen-client-urls", f"http://127.0.0.1:{client}",
                             "--advertise-client-urls", f"http://127.0.0.1:{client}",
                             "--listen-peer-urls", f"http://127.0.0.1:{peer}",
                             "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
                             "--initial-cluster", f"bench=http://127.0.0.1:{peer}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        url = f"http://127.0.0.1:{client}/v3/kv/put"
        key = base64.b64encode(b"/warren/parameters/shovel/%2F/orders").decode()
        value = base64.b64encode(json.dumps(DEFINITION).encode()).decode()
        body = json.dumps({"key": key, "value": value}).encode()
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(urllib.request.Request(url, body, {"Content-Type": "application/json"}),
                                       timeout=2).read()
                break
            except OSError:
                if time.monotonic() > deadline:
                    print("etcd: did not start in 30 s")
                    return
                time.sleep(0.1)
        samples = []
        for _ in range(n):
            t = time.perf_counter()
            urllib.request.urlopen(urllib.request.Request(url, body, {"Content-Type": "application/json"}),
                                   timeout=10).read()
            samples.append(time.perf_counter() - t)
        _summary("etcd put of a 1 KB definition (1 member, fsynced WAL, HTTP JSON gateway)", samples)
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
        shutil.rmtree(base, ignore_errors=True)


def bench_parameter_store(n: int) -> None:
    from warren.management.parameters import ParameterStore
    base = Path(tempfile.mkdtemp(prefix="warren-params-"))
    try:
        store = ParameterStore.in_data_dir(base)
        samples = []
        for i in range(n):
            t = time.perf_counter()
            store.put("shovel", "/", "orders", dict(DEFINITION["value"], i=i))
            samples.append(time.perf_counter() - t)
        _summary("Warren today: parameters.json rewrite (tmp file, fsync, rename, folder fsync)", samples)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _start_warren(base: Path, *extra: str):
    from tests.conftest import launch_broker
    base.mkdir(parents=True, exist_ok=True)
    return launch_broker(base, *extra)


async def _round_trips(port: int, n: int) -> list[float]:
    from warren.federation.client import connect
    from warren.federation.uri import parse_uri
    from warren.spec.amqp0_9_1 import BasicProperties
    client = await connect(parse_uri(f"amqp://guest:guest@127.0.0.1:{port}/%2F"), "guest", "guest", "bench")
    ch = await client.channel()
    await ch.confirm_select()
    await ch.declare_queue("bench-rtt", durable=True)
    props = BasicProperties(delivery_mode=2).encode()
    body = b"x" * 1024
    samples = []
    for _ in range(n):
        t = time.perf_counter()
        await ch.publish("", "bench-rtt", props, body)
        samples.append(time.perf_counter() - t)
    await client.close()
    return samples


async def _shovel_delays(src_port: int, dest, n: int) -> list[float]:
    """Publish to the source; time until a consumer on the destination has it (via the shovel)."""
    from warren.federation.client import connect
    from warren.federation.uri import parse_uri
    from warren.spec.amqp0_9_1 import BasicProperties
    src = await connect(parse_uri(f"amqp://guest:guest@127.0.0.1:{src_port}/%2F"), "guest", "guest", "bench")
    dst = await connect(parse_uri(f"amqp://guest:guest@127.0.0.1:{dest}/%2F"), "guest", "guest", "bench")
    pch, cch = await src.channel(), await dst.channel()
    await pch.declare_queue("bench-src", durable=True)
    await cch.declare_queue("bench-dst", durable=True)
    arrived: asyncio.Queue = asyncio.Queue()
    await cch.consume("bench-dst", lambda ch, m, p, b: arrived.put_nowait(time.perf_counter()), no_ack=True)
    props = BasicProperties(delivery_mode=2).encode()
    samples = []
    for _ in range(n):
        t = time.perf_counter()
        pch.publish("", "bench-src", props, b"x" * 1024)
        samples.append(await asyncio.wait_for(arrived.get(), 10) - t)
    await src.close()
    await dst.close()
    return samples


def bench_round_trips(n: int) -> None:
    base = Path(tempfile.mkdtemp(prefix="warren-rtt-"))
    brokers = []
    try:
        for fsync in ("--fsync", "--no-fsync"):
            b = _start_warren(base / fsync.strip("-"), fsync)
            brokers.append(b)
            _summary(f"publish -> confirm over loopback, 1 KB persistent ({fsync})", asyncio.run(_round_trips(b.port, n)))
        src, dst = brokers
        from tests.management.api_client import call
        status, body, _ = call(dst.http_url, "PUT", "/api/parameters/shovel/%2F/bench", {"value": {
            "src-uri": f"amqp://guest:guest@127.0.0.1:{src.port}/%2F", "src-queue": "bench-src",
            "dest-uri": "amqp://", "dest-queue": "bench-dst", "src-prefetch-count": 100}})
        assert status in (201, 204), body
        time.sleep(1.0)
        _summary("shovel Warren(fsync) -> Warren(no-fsync), on-confirm: publish to delivery at the replica",
                 asyncio.run(_shovel_delays(src.port, dst.port, n)))
    finally:
        for b in brokers:
            b.stop()
        shutil.rmtree(base, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=300)
    args = parser.parse_args()
    print(f"# {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}")
    bench_etcd(args.n)
    bench_parameter_store(args.n)
    bench_round_trips(args.n)


if __name__ == "__main__":
    main()
