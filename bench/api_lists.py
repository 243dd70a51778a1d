"""What the management API's list endpoints cost with many queues, and what they do to the loop.

Starts a Warren, declares N queues (default 10,000) over AMQP with a message in every tenth and
a consumer-less exchange bound to every hundredth, then asks the HTTP API for lists while a
probe client measures the broker's responsiveness: an AMQP round trip (``basic.get`` on an
empty queue, answered only when the loop is free) every 5 ms. The HTTP API shares the broker's
loop, so the longest round trip during a request is the longest the request kept the loop
from AMQP clients. Prints per request: the answer's time (median and worst of ``--requests``),
its size, and the median and worst AMQP round trip while it ran; first the round trip with no
request (the 5 s statistics sample included).

    .venv/bin/python bench/api_lists.py [--queues 10000] [--requests 5]
"""

from __future__ import annotations

import argparse
import base64
import os
import statistics
import tempfile
import time
import urllib.request
from pathlib import Path

from loop_probe import RoundTrips, declare_queues, start_broker, stop_broker

REQUESTS = [
    # (label, path)
    ("queues page 100, substring filter, sort by messages",
     "/api/queues?page=1&page_size=100&name=q-0001&sort=messages&sort_reverse=true"),
    ("queues page 100, regex filter, sort by name", "/api/queues?page=2&page_size=100&name=%5Ebench-q-00&use_regex=true"
     "&sort=name"),
    ("queues page 100, sort by publish rate (the UI's list)",
     "/api/queues?page=1&page_size=100&sort=message_stats.publish_details.rate&sort_reverse=true"
     "&columns=name,vhost,type,state,consumers,messages_ready,messages_unacknowledged,messages,"
     "message_stats.publish_details.rate,message_stats.deliver_get_details.rate,message_stats.ack_details.rate"),
    ("queues page 500, sort by arguments (a field without a cheap key)",
     "/api/queues?page=1&page_size=500&sort=arguments"),
    ("queues, all (no page)", "/api/queues"),
    ("queues, all, columns=name,messages (rabbitmqadmin's form)", "/api/queues?columns=name,messages"),
    ("exchanges page 100", "/api/exchanges?page=1&page_size=100&sort=name"),
    ("bindings, all", "/api/bindings"),
    ("overview", "/api/overview"),
    ("vhosts", "/api/vhosts"),
]


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process ``pid`` so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def get(base: str, path: str) -> tuple[float, int]:
    req = urllib.request.Request(base + path, headers={
        "Authorization": "Basic " + base64.b64encode(b"guest:guest").decode()})
    started = time.perf_counter()
    with urllib.request.urlopen(req, timeout=300) as r:
        size = len(r.read())
    return time.perf_counter() - started, size


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--queues", type=int, default=10_000)
    ap.add_argument("--requests", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="warren-api-lists-bench-") as tmp:
        proc, ports = start_broker(Path(tmp), ["--http-port", "0"], settle=0.1)
        port, base = ports["port"], f"http://127.0.0.1:{ports['http_port']}"
        try:
            declare_queues(port, args.queues, bind_every=100)
            probe = RoundTrips(port)
            probe.start()
            time.sleep(1.0)
            idle_start = time.perf_counter()
            time.sleep(11.0)  # two statistics samples at least
            idle = probe.between(idle_start, time.perf_counter(), overlapping=True)
            print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
            print(f"AMQP round trip without requests (11 s, 5 s samples included): median "
                  f"{statistics.median(idle) * 1000:.1f} ms, max {max(idle) * 1000:.1f} ms ({len(idle)} samples)")
            print(f"{'request':<62} {'median':>8} {'worst':>8} {'size':>10} {'cpu':>7} {'rt med':>7} {'rt max':>7}")
            for label, path in REQUESTS:
                times, cpus, trips, size = [], [], [], 0
                for _ in range(args.requests):
                    start, cpu = time.perf_counter(), cpu_seconds(proc.pid)
                    took, size = get(base, path)
                    cpus.append(cpu_seconds(proc.pid) - cpu)  # includes the probe's round trips (~0.1 ms each)
                    trips += probe.between(start, time.perf_counter(), overlapping=True)
                    times.append(took)
                    time.sleep(0.2)
                print(f"{label[:62]:<62} {statistics.median(times) * 1000:6.0f}ms {max(times) * 1000:6.0f}ms "
                      f"{size:>10} {statistics.median(cpus) * 1000:5.0f}ms {statistics.median(trips) * 1000:5.1f}ms "
                      f"{max(trips) * 1000:5.0f}ms")
            probe.stop.set()
            probe.join(timeout=5)
        finally:
            stop_broker(proc, timeout=10)


if __name__ == "__main__":
    main()
