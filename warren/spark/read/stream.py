"""``spark.readStream.format("warren")``: micro-batches of offset ranges of one or more streams.

Offsets (checkpointed by Spark) are ``{"stream": next offset to read}``. Each micro-batch:

* ``latestOffset(start, limit)``: the committed end of every stream (HTTP API), cut down by the
  read limit: ``maxRecordsPerTrigger`` (records, all streams together, shared out evenly) and
  ``maxBytesPerTrigger`` (approximate, see ``planning.admit``). Under ``Trigger.AvailableNow``
  the ends are also capped at the committed ends seen when the query started
  (``prepareForTriggerAvailableNow``), so the query stops even while publishers go on;
* ``partitions(start, end)``: the ranges to read, checked against retention (``failOnDataLoss``);
* ``read(range)``: in the executors, as for a batch read.

A batch that fails and runs again gets exactly the same ranges from Spark, and a range of
committed records always reads the same, so with an idempotent sink (Parquet through Spark's
file sink log, for one) every record lands exactly once. ``commit`` has nothing to release: the
broker keeps no state for the reader.
"""

from __future__ import annotations

import logging
from typing import Iterator

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable, ReadMaxBytes, ReadMaxRows, ReadMinRows, SupportsTriggerAvailableNow,
)

from warren.spark.options import parse_read_options
from warren.spark.read.planning import StreamRange, admit, per_partition, resolve_offset, retained_start, split_range
from warren.spark.read.batch import ReadLayout, read_range

__all__ = ["WarrenStreamReader"]

log = logging.getLogger("warren.spark")


class WarrenStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, schema, options) -> None:
        self.options = parse_read_options(options, batch=False)
        self.layout = ReadLayout(schema)
        self._api = None
        self._target: dict[str, int] | None = None  # AvailableNow: never plan past these ends

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state["_api"] = None  # a socket does not travel to the executors
        return state

    def _client(self):
        if self._api is None:
            from warren.spark.read.http import api_for
            self._api = api_for(self.options)
        return self._api

    def _infos(self) -> dict:
        api = self._client()
        return {s: api.info(s) for s in self.options.streams}

    def _start_of(self, start: dict, stream: str, info) -> int:
        """A stream's start offset; a stream the checkpoint does not know yet (added to the
        option since) starts at startingOffsets."""
        if stream in start:
            return int(start[stream])
        return resolve_offset(self.options.starting[stream], info, self._client())

    def initialOffset(self) -> dict:
        return {s: resolve_offset(self.options.starting[s], info, self._client()) for s, info in self._infos().items()}

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = {s: info.end for s, info in self._infos().items()}
        log.info("warren: AvailableNow reads up to %s", self._target)

    def getDefaultReadLimit(self):
        if self.options.max_records_per_trigger is not None:
            return ReadMaxRows(self.options.max_records_per_trigger)
        if self.options.max_bytes_per_trigger is not None:
            return ReadMaxBytes(self.options.max_bytes_per_trigger)
        return ReadAllAvailable()

    def _limits(self, limit) -> tuple[int | None, int | None]:
        """(max records, max bytes) of this batch: Spark's limit wins; our options only refine
        the default limit we gave it (both options set: records is the default, bytes too)."""
        if isinstance(limit, ReadAllAvailable) or limit is None:
            return None, None
        if isinstance(limit, ReadMaxRows):
            return limit.max_rows, self.options.max_bytes_per_trigger
        if isinstance(limit, ReadMaxBytes):
            return self.options.max_records_per_trigger, limit.max_bytes
        return None, None

    def latestOffset(self, start: dict, limit) -> dict:
        infos = self._infos()
        begin = {}
        available = {}
        for s, info in infos.items():
            b = self._start_of(start, s, info)
            if not self.options.fail_on_data_loss:
                b = max(b, info.first_offset)  # lost records are skipped: do not count them
            begin[s] = b
            end = info.end if self._target is None else min(info.end, self._target.get(s, info.end))
            available[s] = max(b, end)
        if isinstance(limit, ReadMinRows) and sum(available[s] - begin[s] for s in begin) < limit.min_rows:
            return {s: self._start_of(start, s, infos[s]) for s in infos}
        max_records, max_bytes = self._limits(limit)
        sizes = {s: info.average_record_size for s, info in infos.items()}
        ends = admit(begin, available, max_records, max_bytes, sizes)
        # a stream with nothing new keeps its start offset exactly (no spurious empty batches)
        return {s: max(ends[s], self._start_of(start, s, infos[s])) for s in infos}

    def reportLatestOffset(self) -> dict:
        return {s: info.end for s, info in self._infos().items()}

    def partitions(self, start: dict, end: dict) -> list[StreamRange]:
        opts = self.options
        infos = self._infos()
        spans: list[tuple[str, int, int]] = []
        for s in opts.streams:
            if s not in end:
                continue
            info = infos[s]
            b = self._start_of(start, s, info)
            e = int(end[s])
            if e <= b:
                continue
            b = retained_start(s, b, info.first_offset, opts.fail_on_data_loss)
            spans.append((s, b, e))
        size = per_partition(sum(e - b for _s, b, e in spans), opts.records_per_partition, opts.min_partitions)
        return [r for s, b, e in spans for r in split_range(s, b, e, size)]

    def read(self, partition: StreamRange) -> Iterator[pa.RecordBatch]:
        return read_range(self.options, partition, self.layout)

    def commit(self, end: dict) -> None:
        log.debug("warren: committed %s", end)

    def stop(self) -> None:
        if self._api is not None:
            self._api.close()
            self._api = None
