#!/usr/bin/env python3
"""StreamStore and HTTP bulk-read benchmark: records/s and MB/s. Prints figures; not a test.

Scenarios
---------
* ``append``: ``--records`` records of ``--size`` octets appended (memory only), then one
  ``sync()`` (write + fsync); the rate covers both.
* ``reopen``: the time to open the store again (scan every segment, check every CRC, rebuild
  the index), and the index memory per record.
* ``read_raw``: every record read back with ``read_raw`` in pages of ``--page-bytes`` (one
  pread each, not parsed); then the same plus ``parse_entries`` (CRC check, one tuple per
  record), which is what a Python client pays on top.
* ``read``: the consumer path, ``read`` in batches of 256 (parsed, CRC checked).
* ``http``: the same pages through the HTTP records endpoint (aiohttp on its own loop thread,
  uvloop if installed; the client is ``http.client`` with keep-alive on the main thread),
  without and with parsing. Both ends share this process and its two-core machine, so the
  figure is a floor for a remote reader.

Usage::

    .venv/bin/python bench/stream_bench.py [--dir DIR] [--records 1000000] [--size 100]
        [--page-bytes 4194304] [--no-fsync]
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import http.client
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from warren.access import AccessControl  # noqa: E402
from warren.management import HttpServer  # noqa: E402
from warren.store.stream_format import parse_entries  # noqa: E402
from warren.store.stream_store import StreamStore  # noqa: E402

READ_BATCH = 256


def rate(label: str, records: int, octets: int, seconds: float) -> None:
    print(f"  {label:<34} {records / seconds:>12,.0f} records/s  {octets / seconds / 1e6:>9.1f} MB/s"
          f"  ({seconds:.2f} s)")


def bench_append(store: StreamStore, n: int, size: int) -> None:
    record = b"r" * size
    t0 = time.perf_counter()
    append = store.append
    for i in range(n):
        append(record, i)
    t1 = time.perf_counter()
    store.sync()
    t2 = time.perf_counter()
    rate("append (memory only)", n, n * size, t1 - t0)
    rate("append + one sync", n, n * size, t2 - t0)


def bench_read_raw(store: StreamStore, page_bytes: int, parse: bool) -> int:
    offset, records, octets = 0, 0, 0
    t0 = time.perf_counter()
    while True:
        first, count, data = store.read_raw(offset, 10**9, page_bytes)
        if not count:
            break
        if parse:
            parse_entries(data)
        offset = first + count
        records += count
        octets += len(data)
    rate("read_raw" + (" + parse_entries" if parse else ""), records, octets, time.perf_counter() - t0)
    return records


def bench_read(store: StreamStore) -> None:
    offset, records, octets = 0, 0, 0
    t0 = time.perf_counter()
    while True:
        got = store.read(offset, READ_BATCH, 1 << 20, committed_only=True)
        if not got:
            break
        offset = got[-1][0] + 1
        records += len(got)
        octets += sum(len(r) for _, _, r in got)
    rate(f"read (batches of {READ_BATCH}, records only)", records, octets, time.perf_counter() - t0)


class _StandIn(SimpleNamespace):
    """A queue or vhost as the HTTP API sees it; hashable, as its statistics key objects by identity."""

    __hash__ = object.__hash__


def serve_in_thread(store: StreamStore):
    """An HttpServer over a stand-in broker holding ``store``, on its own loop thread; (port, stop)."""
    try:
        import uvloop
        loop = uvloop.new_event_loop()
    except ImportError:
        loop = asyncio.new_event_loop()
    queue = _StandIn(name="bench", is_stream=True, store=store, durable=True, auto_delete=False, arguments={},
                     consumers=[], message_count=0)
    vhost = _StandIn(name="/", queues={"bench": queue}, exchanges={})
    # the access store in memory: guest/guest on "/", as a new data folder has
    broker = SimpleNamespace(vhosts={"/": vhost}, access=AccessControl())
    server = HttpServer(broker)
    started = threading.Event()

    def run():
        asyncio.set_event_loop(loop)
        loop.run_until_complete(server.start("127.0.0.1", 0))
        started.set()
        loop.run_forever()
        loop.run_until_complete(server.stop())
        loop.close()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    started.wait(10)

    def stop():
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)

    return server.port, stop


def bench_http(port: int, page_bytes: int, parse: bool) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    auth = {"Authorization": "Basic " + base64.b64encode(b"guest:guest").decode()}
    offset, records, octets = 0, 0, 0
    t0 = time.perf_counter()
    while True:
        conn.request("GET", f"/api/streams/%2F/bench/records?offset={offset}&max_records=1000000"
                            f"&max_bytes={page_bytes}", headers=auth)
        r = conn.getresponse()
        body = r.read()
        if r.status != 200:
            raise SystemExit(f"HTTP {r.status}: {body[:200]!r}")
        count = int(r.getheader("X-Warren-Record-Count"))
        if not count:
            break
        if parse:
            parse_entries(body)
        offset = int(r.getheader("X-Warren-Next-Offset"))
        records += count
        octets += len(body)
    conn.close()
    rate("HTTP records" + (" + parse_entries" if parse else ""), records, octets, time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", type=Path, default=None)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--page-bytes", type=int, default=4 * 1024 * 1024)
    ap.add_argument("--no-fsync", action="store_true")
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="stream-bench-", dir=args.dir or Path.cwd()))
    try:
        print(f"{args.records:,} records of {args.size} octets, pages of {args.page_bytes:,} octets, "
              f"fsync={'off' if args.no_fsync else 'on'}, in {root}")
        store = StreamStore(root / "s", fsync=not args.no_fsync)
        bench_append(store, args.records, args.size)
        print(f"  on disk: {store.byte_size / 1e6:.1f} MB in {store.segment_count} segments")
        store.close()
        t0 = time.perf_counter()
        store = StreamStore(root / "s", fsync=not args.no_fsync)
        seconds = time.perf_counter() - t0
        index = sum(len(s.positions) * s.positions.itemsize + len(s.block_max) * 8 for s in store._segments)
        print(f"  reopen (scan + CRC + index): {seconds:.2f} s, {store.message_count / seconds:,.0f} records/s, "
              f"index {index / store.message_count:.2f} octets/record")
        bench_read_raw(store, args.page_bytes, parse=False)
        bench_read_raw(store, args.page_bytes, parse=True)
        bench_read(store)
        port, stop = serve_in_thread(store)
        try:
            bench_http(port, args.page_bytes, parse=False)
            bench_http(port, args.page_bytes, parse=True)
        finally:
            stop()
        store.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
