#!/usr/bin/env python3
"""Warren beside RabbitMQ on the shared scenario matrix, in one run.

    python bench/compare.py [--duration 5] [--repeat 1] [--only NAME,...] [--rabbitmq HOST:PORT|none]
                            [--warren-args '--queue-flow-high 0'] [--json-out FILE] [--baseline DIR]

Uses ``../shared/perf`` as it is (nothing of it is copied into this repository): its C load
generator is built in a temporary folder with ``make`` (needs Debian's librabbitmq-dev), and
its ``bench.py`` runs each scenario against a broker with ``--json-out``. Warren is started
here on an ephemeral port with a temporary data folder; RabbitMQ is used when something
answers on 127.0.0.1:5672 (or the address given), and when nothing does but Debian's
rabbitmq-server is installed, it is started here (and stopped at the end).

The machine is shared, and its load drifts over minutes: running Warren's whole matrix and
then RabbitMQ's compared two different machines. So the brokers take turns scenario by
scenario (and with ``--repeat``, each repeat swaps who goes first), and every row shows the
CPU the rest of the machine used meanwhile (``oth%``, from bench.py: 100 = one core), for both,
and the load generator's own (``cli%``, amqp-perf's threads in the measured window): where
``cli%`` plus the broker's share reaches 200 on a two-core machine, the row measures the machine,
not the broker. ``brk%`` is bench.py's figure for the one process listening; Warren's ``tree%``
is all its processes (``--workers N`` included) over the whole run, warm-up and drain included,
so it reads a little lower than a figure taken in the measured window alone.
``--baseline DIR`` adds a third broker: Warren as it is in DIR (an earlier commit, say
``git archive REV | tar -x -C DIR`` and ``python setup.py build_ext --inplace`` there), taking
its turn with the others, so a change is shown before and after in the same run.
Prints per scenario the medians of consumed (or published) msg/s and of p99 latency for each
broker, the ratio Warren/RabbitMQ, and Warren's peak RSS. Figures, never assertions.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
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


def start_rabbitmq() -> bool:
    """Start the local RabbitMQ when it is installed but not running (Debian's
    rabbitmq-server); True if this script started it (and so stops it at the end)."""
    if shutil.which("rabbitmq-server") is None or shutil.which("rabbitmqctl") is None:
        return False
    print("(starting the installed RabbitMQ: rabbitmq-server -detached)", flush=True)
    subprocess.run(["rabbitmq-server", "-detached"], capture_output=True, timeout=60)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:  # await_startup fails at once until the node has registered
        done = subprocess.run(["rabbitmqctl", "await_startup"], capture_output=True, timeout=180)
        if done.returncode == 0:
            return True
        time.sleep(1)
    return False


def no_http_args(source: Path) -> list[str]:
    """``--http-port -1`` when this Warren has an HTTP API: two brokers started at once (or
    RabbitMQ's management plugin) must not fight over its fixed default port."""
    out = subprocess.run([sys.executable, "-m", "warren", "serve", "--help"], cwd=source, capture_output=True,
                         text=True).stdout
    return ["--http-port", "-1"] if "--http-port" in out else []


def start_warren(tmp: Path, extra: list[str], source: Path = ROOT, tag: str = "warren") -> tuple[subprocess.Popen, int]:
    """Warren from the checkout ``source`` (run from there, so its own ``warren`` package is imported)."""
    ready = tmp / f"{tag}-ready.json"
    log_path = tmp / f"{tag}.log"
    proc = subprocess.Popen([sys.executable, "-m", "warren", "serve", "--port", "0", "--data-dir",
                             str(tmp / f"{tag}-data"), "--ready-file", str(ready), "--log-level", "warning",
                             *no_http_args(source), *extra],
                            cwd=source, stdout=subprocess.DEVNULL, stderr=open(log_path, "wb"))
    deadline = time.monotonic() + 20
    while not ready.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"{tag} did not start:\n" + log_path.read_text())
        time.sleep(0.05)
    return proc, json.loads(ready.read_text())["port"]


class RssSampler(threading.Thread):
    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid, self.peak_kib, self.stop = pid, 0, threading.Event()

    def run(self) -> None:
        while not self.stop.wait(0.2):  # the sum over the process tree: with --workers N, all of them
            kib = 0
            for pid in tree_pids(self.pid):
                try:
                    for line in open(f"/proc/{pid}/status"):
                        if line.startswith("VmRSS:"):
                            kib += int(line.split()[1])
                except OSError:
                    continue
            self.peak_kib = max(self.peak_kib, kib)


