#!/usr/bin/env python3
"""How long a replicated quorum queue is without a leader when its leader is killed (issue 33).

    python bench/quorum_failover.py [--cycles 10] [--lease-ttl 2]

Three Warren nodes on one etcd member (Debian's etcd-server), one quorum queue of three
members. Each cycle: a publisher with confirms runs through a node that does not lead the queue;
the leader is killed (kill -9); the time from the kill to the first confirm of a publish sent
after it is recorded (those publishes are held until a follower took the queue); the killed node
is started again with its data folder once its lease ended, and follows. At the end every
confirmed message is drained and counted: lost (confirmed, never delivered) and unexpected must
be 0. Prints each cycle, then p50 and p99 of the failover times. Figures, never assertions.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
import urllib.parse
import uuid
from pathlib import Path

import pika

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.cluster.cluster_nodes import Nodes, members, wait_until  # noqa: E402
from tests.cluster.etcd_harness import ETCD, EtcdCluster  # noqa: E402
from tests.cluster.test_replicated_quorum import Publisher  # noqa: E402

TIMEOUT_S = 60.0


def record(etcd, cluster: str, queue: str) -> dict | None:
    key = f"/warren/{cluster}/replicas/%2F/{urllib.parse.quote(queue, safe='')}"
    value = etcd.get_prefix(key).get(key)
    return json.loads(value) if value is not None else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cycles", type=int, default=10)
    ap.add_argument("--lease-ttl", default="2")
    args = ap.parse_args()
    if ETCD is None:
        raise SystemExit("etcd is not installed (apt install etcd-server)")
    tmp = Path(tempfile.mkdtemp(prefix="warren-qq-failover-"))
    etcd = EtcdCluster(tmp / "etcd", 1).start()
    nodes = Nodes(tmp)
    cluster = f"f{uuid.uuid4().hex[:8]}"
    extra = ("--cluster-lease-ttl", args.lease_ttl)
    try:
        running = {n: nodes.start(etcd.endpoints, cluster, n, *extra) for n in "abc"}
        queue = "failover"
        conn = pika.BlockingConnection(pika.URLParameters(running["a"].url))
        conn.channel().queue_declare(queue, durable=True, arguments={"x-queue-type": "quorum"})
        conn.close()
        times, publishers = [], []
        for cycle in range(args.cycles):
            leader = record(etcd, cluster, queue)["leader"]
            through = next(n for n in "abc" if n != leader)
            publisher = Publisher(running[through], f"c{cycle}", queue)
            publishers.append(publisher)
            publisher.start()
            wait_until(lambda: len(publisher.confirmed) >= 100, TIMEOUT_S, "confirms before the kill")
            killed_at = time.monotonic()
            running[leader].proc.kill()
            running[leader].proc.wait(timeout=10)
            wait_until(lambda: any(sent > killed_at for sent, _ in publisher.confirmed_at), TIMEOUT_S,
                       "a confirm after the kill")
            took = min(confirmed for sent, confirmed in publisher.confirmed_at if sent > killed_at) - killed_at
            times.append(took)
            publisher.stop.set()
            publisher.join(TIMEOUT_S)
            print(f"cycle {cycle + 1}: leader {leader} killed, publishing through {through}: first confirm after "
                  f"{took:.2f} s; now led by {record(etcd, cluster, queue)['leader']}", flush=True)
            wait_until(lambda: leader not in members(etcd, cluster), TIMEOUT_S, "the killed node's lease ended")
            running[leader] = nodes.start(etcd.endpoints, cluster, leader, *extra, data_dir=tmp / f"data-{leader}")
            wait_until(lambda: leader in members(etcd, cluster), TIMEOUT_S, "the killed node back")
        confirmed = {body for p in publishers for body in p.confirmed}
        sent = set().union(*(p.published for p in publishers))
        conn = pika.BlockingConnection(pika.URLParameters(running["a"].url))
        ch = conn.channel()
        got = []
        while True:
            method, _, body = ch.basic_get(queue, auto_ack=True)
            if body is None:
                break
            got.append(body.decode())
        conn.close()
        lost, unexpected = confirmed - set(got), set(got) - sent
        ordered = sorted(times)
        p99 = ordered[min(len(ordered) - 1, int(round(0.99 * (len(ordered) - 1))))]
        print(f"\n{len(times)} kills, lease TTL {args.lease_ttl} s: failover p50 {statistics.median(times):.2f} s, "
              f"p99 {p99:.2f} s, max {max(times):.2f} s; confirmed {len(confirmed)}, delivered {len(got)}, "
              f"lost {len(lost)}, unexpected {len(unexpected)}, duplicated {len(got) - len(set(got))}", flush=True)
    finally:
        nodes.stop_all()
        etcd.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
