#!/usr/bin/env python3
"""Both cores: Warren with one process against Warren with two worker processes, two vhosts.

    python bench/cores.py [--duration 5] [--repeat 1] [--rabbitmq HOST:PORT|none] [--one-vhost]

Why: ``warren serve --workers 2`` puts each vhost in its own process (warren/server/workers.py).
This runs two copies of the shared load generator (``../shared/perf``'s amqp-perf, built here
in a temporary folder), one per vhost, at the same time, against ``--workers 1`` and against
``--workers 2`` (and, when one answers, RabbitMQ with the same two vhosts), and prints the
summed rate and the CPU of every broker process (100 = one core). Scenarios: publish-only
(16 B, no consumer) and publish + no-ack consume (16 B); ``--scenarios 1p1c-1KiB-persistent``:
persistent 1 KiB messages through durable queues, where the broker is the limit. Figures, never
assertions.

``--one-vhost``: both load generators in vhost "/", on two queues whose owners are different
workers (warren/spread ``queue_owner``), against ``--workers 1`` and ``--workers 2 --worker-mode
queues``: one vhost over two processes.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from compare import build_perf, reachable  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
VHOSTS = ("/", "a")  # owned by different workers of two (warren.server.workers.owner_of)
SCENARIOS = [("pubonly", ["-x1", "-y0", "-s16"]), ("1p1c-autoack", ["-x1", "-y1", "-s16", "-a"]),
             # where the broker, not the load generator, is the limit: each persistent message costs
             # Warren more CPU than amqp-perf (the matrix's persistent row: 93 % against 58 %)
             ("1p1c-1KiB-persistent", ["-x1", "-y1", "-s1024", "-D"])]
DEFAULT_SCENARIOS = "pubonly,1p1c-autoack"


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start_warren(tmp: Path, workers: int, *extra: str):
    ready = tmp / f"ready-{workers}.json"
    args = [sys.executable, "-m", "warren", "serve", "--port", "0", "--http-port", "-1", "--data-dir",
            str(tmp / f"data-{workers}"), "--ready-file", str(ready), "--workers", str(workers), "--log-level",
            "warning", *extra]
    for v in VHOSTS:
        args += ["--vhost", v]
    proc = subprocess.Popen(args, cwd=ROOT)
    deadline = time.monotonic() + 60
    while not ready.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError("Warren did not start")
        time.sleep(0.05)
    info = json.loads(ready.read_text())
    pids = [w["pid"] for w in info.get("workers", [])] or [info["pid"]]
    return proc, info["port"], pids


def queue_names(tag: str, one_vhost: bool) -> list[tuple[str, str]]:
    """(vhost, queue) of each load generator: one per vhost, or both in "/" on queues owned by
    different workers of two (amqp-perf names its one queue as told)."""
    if not one_vhost:
        return [(v, f"cores-{tag}-{i}") for i, v in enumerate(VHOSTS)]
    from warren.spread import queue_owner
    out = []
    for worker in (0, 1):
        name = next(f"cores-{tag}-{i}" for i in range(10_000) if queue_owner("/", f"cores-{tag}-{i}", 2) == worker)
        out.append(("/", name))
    return out


def run(perf: Path, port: int, pids: list[int], scenario: list[str], duration: float, tag: str,
        one_vhost: bool = False) -> dict:
    cmds = [[str(perf / "amqp-perf"), "-H", "127.0.0.1", "-p", str(port), "-V", v, "-d", str(duration), "-W", "1",
             "-q", q, *scenario] for v, q in queue_names(tag, one_vhost)]
    procs = [subprocess.Popen(c, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for c in cmds]
    time.sleep(1.0)  # the warm-up
    before = {p: cpu_seconds(p) for p in pids}
    time.sleep(duration)
    after = {p: cpu_seconds(p) for p in pids}
    rate = 0.0
    for p in procs:
        out, err = p.communicate(timeout=duration + 120)
        line = out.strip().splitlines()[-1] if out.strip() else "{}"
        res = json.loads(line)
        rate += res.get("consumed_per_s") or res.get("published_per_s") or 0.0
    return {"rate": rate, "cpu": [round(100 * (after[p] - before[p]) / duration) for p in pids]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--duration", type=float, default=5.0)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--rabbitmq", default="127.0.0.1:5672")
    ap.add_argument("--one-vhost", action="store_true", help="both load generators in vhost /: --worker-mode queues")
    ap.add_argument("--scenarios", default=DEFAULT_SCENARIOS,
                    help=f"comma-separated, of {', '.join(n for n, _ in SCENARIOS)}")
    args = ap.parse_args()
    chosen = args.scenarios.split(",")
    unknown = set(chosen) - {n for n, _ in SCENARIOS}
    if unknown:
        ap.error(f"unknown scenarios: {', '.join(sorted(unknown))}")
    tmp = Path(tempfile.mkdtemp(prefix="warren-cores-"))
    try:
        perf = build_perf(tmp)
        brokers = []
        for workers in (1, 2):
            extra = ("--worker-mode", "queues") if args.one_vhost and workers > 1 else ()
            proc, port, pids = start_warren(tmp, workers, *extra)
            brokers.append((f"warren --workers {workers} {' '.join(extra)}".strip(), proc, port, pids))
        if args.rabbitmq != "none":
            host, _, port = args.rabbitmq.partition(":")
            if reachable(host, int(port)) and shutil.which("rabbitmqctl"):
                subprocess.run(["rabbitmqctl", "add_vhost", "a"], capture_output=True)
                subprocess.run(["rabbitmqctl", "set_permissions", "-p", "a", "guest", ".*", ".*", ".*"],
                               capture_output=True)
                beam = subprocess.run(["pgrep", "-o", "beam.smp"], capture_output=True, text=True).stdout.split()
                brokers.append(("rabbitmq", None, int(port), [int(beam[0])] if beam else []))
        where = "one vhost, two queues" if args.one_vhost else "two vhosts"
        print(f"| scenario | broker | msg/s ({where} together) | CPU % per broker process |")
        print("|---|---|---:|---|")
        for name, scenario in SCENARIOS:
            if name not in chosen:
                continue
            for r in range(args.repeat):
                for label, _, port, pids in brokers:
                    res = run(perf, port, pids, scenario, args.duration, f"{name}-{r}", args.one_vhost)
                    print(f"| {name} | {label} | {res['rate']:,.0f} | {' + '.join(map(str, res['cpu']))} |",
                          flush=True)
    finally:
        for _, proc, _, _ in locals().get("brokers", []):
            if proc is not None:
                proc.terminate()
                proc.wait(timeout=30)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
