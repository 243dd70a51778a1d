#!/usr/bin/env python3
"""What a durable queue.declare costs in a cluster (issue 32): one node alone, one node of a
cluster of one, and one node of a cluster of three, in one run.

    python bench/cluster_declares.py [--count 200] [--rounds 3]

A declare in a cluster is answered once etcd committed the queue and (since session 26) once
every other running node holds its handle (``NodeReach.announce``: one round trip to each, at
once), so that a publish by name through any node routes at once. The cluster of one has the
etcd write and no node to tell; the cluster of three adds the announce. Each row is a pika
client declaring ``--count`` durable queues one after the other on its node (client-local
placement, so each lives there), then deleting them; the three brokers take turns round by
round, since the machine's load drifts. Prints the median and 99th percentile of one declare's
round trip, and of one delete's. Figures, never assertions.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pika

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.compare import start_warren, stop_all  # noqa: E402
from tests.cluster.etcd_harness import ETCD, EtcdCluster  # noqa: E402


def round_trips(port: int, count: int) -> tuple[list[float], list[float]]:
    conn = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", port))
    try:
        ch = conn.channel()
        prefix = f"declare-bench-{uuid.uuid4().hex[:8]}"
        declares, deletes = [], []
        for i in range(count):
            t = time.perf_counter()
            ch.queue_declare(f"{prefix}-{i}", durable=True)
            declares.append(time.perf_counter() - t)
        for i in range(count):
            t = time.perf_counter()
            ch.queue_delete(f"{prefix}-{i}")
            deletes.append(time.perf_counter() - t)
        return declares, deletes
    finally:
        conn.close()


def p99(values: list[float]) -> float:
    return sorted(values)[max(0, int(len(values) * 0.99) - 1)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--count", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    if ETCD is None:
        raise SystemExit("etcd is not installed (apt install etcd-server)")
    tmp = Path(tempfile.mkdtemp(prefix="warren-cluster-declares-"))
    etcd = EtcdCluster(tmp / "etcd", 1).start()
    procs = []
    try:
        alone = start_warren(tmp, [], tag="alone")
        one = start_warren(tmp, ["--cluster-etcd", etcd.endpoints, "--cluster-name", "one", "--node-name", "a"],
                           tag="one-a")
        three = [start_warren(tmp, ["--cluster-etcd", etcd.endpoints, "--cluster-name", "three", "--node-name", n],
                              tag=f"three-{n}") for n in ("a", "b", "c")]
        procs = [alone[0], one[0], *(p for p, _ in three)]
        brokers = {"single node": alone[1], "cluster of 1": one[1], "cluster of 3": three[0][1]}
        got: dict[str, tuple[list, list]] = {name: ([], []) for name in brokers}
        for name, port in brokers.items():  # a warm-up each
            round_trips(port, 10)
        for r in range(args.rounds):
            for name in (list(brokers) if r % 2 == 0 else list(reversed(brokers))):
                declares, deletes = round_trips(brokers[name], args.count)
                got[name][0].extend(declares)
                got[name][1].extend(deletes)
        print(f"{'broker':14} {'declare p50 ms':>15} {'p99 ms':>8} {'delete p50 ms':>14} {'p99 ms':>8}")
        for name, (declares, deletes) in got.items():
            print(f"{name:14} {1e3 * statistics.median(declares):15.2f} {1e3 * p99(declares):8.2f} "
                  f"{1e3 * statistics.median(deletes):14.2f} {1e3 * p99(deletes):8.2f}")
        print(f"({args.rounds} rounds of {args.count} durable queues each, taking turns)")
    finally:
        stop_all(procs)
        etcd.stop()


if __name__ == "__main__":
    main()
