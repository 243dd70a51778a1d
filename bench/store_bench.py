#!/usr/bin/env python3
"""QueueStore benchmark: append + sync throughput, and recovery time. Prints figures; not a test.

Scenarios
---------
* ``append+sync every N``: 1 KiB records (``--size``), ``sync()`` (write + fsync) after every
  N appends, N = 1, 100, 1000 (``--sync-every``). Runs for ``--seconds`` (or until
  ``--max-records``). Reports records/s, MB/s of records and syncs/s.
* ``append+flush, fsync=False``: the same without any fsync, i.e. the CPU cost of framing,
  buffering and write().
* ``group commit``: the event-loop pattern. The main thread appends flat out while a worker
  thread calls ``sync()`` in a loop; every sync covers whatever was appended meanwhile.
* ``recovery``: ``--recovery-records`` (default 1,000,000) records of ``--recovery-size``
  octets (default 16) are appended and synced, half of them acked; then the time to open the
  store (scan and index every segment and ack log), to list the unacked messages, and to
  ``recover()`` them with their records. Also the index memory per message (its arrays).

Usage::

    .venv/bin/python bench/store_bench.py [--dir DIR] [--seconds 3] [--size 1024]
        [--sync-every 1,100,1000] [--recovery-records 1000000] [--recovery-size 16]

``--dir`` should be on the disk you care about (default: a temporary directory under the
current directory, removed at the end).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from warren.store import QueueStore  # noqa: E402

MB = 1_000_000


def fmt(n: float) -> str:
    return f"{n:,.0f}".replace(",", " ")


def bench_append_sync(root: Path, size: int, every: int, seconds: float, max_records: int, fsync: bool = True):
    d = root / f"sync{every}-{int(fsync)}"
    s = QueueStore(d, fsync=fsync)
    rec = os.urandom(size)
    n = syncs = 0
    t0 = time.perf_counter()
    end = t0 + seconds
    while n < max_records:
        for _ in range(every):
            n += 1
            s.append(n, rec)
        s.sync()
        syncs += 1
        if time.perf_counter() >= end:
            break
    dt = time.perf_counter() - t0
    s.delete()
    return n, syncs, dt


def bench_group_commit(root: Path, size: int, seconds: float):
    d = root / "group"
    s = QueueStore(d)
    rec = os.urandom(size)
    stop = threading.Event()
    syncs = [0]

    def worker():
        while not stop.is_set():
            s.sync()
            syncs[0] += 1

    t = threading.Thread(target=worker)
    t.start()
    n = 0
    t0 = time.perf_counter()
    end = t0 + seconds
    while True:
        for _ in range(100):
            n += 1
            s.append(n, rec)
        if time.perf_counter() >= end:
            break
    stop.set()
    t.join()
    s.sync()
    dt = time.perf_counter() - t0
    s.delete()
    return n, syncs[0], dt


def bench_recovery(root: Path, records: int, size: int):
    d = root / "recovery"
    s = QueueStore(d)
    t0 = time.perf_counter()
    for q in range(1, records + 1):
        s.append(q, b"r" * size)
    for q in range(1, records + 1, 2):  # every other one acked: ack logs to replay as well
        s.ack(q)
    s.sync()
    write_s = time.perf_counter() - t0
    s.close()
    disk = sum(p.stat().st_size for p in d.iterdir())

    t0 = time.perf_counter()
    s = QueueStore(d)
    open_s = time.perf_counter() - t0
    # the index is these arrays (tracemalloc would slow the open down ten times)
    index_bytes = sum(sys.getsizeof(a) for seg in s._segments for a in (seg.seqs, seg.offsets, seg.lengths, seg.flags))
    stats = s.recovery_stats
    t0 = time.perf_counter()
    unacked = s.unacked()
    unacked_s = time.perf_counter() - t0
    del unacked
    t0 = time.perf_counter()
    got = s.recover()
    recover_s = time.perf_counter() - t0
    assert len(got) == records // 2, len(got)
    del got
    s.close()
    shutil.rmtree(d)
    return write_s, disk, open_s, stats, index_bytes, unacked_s, recover_s


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", type=Path, default=None)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--sync-every", default="1,100,1000")
    ap.add_argument("--max-records", type=int, default=2_000_000)
    ap.add_argument("--recovery-records", type=int, default=1_000_000)
    ap.add_argument("--recovery-size", type=int, default=16)
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="warren-store-bench-", dir=args.dir or Path.cwd()))
    try:
        print(f"# QueueStore benchmark, Python {sys.version.split()[0]}, {os.cpu_count()} CPUs, data in {root}")
        print(f"{'scenario':<36} {'records':>10} {'records/s':>11} {'MB/s':>8} {'syncs/s':>8} {'rec/sync':>9}")
        rows = [(f"append+sync every {e}", e, True) for e in map(int, args.sync_every.split(","))]
        rows.append(("append+flush every 1000, fsync=False", 1000, False))
        for name, every, fsync in rows:
            n, syncs, dt = bench_append_sync(root, args.size, every, args.seconds, args.max_records, fsync)
            print(f"{name:<36} {fmt(n):>10} {fmt(n / dt):>11} {n * args.size / dt / MB:>8.1f} "
                  f"{fmt(syncs / dt):>8} {n / syncs:>9.0f}")
        n, syncs, dt = bench_group_commit(root, args.size, args.seconds)
        print(f"{'group commit (sync thread)':<36} {fmt(n):>10} {fmt(n / dt):>11} {n * args.size / dt / MB:>8.1f} "
              f"{fmt(syncs / dt):>8} {n / max(syncs, 1):>9.0f}")
        print()
        w, disk, open_s, st, index_bytes, unacked_s, recover_s = bench_recovery(
            root, args.recovery_records, args.recovery_size)
        n = args.recovery_records
        print(f"# recovery: {fmt(n)} records of {args.recovery_size} octets, every other one acked")
        print(f"written and synced in {w:.2f} s ({fmt(n / w)} appends+acks/s); {disk / MB:.1f} MB on disk, "
              f"{st.segments} segments")
        print(f"open (scan + index + ack replay): {open_s:.2f} s = {fmt(n / open_s)} records/s, "
              f"{disk / open_s / MB:.0f} MB/s; {st.messages} unacked, {st.acks} acks replayed")
        print(f"index memory after open: {index_bytes / MB:.1f} MB = {index_bytes / n:.1f} octets per record")
        print(f"unacked() (seqs + flags, no records): {unacked_s:.2f} s")
        print(f"recover() (with records): {recover_s:.2f} s = {fmt(st.messages / recover_s)} records/s")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
