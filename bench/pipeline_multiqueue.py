#!/usr/bin/env python3
"""CPU per consumed message of the shared matrix's multi-queue rows, in process (no sockets).

    python bench/pipeline_multiqueue.py [fanout|4q] [ROUNDS] [--profile]

``bench/pipeline.py``'s way (``ServerConnection`` + ``ConnectionHandler`` fed bytes, output
taken and dropped), with the connections and the steady state of the two rows as shared/perf's
``amqp-perf`` makes them:

* ``fanout`` (``fanout-1p-10q``): one publishing connection into a fanout exchange bound to 10
  queues; 10 consuming connections, one per queue, prefetch 100, manual acks, one basic.ack
  per message.
* ``4q`` (``4p4c-16B-4q``): 4 publishing connections, each to its own queue through the
  default exchange; 4 consuming connections as above.

16 B bodies. In the running broker these rows stay backlogged (the publishers outrun the
consumers, flow control holds them near the mark), so every queue starts here with a backlog
of ``BACKLOG`` messages and every consumer with a full prefetch window, and each round keeps
that: every publisher sends a turn of 100 publishes (which only enqueue: no consumer has
room), then every consumer acknowledges its 100 deliveries one ack each, in one read (each ack
lets the queue deliver one more), and the broker's flush writes what was queued. So a round
is what the broker does per 100 messages per queue. Under callgrind:

    for n in 20 120; do valgrind --tool=callgrind --callgrind-out-file=/dev/null \\
        .venv/bin/python bench/pipeline_multiqueue.py fanout $n 2>&1 | grep Collected; done
    # instructions per consumed message = (Ir(120) - Ir(20)) / (100 rounds x messages per round)

``--profile`` runs the rounds under cProfile and prints the top functions by own time.
"""

from __future__ import annotations

import struct
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from memory import queue_declare  # noqa: E402
from pipeline import Client, basic_consume, basic_qos, exchange_declare, publish, queue_bind  # noqa: E402

from warren.broker.broker import Broker  # noqa: E402
from warren.broker.durability import Durability  # noqa: E402
from warren.server.collector import tune_young_collections  # noqa: E402

BACKLOG = 1000  # ready messages per queue at the start (below the flow mark of 5,000)
PREFETCH = 100
TURN = 100  # publishes per publisher per round: a server turn (EVENTS_PER_TURN)
# basic.ack on channel 1, multiple=false: one pack per ack (the driver's own cost stays small)
_ACK = struct.Struct(">BHIHHQBB")


def acks(tags) -> bytes:
    pack = _ACK.pack
    return b"".join([pack(1, 1, 13, 60, 80, tag, 0, 0xCE) for tag in tags])


def setup(mode: str, broker):
    """The connections and queues of the row, backlogged: (publishers with their batch, consumers)."""
    if mode == "fanout":
        queues = [f"mq-{i}" for i in range(10)]
        publisher = Client(broker)
        publisher.feed(exchange_declare("mq-fanout", "fanout")
                       + b"".join(queue_declare(q, durable=False) + queue_bind(q, "mq-fanout") for q in queues))
        publishers = [(publisher, publish("mq-fanout", "", b"x" * 16) * TURN)]
        backlog = [(publisher, publish("mq-fanout", "", b"x" * 16) * (BACKLOG + PREFETCH))]
    elif mode == "4q":
        queues = [f"mq-{i}" for i in range(4)]
        publishers = []
        for q in queues:
            p = Client(broker)
            p.feed(queue_declare(q, durable=False))
            publishers.append((p, publish("", q, b"x" * 16) * TURN))
        backlog = [(p, publish("", q, b"x" * 16) * (BACKLOG + PREFETCH)) for (p, _), q in zip(publishers, queues)]
    else:
        raise SystemExit(f"unknown mode {mode!r}: fanout or 4q")
    for p, data in backlog:
        p.feed(data)
        p.conn.data_to_send()
    consumers = []
    for q in queues:
        c = Client(broker)
        c.feed(basic_qos(PREFETCH) + basic_consume(q, f"ctag-{q}", no_ack=False))
        c.conn.data_to_send()
        consumers.append(c)
    return publishers, consumers


def one_round(publishers, consumers) -> int:
    """A turn of publishes per publisher, then every consumer acks what it holds, one ack each."""
    for p, batch in publishers:
        p.feed(batch)
        p.conn.data_to_send()
    consumed = 0
    for c in consumers:
        channel = c.session.channels[1]
        tags = list(channel.unacked)
        c.feed(acks(tags))
        c.session.before_flush()  # the server's flush (AMQPConnection.flush), output dropped
        b"".join(c.conn.data_to_send())
        consumed += len(tags)
    return consumed


def main() -> None:
    mode = sys.argv[1] if len(sys.argv) > 1 else "fanout"
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 and sys.argv[2].isdigit() else 200
    tune_young_collections()  # as the server does (warren/server/collector.py)
    with tempfile.TemporaryDirectory() as d:
        durability = Durability(Path(d), fsync=False)
        broker = Broker(durability=durability, memory_budget=1 << 40)
        publishers, consumers = setup(mode, broker)
        assert all(len(c.session.channels[1].unacked) == PREFETCH for c in consumers), "full prefetch windows"
        profile = "--profile" in sys.argv
        if profile:
            import cProfile
            import pstats
            prof = cProfile.Profile()
            prof.enable()
        started = time.process_time()
        consumed = sum(one_round(publishers, consumers) for _ in range(rounds))
        elapsed = time.process_time() - started
        if profile:
            prof.disable()
            pstats.Stats(prof).sort_stats("tottime").print_stats(30)
        ready = [len(q.ready) for q in broker.vhosts["/"].queues.values()]
        print(f"{mode}: {elapsed / consumed * 1e6:.2f} µs CPU per consumed message ({consumed:,} consumed, "
              f"ready per queue {min(ready)}-{max(ready)})")
        durability.close(list(broker.all_queues()))


if __name__ == "__main__":
    main()
