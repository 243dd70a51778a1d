"""``spark.read.format("warren")``: a batch read of an offset range of one or more streams.

The range is fixed when Spark plans the read (``partitions``, in the driver's planner): for each
stream, ``startingOffsets`` (default earliest) up to ``endingOffsets`` (default latest: the
committed end at that moment), narrowed by the filters Spark pushed down (``pushFilters``:
``offset`` and ``timestamp`` ranges, ``stream`` names; ``planning.push_filters``), cut into
``recordsPerPartition`` ranges (without the option: as few equal ranges as keep a task near
128 MiB, ``planning.PARTITION_BYTES``), one Spark task each. ``read`` runs in the executors and moves
the records with the configured transport, building only the columns of the read schema.

Filter pushdown is opt-in (option ``pushFilters=true``), for two reasons found on pyspark 4.3:

* it is off unless ``spark.sql.python.filterPushdown.enabled`` is true, and a reader that
  offers ``pushFilters`` then fails to plan; so ``pushFilters`` exists only on
  ``PushdownBatchReader``, which the data source hands out when that setting is on;
* Spark keeps the read planned with pushed filters (partitions and reader) on the DataFrame's
  relation and reuses it for later queries of the same DataFrame without asking the source
  again: ``df.where("offset = 7").count()`` then ``df.count()`` gives 1 for both. With the
  option, load the DataFrame once per filtered query (tests/spark/read/test_batch.py shows
  the default is safe).
"""

from __future__ import annotations

import re
from typing import Iterator

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader

from warren.spark.options import parse_read_options
from warren.spark.read.planning import (
    PushedRange, StreamRange, per_partition, push_filters, resolve_offset, retained_start, split_range,
)
from warren.spark.read.records import arrow_schema
from warren.spark.schema import check_read_schema, named_headers

__all__ = ["StreamBatchReader", "PushdownBatchReader", "read_range", "ReadLayout"]


class ReadLayout:
    """The columns a read gives (names and nullability, from Spark's read schema); picklable,
    turned into the Arrow schema where the batches are built."""

    def __init__(self, schema) -> None:
        self.columns = check_read_schema(schema)
        self.nullable = tuple(f.nullable for f in schema.fields)
        # headers read as a struct of chosen headers: (name, nullable) of each
        self.headers = next((named_headers(f) for f in schema.fields if f.name == "headers"), None)

    def arrow(self) -> pa.Schema:
        return arrow_schema(self.columns, self.nullable, self.headers)


def read_range(options, rng: StreamRange, layout: ReadLayout,
               pushed: PushedRange | None = None) -> Iterator[pa.RecordBatch]:
    """The rows of one planned range, over the transport the options name; ``pushed`` (filters
    Spark pushed down, HTTP only): the broker sends only the blocks that may hold the routing
    keys and the records whose properties and headers match (Spark checks them again)."""
    if options.transport == "amqp":
        from warren.spark.read.amqp import read_range_amqp
        return read_range_amqp(options, rng, layout.arrow())
    from warren.spark.read.http import read_range_http
    if pushed is None:
        return read_range_http(options, rng, layout.arrow())
    return read_range_http(options, rng, layout.arrow(), pushed.routing_keys or None, pushed.matches)


class StreamBatchReader(DataSourceReader):
    def __init__(self, schema, options) -> None:
        self.options = parse_read_options(options, batch=True)
        self.layout = ReadLayout(schema)
        self.pushed = PushedRange()

    def partitions(self) -> list[StreamRange]:
        from warren.spark.read.http import api_for

        opts, pushed = self.options, self.pushed
        spans: list[tuple[str, int, int]] = []
        octets = 0.0  # the approximate size of the read, for tasks of PARTITION_BYTES
        with api_for(opts) as api:
            names = opts.streams
            if opts.stream_pattern is not None:  # every stream whose name matches, now
                names = tuple(n for n in api.stream_names() if re.fullmatch(opts.stream_pattern, n))
            for stream in names:
                if pushed.streams is not None and stream not in pushed.streams:
                    continue
                info = api.info(stream)
                start = resolve_offset(opts.starting_for(stream), info, api)
                end = min(resolve_offset(opts.ending_for(stream), info, api, ending=True), info.end)
                start, end = pushed.clip(start, end)
                if end > start and pushed.time_from_ms is not None:
                    start = max(start, api.offset_for_timestamp(stream, pushed.time_from_ms))
                if end > start and pushed.time_to_ms is not None:
                    end = min(end, api.offset_for_timestamp(stream, pushed.time_to_ms))
                if end <= start:
                    continue
                start = retained_start(stream, start, info.first_offset, opts.fail_on_data_loss)
                spans.append((stream, start, end))
                octets += (end - start) * info.average_record_size
        size = per_partition(sum(e - b for _s, b, e in spans), opts.records_per_partition, opts.min_partitions,
                             octets)
        ranges = [r for stream, start, end in spans for r in split_range(stream, start, end, size)]
        # Spark needs at least one partition; an empty range reads nothing
        return ranges or [StreamRange(names[0] if names else "", 0, 0)]

    def read(self, partition: StreamRange) -> Iterator[pa.RecordBatch]:
        return read_range(self.options, partition, self.layout)


class PushdownBatchReader(StreamBatchReader):
    def pushFilters(self, filters):
        self.pushed, remaining = push_filters(filters)
        return remaining

    def read(self, partition: StreamRange) -> Iterator[pa.RecordBatch]:
        return read_range(self.options, partition, self.layout, self.pushed)
