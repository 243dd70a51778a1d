"""Who reads a stream queue, and how far behind its committed end each reader is (the Prometheus
family ``warren_stream_reader_offset_lag``, warren/metrics).

Two kinds of readers: AMQP consumers, whose cursor the queue keeps (``StreamQueue.cursors``), and
HTTP bulk readers, which the broker otherwise does not know (the records endpoint keeps no
state): a records request that names itself (``reader=``, as the Spark source does with its
streaming query's id) is remembered with the offset its answer tells it to ask for next. Up to
``MAX_HTTP_READERS`` are kept per stream; one silent for ``IDLE_S`` is forgotten (a query that
stopped is no longer behind).
"""

from __future__ import annotations

import time

__all__ = ["NamedReader", "HttpReaders", "MAX_HTTP_READERS", "IDLE_S"]

MAX_HTTP_READERS = 1000
IDLE_S = 600.0
MAX_NAME = 200  # octets of a reader's name kept (a label value)


class HttpReaders:
    """reader name -> (next offset it will ask for, when it last asked)."""

    __slots__ = ("_readers",)

    def __init__(self) -> None:
        self._readers: dict[str, tuple[int, float]] = {}

    def saw(self, name: str, next_offset: int) -> None:
        readers = self._readers
        if name not in readers and len(readers) >= MAX_HTTP_READERS:
            del readers[min(readers, key=lambda n: readers[n][1])]  # the longest silent goes
        readers[name] = (next_offset, time.monotonic())

    def positions(self) -> list[tuple[str, int]]:
        """(name, next offset) of every reader heard from within ``IDLE_S``."""
        now = time.monotonic()
        for name in [n for n, (_o, t) in self._readers.items() if now - t > IDLE_S]:
            del self._readers[name]
        return [(n, o) for n, (o, _t) in self._readers.items()]


class NamedReader:
    """The records endpoint's view of the store (or of a filtered view of it) for a request
    that names its reader: reads as the view does and remembers where the reader goes next."""

    __slots__ = ("_view", "_readers", "_name")

    def __init__(self, view, readers: HttpReaders, name: str) -> None:
        self._view = view
        self._readers = readers
        self._name = name[:MAX_NAME]

    def __getattr__(self, name):
        return getattr(self._view, name)

    def read_raw(self, offset: int, max_records: int, max_bytes: int, end: int | None = None):
        first, count, data = self._view.read_raw(offset, max_records, max_bytes, end)
        self._readers.saw(self._name, first + count)
        return first, count, data
