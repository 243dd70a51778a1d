#!/usr/bin/env python3
"""Memory while fsync stalls: publishers with confirms keep publishing, nothing is confirmed.

    python bench/stall_memory.py [--stall 30] [--publishers 4] [--size 1024] [--window 1000000]
                                 [--warren-args '--memory-high-watermark 268435456 --memory-budget 67108864']

Why: issue 35 asks that a long fsync stall hold back confirms and nothing else, and that memory
stay bounded meanwhile. Publishers whose confirm window is wide (``--window`` unconfirmed per
publisher) keep publishing persistent messages into a durable queue while no group commit can
end; what the broker holds grows until flow control stops it: queues page their bodies past
``--memory-budget``, and the memory alarm (``--memory-high-watermark``) blocks the publishers
(connection.blocked, reading paused: docs/flow-control.md).

How the stall is made: every fsync and fdatasync of the broker waits while a flag file exists, by
a 30-line shim loaded with LD_PRELOAD (built here with the system's cc), so writes still reach
the page cache as on a real disk whose flushes stall. (The power-loss layer,
tests/store/powerloss_fs.py, would do it too, but the kernel's FUSE holds a file's inode lock
through its fsync, so the broker's next write to that file would wait as well, which a real file
system does not do.) The load is the shared C load generator (``../shared/perf/amqp-perf``,
publish only, ``-D`` durable and persistent, ``-c`` confirms). Every second: the broker's RSS,
the queue's messages (queue.declare passive on a connection of our own) and the phase. Figures,
never assertions.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from compare import PERF, build_perf, start_warren  # noqa: E402  (bench/ is not a package)
from memory import Blocking, rss_kib  # noqa: E402

QUEUE = "stall-memory"

# fsync and fdatasync wait while the file named by WARREN_STALL_FLAG exists (polled every 5 ms)
SHIM = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static void wait_while_flagged(void) {
    const char *flag = getenv("WARREN_STALL_FLAG");
    struct timespec ts = {0, 5 * 1000 * 1000};
    while (flag && access(flag, F_OK) == 0)
        nanosleep(&ts, NULL);
}

int fsync(int fd) {
    static int (*real)(int);
    if (!real) real = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
    wait_while_flagged();
    return real(fd);
}

int fdatasync(int fd) {
    static int (*real)(int);
    if (!real) real = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
    wait_while_flagged();
    return real(fd);
}
"""


def build_shim(tmp: Path) -> Path:
    src, lib = tmp / "stall_fsync.c", tmp / "stall_fsync.so"
    src.write_text(SHIM)
    subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", str(lib), str(src), "-ldl"], check=True)
    return lib


