"""Scrape cost of the Prometheus endpoint with many queues, and what it does to the event loop.

Starts a Warren (``--prometheus-port 0``), declares N queues (default 10,000) over AMQP with a
message in every tenth, then scrapes ``/metrics`` and ``/metrics/per-object`` several times each
while a probe client measures the broker's responsiveness: an AMQP round trip (``basic.get`` on
an empty queue; a reply comes only when the loop is free) every 5 ms during the scrape. Prints
per endpoint: the scrape time, its size, the broker's loop time used (``warren_scrape_loop_busy_seconds``),
the worst and median AMQP round trip during the scrapes and without any scrape, and the worst
event-loop lag the broker recorded (``warren_event_loop_lag_seconds``).

Then, in this process, the formatting alone: the same per-object families written by
``warren/metrics/text.py``'s way and by ``prometheus_client.generate_latest`` (when installed),
which is why the exporter is hand-written.

    .venv/bin/python bench/metrics_scrape.py [--queues 10000] [--scrapes 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from loop_probe import ROOT, RoundTrips, declare_queues, start_broker, stop_broker


def scrape(url: str) -> tuple[float, int]:
    started = time.perf_counter()
    with urllib.request.urlopen(url, timeout=120) as r:
        size = len(r.read())
    return time.perf_counter() - started, size


def metric(base: str, name: str, **labels) -> float:
    text = urllib.request.urlopen(base + "/metrics", timeout=60).read().decode()
    want = name + ("{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}" if labels else "")
    for line in text.splitlines():
        if line.startswith(want + " "):
            return float(line.rsplit(" ", 1)[1])
    return float("nan")


def lag_buckets(base: str, family: str = "warren_event_loop_lag_seconds_bucket{") -> list[tuple[float, float]]:
    """A histogram's cumulative buckets: [(le, count)] (by default the event-loop lag's)."""
    text = urllib.request.urlopen(base + "/metrics", timeout=60).read().decode()
    buckets = []
    for line in text.splitlines():
        if line.startswith(family):
            le = line.split('le="', 1)[1].split('"', 1)[0]
            buckets.append((float(le), float(line.rsplit(" ", 1)[1])))
    return buckets


def worst_lag(before: list, after: list) -> tuple[float, int]:
    """The bucket bound of the worst lag observed between two readings, and the ticks observed."""
    worst, previous = 0.0, 0.0
    for (bound, b), (_, a) in zip(before, after):
        if a - b > previous:
            worst = bound
        previous = a - b
    return worst, int(after[-1][1] - before[-1][1])


def best_of(work, times: int = 3):
    """(result, the fastest of ``times`` runs in seconds): the least disturbed by other processes."""
    best = float("inf")
    for _ in range(times):
        started = time.perf_counter()
        result = work()
        best = min(best, time.perf_counter() - started)
    return result, best


def formatting_alone(n: int) -> None:
    """The per-object queue families for n queues: hand-written lines against prometheus_client."""
    sys.path.insert(0, str(ROOT))
    from warren.metrics.render import QUEUE_COUNTER_FAMILIES, QUEUE_FAMILIES
    from warren.metrics.text import escape_label, header
    families = QUEUE_FAMILIES + QUEUE_COUNTER_FAMILIES
    rows = [("/", f"bench-q-{i:06d}") + tuple(range(13)) for i in range(n)]

    def hand_written() -> bytes:
        labels = [f'{{vhost="{escape_label(r[0])}",queue="{escape_label(r[1])}"}}' for r in rows]
        parts = []
        for k, (name, kind, _, text) in enumerate(families):
            parts.append(header(name, kind, text))
            parts.append("".join([f"{name}{lab} {row[3 + k]}\n" for lab, row in zip(labels, rows)]))
        return "".join(parts).encode()

    ours, ours_s = best_of(hand_written)
    samples = n * len(families)
    print(f"formatting {samples} samples ({n} queues x {len(families)} families), best of 3: "
          f"hand-written {ours_s * 1000:.0f} ms ({ours_s / samples * 1e6:.2f} us/sample, {len(ours)} octets)")
    try:
        from prometheus_client.core import CollectorRegistry, CounterMetricFamily, GaugeMetricFamily
        from prometheus_client.exposition import generate_latest
    except ImportError:
        print("prometheus_client not installed: no comparison")
        return

    class Families:
        def collect(self):
            for k, (name, kind, _, text) in enumerate(families):
                cls = CounterMetricFamily if kind == "counter" else GaugeMetricFamily
                family = cls(name[:-6] if kind == "counter" else name, text, labels=["vhost", "queue"])
                for row in rows:
                    family.add_metric([row[0], row[1]], row[3 + k])
                yield family

    registry = CollectorRegistry()
    registry.register(Families())
    theirs, theirs_s = best_of(lambda: generate_latest(registry))
    print(f"  prometheus_client.generate_latest {theirs_s * 1000:.0f} ms ({theirs_s / samples * 1e6:.2f} us/sample,"
          f" {len(theirs)} octets): {theirs_s / ours_s:.0f}x the hand-written time")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--queues", type=int, default=10_000)
    ap.add_argument("--scrapes", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="warren-metrics-bench-") as tmp:
        proc, ports = start_broker(Path(tmp), ["--http-port", "-1", "--prometheus-port", "0"])
        port, base = ports["port"], f"http://127.0.0.1:{ports['prometheus_port']}"
        try:
            declare_queues(port, args.queues)
            probe = RoundTrips(port)
            probe.start()
            time.sleep(1.0)
            idle_start = time.perf_counter()
            time.sleep(2.0)
            idle = probe.between(idle_start, time.perf_counter())
            print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
            print(f"AMQP round trip without scrapes: median {statistics.median(idle) * 1000:.2f} ms, "
                  f"max {max(idle) * 1000:.2f} ms ({len(idle)} samples)")
            for path in ("/metrics", "/metrics/per-object"):
                times, sizes, trips = [], [], []
                lags_before = lag_buckets(base)
                full_gc_before = lag_buckets(base, 'warren_gc_pause_seconds_bucket{generation="2",')
                for _ in range(args.scrapes):
                    t0 = time.perf_counter()
                    seconds, size = scrape(base + path)
                    trips += probe.between(t0, time.perf_counter())
                    times.append(seconds)
                    sizes.append(size)
                    time.sleep(0.2)
                lag, ticks = worst_lag(lags_before, lag_buckets(base))
                gc_worst, gc_passes = worst_lag(full_gc_before, lag_buckets(base, 'warren_gc_pause_seconds_bucket{generation="2",'))
                busy = metric(base, "warren_scrape_loop_busy_seconds", endpoint=path)
                longest = metric(base, "warren_scrape_longest_step_seconds", endpoint=path)
                gz = urllib.request.Request(base + path, headers={"Accept-Encoding": "gzip"})
                with urllib.request.urlopen(gz, timeout=120) as r:
                    gz_size = len(r.read())
                print(f"{path}: {args.queues} queues, {sizes[-1] / 1e6:.2f} MB ({gz_size / 1e6:.2f} MB gzipped), scrape median "
                      f"{statistics.median(times) * 1000:.0f} ms (max {max(times) * 1000:.0f}), loop busy "
                      f"{busy * 1000:.0f} ms in steps of at most {longest * 1000:.1f} ms; AMQP round trip during "
                      f"scrapes: median {statistics.median(trips) * 1000:.2f} ms, max {max(trips) * 1000:.2f} ms "
                      f"({len(trips)} samples); event-loop lag during them <= {lag * 1000:g} ms ({ticks} ticks); "
                      f"full GC passes (the broker's own, collector.py) meanwhile: {gc_passes}"
                      + (f", the longest <= {gc_worst * 1000:g} ms" if gc_passes else ""))
            probe.stop.set()
            probe.join(5)
        finally:
            stop_broker(proc, timeout=30)
    formatting_alone(args.queues)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
