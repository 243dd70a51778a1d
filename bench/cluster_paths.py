#!/usr/bin/env python3
"""What a cluster costs on the message path (issue 32): the shared matrix on three paths, in one run.

    python bench/cluster_paths.py [--duration 5] [--repeat 1] [--only NAME,...]

Three brokers take turns scenario by scenario (``../shared/perf``'s bench.py, its C load
generator built as bench/compare.py builds it):

* ``single``: a Warren node alone (no ``--cluster-etcd``);
* ``own``: node a of a two-node cluster on one etcd member (Debian's etcd-server), its clients
  connected to it and its queues on it: what the cluster costs a queue's own node;
* ``through``: node b of that cluster, started with ``--queue-leader-locator a``, so the
  queues the load generator declares through it are made on node a: every message is routed on
  node b, sent to node a, delivered back through node b.

Prints per scenario the median msg/s and p99 latency of each, the ratios own/single and
through/single, and the CPU both nodes spent per message consumed (µs, over the whole run with
warm-up and drain). The machine is shared: ``oth%`` is the rest of its CPU meanwhile (100 = one
core). Figures, never assertions.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.compare import build_perf, fmt, headline, median, p99_ms, run_one, scenario_names, start_warren, stop_all, \
    tree_cpu_s  # noqa: E402
from tests.cluster.etcd_harness import ETCD, EtcdCluster  # noqa: E402

DEFAULT_SCENARIOS = "1p1c-16B,1p1c-1KiB-confirm,1p1c-1KiB-persist-confirm,4p4c-16B-4q,latency-1k-rate"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--duration", type=float, default=5)
    ap.add_argument("--warmup", type=float, default=1)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--only", default=DEFAULT_SCENARIOS)
    args = ap.parse_args()
    if ETCD is None:
        raise SystemExit("etcd is not installed (apt install etcd-server)")
    tmp = Path(tempfile.mkdtemp(prefix="warren-cluster-paths-"))
    perf = build_perf(tmp)
    known = scenario_names(perf)
    names = [n for n in args.only.split(",") if n in known]
    etcd = EtcdCluster(tmp / "etcd", 1).start()
    procs = []
    try:
        cluster = ["--cluster-etcd", etcd.endpoints, "--cluster-name", f"bench{uuid.uuid4().hex[:6]}"]
        single = start_warren(tmp, [], tag="single")
        own = start_warren(tmp, [*cluster, "--node-name", "a"], tag="a")
        through = start_warren(tmp, [*cluster, "--node-name", "b", "--queue-leader-locator", "a"], tag="b")
        procs = [single[0], own[0], through[0]]
        paths = {"single": (single[1], [single[0].pid]), "own": (own[1], [own[0].pid, through[0].pid]),
                 "through": (through[1], [own[0].pid, through[0].pid])}
        print(f"{'scenario':28} {'path':8} {'msg/s':>9} {'p99 ms':>8} {'x single':>8} {'cpu us/msg':>10} "
              f"{'oth%':>5}", flush=True)
        for name in names:
            runs: dict[str, list] = {p: [] for p in paths}
            for r in range(args.repeat):
                order = list(paths) if r % 2 == 0 else list(reversed(paths))
                for path in order:
                    port, pids = paths[path]
                    cpu0 = sum(tree_cpu_s(p) for p in pids)
                    result = run_one(perf, "127.0.0.1", port, name, args, tmp / f"{path}.jsonl")
                    cpu = sum(tree_cpu_s(p) for p in pids) - cpu0
                    moved = result.get("consumed") or result.get("published") or 0
                    result["cpu_us_per_msg"] = 1e6 * cpu / moved if moved else None
                    runs[path].append(result)
            base = median([headline(x) for x in runs["single"]])
            for path, results in runs.items():
                rate = median([headline(x) for x in results])
                ratio = rate / base if rate and base else None
                print(f"{name:28} {path:8} {fmt(rate):>9} {fmt(median([p99_ms(x) for x in results]), '.2f'):>8} "
                      f"{fmt(ratio, '.2f'):>8} {fmt(median([x.get('cpu_us_per_msg') for x in results]), '.1f'):>10} "
                      f"{fmt(median([x.get('other_cpu_pct') for x in results]), '.0f'):>5}", flush=True)
    finally:
        stop_all(procs)
        etcd.stop()


if __name__ == "__main__":
    main()