class ConfirmProbe(threading.Thread):
    """One persistent publish with confirms, on a connection of its own, at the stall's start:
    when it is confirmed says the stall held confirms back (and for how long)."""

    def __init__(self, port: int) -> None:
        super().__init__(daemon=True)
        self.port = port
        self.sent_at = self.confirmed_at = None
        self.error = None

    def run(self) -> None:
        import pika
        try:
            conn = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", self.port, heartbeat=0,
                                                                     blocked_connection_timeout=600))
            ch = conn.channel()
            ch.confirm_delivery()
            self.sent_at = time.monotonic()
            ch.basic_publish("", QUEUE, b"probe", pika.BasicProperties(delivery_mode=2))
            self.confirmed_at = time.monotonic()
            conn.close()
        except Exception as e:  # reported in the summary
            self.error = e


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--stall", type=float, default=30, help="seconds every fsync waits")
    ap.add_argument("--before", type=float, default=5, help="seconds of load before the stall")
    ap.add_argument("--after", type=float, default=10, help="seconds of load after it")
    ap.add_argument("--publishers", type=int, default=4)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--window", type=int, default=1_000_000, help="unconfirmed messages per publisher, at most")
    ap.add_argument("--warren-args", default="--memory-high-watermark 268435456 --memory-budget 67108864")
    args = ap.parse_args()
    if not PERF.is_dir():
        raise SystemExit(f"{PERF} not found: this script needs ../shared/perf beside the checkout")
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; "
          f"warren {args.warren_args or '(defaults)'}; {args.publishers} publishers, {args.size} B, "
          f"window {args.window:,}, stall {args.stall:.0f} s", flush=True)
    total = args.before + args.stall + args.after
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        perf = build_perf(tmp)
        flag = tmp / "stall-now"
        env = {"LD_PRELOAD": str(build_shim(tmp)), "WARREN_STALL_FLAG": str(flag)}
        saved = {k: os.environ.get(k) for k in env}
        os.environ.update(env)  # start_warren's Popen inherits them; the load generator must not
        try:
            proc, port = start_warren(tmp, args.warren_args.split())
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
        try:
            gen = subprocess.Popen([str(perf / "amqp-perf"), "-p", str(port), "-x", str(args.publishers), "-y", "0",
                                    "-s", str(args.size), "-d", str(total), "-W", "0", "-q", QUEUE, "-D",
                                    "-c", str(args.window)],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            watcher = None
            deadline = time.monotonic() + 20
            while watcher is None:  # amqp-perf declares the queue first
                try:
                    w = Blocking("127.0.0.1", port)
                    w.declare(QUEUE, durable=True, passive=True)
                    watcher = w
                except (ConnectionError, OSError, RuntimeError):
                    if time.monotonic() > deadline:
                        raise SystemExit("the queue never appeared")
                    time.sleep(0.2)
            print(f"{'t s':>5} {'phase':>7} {'RSS MiB':>8} {'queued msgs':>12} {'+msgs/s':>9}", flush=True)
            started = time.monotonic()
            peaks = {"before": 0.0, "stall": 0.0, "after": 0.0}
            queued = {}
            last = 0
            stalled_at = ended_at = None
            probe = None
            while gen.poll() is None:
                t = time.monotonic() - started
                if stalled_at is None and t >= args.before:
                    flag.touch()  # every fsync from here waits
                    stalled_at = t
                    queued["stall start"] = last
                    probe = ConfirmProbe(port)
                    probe.start()
                elif stalled_at is not None and ended_at is None and t >= args.before + args.stall:
                    flag.unlink()
                    ended_at = t
                    queued["stall end"] = last
                phase = "before" if stalled_at is None else "stall" if ended_at is None else "after"
                rss = rss_kib(proc.pid) / 1024
                peaks[phase] = max(peaks[phase], rss)
                try:
                    n = watcher.declare(QUEUE, durable=True, passive=True)
                except (ConnectionError, OSError, RuntimeError):
                    n = -1
                if n < 0:  # the load generator deleted the queue: its run is over
                    break
                print(f"{t:5.0f} {phase:>7} {rss:8.0f} {n:12,} {n - last:9,}", flush=True)
                last = n if n >= 0 else last
                time.sleep(1.0)
            if flag.exists():
                flag.unlink()
            out, err = gen.communicate(timeout=120)
            watcher.close()
        finally:
            if flag.exists():
                flag.unlink()
            proc.terminate()
            proc.wait(timeout=60)
    lines = out.strip().splitlines()
    r = json.loads(lines[-1]) if lines else {}
    print(f"\npeak RSS: {peaks['before']:.0f} MiB before the stall, {peaks['stall']:.0f} MiB during it, "
          f"{peaks['after']:.0f} MiB after; messages queued during the stall: "
          f"{queued.get('stall end', 0) - queued.get('stall start', 0):,}")
    if probe.confirmed_at is not None:
        print(f"a publish made as the stall began was confirmed {probe.confirmed_at - probe.sent_at:.1f} s later "
              f"(the stall lasted {args.stall:.0f} s)")
    else:
        print(f"the probe publish made as the stall began was not confirmed: {probe.error!r}")
    print(f"load generator: published {r.get('published_per_s', 0):,.0f} msg/s on average over {total:.0f} s; "
          f"{json.dumps({k: v for k, v in r.items() if k in ('sent', 'confirmed', 'nacked', 'published')})}")
    if err.strip():
        print("amqp-perf said: " + err.strip().splitlines()[-1])
    print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
