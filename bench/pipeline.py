#!/usr/bin/env python3
"""CPU per message of the broker's own code, without sockets or an event loop.

    python bench/pipeline.py [pubonly|autoack|ack|fanout|persist|pubconfirm] [N] [--size B] [--default-gc]

Why: on this shared machine every timing moves 30–50 % with the load, too much to see a 10 %
change. This drives a publishing and a consuming connection in process (``ServerConnection`` +
``ConnectionHandler``, the layers ``warren/server/connection.py`` glues to sockets), so the same Python
runs as in the broker minus the system calls; and under callgrind it gives a count that does
not depend on the load at all:

    for n in 5000 25000; do valgrind --tool=callgrind --callgrind-out-file=/dev/null \\
        .venv/bin/python bench/pipeline.py autoack $n 2>&1 | grep Collected; done
    # instructions per message = (Ir(25000) - Ir(5000)) / 20000

Modes: ``pubonly`` (messages stay queued), ``autoack`` (a no-ack consumer), ``ack`` (prefetch
100, one multiple ack per batch of 100 publishes), ``fanout`` (a fanout exchange to 10 queues,
a no-ack consumer on each), 16 B bodies; ``persist`` (shared/perf's persist-confirm: a durable
queue, persistent 1 KiB messages under publisher confirms, prefetch 100 and one ack per
message, a group commit after every batch of 100, fsync off); ``pubconfirm`` (shared/perf's
``-y0 -c1000``, the Spark writer's load: publish only under confirms, transient, ``--size`` octets,
1000 by default; the confirms written per batch of 100 as the server's flush writes them). Prints the CPU time (``time.process_time``) per
message, which still varies with the machine's load, only less than wall time.
"""

from __future__ import annotations

import struct
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from memory import CHANNEL_OPEN, OPEN, START_OK, TUNE_OK, frame, method, queue_declare, shortstr  # noqa: E402

from warren.access.login import MECHANISMS  # noqa: E402
from warren.broker.broker import Broker  # noqa: E402
from warren.broker.durability import Durability  # noqa: E402
from warren.protocol.amqp0_9_1.adapter import ConnectionHandler  # noqa: E402
from warren.protocol.amqp0_9_1.connection import ServerConnection  # noqa: E402
from warren.server.collector import tune_young_collections  # noqa: E402

EMPTY_TABLE = b"\x00\x00\x00\x00"


class NullIO:
    """What the session calls on the socket glue; nothing to do without a socket."""

    certificate_login = None  # no TLS: no client certificate to log in with
    placing = False  # one process: no connection moves to another worker

    def want_flush(self) -> None:
        pass

    def close_after_flush(self) -> None:
        pass

    def close_soon(self) -> None:
        pass

    def start_heartbeat(self, seconds: int) -> None:
        pass

    def throttle(self, queue) -> None:
        pass

    def opened(self) -> None:
        pass


def exchange_declare(name: str, kind: str) -> bytes:
    return method(1, 40, 10, b"\x00\x00" + shortstr(name) + shortstr(kind) + b"\x00" + EMPTY_TABLE)


def queue_bind(queue: str, exchange: str) -> bytes:
    return method(1, 50, 20, b"\x00\x00" + shortstr(queue) + shortstr(exchange) + shortstr("") + b"\x00" + EMPTY_TABLE)


def basic_consume(queue: str, tag: str, no_ack: bool) -> bytes:
    return method(1, 60, 20, b"\x00\x00" + shortstr(queue) + shortstr(tag) + bytes((2 if no_ack else 0,)) + EMPTY_TABLE)


def basic_qos(prefetch: int) -> bytes:
    return method(1, 60, 10, struct.pack(">IHB", 0, prefetch, 0))


def basic_ack(tag: int) -> bytes:
    return method(1, 60, 80, struct.pack(">QB", tag, 1))


