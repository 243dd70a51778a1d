#!/usr/bin/env python3
"""One replicated quorum queue (or stream), Warren against RabbitMQ 3.10, three nodes each (issue 33).

    python bench/quorum_replicated.py [--duration 10] [--repeat 3] [--only NAME,...] [--queue-type stream]

Starts a three-node Warren cluster on one etcd member (Debian's etcd-server) and a three-node
RabbitMQ 3.10 cluster (Debian's rabbitmq-server, tests/rabbitmq_cluster.py), then runs the shared
matrix's scenarios (``../shared/perf``'s bench.py and its C load generator) against node 1 of
each, taking turns. Before each run the scenario's queue is declared on node 1 as a quorum
queue (``x-queue-type: quorum``, three members), so the load generator's own declare finds it:
every message is replicated to the two other nodes and confirmed once a majority holds it.
Default scenario: ``1p1c-1KiB-persist-confirm`` (1 KiB persistent, confirms window 128, one
publisher and one consumer), the issue's yardstick. Prints per scenario and broker the median
msg/s and p99 latency and Warren/RabbitMQ. ``--queue-type stream`` declares a replicated stream
instead (``x-queue-type: stream``, three members on each). The machine is shared (``oth%``: the rest of its CPU
meanwhile). Figures, never assertions.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import pika

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.compare import PERF, fmt, headline, median, p99_ms, start_warren, stop_all  # noqa: E402
from tests.cluster.etcd_harness import ETCD, EtcdCluster  # noqa: E402
from tests.rabbitmq_cluster import start_rabbitmq_cluster  # noqa: E402

DEFAULT_SCENARIOS = "1p1c-1KiB-persist-confirm"
PREFIX = "qqbench"


PURGE = """    amqp_queue_purge_ok_t *p = amqp_queue_purge(c, 1, amqp_cstring_bytes(queue_names[i]));
    if (!(ok = rpc_ok(c, "queue.purge", err, n))) break;
    if (p) *leftover += p->message_count;
"""


def build_passive_perf(tmp: Path, queue_type: str) -> Path:
    """The shared load generator built with its queue.declare made passive (in a copy: the shared
    source is untouched), so that it uses the quorum queue declared before each run: its own
    declare has no ``x-queue-type``, which both brokers refuse (406) for an existing quorum queue.
    For a stream its queue.purge goes too (both brokers refuse it on a stream, 540; the stream is
    declared anew before each run anyway)."""
    dest = tmp / "perf"
    shutil.copytree(PERF, dest)
    source = dest / "amqp-perf.c"
    text = source.read_text()
    declare = "amqp_queue_declare(c, 1, amqp_cstring_bytes(queue_names[i]), 0, opt.durable"
    if declare not in text or (queue_type == "stream" and PURGE not in text):
        raise SystemExit("the shared amqp-perf.c's queue.declare or purge changed: update bench/quorum_replicated.py")
    text = text.replace(declare, declare.replace("]), 0, opt", "]), 1, opt"))
    if queue_type == "stream":
        text = text.replace(PURGE, "")
    source.write_text(text)
    subprocess.run(["make", "-s"], cwd=dest, check=True, capture_output=True)
    return dest


def declare_replicated(port: int, queue: str, queue_type: str) -> None:
    conn = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", port))
    try:
        ch = conn.channel()
        ch.queue_delete(queue)
        ch.queue_declare(queue, durable=True, arguments={"x-queue-type": queue_type})
    finally:
        conn.close()


def run(perf: Path, port: int, name: str, args, out: Path) -> dict:
    if out.exists():
        out.unlink()
    cmd = [sys.executable, str(perf / "bench.py"), "127.0.0.1", str(port), "--duration", str(args.duration),
           "--warmup", str(args.warmup), "--only", name, "--json-out", str(out), "--queue-prefix", PREFIX]
    subprocess.run(cmd, cwd=perf, check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   timeout=args.duration * 10 + 120)
    lines = out.read_text().splitlines() if out.exists() else []
    return json.loads(lines[-1]) if lines else {"error": "no result"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--duration", type=float, default=10)
    ap.add_argument("--warmup", type=float, default=2)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--only", default=DEFAULT_SCENARIOS)
    ap.add_argument("--queue-type", choices=("quorum", "stream"), default="quorum")
    args = ap.parse_args()
    if ETCD is None:
        raise SystemExit("etcd is not installed (apt install etcd-server)")
    tmp = Path(tempfile.mkdtemp(prefix="warren-qq-bench-"))
    perf = build_passive_perf(tmp, args.queue_type)
    etcd = EtcdCluster(tmp / "etcd", 1).start()
    procs, rabbit = [], None
    try:
        cluster = ["--cluster-etcd", etcd.endpoints, "--cluster-name", f"qq{uuid.uuid4().hex[:6]}"]
        warren = [start_warren(tmp, [*cluster, "--node-name", n], tag=n) for n in ("a", "b", "c")]
        procs = [p for p, _ in warren]
        print("starting a three-node RabbitMQ cluster (about 30 s)...", flush=True)
        rabbit = start_rabbitmq_cluster(tmp / "rabbit")
        brokers = {"warren": warren[0][1], "rabbitmq": rabbit.nodes[0].amqp_port}
        print(f"{'scenario':28} {'broker':9} {'msg/s':>9} {'p99 ms':>8} {'oth%':>5}", flush=True)
        for name in args.only.split(","):
            runs: dict[str, list] = {b: [] for b in brokers}
            for r in range(args.repeat):
                order = list(brokers) if r % 2 == 0 else list(reversed(brokers))
                for broker in order:
                    port = brokers[broker]
                    declare_replicated(port, f"{PREFIX}-{name}", args.queue_type)
                    result = run(perf, port, name, args, tmp / f"{broker}.jsonl")
                    if "error" in result:
                        print(f"  {broker}: {result['error']}", flush=True)
                    runs[broker].append(result)
                    print(f"  run {r + 1} {broker}: {fmt(headline(result))} msg/s", flush=True)
            rates = {b: median([headline(x) for x in results]) for b, results in runs.items()}
            for broker, results in runs.items():
                print(f"{name:28} {broker:9} {fmt(rates[broker]):>9} {fmt(median([p99_ms(x) for x in results]), '.2f'):>8} "
                      f"{fmt(median([x.get('other_cpu_pct') for x in results]), '.0f'):>5}", flush=True)
            if rates["warren"] and rates["rabbitmq"]:
                print(f"{name:28} warren/rabbitmq {rates['warren'] / rates['rabbitmq']:.2f}", flush=True)
    finally:
        stop_all(procs)
        if rabbit is not None:
            rabbit.stop()
        etcd.stop()


if __name__ == "__main__":
    main()
