#!/usr/bin/env python3
"""The cost of TLS: plain AMQP against AMQP over TLS on the same Warren, with pika.

    python bench/tls.py [--seconds 5] [--sizes 16,1024,65536] [--repeat 2] [--connections 100] [--workers 2]

Starts one Warren (ephemeral plain and TLS ports, a temporary data folder, certificates made
with trustme: an ECDSA P-256 server key, TLS 1.3) and, for each message size, runs the same
load over each transport in turn (plain first, then TLS; ``--repeat`` alternates the order,
since the machine's load drifts): one publisher process publishing transient messages flat
out for ``--seconds`` to a fresh queue while one consumer process consumes it (auto-ack,
prefetch 1000). Prints consumed msg/s and MB/s, and the broker's CPU time per consumed message
(from /proc: the figure the shared machine's load disturbs least). Then the cost of
a connection: ``--connections`` pika connections opened and closed one after another, plain
and TLS, with the broker's CPU per connection. Figures, never assertions. The shared load
generator (../shared/perf, librabbitmq) is not used: its amqp-perf has no TLS option.

``--workers N`` starts Warren with N worker processes: the supervisor then ends TLS and relays
the plaintext to the workers (warren/server/relay.py), and the CPU columns are the whole
node's, with the supervisor's share beside them (what the relay costs).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import ssl
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pika

ROOT = Path(__file__).resolve().parent.parent
CLK_TCK = os.sysconf("SC_CLK_TCK")


def make_certs(folder: Path) -> dict:
    import trustme  # the test extra: pip install -e '.[test]'
    ca = trustme.CA()
    leaf = ca.issue_cert("localhost", "127.0.0.1")
    files = {"ca": folder / "ca.pem", "cert": folder / "server.pem", "key": folder / "server.key"}
    ca.cert_pem.write_to_path(str(files["ca"]))
    leaf.cert_chain_pems[0].write_to_path(str(files["cert"]))
    leaf.private_key_pem.write_to_path(str(files["key"]))
    return files


def start_warren(tmp: Path, certs: dict, workers: int = 1) -> tuple[subprocess.Popen, dict]:
    ready = tmp / "ready.json"
    proc = subprocess.Popen([sys.executable, "-m", "warren", "serve", "--port", "0", "--http-port", "-1",
                             "--data-dir", str(tmp / "data"), "--ready-file", str(ready), "--log-level", "warning",
                             "--tls-port", "0", "--tls-cert", str(certs["cert"]), "--tls-key", str(certs["key"]),
                             *(["--workers", str(workers)] if workers > 1 else [])],
                            cwd=ROOT, stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while not ready.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise SystemExit("warren did not start")
        time.sleep(0.05)
    return proc, json.loads(ready.read_text())


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime + stime


def node_cpu(pids: list[int]) -> tuple[float, float]:
    """(the whole node's CPU seconds, the first process's: the supervisor with --workers)."""
    each = [cpu_seconds(p) for p in pids]
    return sum(each), each[0]


def parameters(port: int, ca: str | None) -> pika.ConnectionParameters:
    ssl_options = None
    if ca is not None:
        ssl_options = pika.SSLOptions(ssl.create_default_context(cafile=ca), "localhost")
    return pika.ConnectionParameters("127.0.0.1", port, ssl_options=ssl_options, heartbeat=0)


def publisher(port, ca, queue, size, seconds, out) -> None:
    conn = pika.BlockingConnection(parameters(port, ca))
    ch = conn.channel()
    body = b"x" * size
    sent = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for _ in range(100):
            ch.basic_publish("", queue, body)
        sent += 100
    ch.basic_publish("", queue, b"")  # the end
    conn.close()
    out.put(sent)


def consumer(port, ca, queue, out, started) -> None:
    conn = pika.BlockingConnection(parameters(port, ca))
    ch = conn.channel()
    ch.basic_qos(prefetch_count=1000)
    got = 0
    first = last = None

    def on_message(channel, method, props, body) -> None:
        nonlocal got, first, last
        if not body:
            channel.stop_consuming()
            return
        now = time.monotonic()
        first = first or now
        last = now
        got += 1

    ch.basic_consume(queue, on_message, auto_ack=True)
    started.set()
    ch.start_consuming()
    conn.close()
    out.put((got, (last or 0) - (first or 0)))


def run_load(info: dict, ca: str, pids: list[int], tls: bool, size: int, seconds: float) -> dict:
    port = info["tls_port"] if tls else info["port"]
    ca_file = ca if tls else None
    queue = f"tls-bench-{uuid.uuid4().hex[:8]}"
    with pika.BlockingConnection(parameters(port, ca_file)) as c:
        c.channel().queue_declare(queue, auto_delete=False)
    out_p, out_c, started = mp.Queue(), mp.Queue(), mp.Event()
    cpu0, sup0 = node_cpu(pids)
    cons = mp.Process(target=consumer, args=(port, ca_file, queue, out_c, started))
    cons.start()
    started.wait(30)
    pub = mp.Process(target=publisher, args=(port, ca_file, queue, size, seconds, out_p))
    pub.start()
    sent = out_p.get(timeout=seconds + 120)
    got, elapsed = out_c.get(timeout=seconds + 300)
    pub.join()
    cons.join()
    cpu, sup = node_cpu(pids)
    cpu, sup = cpu - cpu0, sup - sup0
    with pika.BlockingConnection(parameters(port, ca_file)) as c:
        c.channel().queue_delete(queue)
    rate = got / elapsed if elapsed > 0 else 0.0
    return {"sent": sent, "got": got, "rate": rate, "mbs": rate * size / 1e6, "cpu_us": cpu / max(got, 1) * 1e6,
            "sup_us": sup / max(got, 1) * 1e6}


def connection_cost(info: dict, ca: str, pids: list[int], tls: bool, n: int) -> tuple[float, float]:
    port = info["tls_port"] if tls else info["port"]
    params = parameters(port, ca if tls else None)
    cpu0, t0 = node_cpu(pids)[0], time.perf_counter()
    for _ in range(n):
        pika.BlockingConnection(params).close()
    return (time.perf_counter() - t0) / n * 1000, (node_cpu(pids)[0] - cpu0) / n * 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--sizes", default="16,1024,65536")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--connections", type=int, default=100)
    ap.add_argument("--workers", type=int, default=1, help="worker processes (TLS ends in the supervisor)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="warren-tls-bench-") as tmp:
        tmp = Path(tmp)
        certs = make_certs(tmp)
        proc, info = start_warren(tmp, certs, args.workers)
        pids = [proc.pid] + [w["pid"] for w in info.get("workers") or ()]
        try:
            print(f"Warren pid {proc.pid}{f' with {args.workers} workers' if args.workers > 1 else ''}: plain port "
                  f"{info['port']}, TLS port {info['tls_port']}; "
                  f"{args.seconds:g} s per run, 1 publisher + 1 consumer (pika, auto-ack)")
            print(f"{'size':>7} {'transport':>9} {'msg/s':>9} {'MB/s':>8} {'broker CPU µs/msg':>18}"
                  + (f" {'of which supervisor':>20}" if args.workers > 1 else ""))
            for size in (int(s) for s in args.sizes.split(",")):
                rows: dict[bool, list] = {False: [], True: []}
                for r in range(args.repeat):
                    for tls in ((False, True) if r % 2 == 0 else (True, False)):
                        rows[tls].append(run_load(info, str(certs["ca"]), pids, tls, size, args.seconds))
                for tls in (False, True):
                    rs = rows[tls]
                    rate = sorted(x["rate"] for x in rs)[len(rs) // 2]
                    cpu = sorted(x["cpu_us"] for x in rs)[len(rs) // 2]
                    sup = sorted(x["sup_us"] for x in rs)[len(rs) // 2]
                    print(f"{size:>7} {'TLS' if tls else 'plain':>9} {rate:>9.0f} {rate * size / 1e6:>8.2f} {cpu:>18.1f}"
                          + (f" {sup:>20.1f}" if args.workers > 1 else ""))
                plain, tls_ = (sorted(x["rate"] for x in rows[k])[len(rows[k]) // 2] for k in (False, True))
                print(f"{'':>7} {'TLS/plain':>9} {tls_ / plain if plain else 0:>9.2f}")
            for tls in (False, True):
                wall, cpu = connection_cost(info, str(certs["ca"]), pids, tls, args.connections)
                print(f"connection open+close, {'TLS' if tls else 'plain'}: {wall:.1f} ms each (client side), "
                      f"broker CPU {cpu:.2f} ms each")
        finally:
            proc.terminate()
            proc.wait(30)


if __name__ == "__main__":
    main()