def stop_all(procs: list) -> None:
    """SIGTERM to every broker started, then each waited for (killed past 15 s)."""
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    for proc in procs:
        try:
            proc.wait(timeout=15)
        except Exception:  # noqa: BLE001: past the bound, it is killed
            proc.kill()


def scenario_names(perf: Path) -> list[str]:
    out = subprocess.run([sys.executable, str(perf / "bench.py"), "127.0.0.1", "1", "--list"], cwd=perf,
                         capture_output=True, text=True).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def tree_pids(pid: int) -> list[int]:
    """pid and every process below it (a supervisor's workers), from /proc."""
    parents: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = open(f"/proc/{entry}/stat").read()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            parents.setdefault(ppid, []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        p = todo.pop()
        found.append(p)
        todo.extend(parents.get(p, []))
    return found


def tree_cpu_s(pid: int) -> float:
    """utime + stime of the process tree under pid, seconds (processes that ended are not counted)."""
    total = 0
    for p in tree_pids(pid):
        try:
            fields = open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def run_one(perf: Path, host: str, port: int, name: str, args, out: Path, tree_pid: int | None = None) -> dict:
    """One run of one scenario; its amqp-perf result plus bench.py's CPU figures, and with
    tree_pid the CPU of that process tree over the whole run (``tree_cpu_pct``)."""
    if out.exists():
        out.unlink()
    cpu0, wall0 = (tree_cpu_s(tree_pid), time.monotonic()) if tree_pid else (0.0, 0.0)
    cmd = [sys.executable, str(perf / "bench.py"), host, str(port), "--duration", str(args.duration),
           "--warmup", str(args.warmup), "--only", name, "--json-out", str(out)]
    subprocess.run(cmd, cwd=perf, check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   timeout=args.duration * 10 + 120)
    lines = out.read_text().splitlines() if out.exists() else []
    result = json.loads(lines[-1]) if lines else {"error": "no result"}
    if tree_pid:
        result["tree_cpu_pct"] = round(100 * (tree_cpu_s(tree_pid) - cpu0) / (time.monotonic() - wall0), 1)
    return result


def headline(r: dict) -> float:
    return r.get("consumed_per_s") or r.get("published_per_s") or 0.0


def p99_ms(r: dict) -> float | None:
    p = (r.get("latency_us") or {}).get("p99")
    return p / 1000 if p else None


def median(values: list) -> float | None:
    vals = sorted(v for v in values if v is not None)
    if not vals:
        return None
    n = len(vals)
    return vals[n // 2] if n % 2 else (vals[n // 2 - 1] + vals[n // 2]) / 2


def fmt(v, spec: str = ",.0f") -> str:
    return "-" if v is None else format(v, spec)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--duration", type=float, default=5)
    ap.add_argument("--warmup", type=float, default=1)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--only", default="")
    ap.add_argument("--rabbitmq", default="127.0.0.1:5672", help="HOST:PORT, or 'none'")
    ap.add_argument("--warren-args", default="", help="extra 'warren serve' options, e.g. '--queue-flow-high 0'")
    ap.add_argument("--json-out", help="append every run (one JSON line each) to this file")
    ap.add_argument("--baseline", type=Path, help="also run Warren from this checkout (before a change)")
    args = ap.parse_args()
    if not PERF.is_dir():
        raise SystemExit(f"{PERF} not found: this script needs ../shared/perf beside the checkout")
    results: dict[str, dict[str, list]] = {}
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        perf = build_perf(tmp)
        names = scenario_names(perf)
        if args.only:
            names = [n for n in names if n in args.only.split(",")]
        brokers = []
        proc, port = start_warren(tmp, args.warren_args.split())
        brokers.append(("warren", "127.0.0.1", port))
        base_proc = None
        if args.baseline:
            base_proc, base_port = start_warren(tmp, args.warren_args.split(), args.baseline.resolve(), "before")
            brokers.append(("before", "127.0.0.1", base_port))
        started_rabbit = False
        if args.rabbitmq != "none":
            host, _, rport = args.rabbitmq.partition(":")
            if not reachable(host, int(rport or 5672)) and host in ("127.0.0.1", "localhost"):
                started_rabbit = start_rabbitmq()
            if reachable(host, int(rport or 5672)):
                brokers.append(("rabbit", host, int(rport or 5672)))
            else:
                print(f"(RabbitMQ not reachable at {args.rabbitmq} and not installed here: Warren only)")
        rss = RssSampler(proc.pid)
        rss.start()
        print(f"{'scenario':26} {'broker':7} {'pub/s':>9} {'con/s':>9} {'p50 ms':>8} {'p99 ms':>8} "
              f"{'brk%':>5} {'tree%':>5} {'cli%':>5} {'oth%':>5}", flush=True)
        warren_pids = {"warren": proc.pid, "before": base_proc.pid if base_proc else None}
        try:
            for name in names:
                for rep in range(args.repeat):
                    order = brokers[rep % len(brokers):] + brokers[:rep % len(brokers)]  # rotate who goes first
                    for who, host, bport in order:
                        r = run_one(perf, host, bport, name, args, tmp / f"{who}.jsonl", warren_pids.get(who))
                        r.update(broker=who, repeat=rep)
                        results.setdefault(name, {}).setdefault(who, []).append(r)
                        lat = r.get("latency_us") or {}
                        print(f"{name:26} {who:7} {fmt(r.get('published_per_s')):>9} "
                              f"{fmt(r.get('consumed_per_s')):>9} "
                              f"{fmt(lat.get('p50') / 1000 if lat.get('p50') else None, '.2f'):>8} "
                              f"{fmt(p99_ms(r), '.2f'):>8} {fmt(r.get('broker_cpu_pct')):>5} "
                              f"{fmt(r.get('tree_cpu_pct')):>5} {fmt(r.get('client_cpu_pct')):>5} "
                              f"{fmt(r.get('other_cpu_pct')):>5}"
                              + (f"  ERROR {r['error']}" if r.get("error") else ""), flush=True)
                        if args.json_out:
                            with open(args.json_out, "a") as f:
                                f.write(json.dumps(dict(r, scenario=name)) + "\n")
        finally:
            rss.stop.set()
            for p in (proc, base_proc):
                if p is not None:
                    p.terminate()
                    p.wait(timeout=30)
            if started_rabbit:  # only the node this script started
                subprocess.run(["rabbitmqctl", "stop"], capture_output=True, timeout=120)
    print(f"\n## Warren / RabbitMQ (medians of {args.repeat})")
    print(f"| scenario | Warren msg/s | RabbitMQ msg/s | ratio | Warren p99 ms | RabbitMQ p99 ms | "
          f"Warren tree% | cli% W/R | oth% W/R |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name in names:
        w = results.get(name, {}).get("warren", [])
        r = results.get(name, {}).get("rabbit", [])
        wv, rv = median([headline(x) for x in w]), median([headline(x) for x in r])
        ratio = f"{wv / rv:.2f}" if wv and rv else "-"
        both = {key: f"{fmt(median([x.get(key) for x in w]))}/{fmt(median([x.get(key) for x in r]))}"
                for key in ("client_cpu_pct", "other_cpu_pct")}
        print(f"| {name} | {fmt(wv)} | {fmt(rv)} | {ratio} | {fmt(median([p99_ms(x) for x in w]), '.2f')} | "
              f"{fmt(median([p99_ms(x) for x in r]), '.2f')} | {fmt(median([x.get('tree_cpu_pct') for x in w]))} | "
              f"{both['client_cpu_pct']} | {both['other_cpu_pct']} |")
    if args.baseline:
        print(f"\n## Warren now / Warren before ({args.baseline})")
        print("| scenario | now msg/s | before msg/s | now/before | now p99 ms | before p99 ms |")
        print("|---|---:|---:|---:|---:|---:|")
        for name in names:
            w = results.get(name, {}).get("warren", [])
            b = results.get(name, {}).get("before", [])
            wv, bv = median([headline(x) for x in w]), median([headline(x) for x in b])
            ratio = f"{wv / bv:.2f}" if wv and bv else "-"
            print(f"| {name} | {fmt(wv)} | {fmt(bv)} | {ratio} | {fmt(median([p99_ms(x) for x in w]), '.2f')} | "
                  f"{fmt(median([p99_ms(x) for x in b]), '.2f')} |")
    print(f"\nWarren peak RSS during the matrix: {rss.peak_kib / 1024:.0f} MiB; "
          f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
