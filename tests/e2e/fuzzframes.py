"""Hostile frame sequences for the fuzzing harness (tests/e2e/test_fuzz.py, bench/fuzz.py).

Hypothesis strategies that build what a hostile peer sends after (or instead of) a valid
handshake: mutated valid frames, truncated frames, huge declared sizes, wrong frame-end
octets, random class and method ids, field tables with bad type letters, tables nested deep,
random octets; a runner that sends one case over a real socket and says what the broker did;
a control client (pika, in a thread) that publishes and consumes throughout and records every
round trip; and the broker's resident memory from /proc.

Written with ``struct`` and the raw client (``rawamqp.py``), independent of Warren's codec.
"""

from __future__ import annotations

import struct
import threading
import time
import uuid
from dataclasses import dataclass, field

from hypothesis import strategies as st

from tests.e2e.rawamqp import (
    CONNECTION_CLOSE, FRAME_BODY, FRAME_END, FRAME_HEADER, FRAME_HEARTBEAT, FRAME_METHOD, ConnectionLost,
    RawConnection, basic_ack, basic_consume, basic_get, basic_publish, channel_close, channel_flow, channel_open,
    exchange_declare, frame, method_frame, parse_close, queue_bind, queue_declare, queue_delete,
)

FRAME_MAX = 131072

# what a refusal may carry: hard errors close the connection, soft ones a channel. Never 541:
# that says the broker broke, and hostile input is the client's fault (issue 29;
# warren/codec/refusals.py), though RabbitMQ answers a malformed property list with it.
HARD_CODES = {320, 402, 403, 501, 502, 503, 504, 505, 506, 530, 540}
SOFT_CODES = {311, 312, 313, 403, 404, 405, 406}


# --- building blocks ------------------------------------------------------------------------------


def nested_table(depth: int) -> bytes:
    """A field table nested ``depth`` deep ({"n": {"n": ...}}): each level is its size, then
    the entry "n" of type F holding the next level; the innermost is empty. Linear in depth."""
    parts = []
    inner_size = 4  # octets of the innermost table: its size field only
    sizes = []
    for _ in range(depth - 1):
        sizes.append(3 + inner_size)  # this level's payload: name (2) + type (1) + the inner table
        inner_size = 4 + sizes[-1]
    for size in reversed(sizes):
        parts.append(struct.pack(">I", size) + b"\x01nF")
    parts.append(struct.pack(">I", 0))
    return b"".join(parts)


def declare_with_arguments(channel: int, queue: str, arguments: bytes) -> bytes:
    """queue.declare whose arguments table is ``arguments`` as given (any octets)."""
    name = queue.encode()
    args = struct.pack(">H", 0) + bytes((len(name),)) + name + b"\x00" + arguments
    return method_frame(channel, 50, 10, args)


def publish(channel: int, routing_key: str, body: bytes, properties: bytes = b"\x00\x00") -> bytes:
    header = frame(FRAME_HEADER, channel, struct.pack(">HHQ", 60, 0, len(body)) + properties)
    return basic_publish(channel, "", routing_key) + header + (frame(FRAME_BODY, channel, body) if body else b"")


def valid_frames(queue: str) -> list[bytes]:
    """Frames a good client sends on channel 1 (open) against an existing ``queue``."""
    return [
        queue_declare(1, queue, passive=True),
        exchange_declare(1, "amq.direct", "direct", passive=True),
        queue_bind(1, queue, "amq.direct", "fuzz"),
        publish(1, queue, b"hello"),
        publish(1, queue, b"x" * 300, properties=b"\x90\x00" + b"\x0atext/plain" + struct.pack(">I", 0)),
        basic_get(1, queue),
        basic_consume(1, queue, "fuzz-ctag", no_ack=True),
        basic_ack(1, 1),
        channel_flow(1, True),
        method_frame(1, 60, 10, struct.pack(">IHB", 0, 10, 0)),  # basic.qos
        channel_open(2),
        channel_close(2),
        frame(FRAME_HEARTBEAT, 0, b""),
    ]


# --- cases ------------------------------------------------------------------------------------------


@dataclass
class Case:
    kind: str
    data: list[bytes]  # written one after another after the handshake (or instead of it)
    handshake: bool = True
    expect: frozenset | None = None  # the reply codes allowed for this kind; None: any known one

    def __repr__(self) -> str:  # Hypothesis prints failing examples
        size = sum(len(d) for d in self.data)
        return f"Case({self.kind!r}, {size} octets in {len(self.data)} writes: {b''.join(self.data)[:120]!r}...)"


def _mutate(data: bytes, draw) -> bytes:
    b = bytearray(data)
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["flip", "set", "insert", "delete"]))
        i = draw(st.integers(0, max(0, len(b) - 1)))
        if op == "flip" and b:
            b[i] ^= 1 << draw(st.integers(0, 7))
        elif op == "set" and b:
            b[i] = draw(st.integers(0, 255))
        elif op == "insert":
            b[i:i] = draw(st.binary(min_size=1, max_size=8))
        elif b:
            del b[i:i + draw(st.integers(1, 4))]
    return bytes(b)


