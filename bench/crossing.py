"""What a message costs to cross from one worker to another under --worker-mode queues.

Measures, in one process and without sockets, the two ends of the crossing path of
``warren/spread/messages.py`` as the broker runs them, per message:

* sender: what ``Forwarding.forward`` keeps per message, then the record the link writes once
  per loop turn (``pickle.dumps`` of the link's record);
* owner: ``pickle.loads`` of that record, then the ``Message`` objects the owner's queues take.

Two formats: ``tuples`` (session 9: one pickled tuple per message and queue, a ``Message``
built from it on the owner) and ``handover`` (``warren/codec/handover.py``: one batch per loop
turn, names and property lists once per batch, a message once however many of the owner's
queues it goes to; the owner's compiled ``take_batch`` returns the ``Message`` objects). Each
for 16 B and 1 KiB bodies, to one queue and to five queues of the owner (fanout).

    .venv/bin/python bench/crossing.py [--batch 256] [--rounds 400]

Prints µs per message (best of 5 runs of ``--rounds`` batches); no assertions.
"""

from __future__ import annotations

import argparse
import pickle
import time

from warren.broker.message import Message, shared_name
from warren.codec.handover import encode_batch, take_batch
from warren.spec.amqp0_9_1 import BasicProperties

HIGHEST = pickle.HIGHEST_PROTOCOL


def _messages(n: int, size: int) -> list[Message]:
    props = BasicProperties(content_type="application/octet-stream", delivery_mode=1).encode()
    return [Message("amq.direct", "bench-key", props, b"x" * size) for _ in range(n)]


def tuples_sender(msgs, queues) -> bytes:
    items = []
    for msg in msgs:
        for q in queues:
            items.append(("/", q, msg.exchange, msg.routing_key, bytes(msg.properties), bytes(msg.body)))
    return pickle.dumps(("m", "publish", (items,)), HIGHEST)


def tuples_owner(data: bytes) -> int:
    _, _, (items,) = pickle.loads(data)
    n = 0
    for vhost, name, exchange, routing_key, properties, body in items:
        msg = Message(exchange, routing_key, properties, body)
        msg.check_expiration()
        n += 1
    return n


def handover_sender(msgs, queues) -> bytes:
    dest = ("/", tuple(queues))
    batch = encode_batch(0, msgs, [dest] * len(msgs))
    return pickle.dumps(("m", "handover", (batch,)), HIGHEST)


_DEFAULTS = (("_decoded", None), ("_record", None))


def _name(ss) -> tuple:
    return shared_name(str(ss[1:], "utf-8", "surrogateescape"))


def handover_owner(data: bytes) -> int:
    _, _, (batch,) = pickle.loads(data)
    items, dests, _, _, _ = take_batch(batch, 0, Message, _DEFAULTS, _name, lambda v, names: names, True)
    return sum(len(d) for d in dests)


def best(fn, arg, rounds: int) -> float:
    runs = []
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(rounds):
            fn(*arg) if isinstance(arg, tuple) else fn(arg)
        runs.append(time.perf_counter() - t)
    return min(runs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batch", type=int, default=256, help="messages per loop turn")
    ap.add_argument("--rounds", type=int, default=400, help="batches per timed run")
    a = ap.parse_args()
    print(f"{'format':<9} {'body':>6} {'queues':>6} {'sender µs/msg':>14} {'owner µs/msg':>13} {'octets/msg':>11}")
    for size in (16, 1024):
        msgs = _messages(a.batch, size)
        for queues in (["q0"], ["q0", "q1", "q2", "q3", "q4"]):
            for name, send, take in (("tuples", tuples_sender, tuples_owner),
                                     ("handover", handover_sender, handover_owner)):
                data = send(msgs, queues)
                assert take(data) == a.batch * len(queues)
                s = best(send, (msgs, queues), a.rounds) / (a.rounds * a.batch) * 1e6
                o = best(take, data, a.rounds) / (a.rounds * a.batch) * 1e6
                print(f"{name:<9} {size:>6} {len(queues):>6} {s:>14.2f} {o:>13.2f} {len(data) / a.batch:>11.1f}")


if __name__ == "__main__":
    main()
