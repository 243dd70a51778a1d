"""The bulk read path (``transport=http``): one partition's offset range over the HTTP API.

The broker answers a records request with committed entries exactly as they lie in the
segment file (BULK FORMAT), read from the socket straight into a padded buffer;
``records.parse_padded`` turns each answer into one Arrow batch of the read schema. The
next range is requested on a helper thread while the current one is parsed, so the broker's
read, the transfer and the parse overlap (the socket read and most of numpy/Arrow's work run
without the GIL). The answers, and the values copied out of them, go into buffers used
again once nothing refers to them (``gather.BufferPool``, one per thread): fresh ones cost
a page fault per 4 KiB. The pools outlive the read (``_IDLE``), so the next task of a reused
Spark worker starts with its buffers mapped.
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

# pairs of pools (the fetching thread's, the parsing one's) no read is using: a Spark worker
# runs one task at a time, so one pair is reused; a few more for reads run side by side
_IDLE: list[tuple[BufferPool, BufferPool]] = []
_IDLE_KEPT = 2
_IDLE_LOCK = threading.Lock()


def _pools() -> tuple[BufferPool, BufferPool]:
    with _IDLE_LOCK:
        return _IDLE.pop() if _IDLE else (BufferPool(2), BufferPool(4))


def _release(pools: tuple[BufferPool, BufferPool]) -> None:
    with _IDLE_LOCK:
        if len(_IDLE) < _IDLE_KEPT:
            _IDLE.append(pools)


def api_for(options: ReadOptions) -> StreamApi:
    return StreamApi(options.http_url, options.user, options.password, options.vhost, options.timeout_s)


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
    answers, values = pools  # the fetching thread's, the parsing one's

    def fetch(offset: int) -> RecordRange:
        return api.records(stream, offset, rng.end, min(options.fetch_max_records, rng.end - offset),
                           options.fetch_max_bytes, padded=True, routing_keys=routing_keys, reader=reader,
                           matches=matches, pool=answers)

    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="warren-fetch")
    try:
        cursor = rng.start
        pending = pool.submit(fetch, cursor)
        while pending is not None:
            answer = pending.result()
            pending = None
            if not filtered and answer.first_offset > cursor:  # retention (or a lost segment) passed it
                cursor = retained_start(stream, cursor, answer.first_offset, options.fail_on_data_loss)
            if answer.count == 0:
                if cursor >= rng.end or (filtered and answer.next_offset >= rng.end):
                    break
                if filtered and answer.next_offset > cursor:  # nothing matched in what it looked at
                    cursor = answer.next_offset
                    pending = pool.submit(fetch, cursor)
                    continue
                raise StreamApiError(
                    f"stream {stream!r}: no record at offset {cursor} though offsets up to {rng.end - 1} "
                    f"were committed when the batch was planned (deleted or re-created meanwhile?)")
            following = answer.next_offset
            if following < rng.end:
                pending = pool.submit(fetch, following)
            batch = parse_padded(answer.data, answer.size, stream, options.verify_crc, schema, values)
            if batch.num_rows != answer.count:
                raise StreamApiError(f"stream {stream!r}: the answer from offset {answer.first_offset} announced "
                                     f"{answer.count} records and holds {batch.num_rows}")
            yield batch
            cursor = following
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        api.close()
        _release(pools)
