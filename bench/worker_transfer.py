#!/usr/bin/env python3
"""What it costs to hand messages from one broker process to another (the both-cores design).

    python bench/worker_transfer.py [--messages 1000000] [--size 16] [--batch 256]

Why: the design for using several cores (docs/performance.md, "Both cores") has the worker
that parsed a publish hand the message to the worker that owns its queue. That pays only if
the hand-over costs much less than the ~5 µs a publish costs in one process. This measures it
on the way the design would do it: the sending side encodes each message as the store record
Warren already has (``warren.store.message.encode_message``, length-prefixed) into a batch and
writes a batch per ``--batch`` messages to a Unix socket; the owning side reads in large
chunks, decodes every record and builds the ``Message`` a queue holds, as ``Queue.publish``
would get it. Both sides report their own CPU per message; the figures say how many publishes
per second one owner could take from the others. Figures, never assertions.
"""

from __future__ import annotations

import argparse
import os
import resource
import socket
import struct
import sys
import time
from collections import deque
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from warren.broker.message import Message  # noqa: E402
from warren.store.message import decode_message, encode_message  # noqa: E402

_LEN = struct.Struct(">I")


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def owner(sock: socket.socket, n: int, report: socket.socket) -> None:
    """Read batches, decode every record into a Message, queue it; report CPU per message."""
    ready: deque = deque()
    buf = bytearray()
    got = 0
    start = cpu()
    while got < n:
        data = sock.recv(1 << 20)
        if not data:
            break
        buf += data
        pos = 0
        end = len(buf)
        with memoryview(buf) as view:
            while end - pos >= 4:
                (size,) = _LEN.unpack_from(buf, pos)
                if end - pos - 4 < size:
                    break
                ex, rk, props, body = decode_message(view[pos + 4:pos + 4 + size])
                ready.append(Message(ex, rk, props, body))
                pos += 4 + size
                got += 1
        del buf[:pos]
    used = cpu() - start
    report.sendall(f"{got} {used}".encode())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--messages", type=int, default=1_000_000)
    ap.add_argument("--size", type=int, default=16)
    ap.add_argument("--batch", type=int, default=256, help="messages per write (one event-loop turn's worth)")
    args = ap.parse_args()
    n = args.messages
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    ra, rb = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    for s in (a, b):
        s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 20)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
    pid = os.fork()
    if pid == 0:
        a.close()
        try:
            owner(b, n, rb)
        finally:
            os._exit(0)
    b.close()
    props, body = b"\x00\x00", b"m" * args.size
    start_wall, start_cpu = time.perf_counter(), cpu()
    batch = bytearray()
    for i in range(n):
        record = encode_message("", "bench-queue", props, body)
        batch += _LEN.pack(len(record))
        batch += record
        if (i + 1) % args.batch == 0:
            a.sendall(batch)
            batch.clear()
    if batch:
        a.sendall(batch)
    send_cpu = cpu() - start_cpu
    got, recv_cpu = ra.recv(100).decode().split()
    wall = time.perf_counter() - start_wall
    os.waitpid(pid, 0)
    got, recv_cpu = int(got), float(recv_cpu)
    # the same Message built in one process, for comparison (what the hand-over adds to it)
    start = cpu()
    ready: deque = deque()
    for _ in range(min(n, 200_000)):
        ready.append(Message("", "bench-queue", props, body))
    local = (cpu() - start) / min(n, 200_000)
    print(f"{got:,} messages of {args.size} B in batches of {args.batch}: {got / wall:,.0f} msg/s over the socket")
    print(f"  sending worker: {send_cpu / n * 1e6:.2f} µs CPU per message (encode + write)")
    print(f"  owning worker:  {recv_cpu / got * 1e6:.2f} µs CPU per message (read + decode + Message), "
          f"of which building the Message in one process costs {local * 1e6:.2f} µs")


if __name__ == "__main__":
    main()