@st.composite
def mutated(draw, queue: str) -> Case:
    good = draw(st.sampled_from(valid_frames(queue)))
    return Case("mutated", [_mutate(good, draw)])


@st.composite
def truncated(draw, queue: str) -> Case:
    good = draw(st.sampled_from(valid_frames(queue)))
    cut = draw(st.integers(1, max(1, len(good) - 1)))
    return Case("truncated", [good[:cut]])


@st.composite
def huge_size(draw) -> Case:
    size = draw(st.integers(FRAME_MAX + 1, 2 ** 32 - 1))
    kind = draw(st.sampled_from([FRAME_METHOD, FRAME_HEADER, FRAME_BODY]))
    head = struct.pack(">BHI", kind, 1, size)
    return Case("huge frame size", [head + draw(st.binary(max_size=64))], expect=frozenset({501}))


@st.composite
def huge_body_size(draw, queue: str) -> Case:
    body_size = draw(st.integers(2 ** 28, 2 ** 64 - 1))
    header = frame(FRAME_HEADER, 1, struct.pack(">HHQH", 60, 0, body_size, 0))
    return Case("huge body size", [basic_publish(1, "", queue) + header], expect=frozenset({406, 501, 502}))


@st.composite
def huge_longstr(draw, queue: str) -> Case:
    # exchange.declare whose arguments table claims more octets than the frame holds
    claimed = draw(st.integers(2 ** 16, 2 ** 32 - 1))
    args = struct.pack(">H", 0) + b"\x04fuzz" + b"\x06direct" + b"\x00" + struct.pack(">I", claimed) + b"\x01a"
    return Case("huge table size", [method_frame(1, 40, 10, args)], expect=frozenset({501, 502}))


@st.composite
def bad_frame_end(draw, queue: str) -> Case:
    good = draw(st.sampled_from(valid_frames(queue)[:8]))
    end = draw(st.integers(0, 255).filter(lambda e: e != FRAME_END))
    first = good[:7 + struct.unpack(">I", good[3:7])[0]]  # the first frame of the sequence
    return Case("wrong frame-end", [first + bytes((end,))], expect=frozenset({501}))


@st.composite
def random_method(draw) -> Case:
    class_id = draw(st.one_of(st.sampled_from([10, 20, 40, 50, 60, 85, 90]), st.integers(0, 65535)))
    method_id = draw(st.integers(0, 65535))
    args = draw(st.binary(max_size=200))
    channel = draw(st.sampled_from([0, 1, 2, 65535]))
    return Case("random method", [method_frame(channel, class_id, method_id, args)])


@st.composite
def bad_table(draw, queue: str) -> Case:
    letter = draw(st.integers(0, 255).map(lambda c: bytes((c,))))
    value = draw(st.binary(max_size=40))
    entry = b"\x03key" + letter + value
    body = struct.pack(">I", len(entry)) + entry
    return Case("bad field table", [declare_with_arguments(1, queue + "-t", body)])


@st.composite
def deep_table(draw, queue: str) -> Case:
    depth = draw(st.integers(101, 5000))
    return Case("deep nesting", [declare_with_arguments(1, queue + "-d", nested_table(depth))],
                expect=frozenset({501, 502}))


@st.composite
def bad_properties(draw, queue: str) -> Case:
    props = draw(st.binary(min_size=0, max_size=40))
    return Case("bad property list", [publish(1, queue, b"p", properties=props)])


@st.composite
def garbage(draw) -> Case:
    before = draw(st.booleans())
    octets = st.binary(min_size=1, max_size=300)
    if before:  # sent instead of the protocol header: octets that begin "AMQP" may be a header the
        # broker takes (hypothesis once drew "AMQP\x01\x01\x08\x00", 0-8's, and got connection.start)
        octets = octets.filter(lambda data: not data.startswith(b"AMQP"))
    return Case("random octets", [draw(octets)], handshake=not before)


