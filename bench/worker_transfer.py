#!/usr/bin/env python3
"""What it costs to hand messages from one broker process to another (the both-cores design).

    python bench/worker_transfer.py [--messages 300000] [--sizes 16,1024] [--batch 256]
                                    [--paths old,py,c-parts,c] [--repeat 200]

Why: the design for using several cores (docs/performance.md, "Both cores") has the worker
that parsed a publish hand the message to the worker that owns its queue. That pays only if
the hand-over costs much less than the ~5 µs a publish costs in one process. Each path sends
``--messages`` messages in batches of ``--batch`` (one event-loop turn's worth) through a Unix
socket to a forked owning process, which reads in large chunks and ends with the ``Message``
objects a queue holds, as ``Queue.publish`` would get them. Both sides report their own CPU
per message. The paths:

* ``old``: the store record as the wire format (``warren.store.message.encode_message``,
  length-prefixed), decoded field by field in Python, then ``Message(...)``: the first design's
  measurement (sender 1.5 µs, owner 5.3 µs per 16 B message).
* ``py``: the hand-over batch (``warren.codec.handover``), both sides in Python (the twins
  that run where ``_speedups`` is not built).
* ``c-parts``: the batch, encoded in C, decoded in C into (exchange, routing key, properties,
  body, ttl) parts, then ``Message(...)`` in Python for each.
* ``c``: the batch, encoded in C, decoded in C straight into ``Message`` objects (no
  ``__init__``; names shared through ``shared_name`` once per batch; out of the collector's sight).

The sending worker already has its ``Message`` objects (it routed them), so the batch paths
start from them; ``old`` from the parts, as the first measurement did. ``--repeat`` adds a
figure without the socket: one batch encoded and decoded that many times in this process
(CPU per message of the codec alone). Figures, never assertions.
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

from warren.broker.message import Message, shared_name, untrack  # noqa: E402
from warren.codec import handover  # noqa: E402
from warren.store.message import decode_message, encode_message  # noqa: E402

_LEN = struct.Struct(">I")
PROPS = b"\x00\x00"
DEST = ("/", ("bench-queue",))
# the Message slots take_batch does not set from the batch: what Message.__init__ starts them as
DEFAULTS = (("_decoded", None), ("_record", None))
assert set(Message.__slots__) == set(handover.MESSAGE_SLOTS) | {s for s, _ in DEFAULTS}, "Message's slots changed"


def resolve_name(shortstr: bytes) -> tuple[str, bytes]:
    return shared_name(str(shortstr[1:], "utf-8", "surrogateescape"))


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


# --- the owning side: a chunk of octets in, Messages queued, the unread tail kept ----------

def own_old(buf, ready: deque) -> int:
    pos, end = 0, len(buf)
    with memoryview(buf) as view:
        while end - pos >= 4:
            (size,) = _LEN.unpack_from(buf, pos)
            if end - pos - 4 < size:
                break
            ex, rk, props, body = decode_message(view[pos + 4:pos + 4 + size])
            ready.append(Message(ex, rk, props, body))
            pos += 4 + size
    return pos


def own_py(buf, ready: deque) -> int:
    pos = 0
    while (got := handover.take_batch_py(buf, pos, Message, DEFAULTS, resolve_name)) is not None:
        ready.extend(got[0])
        pos = got[4]
    return pos


def own_c_parts(buf, ready: deque) -> int:
    pos = 0
    while (got := handover.take_batch(buf, pos)) is not None:
        for exchange, routing_key, props, body, ttl in got[0]:
            msg = Message(exchange, routing_key, props, body)
            if ttl is not None:
                msg.ttl = ttl
            ready.append(msg)
        pos = got[4]
    return pos


def own_c(buf, ready: deque) -> int:
    pos = 0
    while (got := handover.take_batch(buf, pos, Message, DEFAULTS, resolve_name, None, True)) is not None:
        ready.extend(got[0])
        pos = got[4]
    return pos


OWNERS = {"old": own_old, "py": own_py, "c-parts": own_c_parts, "c": own_c}


def owner(sock: socket.socket, n: int, report: socket.socket, take) -> None:
    """Read chunks, turn every complete batch into Messages, queue them; report CPU per message."""
    ready: deque = deque()
    buf = bytearray()
    start = cpu()
    while len(ready) < n:
        data = sock.recv(1 << 20)
        if not data:
            break
        buf += data
        del buf[:take(buf, ready)]
    used = cpu() - start
    report.sendall(f"{len(ready)} {used}".encode())


# --- the sending side ------------------------------------------------------------------------

def send_old(sock: socket.socket, n: int, size: int, batch_size: int) -> None:
    body = b"m" * size
    batch = bytearray()
    for i in range(n):
        record = encode_message("", "bench-queue", PROPS, body)
        batch += _LEN.pack(len(record))
        batch += record
        if (i + 1) % batch_size == 0:
            sock.sendall(batch)
            batch.clear()
    if batch:
        sock.sendall(batch)


def sender_for(encode):
    def send(sock: socket.socket, n: int, size: int, batch_size: int) -> None:
        # the routed messages (a pool reused batch after batch: the sender has them already)
        pool = [Message("", "bench-queue", PROPS, b"m" * size) for _ in range(batch_size)]
        ticket = 1
        messages: list = []
        dests: list = []
        for i in range(n):
            messages.append(pool[i % batch_size])  # what routing a message to a remote queue adds
            dests.append(DEST)
            if len(messages) == batch_size:
                sock.sendall(encode(ticket, messages, dests))
                ticket += len(messages)
                messages.clear()
                dests.clear()
        if messages:
            sock.sendall(encode(ticket, messages, dests))
    return send


SENDERS = {"old": send_old, "py": sender_for(handover.encode_batch_py), "c-parts": sender_for(handover.encode_batch),
           "c": sender_for(handover.encode_batch)}


def run_path(path: str, n: int, size: int, batch_size: int) -> tuple[float, float, float]:
    """(sender µs, owner µs, msg/s) per message for one path over a socket to a forked owner."""
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    ra, rb = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    for s in (a, b):
        s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 20)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
    pid = os.fork()
    if pid == 0:
        a.close()
        try:
            owner(b, n, rb, OWNERS[path])
        finally:
            os._exit(0)
    b.close()
    start_wall, start_cpu = time.perf_counter(), cpu()
    SENDERS[path](a, n, size, batch_size)
    send_cpu = cpu() - start_cpu
    got, recv_cpu = ra.recv(100).decode().split()
    wall = time.perf_counter() - start_wall
    os.waitpid(pid, 0)
    for s in (a, ra, rb):
        s.close()
    got, recv_cpu = int(got), float(recv_cpu)
    if got != n:
        raise SystemExit(f"{path}: the owner queued {got} of {n} messages")
    return send_cpu / n * 1e6, recv_cpu / n * 1e6, n / wall


def in_process(path: str, size: int, batch_size: int, repeat: int) -> tuple[float, float]:
    """(encode µs, decode-into-Messages µs) per message for one batch, without the socket."""
    pool = [Message("", "bench-queue", PROPS, b"m" * size) for _ in range(batch_size)]
    dests = [DEST] * batch_size
    if path == "old":
        def encode():
            out = bytearray()
            for m in pool:
                record = encode_message(m.exchange, m.routing_key, m.properties, m.body)
                out += _LEN.pack(len(record))
                out += record
            return out
    else:
        enc = handover.encode_batch_py if path == "py" else handover.encode_batch

        def encode():
            return enc(1, pool, dests)
    data = encode()
    start = cpu()
    for _ in range(repeat):
        encode()
    enc_us = (cpu() - start) / (repeat * batch_size) * 1e6
    take = OWNERS[path]
    start = cpu()
    for _ in range(repeat):
        ready: deque = deque()
        take(data, ready)
    dec_us = (cpu() - start) / (repeat * batch_size) * 1e6
    assert len(ready) == batch_size
    return enc_us, dec_us


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--messages", type=int, default=300_000)
    ap.add_argument("--sizes", default="16,1024", help="body sizes in octets, comma-separated")
    ap.add_argument("--batch", type=int, default=256, help="messages per write (one event-loop turn's worth)")
    ap.add_argument("--paths", default="old,py,c-parts,c", help=f"comma-separated, of {', '.join(OWNERS)}")
    ap.add_argument("--repeat", type=int, default=200, help="batches for the in-process figure (0: none)")
    args = ap.parse_args()
    paths = args.paths.split(",")
    compiled = handover.take_batch is not handover.take_batch_py
    if not compiled:
        print("warren.codec._speedups is not built: c-parts and c run the Python twins")
    # the same Message built in one process, for comparison (what the hand-over adds to it)
    start = cpu()
    ready: deque = deque()
    for _ in range(200_000):
        ready.append(Message("", "bench-queue", PROPS, b"m"))
    local = (cpu() - start) / 200_000 * 1e6
    del ready
    print(f"building a Message in one process: {local:.2f} µs; batches of {args.batch}, "
          f"{args.messages:,} messages per run")
    print(f"{'path':8} {'body':>6} | {'sender µs':>9} {'owner µs':>9} {'msg/s':>10} |"
          f" {'encode µs':>9} {'decode µs':>9} (in process)")
    for size in (int(s) for s in args.sizes.split(",")):
        for path in paths:
            send_us, own_us, rate = run_path(path, args.messages, size, args.batch)
            line = f"{path:8} {size:>5}B | {send_us:9.2f} {own_us:9.2f} {rate:10,.0f} |"
            if args.repeat:
                enc_us, dec_us = in_process(path, size, args.batch, args.repeat)
                line += f" {enc_us:9.2f} {dec_us:9.2f}"
            print(line, flush=True)


if __name__ == "__main__":
    main()
