"""The bulk read path (``transport=http``): one partition's offset range over the HTTP API.

The broker answers a records request with committed entries exactly as they lie in the
segment file (BULK FORMAT), read from the socket straight into a padded buffer;
``records.parse_padded`` turns each answer into one Arrow batch of the read schema. A
helper thread requests and parses the next range while the task's thread hands the current
batch to Spark, so the broker's read, the transfer, the parse and Spark's intake overlap
(the socket reads and writes and most of numpy/Arrow's work run without the GIL), and the
parse reads an answer just received, still in the CPU's cache. One range at most is read
ahead. The answers, and the values copied out of them, go into buffers used again once
nothing refers to them (``gather.BufferPool``): fresh ones cost a page fault per 4 KiB. The
pools outlive the read (``_IDLE``), so the next task of a reused Spark worker starts with
its buffers mapped.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Iterator

import pyarrow as pa

from warren.spark.read.http_api import RecordRange, StreamApi, StreamApiError
from warren.spark.options import ReadOptions
from warren.spark.read.planning import StreamRange, retained_start
from warren.spark.read.gather import BufferPool
from warren.spark.read.records import ARROW_SCHEMA, parse_padded

__all__ = ["read_range_http", "api_for"]

RAMP_STEPS = 3  # the first request of a range asks for fetchMaxBytes / 2**3
RAMP_FLOOR = 64 * 1024  # but not less than this (nor more than fetchMaxBytes)

# pairs of pools (the fetching thread's, the parsing one's) no read is using: a Spark worker
# runs one task at a time, so one pair is reused; a few more for reads run side by side
_IDLE: list[tuple[BufferPool, BufferPool]] = []
_IDLE_KEPT = 2
_IDLE_LOCK = threading.Lock()


def _pools() -> tuple[BufferPool, BufferPool]:
    with _IDLE_LOCK:
        # answers: the one parsed, the next; values (two buffers a batch): the batch being
        # built, the one handed over, the one Spark is writing and the first (pyspark keeps it)
        return _IDLE.pop() if _IDLE else (BufferPool(3), BufferPool(8))


def _release(pools: tuple[BufferPool, BufferPool]) -> None:
    with _IDLE_LOCK:
        if len(_IDLE) < _IDLE_KEPT:
            _IDLE.append(pools)


def api_for(options: ReadOptions) -> StreamApi:
    api = StreamApi(options.http_url, options.user, options.password, options.vhost, options.timeout_s)
    api.local_reads = api.local_reads and options.local_reads
    return api


def _reader_name() -> str | None:
    """``spark:<streaming query id>`` in a micro-batch's task (Spark puts the id in the task's
    local properties), so the broker shows each query's lag (warren_stream_reader_offset_lag);
    None for batch reads, which have no lag to show."""
    try:
        from pyspark import TaskContext
    except ImportError:
        return None
    context = TaskContext.get()
    query = context.getLocalProperty("sql.streaming.queryId") if context is not None else None
    return f"spark:{query}" if query else None


def _ramp(full: int) -> Iterator[int]:
    size = max(full >> RAMP_STEPS, min(full, RAMP_FLOOR))
    while size < full:
        yield size
        size *= 2
    while True:
        yield full


def read_range_http(options: ReadOptions, rng: StreamRange, schema: pa.Schema = ARROW_SCHEMA,
                    routing_keys: frozenset | None = None, matches: tuple = ()) -> Iterator[pa.RecordBatch]:
    """Arrow batches (of ``schema``) of the records [rng.start, rng.end) of ``rng.stream``, in
    offset order; with ``routing_keys``, only the blocks of records the broker's Bloom filters
    say may hold one of them, with ``matches`` only the records whose properties or headers
    match (``PushedRange.matches``). Filtered answers skip offsets: their first offset is not
    where a record is, so retention is checked when the read is planned only, and an answer
    may hold no record yet say where to go on (the broker bounds the records it looks at)."""
    if rng.end <= rng.start:
        return
    stream = rng.stream
    api = api_for(options)
    reader = _reader_name()
    filtered = bool(routing_keys) or bool(matches)
    pools = _pools()
    answers, values = pools  # both used by the helper thread only

    def fetch(offset: int, max_bytes: int) -> tuple[RecordRange, pa.RecordBatch | None]:
        """The answer from ``offset``, and its batch (on the helper thread, while the data is
        still in the CPU's cache and the task's thread hands the previous batch to Spark)."""
        answer = api.records(stream, offset, rng.end, min(options.fetch_max_records, rng.end - offset),
                             max_bytes, padded=True, routing_keys=routing_keys, reader=reader,
                             matches=matches, pool=answers)
        if answer.count == 0:
            return answer, None
        return answer, parse_padded(answer.data, answer.size, stream, options.verify_crc, schema, values)

    # Spark has nothing to do until the first batch comes: the first request asks for an
    # eighth of fetchMaxBytes, each next one for twice the one before, up to fetchMaxBytes
    sizes = _ramp(options.fetch_max_bytes)
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="warren-fetch")
    try:
        cursor = rng.start
        pending = pool.submit(fetch, cursor, next(sizes))
        while pending is not None:
            answer, batch = pending.result()
            pending = None
            if not filtered and answer.first_offset > cursor:  # retention (or a lost segment) passed it
                cursor = retained_start(stream, cursor, answer.first_offset, options.fail_on_data_loss)
            if answer.count == 0:
                if cursor >= rng.end or (filtered and answer.next_offset >= rng.end):
                    break
                if filtered and answer.next_offset > cursor:  # nothing matched in what it looked at
                    cursor = answer.next_offset
                    pending = pool.submit(fetch, cursor, next(sizes))
                    continue
                raise StreamApiError(
                    f"stream {stream!r}: no record at offset {cursor} though offsets up to {rng.end - 1} "
                    f"were committed when the batch was planned (deleted or re-created meanwhile?)")
            following = answer.next_offset
            if following < rng.end:
                pending = pool.submit(fetch, following, next(sizes))
            if batch.num_rows != answer.count:
                raise StreamApiError(f"stream {stream!r}: the answer from offset {answer.first_offset} announced "
                                     f"{answer.count} records and holds {batch.num_rows}")
            yield batch
            batch = None  # Spark took it (the pool sees when nothing refers to its buffers any more)
            cursor = following
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        api.close()
        _release(pools)
