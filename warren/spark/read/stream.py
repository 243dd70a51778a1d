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
import re
import time
from typing import Iterator

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable, ReadMaxBytes, ReadMaxRows, ReadMinRows, SupportsTriggerAvailableNow,
)

from warren.spark.options import parse_read_options
from warren.spark.read.planning import StreamRange, admit, per_partition, resolve_offset, retained_start, split_range
from warren.spark.read.batch import ReadLayout, read_range

# a stream's HTTP API answering 503 (its leader being replaced) is asked again this long, this often
UNAVAILABLE_WAIT_S = 30.0
UNAVAILABLE_POLL_S = 0.5

__all__ = ["WarrenStreamReader", "records_behind"]

log = logging.getLogger("warren.spark")


class WarrenStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, schema, options) -> None:
        self.options = parse_read_options(options, batch=False)
        self.layout = ReadLayout(schema)
        self._api = None
        self._target: dict[str, int] | None = None  # AvailableNow: never plan past these ends
        self._last_trigger: float | None = None  # minRecordsPerTrigger: when the last batch was planned

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state["_api"] = None  # a socket does not travel to the executors
        return state

    def _client(self):
        if self._api is None:
            from warren.spark.read.http import api_for
            self._api = api_for(self.options)
        return self._api

    def _stream_names(self) -> tuple[str, ...]:
        """The streams read now: the ``stream`` option's, or every stream whose name matches
        ``streamPattern`` (asked of the HTTP API each time: new streams join the query)."""
        if self.options.stream_pattern is None:
            return self.options.streams
        match = re.compile(self.options.stream_pattern).fullmatch
        return tuple(n for n in self._client().stream_names() if match(n))

    def _infos(self) -> dict:
        from warren.spark.read.http_api import StreamApiError

        api = self._client()
        infos = {}
        for s in self._stream_names():
            try:
                infos[s] = self._info(api, s)
            except StreamApiError as e:
                if self.options.stream_pattern is None or e.status != 404:
                    raise
                # found by the pattern and deleted since: no longer read
        return infos

    @staticmethod
    def _info(api, stream: str):
        """``api.info(stream)``; a 503 (a replicated stream between leaders in a cluster: the node
        asked cannot reach its leader for a moment) asked again for at most UNAVAILABLE_WAIT_S,
        rather than failing the query."""
        from warren.spark.read.http_api import StreamApiError

        deadline = time.monotonic() + UNAVAILABLE_WAIT_S
        while True:
            try:
                return api.info(stream)
            except StreamApiError as e:
                if e.status != 503 or time.monotonic() > deadline:
                    raise
                log.info("stream %r unavailable (%s): asking again", stream, e)
                time.sleep(UNAVAILABLE_POLL_S)

    def _start_of(self, start: dict, stream: str, info) -> int:
        """A stream's start offset; a stream the checkpoint does not know yet starts at
        startingOffsets (added to the option since), or at its first offset (created since,
        under streamPattern: as Kafka's subscribePattern reads new partitions from earliest)."""
        if stream in start:
            return int(start[stream])
        if self.options.stream_pattern is not None:
            return info.first_offset
        return resolve_offset(self.options.starting_for(stream), info, self._client())

    def initialOffset(self) -> dict:
        return {s: resolve_offset(self.options.starting_for(s), info, self._client())
                for s, info in self._infos().items()}

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
        pending = sum(available[s] - begin[s] for s in begin)
        if isinstance(limit, ReadMinRows) and pending < limit.min_rows:
            return {s: self._start_of(start, s, infos[s]) for s in infos}
        if self._delayed(pending):
            return {s: self._start_of(start, s, infos[s]) for s in infos}
        max_records, max_bytes = self._limits(limit)
        sizes = {s: info.average_record_size for s, info in infos.items()}
        ends = admit(begin, available, max_records, max_bytes, sizes)
        # a stream with nothing new keeps its start offset exactly (no spurious empty batches)
        ends = {s: max(ends[s], self._start_of(start, s, infos[s])) for s in infos}
        if any(ends[s] > self._start_of(start, s, infos[s]) for s in infos):
            self._last_trigger = time.monotonic()
        return ends

    def _delayed(self, pending: int) -> bool:
        """minRecordsPerTrigger with maxTriggerDelay, as Kafka's minOffsetsPerTrigger: fewer
        records than the minimum wait for more until maxTriggerDelay has passed since the last
        batch (or since the query started); not under Trigger.AvailableNow, which must end."""
        wanted = self.options.min_records_per_trigger
        if wanted is None or self._target is not None or pending >= wanted:
            return False
        now = time.monotonic()
        if self._last_trigger is None:
            self._last_trigger = now
        return now - self._last_trigger < self.options.max_trigger_delay_s

    def reportLatestOffset(self) -> dict:
        """The committed end of every stream read: Spark shows it as the source's
        ``latestOffset`` in each progress, beside ``endOffset`` (what the batch read), so the
        records behind are their difference per stream (``records_behind``)."""
        return {s: info.end for s, info in self._infos().items()}

    def partitions(self, start: dict, end: dict) -> list[StreamRange]:
        opts = self.options
        infos = self._infos()
        spans: list[tuple[str, int, int]] = []
        # the option's order (a replayed batch must cut the same partitions), else by name
        names = opts.streams if opts.stream_pattern is None else sorted(end)
        for s in names:
            if s not in end:
                continue
            info = infos.get(s)
            if info is None:  # under streamPattern, deleted since it was planned
                continue
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


def records_behind(progress) -> dict[str, int]:
    """Per stream, the records committed in the broker and not yet read by the micro-batch a
    query progress reports (``query.lastProgress``, a dict, or a ``StreamingQueryProgress``):
    the warren source's ``latestOffset`` (``reportLatestOffset``) less its ``endOffset``."""
    import json

    if not isinstance(progress, dict):
        progress = json.loads(progress.json)
    behind: dict[str, int] = {}
    for source in progress.get("sources") or ():
        latest, end = source.get("latestOffset"), source.get("endOffset")
        latest = json.loads(latest) if isinstance(latest, str) else latest
        end = json.loads(end) if isinstance(end, str) else end
        if not isinstance(latest, dict) or not isinstance(end, dict):
            continue
        for stream, at in latest.items():
            if isinstance(at, int):
                behind[stream] = at - int(end.get(stream, 0))
    return behind
