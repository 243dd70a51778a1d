"""AMQP 0-10 transfer throughput against 0-9-1 on the same Warren, same machine, same run.

    .venv/bin/python bench/amqp0_10_bench.py                  # 20000 messages per row
    .venv/bin/python bench/amqp0_10_bench.py -n 50000 --repeat 3

The 0-10 client is Qpid's own qpid.messaging (qpid-python 1.36 on pyenv's Python 2.7,
tests/qpid_python.py), the 0-9-1 client pika (BlockingConnection): each the everyday Python client
of its protocol, run as a separate process against one Warren started from this checkout. For
each row, one client process publishes N messages to a queue (0-10: a sender with capacity 1000,
unsynced transfers, then ``session.sync``; 0-9-1: basic.publish, then a round trip), then
another consumes them (0-10: a receiver with capacity 1000, acknowledging every 500; 0-9-1:
prefetch 1000, basic.ack multiple every 500). Printed per row and protocol: messages per second
as the client saw them, and the broker's CPU time per message (user + system, from
/proc/<pid>/stat around the phase), which is what the protocol costs Warren whatever the client's
speed. Both clients are pure Python: the client, not the broker, bounds the rates; the broker
CPU column is the comparison that matters. No timed assertion: figures only.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH.parent))
sys.path.insert(0, str(BENCH))

from loop_probe import start_broker, stop_broker  # noqa: E402
from tests.qpid_python import qpid_python, why_missing  # noqa: E402

TICKS = os.sysconf("SC_CLK_TCK")

QPID_PUBLISH = r"""
import json, sys, time
from qpid.messaging import Connection, Message
port, queue, n, size, durable = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5] == "1"
c = Connection("127.0.0.1:%d" % port, username="guest", password="guest"); c.open()
ssn = c.session()
snd = ssn.sender("%s; {create: always, node: {durable: %s}}" % (queue, durable))
snd.capacity = 1000
body = "x" * size
t0 = time.time()
for i in range(n):
    snd.send(Message(content=body, durable=durable), sync=False)
ssn.sync()
print(json.dumps({"seconds": time.time() - t0}))
c.close()
"""

QPID_CONSUME = r"""
import json, sys, time
from qpid.messaging import Connection
port, queue, n = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
c = Connection("127.0.0.1:%d" % port, username="guest", password="guest"); c.open()
ssn = c.session()
rcv = ssn.receiver(queue)
rcv.capacity = 1000
t0 = time.time()
for i in range(n):
    rcv.fetch(timeout=60)
    if i % 500 == 499:
        ssn.acknowledge(sync=False)
ssn.acknowledge()
print(json.dumps({"seconds": time.time() - t0}))
c.close()
"""

PIKA_PUBLISH = r"""
import json, sys, time, pika
port, queue, n, size, durable = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5] == "1"
conn = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", port))
ch = conn.channel()
ch.queue_declare(queue, durable=durable)
props = pika.BasicProperties(delivery_mode=2 if durable else 1)
body = b"x" * size
if durable:
    ch.confirm_delivery()  # as 0-10's sync: the broker says when the messages are safe
t0 = time.time()
for i in range(n):
    ch.basic_publish("", queue, body, props)
ch.queue_declare(queue, passive=True)  # a round trip: everything before it was handled
print(json.dumps({"seconds": time.time() - t0}))
conn.close()
"""

PIKA_CONSUME = r"""
import json, sys, time, pika
port, queue, n = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
conn = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", port))
ch = conn.channel()
ch.basic_qos(prefetch_count=1000)
got = [0]
t0 = time.time()
def on(ch, method, props, body):
    got[0] += 1
    if got[0] % 500 == 0 or got[0] == n:
        ch.basic_ack(method.delivery_tag, multiple=True)
    if got[0] == n:
        ch.stop_consuming()
ch.basic_consume(queue, on)
ch.start_consuming()
print(json.dumps({"seconds": time.time() - t0}))
conn.close()
"""


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime


def run_client(cmd: list[str], env=None) -> float:
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        raise SystemExit(f"client failed: {out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])["seconds"]


def phase(broker_pid: int, cmd: list[str], env=None) -> tuple[float, float]:
    """(client seconds, broker CPU seconds) of one client process."""
    before = cpu_seconds(broker_pid)
    seconds = run_client(cmd, env)
    return seconds, cpu_seconds(broker_pid) - before


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-n", type=int, default=20000, help="messages per row")
    ap.add_argument("--repeat", type=int, default=1, help="runs of each row (the best is printed)")
    args = ap.parse_args()
    qp = qpid_python()
    if qp is None:
        print(f"no 0-10 client: {why_missing()}", file=sys.stderr)
        return 2
    rows = [("16B", 16, False), ("1KiB", 1024, False), ("1KiB-persistent", 1024, True)]
    with tempfile.TemporaryDirectory(prefix="amqp0_10-bench-") as tmp:
        proc, info = start_broker(Path(tmp), ["--host", "127.0.0.1", "--http-port", "-1"])
        port = info["port"]
        try:
            print(f"Warren pid {proc.pid} port {port}; {args.n} messages per row, best of {args.repeat}")
            print(f"{'row':<18}{'protocol':<10}{'publish msg/s':>15}{'consume msg/s':>15}"
                  f"{'broker µs/msg pub':>20}{'broker µs/msg con':>20}")
            for label, size, durable in rows:
                for proto in ("0-10", "0-9-1"):
                    best = None
                    for r in range(args.repeat):
                        queue = f"bench-{proto}-{label}-{r}-{os.getpid()}"
                        common = [str(port), queue]
                        if proto == "0-10":
                            pub = [qp.python, "-c", QPID_PUBLISH, *common, str(args.n), str(size), str(int(durable))]
                            con = [qp.python, "-c", QPID_CONSUME, *common, str(args.n)]
                            env = qp.env
                        else:
                            pub = [sys.executable, "-c", PIKA_PUBLISH, *common, str(args.n), str(size),
                                   str(int(durable))]
                            con = [sys.executable, "-c", PIKA_CONSUME, *common, str(args.n)]
                            env = None
                        p_s, p_cpu = phase(proc.pid, pub, env)
                        c_s, c_cpu = phase(proc.pid, con, env)
                        got = (args.n / p_s, args.n / c_s, p_cpu / args.n * 1e6, c_cpu / args.n * 1e6)
                        if best is None or got[0] + got[1] > best[0] + best[1]:
                            best = got
                    print(f"{label:<18}{proto:<10}{best[0]:>15,.0f}{best[1]:>15,.0f}{best[2]:>20.1f}{best[3]:>20.1f}",
                          flush=True)
        finally:
            stop_broker(proc, 10)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
