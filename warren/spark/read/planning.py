"""Offset arithmetic of the readers: resolving offset options, admission control, partitions.

An offset here is a position in a stream, the offset of the next record to read; a batch is the
range [start, end) of each stream. Ranges are planned only up to the committed end (the last
offset a completed sync covers, + 1), so every planned record is on disk and reading the same
range again, after a failure, gives the same records: that, not ``commit``, is what makes a
streaming query exactly-once with Spark's checkpoint.

Pure functions over ``StreamInfo`` figures, so they are tested without Spark or a broker.
"""

from __future__ import annotations

import datetime
import logging
from dataclasses import dataclass

from pyspark.sql.datasource import InputPartition

from warren.codec.properties import STREAM_OFFSET_HEADER as OFFSET_HEADER
from warren.spark.read.http_api import StreamInfo
from warren.spark.options import EARLIEST, LATEST, AtTimestamp
from warren.spark.schema import PROPERTY_FIELDS

__all__ = [
    "StreamRange", "DataLossError", "resolve_offset", "admit", "split_range", "retained_start", "PushedRange",
    "push_filters", "NoRecordAtTimestamp", "per_partition",
]

log = logging.getLogger("warren.spark")


class DataLossError(RuntimeError):
    """Records a batch must read were removed by retention before it read them."""


@dataclass(frozen=True)
class StreamRange(InputPartition):
    """One Spark task's share of a batch: records [start, end) of ``stream``."""

    stream: str
    start: int
    end: int


class NoRecordAtTimestamp(RuntimeError):
    """startingTimestamp (strategy ``error``) names a time after a stream's last record."""


def _utc(ms: int) -> str:
    try:
        return datetime.datetime.fromtimestamp(ms / 1000, datetime.timezone.utc).isoformat(timespec="milliseconds")
    except (OverflowError, OSError, ValueError):
        return f"{ms} ms"


def resolve_offset(spec, info: StreamInfo, api=None, ending: bool = False) -> int:
    """``earliest`` = the oldest retained record, ``latest`` = after the last committed one, an
    ``AtTimestamp`` = the first record stored at that time or later (asked from ``api``, the
    broker's time index; ``ending``: an exclusive end, the committed end when none is that late)."""
    if spec == EARLIEST:
        return info.first_offset
    if spec == LATEST:
        return info.end
    if isinstance(spec, AtTimestamp):
        if api is None:
            raise ValueError("a timestamp offset needs the HTTP API to resolve it")
        found = min(api.offset_for_timestamp(info.name, spec.ms), info.end)
        if found < info.end or ending or spec.strategy == "latest":
            return max(found, info.first_offset) if not ending else found
        raise NoRecordAtTimestamp(
            f"stream {info.name!r}: no record stored at {_utc(spec.ms)} or later (its last committed record is "
            f"offset {info.end - 1}); set startingOffsetsByTimestampStrategy=latest to start after it")
    return int(spec)


def retained_start(stream: str, wanted: int, first_retained: int, fail_on_data_loss: bool) -> int:
    """Where reading from ``wanted`` really starts, given the oldest retained offset.

    DataLossError (``fail_on_data_loss``) or a warning when retention already removed
    ``wanted``: the batch would silently miss ``first_retained - wanted`` records.
    """
    if wanted >= first_retained:
        return wanted
    message = (f"stream {stream!r}: offset {wanted} is no longer retained, the first retained offset is "
               f"{first_retained} ({first_retained - wanted} records removed by retention before they were read)")
    if fail_on_data_loss:
        raise DataLossError(message + "; set failOnDataLoss=false to skip to the first retained offset")
    log.warning("%s; skipping to %d (failOnDataLoss=false)", message, first_retained)
    return first_retained


def _water_fill(wants: dict[str, float], budget: float) -> dict[str, float]:
    """Share ``budget`` among streams: equal shares, what one stream cannot use goes to the others."""
    given = {s: 0.0 for s in wants}
    open_streams = [s for s, w in wants.items() if w > 0]
    while open_streams and budget > 1e-9:
        share = budget / len(open_streams)
        still = []
        for s in open_streams:
            take = min(share, wants[s] - given[s])
            given[s] += take
            budget -= take
            if wants[s] - given[s] > 1e-9:
                still.append(s)
        if len(still) == len(open_streams):  # everyone took a full share: budget is spent
            break
        open_streams = still
    return given


