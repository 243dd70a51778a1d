"""``spark.read.format("warren")``: a batch read of an offset range of one or more streams.

The range is fixed when Spark plans the read (``partitions``, in the driver's planner): for each
stream, ``startingOffsets`` (default earliest) up to ``endingOffsets`` (default latest: the
committed end at that moment), cut into ``recordsPerPartition`` ranges, one Spark task each.
``read`` runs in the executors and moves the records with the configured transport.
"""

from __future__ import annotations

from typing import Iterator

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader

from warren.spark.options import parse_read_options
from warren.spark.read.planning import StreamRange, resolve_offset, retained_start, split_range

__all__ = ["StreamBatchReader", "read_range"]


def read_range(options, rng: StreamRange) -> Iterator[pa.RecordBatch]:
    """The rows of one planned range, over the transport the options name."""
    if options.transport == "amqp":
        from warren.spark.read.amqp import read_range_amqp
        return read_range_amqp(options, rng)
    from warren.spark.read.http import read_range_http
    return read_range_http(options, rng)


class StreamBatchReader(DataSourceReader):
    def __init__(self, schema, options) -> None:
        self.options = parse_read_options(options, batch=True)

    def partitions(self) -> list[StreamRange]:
        from warren.spark.read.http import api_for

        opts = self.options
        ranges: list[StreamRange] = []
        with api_for(opts) as api:
            for stream in opts.streams:
                info = api.info(stream)
                start = resolve_offset(opts.starting[stream], info)
                end = min(resolve_offset(opts.ending[stream], info), info.end)
                if end <= start:
                    continue
                start = retained_start(stream, start, info.first_offset, opts.fail_on_data_loss)
                ranges.extend(split_range(stream, start, end, opts.records_per_partition))
        # Spark needs at least one partition; an empty range reads nothing
        return ranges or [StreamRange(opts.streams[0], 0, 0)]

    def read(self, partition: StreamRange) -> Iterator[pa.RecordBatch]:
        return read_range(self.options, partition)
