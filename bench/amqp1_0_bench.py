"""AMQP 1.0 transfer throughput against 0-9-1 on the same Warren, same machine, same run.

    .venv/bin/python bench/amqp1_0_bench.py                  # 20000 messages per row
    .venv/bin/python bench/amqp1_0_bench.py -n 50000 --repeat 3

The 1.0 client is Qpid Proton's Python binding (its reactor, python-qpid-proton), the 0-9-1 client
pika (BlockingConnection, the scripts of amqp0_10_bench.py): each run as a separate process against
one Warren started from this checkout. For each row one client publishes N messages to a queue
(1.0: unsettled transfers as fast as the credit allows, done when all are accepted, which for
the persistent row means on disk; 0-9-1: basic.publish, with confirms for the persistent row),
then another consumes them (1.0: a receiver with 1000 credit, each delivery accepted; 0-9-1:
prefetch 1000, ack multiple every 500). Printed per row and protocol: messages per second as the
client saw them and the broker's CPU time per message (user + system from /proc/<pid>/stat around
the phase), which is what the protocol costs Warren whatever the client's speed. RabbitMQ 4
reports 1.0 faster than 0-9-1 on its broker; this script says where Warren stands. Figures only,
no assertion; run it on a quiet machine (the load average is printed at the start and the end).

The rows are not alike in one way each: the persistent 0-9-1 publisher (pika's blocking
connection with confirms) waits for each confirm before the next publish, where Proton keeps
up to its credit (256) unsettled; the 0-9-1 consumer acks every 500th delivery with
``multiple``, where Proton accepts each (its dispositions coalesced into ranges).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH.parent))
sys.path.insert(0, str(BENCH))

from amqp0_10_bench import PIKA_CONSUME, PIKA_PUBLISH, phase  # noqa: E402
from loop_probe import start_broker, stop_broker  # noqa: E402

PROTON_PUBLISH = r"""
import json, sys, time, pika
from proton import Message
from proton.handlers import MessagingHandler
from proton.reactor import Container
port, queue, n, size, durable = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5] == "1"
p = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", port))
p.channel().queue_declare(queue, durable=durable)
p.close()

class Send(MessagingHandler):
    def __init__(self):
        super().__init__()
        self.sent = self.accepted = 0
        self.body = b"x" * size
    def on_start(self, event):
        self.t0 = time.time()
        conn = event.container.connect(f"amqp://guest:guest@127.0.0.1:{port}")
        event.container.create_sender(conn, f"/queues/{queue}")
    def on_sendable(self, event):
        while event.sender.credit and self.sent < n:
            event.sender.send(Message(body=self.body, durable=durable, inferred=True))
            self.sent += 1
    def on_accepted(self, event):
        self.accepted += 1
        if self.accepted == n:
            self.seconds = time.time() - self.t0
            event.connection.close()

h = Send()
Container(h).run()
print(json.dumps({"seconds": h.seconds}))
"""

PROTON_CONSUME = r"""
import json, sys, time
from proton.handlers import MessagingHandler
from proton.reactor import Container
port, queue, n = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])

class Receive(MessagingHandler):
    def __init__(self):
        super().__init__(prefetch=1000)
        self.got = 0
    def on_start(self, event):
        self.t0 = time.time()
        conn = event.container.connect(f"amqp://guest:guest@127.0.0.1:{port}")
        event.container.create_receiver(conn, f"/queues/{queue}")
    def on_message(self, event):
        self.got += 1
        if self.got == n:
            self.seconds = time.time() - self.t0
            event.connection.close()

h = Receive()
Container(h).run()
print(json.dumps({"seconds": h.seconds}))
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-n", type=int, default=20000, help="messages per row")
    ap.add_argument("--repeat", type=int, default=1, help="runs of each row (the best is printed)")
    args = ap.parse_args()
    try:
        import proton  # noqa: F401 - only to say early that the 1.0 client is missing
    except ImportError:
        print("no AMQP 1.0 client: pip install python-qpid-proton (the test extra)", file=sys.stderr)
        return 2
    rows = [("16B", 16, False), ("1KiB", 1024, False), ("1KiB-persistent", 1024, True)]
    with tempfile.TemporaryDirectory(prefix="amqp1_0-bench-") as tmp:
        proc, info = start_broker(Path(tmp), ["--host", "127.0.0.1", "--http-port", "-1"])
        port = info["port"]
        try:
            print(f"Warren pid {proc.pid} port {port}; {args.n} messages per row, best of {args.repeat}; "
                  f"load average {os.getloadavg()[0]:.2f} at the start")
            print(f"{'row':<18}{'protocol':<10}{'publish msg/s':>15}{'consume msg/s':>15}"
                  f"{'broker µs/msg pub':>20}{'broker µs/msg con':>20}")
            for label, size, durable in rows:
                for proto in ("1.0", "0-9-1"):
                    best = None
                    for r in range(args.repeat):
                        queue = f"bench-{proto}-{label}-{r}-{os.getpid()}"
                        common = [str(port), queue]
                        publish, consume = (PROTON_PUBLISH, PROTON_CONSUME) if proto == "1.0" else (PIKA_PUBLISH, PIKA_CONSUME)
                        p_s, p_cpu = phase(proc.pid, [sys.executable, "-c", publish, *common, str(args.n), str(size),
                                                      str(int(durable))])
                        c_s, c_cpu = phase(proc.pid, [sys.executable, "-c", consume, *common, str(args.n)])
                        got = (args.n / p_s, args.n / c_s, p_cpu / args.n * 1e6, c_cpu / args.n * 1e6)
                        if best is None or got[0] + got[1] > best[0] + best[1]:
                            best = got
                    print(f"{label:<18}{proto:<10}{best[0]:>15,.0f}{best[1]:>15,.0f}{best[2]:>20.1f}{best[3]:>20.1f}",
                          flush=True)
            print(f"load average {os.getloadavg()[0]:.2f} at the end")
        finally:
            stop_broker(proc, 10)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