def admit(start: dict[str, int], available_end: dict[str, int], max_records: int | None,
          max_bytes: int | None, record_size: dict[str, float]) -> dict[str, int]:
    """The end offsets of the next batch from ``start``, within the limits.

    ``max_records`` caps the records of the batch (all streams together); ``max_bytes`` caps
    its approximate size: a stream's records are counted at its average retained record size
    (``StreamInfo.average_record_size``: the stream's octets over its records, entry headers
    included), as the API gives no per-record sizes without reading them. Each stream with
    data gets at least one record, so a limit below one record's size never stalls a query.
    """
    wants = {s: max(0, available_end[s] - start[s]) for s in start}
    take = dict(wants)
    if max_records is not None:
        shares = _water_fill({s: float(n) for s, n in wants.items()}, float(max_records))
        take = {s: min(take[s], int(shares[s])) for s in take}
    if max_bytes is not None:
        sizes = {s: max(record_size.get(s, 0.0), 1.0) for s in take}
        shares = _water_fill({s: take[s] * sizes[s] for s in take}, float(max_bytes))
        take = {s: min(take[s], max(1, int(shares[s] / sizes[s]))) if take[s] else 0 for s in take}
    if wants and all(n == 0 for n in take.values()) and any(wants.values()):
        # a record budget smaller than the number of streams: still move one stream forward
        s = next(s for s, n in wants.items() if n)
        take[s] = 1
    return {s: start[s] + take[s] for s in start}


# a task's share of a batch read without recordsPerPartition: Spark's own for files
# (spark.sql.files.maxPartitionBytes). Each task costs the JVM and the Python worker a fixed
# amount (in bench/spark_user_session_bench.py, 1M records of 100 octets cut into 10 tasks took
# 1.7 times the CPU of the same cut into 2), so a read is cut into as few tasks as that allows,
# of equal size; minPartitions asks for more
PARTITION_BYTES = 128 * 1024 * 1024