def publish(exchange: str, routing_key: str, body: bytes, persistent: bool = False) -> bytes:
    props = b"\x10\x00\x02" if persistent else b"\x00\x00"  # delivery-mode 2, or no properties
    return (method(1, 60, 40, b"\x00\x00" + shortstr(exchange) + shortstr(routing_key) + b"\x00")
            + frame(2, 1, struct.pack(">HHQ", 60, 0, len(body)) + props) + frame(3, 1, body))


def confirm_select() -> bytes:
    return method(1, 85, 10, b"\x00")


def basic_ack_one(tag: int) -> bytes:
    return method(1, 60, 80, struct.pack(">QB", tag, 0))


class Client:
    """One in-process connection: bytes in, events to the session, output discarded."""

    def __init__(self, broker) -> None:
        self.conn = ServerConnection(broker.server_properties(), MECHANISMS)
        self.session = ConnectionHandler(broker, self.conn, ("127.0.0.1", 1), NullIO())
        self.feed(START_OK + TUNE_OK + OPEN + CHANNEL_OPEN)
        self.conn.data_to_send()

    def feed(self, data: bytes) -> None:
        conn, session = self.conn, self.session
        conn.receive_data(data)
        while (event := conn.next_event()) is not None:
            session.handle(event)


def main() -> None:
    mode = sys.argv[1] if len(sys.argv) > 1 else "autoack"
    n = int(sys.argv[2]) if len(sys.argv) > 2 and sys.argv[2].isdigit() else 200_000
    size = int(sys.argv[sys.argv.index("--size") + 1]) if "--size" in sys.argv else None
    if "--default-gc" not in sys.argv:
        tune_young_collections()  # as the server does (warren/server/collector.py)
    with tempfile.TemporaryDirectory() as d:
        durability = Durability(Path(d), fsync=False)
        broker = Broker(durability=durability, memory_budget=1 << 40)
        publisher, consumer = Client(broker), Client(broker)
        queues = [f"pipeline-{i}" for i in range(10 if mode == "fanout" else 1)]
        persist = mode == "persist"
        setup = b"".join(queue_declare(q, durable=persist) for q in queues)
        if persist or mode == "pubconfirm":
            setup += confirm_select()
        if mode == "fanout":
            setup += exchange_declare("pipeline-fanout", "fanout")
            setup += b"".join(queue_bind(q, "pipeline-fanout") for q in queues)
        publisher.feed(setup)
        publisher.conn.data_to_send()
        if mode not in ("pubonly", "pubconfirm"):
            acking = mode in ("ack", "persist")
            subscribe = basic_qos(100) if acking else b""
            subscribe += b"".join(basic_consume(q, f"ctag-{q}", no_ack=not acking) for q in queues)
            consumer.feed(subscribe)
            consumer.conn.data_to_send()
        if size is None:
            size = 1024 if persist else 1000 if mode == "pubconfirm" else 16
        batch = (publish("pipeline-fanout", "", b"x" * size) if mode == "fanout"
                 else publish("", queues[0], b"x" * size, persist)) * 100
        channel = consumer.session.channels[1]
        started = time.process_time()
        for _ in range(n // 100):
            publisher.feed(batch)
            if mode == "pubconfirm":
                publisher.session.before_flush()  # the server's flush: one basic.ack per batch
            publisher.conn.data_to_send()
            if mode not in ("pubonly", "pubconfirm"):
                if mode == "ack" and channel.unacked:
                    consumer.feed(basic_ack(next(reversed(channel.unacked))))
                elif persist:
                    consumer.feed(b"".join(basic_ack_one(tag) for tag in list(channel.unacked)))
                    job = durability.begin_sync()  # the group commit, inline (the server: a thread)
                    if job is not None:
                        durability.sync(job[1])
                        durability.end_sync(job[0])
                    publisher.conn.data_to_send()  # the confirms
                b"".join(consumer.conn.data_to_send())
        elapsed = time.process_time() - started
        ready = sum(len(broker.vhosts["/"].queues[q].ready) for q in queues)
        print(f"{mode}: {elapsed / n * 1e6:.2f} µs CPU per message ({n:,} messages, {ready:,} left ready)")
        durability.close(list(broker.all_queues()))


if __name__ == "__main__":
    main()
