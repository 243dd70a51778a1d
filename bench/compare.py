#!/usr/bin/env python3
"""Warren beside RabbitMQ on the shared scenario matrix, in one run.

    python bench/compare.py [--duration 5] [--repeat 1] [--only NAME,...] [--rabbitmq HOST:PORT|none]

Uses ``../shared/perf`` as it is (nothing of it is copied into this repository): its C load
generator is built in a temporary folder with ``make`` (needs Debian's librabbitmq-dev), and
its ``bench.py`` runs the matrix against each broker with ``--json-out``. Warren is started
here on an ephemeral port with a temporary data folder; RabbitMQ is used when something
answers on 127.0.0.1:5672 (or the address given). Prints Warren's table, RabbitMQ's, and per
scenario the ratios Warren/RabbitMQ of consumed (or published) msg/s and of p99 latency, plus
Warren's peak RSS. Figures, never assertions.
"""

from __future__ import annotations

import argparse
import json
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PERF = ROOT.parent / "shared" / "perf"


def build_perf(tmp: Path) -> Path:
    dest = tmp / "perf"
    shutil.copytree(PERF, dest)
    subprocess.run(["make", "-s"], cwd=dest, check=True, capture_output=True)
    return dest


def reachable(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1):
            return True
    except OSError:
        return False


def start_warren(tmp: Path) -> tuple[subprocess.Popen, int]:
    ready = tmp / "warren-ready.json"
    proc = subprocess.Popen([sys.executable, "-m", "warren", "serve", "--port", "0", "--data-dir",
                             str(tmp / "warren-data"), "--ready-file", str(ready), "--log-level", "warning"],
                            stdout=subprocess.DEVNULL, stderr=open(tmp / "warren.log", "wb"))
    deadline = time.monotonic() + 20
    while not ready.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit("warren did not start:\n" + (tmp / "warren.log").read_text())
        time.sleep(0.05)
    return proc, json.loads(ready.read_text())["port"]


class RssSampler(threading.Thread):
    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid, self.peak_kib, self.stop = pid, 0, threading.Event()

    def run(self) -> None:
        while not self.stop.wait(0.2):
            try:
                for line in open(f"/proc/{self.pid}/status"):
                    if line.startswith("VmRSS:"):
                        self.peak_kib = max(self.peak_kib, int(line.split()[1]))
            except OSError:
                return


def run_matrix(perf: Path, host: str, port: int, args, out: Path) -> dict:
    cmd = [sys.executable, str(perf / "bench.py"), host, str(port), "--duration", str(args.duration),
           "--warmup", str(args.warmup), "--repeat", str(args.repeat), "--json-out", str(out)]
    if args.only:
        cmd += ["--only", args.only]
    print(f"\n## {host}:{port}", flush=True)
    subprocess.run(cmd, cwd=perf, check=False)
    rows: dict = {}
    for line in out.read_text().splitlines() if out.exists() else []:
        r = json.loads(line)
        if args.repeat == 1 or r.get("median_of"):
            rows[r["scenario"]] = r
    return rows


def headline(r: dict) -> float:
    return r.get("consumed_per_s") or r.get("published_per_s") or 0.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--duration", type=float, default=5)
    ap.add_argument("--warmup", type=float, default=1)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--only", default="")
    ap.add_argument("--rabbitmq", default="127.0.0.1:5672", help="HOST:PORT, or 'none'")
    args = ap.parse_args()
    if not PERF.is_dir():
        raise SystemExit(f"{PERF} not found: this script needs ../shared/perf beside the checkout")
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        perf = build_perf(tmp)
        proc, port = start_warren(tmp)
        rss = RssSampler(proc.pid)
        rss.start()
        try:
            warren = run_matrix(perf, "127.0.0.1", port, args, tmp / "warren.jsonl")
        finally:
            rss.stop.set()
            proc.terminate()
            proc.wait(timeout=30)
        rabbit: dict = {}
        if args.rabbitmq != "none":
            host, _, rport = args.rabbitmq.partition(":")
            if reachable(host, int(rport or 5672)):
                rabbit = run_matrix(perf, host, int(rport or 5672), args, tmp / "rabbit.jsonl")
            else:
                print(f"\n(RabbitMQ not reachable at {args.rabbitmq}: Warren only)")
    print("\n## Warren / RabbitMQ")
    print(f"{'scenario':26} {'warren msg/s':>13} {'rabbit msg/s':>13} {'ratio':>6} {'warren p99 ms':>14} "
          f"{'rabbit p99 ms':>14}")
    for name, w in warren.items():
        r = rabbit.get(name, {})
        wv, rv = headline(w), headline(r)
        wp = (w.get("latency_us") or {}).get("p99")
        rp = (r.get("latency_us") or {}).get("p99")
        ratio = f"{wv / rv:.2f}" if rv else "-"
        print(f"{name:26} {wv:13,.0f} {rv:13,.0f} {ratio:>6} {wp / 1000 if wp else float('nan'):14.2f} "
              f"{rp / 1000 if rp else float('nan'):14.2f}")
    print(f"\nWarren peak RSS during the matrix: {rss.peak_kib / 1024:.0f} MiB")


if __name__ == "__main__":
    main()