def per_partition(records: int, records_per_partition: int | None, min_partitions: int | None,
                  octets: float = 0.0) -> int:
    """Records per task for a batch of ``records``: at most ``records_per_partition`` (None: as
    many equal tasks as ``octets``, the batch's approximate size, needs at ``PARTITION_BYTES``
    each), and few enough that the batch makes at least ``min_partitions`` tasks (Kafka's
    minPartitions)."""
    if records_per_partition is None:
        tasks = max(1, -(-int(octets) // PARTITION_BYTES))
        records_per_partition = max(1, -(-records // tasks))
    if not min_partitions or records <= 0:
        return records_per_partition
    return max(1, min(records_per_partition, -(-records // min_partitions)))


def split_range(stream: str, start: int, end: int, per_partition: int) -> list[StreamRange]:
    """[start, end) of one stream cut into ranges of at most ``per_partition`` records."""
    return [StreamRange(stream, a, min(a + per_partition, end)) for a in range(start, end, per_partition)]


# --- filter pushdown (batch reads) ------------------------------------------------------------

@dataclass(frozen=True)
class PushedRange:
    """What the filters Spark pushed down say about the rows to read, before any is read.

    ``offset`` bounds are exact (a stream's offsets are its rows' positions); ``stream`` names
    are exact; time bounds (milliseconds, when the broker stored the record) become offset
    bounds through the broker's index (``StreamApi.offset_for_timestamp``) and are checked by
    Spark again (``push_filters`` hands them back), so a clock that stepped back never loses
    a row.
    """

    offset_from: int = 0
    offset_to: int | None = None  # exclusive
    time_from_ms: int | None = None
    time_to_ms: int | None = None  # exclusive
    streams: frozenset | None = None  # None: every stream of the option
    # routing keys the rows must have (None: any): the broker skips blocks of the stream that
    # hold none of them (its Bloom filter per block, warren/broker/queues/stream_filter.py);
    # the blocks it sends hold other keys too, so Spark checks the filter again
    routing_keys: frozenset | None = None
    # property and header conditions, as the records endpoint's parameters: ((name, texts), ...)
    # with name ``property.<field>`` or ``header.<name>``, each meaning "one of texts"; the broker
    # drops the records that do not match (warren/broker/queues/stream_match.py); Spark checks
    # the filters again all the same (they cost it nothing on the rows that remain)
    matches: tuple = ()

    @property
    def filtered(self) -> bool:
        """Whether the broker's answers skip records (so their offsets are not consecutive)."""
        return bool(self.routing_keys) or bool(self.matches)

    def clip(self, start: int, end: int) -> tuple[int, int]:
        """[start, end) narrowed by the offset bounds."""
        start = max(start, self.offset_from)
        if self.offset_to is not None:
            end = min(end, self.offset_to)
        return start, end


_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)


def _micros(value) -> int | None:
    """A pushed timestamp literal (an aware datetime, UTC when naive) in microseconds."""
    if not isinstance(value, datetime.datetime):
        return None
    if value.tzinfo is None:
        value = value.replace(tzinfo=datetime.timezone.utc)
    return (value - _EPOCH) // datetime.timedelta(microseconds=1)


def _integer(value) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


# the basic properties the records endpoint filters on, as (column path, parameter): the flat
# columns and the fields of ``properties`` (not its timestamp); headers are ("headers", name),
# which Spark pushes only when the read schema has ``headers`` as a struct of named headers
# (it never pushes a map lookup such as headers['region'])
_INT_PROPERTIES = ("delivery_mode", "priority")
_PUSHED_PROPERTIES = {
    **{("properties", name): f"property.{name}" for name, kind in PROPERTY_FIELDS if kind in ("string", "int")},
    ("content_type",): "property.content_type", ("message_id",): "property.message_id",
}


def _match_parameter(f) -> tuple[str, frozenset] | None:
    """(records endpoint parameter, texts) of an ``=`` / ``IN`` filter on a property or a named
    header, None when it cannot be pushed (other columns or operators; a null, a value of the
    wrong type, text holding U+FFFD, which stands for octets that were not UTF-8)."""
    from pyspark.sql.datasource import EqualTo, In

    column = getattr(f, "attribute", None)
    if type(f) not in (EqualTo, In) or not isinstance(column, tuple):
        return None
    if column in _PUSHED_PROPERTIES:
        parameter = _PUSHED_PROPERTIES[column]
    elif len(column) == 2 and column[0] == "headers" and column[1] != OFFSET_HEADER:
        parameter = f"header.{column[1]}"
    else:
        return None
    values = [f.value] if type(f) is EqualTo else list(f.value)
    if column[-1] in _INT_PROPERTIES and column[0] == "properties":
        if not values or not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
            return None
        return parameter, frozenset(str(v) for v in values)
    if not values or not all(isinstance(v, str) and "\ufffd" not in v for v in values):
        return None
    return parameter, frozenset(values)


def push_filters(filters) -> tuple[PushedRange, list]:
    """(what the filters allow, the filters Spark must still evaluate).

    Understood: comparisons and ``=`` / ``IN`` on ``offset``, on ``timestamp`` and on
    ``stream`` (``=`` / ``IN``), ``routing_key`` ``=`` / ``IN`` (the broker then skips the
    blocks that cannot hold those keys), and ``=`` / ``IN`` on a basic property (``content_type``,
    ``message_id``, ``properties.<field>``) or a named header (``headers.<name>``, when
    ``headers`` is read as a struct), which the broker applies record by record; a filter is
    handed back when it is not understood, or when reading the narrowed range does not make it
    true of every row (timestamps, ``offset IN``, routing keys, properties and headers).
    """
    from pyspark.sql.datasource import (
        EqualTo, GreaterThan, GreaterThanOrEqual, In, LessThan, LessThanOrEqual,
    )

    lo, hi, t_lo, t_hi, streams, keys = 0, None, None, None, None, None
    matches: dict[str, frozenset] = {}
    remaining = []

    def upper(a, b):
        return b if a is None else min(a, b)

    def later(a, b):
        return b if a is None else max(a, b)

    def narrowed(kind, low, high, floor, ceil):
        """[low, high) narrowed by a comparison with a value between floor and ceil (equal for an
        integer; a timestamp's microseconds fall between two milliseconds)."""
        if kind in (EqualTo, GreaterThanOrEqual):
            low = later(low, ceil)
        if kind is GreaterThan:
            low = later(low, floor + 1)
        if kind in (EqualTo, LessThanOrEqual):
            high = upper(high, floor + 1)
        if kind is LessThan:
            high = upper(high, ceil)
        return low, high

    for f in filters:
        column = getattr(f, "attribute", None)
        kind = type(f)
        if column == ("offset",):
            if kind is In:
                values = [_integer(v) for v in f.value]
                if values and None not in values:
                    lo, hi = max(lo, min(values)), upper(hi, max(values) + 1)
                remaining.append(f)
                continue
            v = _integer(getattr(f, "value", None))
            if v is None or kind not in (EqualTo, GreaterThan, GreaterThanOrEqual, LessThan, LessThanOrEqual):
                remaining.append(f)
                continue
            lo, hi = narrowed(kind, lo, hi, v, v)
        elif column == ("timestamp",):
            remaining.append(f)  # Spark checks it again (see PushedRange)
            us = _micros(getattr(f, "value", None))
            if us is None or kind not in (EqualTo, GreaterThan, GreaterThanOrEqual, LessThan, LessThanOrEqual):
                continue
            t_lo, t_hi = narrowed(kind, t_lo, t_hi, us // 1000, -(-us // 1000))
        elif column == ("stream",) and kind in (EqualTo, In):
            names = {f.value} if kind is EqualTo else set(f.value)
            if not all(isinstance(n, str) for n in names):
                remaining.append(f)
                continue
            streams = frozenset(names) if streams is None else streams & names
        elif column == ("routing_key",) and kind in (EqualTo, In):
            remaining.append(f)  # blocks, not rows: Spark checks each row again
            names = {f.value} if kind is EqualTo else set(f.value)
            if all(isinstance(n, str) for n in names):
                keys = frozenset(names) if keys is None else keys & names
        else:
            remaining.append(f)
            pushed = _match_parameter(f)  # the broker drops what cannot match; Spark checks again
            if pushed is not None:
                parameter, texts = pushed
                matches[parameter] = matches[parameter] & texts if parameter in matches else texts
    return PushedRange(lo, hi, t_lo, t_hi, streams, keys, tuple(sorted(matches.items()))), remaining
