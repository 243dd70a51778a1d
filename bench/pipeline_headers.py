#!/usr/bin/env python3
"""bench/pipeline.py with a new headers table in every message: the worst case of the property
list check at the edge (issue 16; a list equal to the previous one is not scanned again).

    python bench/pipeline_headers.py [pubonly|autoack|ack|fanout] [N] [--default-gc]

Each message carries three headers (a task id, a retry count and an origin), as a Celery-like
publisher sends them; the batch of 100 publishes pipeline.py sends over and over holds 100
different ids, so no message has the property list of the one before it. Under callgrind, as pipeline.py's docstring says:

    for n in 5000 25000; do valgrind --tool=callgrind --callgrind-out-file=/dev/null \\
        .venv/bin/python bench/pipeline_headers.py pubonly $n 2>&1 | grep Collected; done

Figures before and after the check: docs/performance.md, "Checking every property list".
"""

from __future__ import annotations

import itertools
import struct
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import pipeline  # noqa: E402
from memory import frame, method, shortstr  # noqa: E402

_numbers = itertools.count()


def publish_with_headers(exchange: str, routing_key: str, body: bytes, persistent: bool = False) -> bytes:
    task_id = f"task-{next(_numbers):08d}".encode()
    entries = (shortstr("id") + b"S" + struct.pack(">I", len(task_id)) + task_id
               + shortstr("retries") + b"I" + struct.pack(">i", 0)
               + shortstr("origin") + b"S" + struct.pack(">I", 9) + b"gen1@host")
    flags = 0x3000 if persistent else 0x2000  # headers (and delivery-mode 2)
    props = struct.pack(">HI", flags, len(entries)) + entries + (b"\x02" if persistent else b"")
    return (method(1, 60, 40, b"\x00\x00" + shortstr(exchange) + shortstr(routing_key) + b"\x00")
            + frame(2, 1, struct.pack(">HHQ", 60, 0, len(body)) + props) + frame(3, 1, body))


class _Batch:
    """What ``publish(...) * 100`` gives pipeline.main: here 100 different publishes."""

    def __init__(self, *args) -> None:
        self.args = args

    def __mul__(self, count: int) -> bytes:
        return b"".join(publish_with_headers(*self.args) for _ in range(count))


pipeline.publish = _Batch

if __name__ == "__main__":
    pipeline.main()