@st.composite
def mixed(draw, queue: str) -> Case:
    """Several valid frames with one bad one among them, sent in pieces."""
    frames = draw(st.lists(st.sampled_from(valid_frames(queue)), min_size=1, max_size=6))
    bad = draw(st.one_of(mutated(queue), truncated(queue), random_method(), bad_table(queue)))
    data = b"".join(frames[: len(frames) // 2]) + b"".join(bad.data) + b"".join(frames[len(frames) // 2:])
    cuts = sorted(draw(st.lists(st.integers(0, len(data)), max_size=4)))
    pieces, last = [], 0
    for c in cuts + [len(data)]:
        if c > last:
            pieces.append(data[last:c])
            last = c
    return Case("mixed", pieces)


def cases(queue: str):
    """Every kind of hostile input, for a broker where ``queue`` exists."""
    return st.one_of(
        mutated(queue), truncated(queue), huge_size(), huge_body_size(queue), huge_longstr(queue),
        bad_frame_end(queue), random_method(), bad_table(queue), deep_table(queue), bad_properties(queue),
        garbage(), mixed(queue),
    )


# --- running a case ---------------------------------------------------------------------------------


@dataclass
class Outcome:
    codes: list[tuple[str, int, str]] = field(default_factory=list)  # ("connection"|"channel", code, text)
    closed: bool = False  # the broker closed the socket
    error: str | None = None  # something the harness itself could not do (handshake refused...)


def run_case(host: str, port: int, case: Case, listen_s: float = 0.3) -> Outcome:
    """One connection: handshake (unless the case replaces it), channel 1, the case's writes,
    then what the broker answers within ``listen_s`` (or until it closes)."""
    out = Outcome()
    with RawConnection(host, port, timeout=5.0) as c:
        if case.handshake:
            c.handshake(heartbeat=0)
            c.open_channel(1)
        for chunk in case.data:
            if not c.try_send(chunk):
                out.closed = True
                return out
        if not case.handshake:
            # instead of a protocol header: the broker answers its own header and closes, or waits
            try:
                got = c.read_until_eof(listen_s)
                out.closed = True
            except TimeoutError:
                got = c.buf
            if got and not got.startswith(b"AMQP"):
                out.error = f"the broker answered {got[:16]!r} to a protocol header it cannot take"
            return out
        deadline = time.monotonic() + listen_s
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            try:
                f = c.read_frame(timeout=left)
            except TimeoutError:
                break
            except (ConnectionLost, OSError):
                out.closed = True
                break
            except ValueError as e:  # a frame of ours echoed wrongly would be a broker bug
                out.error = f"unreadable frame from the broker: {e}"
                break
            if f.is_method and f.method in (CONNECTION_CLOSE, (20, 40)):
                close = parse_close(f)
                scope = "connection" if f.method == CONNECTION_CLOSE else "channel"
                out.codes.append((scope, close.reply_code, close.reply_text))
                if scope == "connection":
                    c.try_send(method_frame(0, 10, 51))  # close-ok
                    deadline = min(deadline, time.monotonic() + 0.2)
                else:
                    c.try_send(method_frame(f.channel, 20, 41))
    return out


def check_outcome(case: Case, out: Outcome) -> None:
    """The broker answered with a known code for the scope (and the expected one, where the
    kind has one), or closed the socket, or took the input as valid."""
    assert out.error is None, out.error
    for scope, code, text in out.codes:
        allowed = HARD_CODES if scope == "connection" else SOFT_CODES
        assert code in allowed, f"{scope}.close {code} {text!r} for {case!r}"
    if case.expect is not None and case.handshake:
        seen = {code for _, code, _ in out.codes}
        assert seen & case.expect or (out.closed and not seen), \
            f"expected one of {sorted(case.expect)} for {case.kind}, got {out.codes} (closed={out.closed})"


# --- the control client -------------------------------------------------------------------------------


class ControlClient(threading.Thread):
    """Publishes and consumes one message at a time over pika for as long as it runs;
    records each round trip's latency and any failure."""

    def __init__(self, host: str, port: int) -> None:
        super().__init__(daemon=True, name="fuzz-control")
        self.host, self.port = host, port
        self.stop_event = threading.Event()
        self.latencies: list[float] = []
        self.failures: list[str] = []

    def run(self) -> None:
        import pika
        try:
            conn = pika.BlockingConnection(pika.ConnectionParameters(
                self.host, self.port, connection_attempts=3, socket_timeout=10, heartbeat=0))
            ch = conn.channel()
            q = ch.queue_declare(f"fuzz-control-{uuid.uuid4().hex[:8]}", exclusive=True).method.queue
            ch.confirm_delivery()
            n = 0
            while not self.stop_event.is_set():
                n += 1
                body = str(n).encode()
                started = time.monotonic()
                ch.basic_publish("", q, body)  # confirmed: returns once the broker has it
                got = None
                for _ in range(200):
                    _, _, got = ch.basic_get(q, auto_ack=True)
                    if got is not None:
                        break
                    conn.sleep(0.005)
                if got != body:
                    self.failures.append(f"round trip {n}: got {got!r}")
                    break
                self.latencies.append(time.monotonic() - started)
                conn.sleep(0.02)
            conn.close()
        except Exception as e:  # noqa: BLE001 - any failure is the finding
            self.failures.append(f"{type(e).__name__}: {e}")

    def stop(self) -> None:
        self.stop_event.set()
        self.join(timeout=15)


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def ensure_queue(host: str, port: int, name: str) -> None:
    with RawConnection(host, port) as c:
        c.handshake(heartbeat=0)
        c.open_channel(1)
        c.declare_queue(1, name)


def delete_queue(host: str, port: int, name: str) -> None:
    with RawConnection(host, port) as c:
        c.handshake(heartbeat=0)
        c.open_channel(1)
        c.send(queue_delete(1, name))


__all__ = ["Case", "Outcome", "ControlClient", "cases", "run_case", "check_outcome", "rss_kib", "nested_table",
           "ensure_queue", "delete_queue", "valid_frames", "HARD_CODES", "SOFT_CODES"]
