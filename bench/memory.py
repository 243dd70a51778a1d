#!/usr/bin/env python3
"""Memory per queued message and per idle connection, Warren beside RabbitMQ.

    python bench/memory.py [--messages 1000000] [--size 16] [--connections 10000]
                           [--only transient,persistent,connections] [--rabbitmq HOST:PORT|none]

Why a script of its own: the throughput matrix says nothing about how many messages or
clients fit in a given memory, and a broker that holds a backlog (or serves thousands of
mostly idle clients) is judged on exactly that.

Each phase measures the broker's resident memory (VmRSS, from /proc) before and after, and
divides the growth by the number of messages or connections:

* ``transient``: N messages of ``--size`` octets, delivery-mode 1, into a fresh non-durable
  classic queue with no consumer.
* ``persistent``: the same, delivery-mode 2, into a fresh durable queue.
* ``connections``: ``--connections`` idle connections, each through the whole handshake
  (start-ok, tune-ok with heartbeats off, open), no channel.

Warren is started afresh for every phase (a Python process keeps freed memory in its
allocator, so a second phase in the same process would reuse the first one's pages and look
cheaper than it is), with a temporary data folder. RabbitMQ (3.10 here) cannot be restarted:
other people use it, so each phase uses fresh queues that are deleted afterwards, and its
beam.smp is found by the port it listens on. Its figure is the growth of the whole VM.

The client is a few raw sockets speaking just enough AMQP 0-9-1 (no client library): the
publisher writes pre-encoded frames in large batches, and 10,000 connections cost the client
little. The open-file limit is raised to the hard limit (the broker started here inherits it).
Figures, never assertions.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import socket
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

FRAME_END = b"\xce"
_frame_header = struct.Struct(">BHI")


# --- just enough AMQP 0-9-1 ------------------------------------------------------------------

def shortstr(s: str) -> bytes:
    b = s.encode()
    return bytes((len(b),)) + b


def longstr(b: bytes) -> bytes:
    return struct.pack(">I", len(b)) + b


def frame(ftype: int, channel: int, payload: bytes) -> bytes:
    return _frame_header.pack(ftype, channel, len(payload)) + payload + FRAME_END


def method(channel: int, class_id: int, method_id: int, args: bytes = b"") -> bytes:
    return frame(1, channel, struct.pack(">HH", class_id, method_id) + args)


EMPTY_TABLE = b"\x00\x00\x00\x00"
START_OK = method(0, 10, 11, EMPTY_TABLE + shortstr("PLAIN") + longstr(b"\x00guest\x00guest") + shortstr("en_US"))
TUNE_OK = method(0, 10, 31, struct.pack(">HIH", 2047, 131072, 0))  # heartbeat 0: idle for good
OPEN = method(0, 10, 40, shortstr("/") + shortstr("") + b"\x00")
CHANNEL_OPEN = method(1, 20, 10, shortstr(""))


def queue_declare(name: str, durable: bool, passive: bool = False) -> bytes:
    bits = (1 if passive else 0) | (2 if durable else 0)
    return method(1, 50, 10, b"\x00\x00" + shortstr(name) + bytes((bits,)) + EMPTY_TABLE)


def queue_delete(name: str) -> bytes:
    return method(1, 50, 40, b"\x00\x00" + shortstr(name) + b"\x00")


def publish_frames(queue: str, size: int, persistent: bool) -> bytes:
    """basic.publish to the default exchange + header + body, encoded once for every message."""
    publish = method(1, 60, 40, b"\x00\x00" + shortstr("") + shortstr(queue) + b"\x00")
    props = b"\x10\x00\x02" if persistent else b"\x00\x00"  # delivery-mode 2 (flag 0x1000), or none
    header = frame(2, 1, struct.pack(">HHQ", 60, 0, size) + props)
    body = frame(3, 1, b"m" * size)
    return publish + header + body


class Blocking:
    """One blocking connection: handshake, channel 1, and reading method frames."""

    def __init__(self, host: str, port: int) -> None:
        self.sock = socket.create_connection((host, port), timeout=60)
        self.buf = b""
        self.sock.sendall(b"AMQP\x00\x00\x09\x01")
        self.expect(10, 10)
        self.sock.sendall(START_OK)
        self.expect(10, 30)
        self.sock.sendall(TUNE_OK + OPEN)
        self.expect(10, 41)
        self.sock.sendall(CHANNEL_OPEN)
        self.expect(20, 11)

    def _read_frame(self) -> tuple[int, int, bytes]:
        while True:
            if len(self.buf) >= 7:
                ftype, channel, size = _frame_header.unpack_from(self.buf)
                if len(self.buf) >= 8 + size:
                    payload = self.buf[7:7 + size]
                    self.buf = self.buf[8 + size:]
                    return ftype, channel, payload
            data = self.sock.recv(65536)
            if not data:
                raise ConnectionError("broker closed the connection")
            self.buf += data

    def expect(self, class_id: int, method_id: int) -> bytes:
        """Read until the given method arrives (heartbeats and others are skipped)."""
        while True:
            ftype, _, payload = self._read_frame()
            if ftype != 1:
                continue
            ids = struct.unpack_from(">HH", payload)
            if ids == (class_id, method_id):
                return payload[4:]
            if ids in ((10, 50), (20, 40)):
                raise ConnectionError(f"closed by the broker: {payload[6:6 + payload[6] + 1]!r}")

    def declare(self, name: str, durable: bool, passive: bool = False) -> int:
        """queue.declare; returns the message count of declare-ok."""
        self.sock.sendall(queue_declare(name, durable, passive))
        args = self.expect(50, 11)
        n = args[0]
        return struct.unpack_from(">I", args, 1 + n)[0]

    def delete(self, name: str) -> None:
        self.sock.sendall(queue_delete(name))
        self.expect(50, 41)

    def close(self) -> None:
        self.sock.close()


# --- brokers -------------------------------------------------------------------------------

def rss_kib(pid: int) -> int:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def open_file_limit(pid: int) -> int:
    """The soft RLIMIT_NOFILE of a process (what it may really open)."""
    for line in open(f"/proc/{pid}/limits"):
        if line.startswith("Max open files"):
            return int(line.split()[3])
    return 0


def listening_pid(port: int) -> int | None:
    out = subprocess.run(["ss", "-ltnpH", f"sport = :{port}"], capture_output=True, text=True).stdout
    for part in out.split("pid=")[1:]:
        return int(part.split(",")[0])
    return None


class Warren:
    name = "Warren"

    def __init__(self) -> None:
        self.tmp = tempfile.TemporaryDirectory()
        tmp = Path(self.tmp.name)
        ready = tmp / "ready.json"
        root = Path(__file__).resolve().parent.parent
        # no HTTP API (when this Warren has one): its fixed default port may be taken
        help_text = subprocess.run([sys.executable, "-m", "warren", "serve", "--help"], cwd=root,
                                   capture_output=True, text=True).stdout
        no_http = ["--http-port", "-1"] if "--http-port" in help_text else []
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "warren", "serve", "--port", "0", "--data-dir", str(tmp / "data"),
             "--ready-file", str(ready), "--log-level", "warning", *no_http],
            cwd=root, stdout=subprocess.DEVNULL, stderr=open(tmp / "warren.log", "wb"))
        deadline = time.monotonic() + 30
        while not ready.exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit("Warren did not start:\n" + (tmp / "warren.log").read_text())
            time.sleep(0.05)
        self.host, self.port, self.pid = "127.0.0.1", json.loads(ready.read_text())["port"], self.proc.pid

    def quiesce(self) -> None:
        pass  # reference counting frees at once; nothing to collect

    def vm_bytes(self) -> int:
        return 0

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.tmp.cleanup()


class RabbitMQ:
    name = "RabbitMQ"

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        pid = listening_pid(port)
        if pid is None:
            raise SystemExit(f"nothing listens on {port} (is RabbitMQ running?)")
        self.pid = pid
        self.quiesce()
        self.floor_kib = rss_kib(pid)  # what it used before our first phase

    def _eval(self, expr: str) -> str:
        try:
            return subprocess.run(["rabbitmqctl", "eval", expr], capture_output=True, text=True,
                                  timeout=120).stdout.strip()
        except (OSError, subprocess.TimeoutExpired):
            return ""

    def quiesce(self) -> None:
        """A full garbage collection of every Erlang process, so that RSS shows live data and
        not heaps that have not been collected yet; then, between phases, wait (up to two
        minutes) for the VM to hand the last phase's memory back to the system: it keeps
        freed carriers for a while, and a phase started on top of them would reuse them and
        look cheaper than it is."""
        self._eval("[garbage_collect(P) || P <- processes()], ok.")
        floor = getattr(self, "floor_kib", 0)
        deadline = time.monotonic() + 120
        while floor and rss_kib(self.pid) > floor * 1.2 + 32 * 1024 and time.monotonic() < deadline:
            time.sleep(2)

    def vm_bytes(self) -> int:
        """erlang:memory(total): what the VM has allocated, without free space in carriers
        (shown beside the RSS growth for messages)."""
        out = self._eval("erlang:memory(total).")
        return int(out) if out.isdigit() else 0

    def stop(self) -> None:
        pass  # shared with others: left running


# --- phases -------------------------------------------------------------------------------

def settle(broker, seconds: float = 2.0) -> int:
    """RSS once it stops moving (a broker may still be tidying up after the last phase)."""
    broker.quiesce()
    pid = broker.pid
    last = rss_kib(pid)
    deadline = time.monotonic() + seconds * 5
    while time.monotonic() < deadline:
        time.sleep(seconds / 4)
        now = rss_kib(pid)
        if abs(now - last) < 256:
            return now
        last = now
    return last


def messages_phase(broker, n: int, size: int, persistent: bool) -> dict:
    queue = f"memory-bench-{'p' if persistent else 't'}-{os.getpid()}-{time.monotonic_ns() % 10**6}"
    c = Blocking(broker.host, broker.port)
    c.declare(queue, durable=persistent)
    before = settle(broker)
    vm_before = broker.vm_bytes()
    one = publish_frames(queue, size, persistent)
    batch = one * 1000
    started = time.monotonic()
    sent = 0
    while sent < n:
        k = min(1000, n - sent)
        c.sock.sendall(batch if k == 1000 else one * k)
        sent += k
    count = 0
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        count = c.declare(queue, durable=persistent, passive=True)
        if count >= n:
            break
        time.sleep(0.5)
    elapsed = time.monotonic() - started
    time.sleep(1)  # let the store writers and allocators settle
    after = settle(broker)
    vm_after = broker.vm_bytes()
    c.delete(queue)
    c.close()
    return {"before_kib": before, "after_kib": after, "queued": count, "seconds": elapsed,
            "per_item": (after - before) * 1024 / max(count, 1),
            "vm_before": vm_before, "vm_after": vm_after,
            "vm_per_item": (vm_after - vm_before) / max(count, 1) if vm_before else None}


async def _open_idle(host: str, port: int, opened: list) -> None:
    reader, writer = await asyncio.open_connection(host, port)
    writer.write(b"AMQP\x00\x00\x09\x01")

    async def until(class_id: int, method_id: int) -> None:
        while True:
            ftype, _, size = _frame_header.unpack(await reader.readexactly(7))
            payload = await reader.readexactly(size + 1)
            if ftype == 1 and struct.unpack_from(">HH", payload) == (class_id, method_id):
                return

    await until(10, 10)
    writer.write(START_OK)
    await until(10, 30)
    writer.write(TUNE_OK + OPEN)
    await until(10, 41)
    opened.append(writer)


async def _connections(broker, n: int) -> dict:
    host, port = broker.host, broker.port
    opened: list = []
    limit = asyncio.Semaphore(200)  # handshakes in flight at once

    async def one() -> None:
        async with limit:
            await asyncio.wait_for(_open_idle(host, port, opened), 60)

    before = settle(broker)
    started = time.monotonic()
    results = await asyncio.gather(*(one() for _ in range(n)), return_exceptions=True)
    elapsed = time.monotonic() - started
    failed = [r for r in results if isinstance(r, BaseException)]
    await asyncio.sleep(2)
    after = await asyncio.get_running_loop().run_in_executor(None, settle, broker)
    for w in opened:
        w.close()
    await asyncio.sleep(1)
    return {"before_kib": before, "after_kib": after, "queued": len(opened), "seconds": elapsed,
            "failed": len(failed), "first_error": repr(failed[0]) if failed else "",
            "per_item": (after - before) * 1024 / max(len(opened), 1),
            # no VM figure here: Erlang counts each socket's reserved (never touched) buffers
            "vm_per_item": None}


def connections_phase(broker, n: int) -> dict:
    # A broker that runs out of descriptors may fail in worse ways than refusing clients
    # (RabbitMQ's Mnesia stopped when it could not open its files): never go past its limit.
    limit = open_file_limit(broker.pid)
    if limit < n + 500:
        raise SystemExit(f"{broker.name} (pid {broker.pid}) may open {limit} files: too few for {n} "
                         "connections; raise its limit (for RabbitMQ, ulimit -n before starting it)")
    return asyncio.run(_connections(broker, n))


def raise_nofile() -> int:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return hard


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=1_000_000)
    ap.add_argument("--size", type=int, default=16)
    ap.add_argument("--connections", type=int, default=10_000)
    ap.add_argument("--only", default="transient,persistent,connections")
    ap.add_argument("--rabbitmq", default="127.0.0.1:5672", help="HOST:PORT, or 'none'")
    ap.add_argument("--no-warren", action="store_true", help="measure RabbitMQ only")
    ap.add_argument("--json", action="store_true", help="one JSON line per result as well")
    args = ap.parse_args()
    phases = [p for p in args.only.split(",") if p]
    nofile = raise_nofile()
    if "connections" in phases and nofile < args.connections + 100:
        raise SystemExit(f"the open-file limit ({nofile}) is too low for {args.connections} connections")
    brokers = [] if args.no_warren else [lambda: Warren()]
    if args.rabbitmq != "none":
        host, _, port = args.rabbitmq.partition(":")
        if listening_pid(int(port or 5672)) is not None:
            rabbit = []  # one object for every phase: it remembers the memory before the first
            brokers.append(lambda: rabbit[0] if rabbit else rabbit.append(RabbitMQ(host, int(port or 5672))) or rabbit[0])
        else:
            print(f"(RabbitMQ not found on {args.rabbitmq}: Warren only)")
    print(f"load average before: {os.getloadavg()[0]:.2f}", flush=True)
    results = []
    for make in brokers:
        for phase in phases:
            broker = make()
            try:
                if phase == "connections":
                    r = connections_phase(broker, args.connections)
                    unit = "connection"
                else:
                    r = messages_phase(broker, args.messages, args.size, phase == "persistent")
                    unit = f"{args.size} B message"
            finally:
                broker.stop()
            r.update(broker=broker.name, phase=phase, unit=unit, load=os.getloadavg()[0])
            results.append(r)
            extra = f", {r['failed']} failed ({r['first_error']})" if r.get("failed") else ""
            if r.get("vm_per_item") is not None:
                extra += f" (VM-allocated: {r['vm_per_item']:,.0f} B)"
            print(f"{broker.name:9} {phase:11} {r['queued']:>9,} in {r['seconds']:6.1f} s  RSS "
                  f"{r['before_kib'] / 1024:7.1f} -> {r['after_kib'] / 1024:7.1f} MiB  "
                  f"{r['per_item']:8.0f} B per {unit}{extra}", flush=True)
            if args.json:
                print(json.dumps(r), flush=True)
    print("\n| phase | Warren B/item | RabbitMQ B/item | Warren/RabbitMQ |")
    print("|---|---:|---:|---:|")
    for phase in phases:
        w = next((r for r in results if r["broker"] == "Warren" and r["phase"] == phase), None)
        q = next((r for r in results if r["broker"] == "RabbitMQ" and r["phase"] == phase), None)
        wv = f"{w['per_item']:,.0f}" if w else "-"
        qv = f"{q['per_item']:,.0f}" if q else "-"
        ratio = f"{w['per_item'] / q['per_item']:.2f}" if w and q and q["per_item"] > 0 else "-"
        print(f"| {phase} ({w['unit'] if w else ''}) | {wv} | {qv} | {ratio} |")
    print(f"\nload average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
