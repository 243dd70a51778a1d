"""Every option of the ``warren`` data source, parsed once on the driver: reads, drain, writes.

Spark hands a Python data source its options with lower-cased keys (``maxRecordsPerTrigger``
arrives as ``maxrecordspertrigger``), so every key is looked up lower-cased while messages name
it as documented. An empty value counts as not given. A bad value is an ``OptionError`` (a
``ValueError``) that names the option and what it got, raised on the driver before any task.

The parsed options (``ReadOptions``, ``DrainOptions``, ``WriteOptions``) are plain frozen
dataclasses: they are pickled to the executors with the reader or writer.

Where the broker is: ``url`` is the AMQP URL (``amqp://user:password@host:5672/%2F``; the path
is the URL-encoded vhost, ``/`` when empty). The bulk read path talks to the HTTP API at
``httpUrl``, by default the URL's host on the HTTP port the broker announces in connection.start
(``endpoints.py``; 15672 when it announces none), with the same user and password.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from urllib.parse import unquote, urlsplit

from warren.codec.properties import DEDUPLICATION_HEADER
from warren.spark.amqp_link import DEFAULT_URL, parse_url

__all__ = [
    "OptionError", "option_map", "int_option", "float_option", "bool_option",
    "ReadOptions", "parse_read_options", "parse_offsets", "EARLIEST", "LATEST", "DEFAULT_HTTP_PORT", "AtTimestamp",
    "DrainOptions", "WriteOptions", "DEFAULT_URL",
]

# --- option values --------------------------------------------------------------------------

_TRUE, _FALSE = ("true", "1", "yes", "on"), ("false", "0", "no", "off")


class OptionError(ValueError):
    """An option of the ``warren`` data source is missing or malformed."""


def option_map(options) -> dict[str, str]:
    """Spark's options as a plain dict with lower-cased keys and text values."""
    return {str(k).lower(): str(v) for k, v in dict(options or {}).items()}


def _given(opts: dict, key: str) -> str | None:
    raw = opts.get(key.lower())
    return None if raw is None or raw == "" else raw


def int_option(opts: dict, key: str, default: int | None, minimum: int = 1) -> int | None:
    raw = _given(opts, key)
    if raw is None:
        return default
    try:
        value = int(raw)
    except (TypeError, ValueError):
        raise OptionError(f"option {key} must be an integer, not {raw!r}") from None
    if value < minimum:
        raise OptionError(f"option {key} must be at least {minimum}, not {value}")
    return value


def float_option(opts: dict, key: str, default: float, minimum: float = 0.001) -> float:
    raw = _given(opts, key)
    if raw is None:
        return default
    try:
        value = float(raw)
    except (TypeError, ValueError):
        raise OptionError(f"option {key} must be a number, not {raw!r}") from None
    if not value >= minimum:  # NaN too
        raise OptionError(f"option {key} must be at least {minimum}, not {value}")
    return value


def bool_option(opts: dict, key: str, default: bool) -> bool:
    raw = _given(opts, key)
    if raw is None:
        return default
    text = str(raw).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise OptionError(f"option {key} must be true or false, not {raw!r}")


# --- reading streams ------------------------------------------------------------------------

EARLIEST = "earliest"
LATEST = "latest"
DEFAULT_HTTP_PORT = 15672
DEFAULT_RECORDS_PER_PARTITION = 100_000
DEFAULT_FETCH_MAX_BYTES = 4 * 1024 * 1024
DEFAULT_FETCH_MAX_RECORDS = 100_000
DEFAULT_TIMEOUT_S = 30.0
DEFAULT_PREFETCH = 2000
DEFAULT_MAX_TRIGGER_DELAY_S = 15 * 60.0  # Kafka's maxTriggerDelay default


@dataclass(frozen=True)
class AtTimestamp:
    """An offset given by time (Kafka's ``startingTimestamp`` and friends): the first record the
    broker stored at ``ms`` (milliseconds since the epoch) or later, found through its time index.

    When no record is that late: a start follows ``strategy`` (``error`` fails the query,
    ``latest`` starts after the last committed record, as Kafka's
    ``startingOffsetsByTimestampStrategy``); an end is the committed end."""

    ms: int
    strategy: str = "error"


@dataclass(frozen=True)
class ReadOptions:
    url: str
    http_url: str
    user: str
    password: str
    vhost: str
    streams: tuple[str, ...]
    transport: str = "http"
    starting: dict = field(default_factory=dict)   # stream -> "earliest" | "latest" | int | AtTimestamp
    ending: dict = field(default_factory=dict)
    max_records_per_trigger: int | None = None
    max_bytes_per_trigger: int | None = None
    # None (batch reads without the option): cut by size, ``planning.PARTITION_BYTES`` a task
    records_per_partition: int | None = DEFAULT_RECORDS_PER_PARTITION
    min_partitions: int | None = None  # Kafka's minPartitions: cut a batch into at least this many tasks
    fail_on_data_loss: bool = True
    verify_crc: bool = False
    # a broker on this machine names where records lie in its files and the reader reads them
    # (warren/spark/read/http_api.py, "local reads")
    local_reads: bool = True
    fetch_max_bytes: int = DEFAULT_FETCH_MAX_BYTES
    fetch_max_records: int = DEFAULT_FETCH_MAX_RECORDS
    timeout_s: float = DEFAULT_TIMEOUT_S
    prefetch: int = DEFAULT_PREFETCH
    # streamPattern: every stream whose name matches (re.fullmatch), those created later too;
    # ``streams`` is then empty and ``starting_default`` gives every stream its start
    stream_pattern: str | None = None
    starting_default: object = None
    ending_default: object = LATEST
    min_records_per_trigger: int | None = None  # Kafka's minOffsetsPerTrigger
    max_trigger_delay_s: float = DEFAULT_MAX_TRIGGER_DELAY_S

    def starting_for(self, stream: str):
        """Where ``stream`` starts (a stream found by the pattern has no entry of its own)."""
        return self.starting.get(stream, self.starting_default)

    def ending_for(self, stream: str):
        return self.ending.get(stream, self.ending_default)


_DURATION_UNITS = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "d": 86400.0}


def duration_option(opts: dict, key: str, default: float) -> float:
    """Seconds from a duration as Kafka's ``maxTriggerDelay`` takes it (Spark's
    ``timeStringAsMs``): digits and a unit ``us``, ``ms``, ``s``, ``m``/``min``, ``h``, ``d``;
    digits alone are milliseconds."""
    raw = _given(opts, key)
    if raw is None:
        return default
    text = str(raw).strip().lower()
    digits = len(text) - len(text.lstrip("0123456789"))
    unit = text[digits:].strip() or "ms"
    if not digits or unit not in _DURATION_UNITS:
        raise OptionError(f"option {key} must be a duration such as 15m, 30s or 500ms, not {raw!r}")
    return int(text[:digits]) * _DURATION_UNITS[unit]


def _one_offset(value, key: str, stream: str | None = None):
    where = f"option {key}" + (f" for stream {stream!r}" if stream else "")
    if isinstance(value, bool):
        raise OptionError(f"{where}: {value!r} is not an offset")
    if isinstance(value, int):
        if value < -2:
            raise OptionError(f"{where}: offsets are at least 0, not {value}")
        # Kafka's convention, accepted in JSON: -2 earliest, -1 latest
        return {-2: EARLIEST, -1: LATEST}.get(value, value)
    text = str(value).strip().lower()
    if text in (EARLIEST, LATEST):
        return text
    try:
        return _one_offset(int(text), key, stream)
    except ValueError:
        raise OptionError(f"{where}: expected earliest, latest or an offset, not {value!r}") from None


def parse_offsets(raw, key: str, streams: tuple[str, ...], default: str) -> dict:
    """stream -> "earliest" | "latest" | int, from an option's text.

    ``earliest``, ``latest`` or a number apply to every stream; a JSON object gives each stream
    its own (``{"events": 42, "audit": "earliest"}``); a stream it leaves out gets ``default``.
    """
    if raw is None or str(raw).strip() == "":
        return {s: default for s in streams}
    text = str(raw).strip()
    if text.startswith("{"):
        try:
            given = json.loads(text)
        except json.JSONDecodeError as e:
            raise OptionError(f"option {key} is not valid JSON: {e}") from None
        unknown = sorted(set(given) - set(streams))
        if unknown:
            raise OptionError(f"option {key} names streams that are not read: {', '.join(unknown)}")
        return {s: _one_offset(given[s], key, s) if s in given else default for s in streams}
    value = _one_offset(text, key)
    return {s: value for s in streams}


TIMESTAMP_STRATEGIES = ("error", "latest")


def _timestamp_ms(value, key: str, stream: str | None = None) -> int:
    where = f"option {key}" + (f" for stream {stream!r}" if stream else "")
    if isinstance(value, bool):
        raise OptionError(f"{where}: {value!r} is not a timestamp in milliseconds")
    try:
        ms = int(str(value).strip())
    except ValueError:
        raise OptionError(f"{where}: expected a timestamp in milliseconds since the epoch, not {value!r}") from None
    if ms < 0:
        raise OptionError(f"{where}: a timestamp is at least 0, not {ms}")
    return ms


def _by_timestamp(opts: dict, single: str, per_stream: str, streams: tuple[str, ...], strategy: str) -> dict:
    """stream -> AtTimestamp from ``single`` (every stream) or ``per_stream`` (JSON object),
    ``single`` first as Kafka does; {} when neither is given."""
    raw = _given(opts, single)
    if raw is not None:
        at = AtTimestamp(_timestamp_ms(raw, single), strategy)
        return {s: at for s in streams}
    raw = _given(opts, per_stream)
    if raw is None:
        return {}
    try:
        given = json.loads(raw)
    except json.JSONDecodeError as e:
        raise OptionError(f"option {per_stream} is not valid JSON: {e}") from None
    if not isinstance(given, dict):
        raise OptionError(f'option {per_stream} must be a JSON object {{"stream": milliseconds}}, not {raw!r}')
    unknown = sorted(set(given) - set(streams))
    if unknown:
        raise OptionError(f"option {per_stream} names streams that are not read: {', '.join(unknown)}")
    return {s: AtTimestamp(_timestamp_ms(v, per_stream, s), strategy) for s, v in given.items()}


def _alias(opts: dict, name: str, kafka_name: str) -> None:
    """Take Kafka's name for an option (``maxOffsetsPerTrigger``) as ours; both given and
    different is an error."""
    ours, theirs = _given(opts, name), _given(opts, kafka_name)
    if theirs is None:
        return
    if ours is not None and ours != theirs:
        raise OptionError(f"options {name} and {kafka_name} (Kafka's name for it) disagree: {ours!r} and {theirs!r}")
    opts[name.lower()] = theirs


def _http_base(opts: dict, host: str | None, amqp_port: int | None) -> str:
    """``httpUrl``; else the URL's host with ``httpPort``; else the port the broker announces in
    connection.start (endpoints.py), 15672 when it announces none."""
    given = opts.get("httpurl")
    if given:
        return str(given).rstrip("/")
    port = int_option(opts, "httpPort", None)
    if port is None:
        from warren.spark.endpoints import http_url_for

        return http_url_for(host, amqp_port, float_option(opts, "timeout", DEFAULT_TIMEOUT_S))
    return f"http://{host or '127.0.0.1'}:{port}"


def parse_read_options(options, batch: bool) -> ReadOptions:
    """``ReadOptions`` from the options Spark passed; OptionError when one is wrong.

    ``batch``: a ``spark.read`` (endingOffsets allowed; starting default earliest, ending
    latest) rather than a ``readStream`` (starting default latest, as Kafka).
    """
    opts = option_map(options)
    url = opts.get("url")
    if not url:
        raise OptionError('option url is required (the AMQP URL, e.g. "amqp://guest:guest@localhost:5672/%2F")')
    parts = urlsplit(str(url))
    if parts.scheme not in ("amqp", "amqps"):
        raise OptionError(f"option url must be an amqp:// URL, not {url!r}")
    vhost = unquote(parts.path[1:]) if len(parts.path) > 1 else "/"
    streams = tuple(s.strip() for s in str(opts.get("stream", "")).split(",") if s.strip())
    pattern = _given(opts, "streamPattern")
    if pattern is not None:
        if streams:
            raise OptionError("options stream and streamPattern exclude each other: give one")
        try:
            re.compile(pattern)
        except re.error as e:
            raise OptionError(f"option streamPattern is not a regular expression ({e}): {pattern!r}") from None
    elif not streams:
        raise OptionError("option stream is required: the stream queue to read (several: comma-separated), "
                          "or streamPattern: a regular expression every stream read must match")
    if len(set(streams)) != len(streams):
        raise OptionError(f"option stream names a stream twice: {opts['stream']!r}")
    transport = str(opts.get("transport", "http")).strip().lower()
    if transport not in ("http", "amqp"):
        raise OptionError(f"option transport must be http or amqp, not {transport!r}")
    for key in ("endingOffsets", "endingTimestamp", "endingOffsetsByTimestamp"):
        if not batch and _given(opts, key) is not None:
            raise OptionError(f"option {key} is for batch reads (spark.read), not readStream")
    _alias(opts, "maxRecordsPerTrigger", "maxOffsetsPerTrigger")
    _alias(opts, "minRecordsPerTrigger", "minOffsetsPerTrigger")
    if batch and (_given(opts, "minRecordsPerTrigger") or _given(opts, "maxTriggerDelay")) is not None:
        raise OptionError("options minRecordsPerTrigger and maxTriggerDelay are for readStream, not batch reads")
    strategy = str(opts.get("startingoffsetsbytimestampstrategy") or "error").strip().lower()
    if strategy not in TIMESTAMP_STRATEGIES:
        raise OptionError(f"option startingOffsetsByTimestampStrategy must be error or latest, not {strategy!r}")
    default_start = EARLIEST if batch else LATEST
    if pattern is not None:
        raw = _given(opts, "startingOffsets")
        if raw is not None and str(raw).strip().startswith("{"):
            raise OptionError("option startingOffsets per stream (JSON) needs option stream; with streamPattern "
                              "give earliest, latest or an offset")
        if raw is not None:
            default_start = _one_offset(raw, "startingOffsets")
        for key in ("startingOffsetsByTimestamp", "endingOffsetsByTimestamp", "endingOffsets"):
            if _given(opts, key) is not None and str(_given(opts, key)).strip().startswith("{"):
                raise OptionError(f"option {key} per stream (JSON) needs option stream, not streamPattern")
    starting = parse_offsets(opts.get("startingoffsets"), "startingOffsets", streams, default_start)
    if any(v == LATEST for v in starting.values()) and batch:
        raise OptionError("startingOffsets=latest makes no sense for a batch read (it reads nothing)")
    # by time, as Kafka: startingTimestamp over startingOffsetsByTimestamp over startingOffsets
    starting.update(_by_timestamp(opts, "startingTimestamp", "startingOffsetsByTimestamp", streams, strategy))
    if pattern is not None and _given(opts, "startingTimestamp") is not None:
        default_start = AtTimestamp(_timestamp_ms(_given(opts, "startingTimestamp"), "startingTimestamp"), strategy)
    ending = parse_offsets(opts.get("endingoffsets"), "endingOffsets", streams, LATEST)
    ending.update(_by_timestamp(opts, "endingTimestamp", "endingOffsetsByTimestamp", streams, "latest"))
    default_end = LATEST
    if pattern is not None:
        if _given(opts, "endingTimestamp") is not None:
            default_end = AtTimestamp(_timestamp_ms(_given(opts, "endingTimestamp"), "endingTimestamp"), "latest")
        elif _given(opts, "endingOffsets") is not None:
            default_end = _one_offset(_given(opts, "endingOffsets"), "endingOffsets")
    return ReadOptions(
        url=str(url),
        http_url=_http_base(opts, parts.hostname, parts.port),
        user=unquote(parts.username) if parts.username else "guest",
        password=unquote(parts.password) if parts.password else "guest",
        vhost=vhost,
        streams=streams,
        transport=transport,
        starting=starting,
        ending=ending,
        max_records_per_trigger=int_option(opts, "maxRecordsPerTrigger", None),
        max_bytes_per_trigger=int_option(opts, "maxBytesPerTrigger", None),
        records_per_partition=int_option(opts, "recordsPerPartition",
                                         None if batch else DEFAULT_RECORDS_PER_PARTITION),
        min_partitions=int_option(opts, "minPartitions", None),
        fail_on_data_loss=bool_option(opts, "failOnDataLoss", True),
        verify_crc=bool_option(opts, "verifyCrc", False),
        local_reads=bool_option(opts, "localReads", True),
        fetch_max_bytes=int_option(opts, "fetchMaxBytes", DEFAULT_FETCH_MAX_BYTES),
        fetch_max_records=int_option(opts, "fetchMaxRecords", DEFAULT_FETCH_MAX_RECORDS),
        timeout_s=float_option(opts, "timeout", DEFAULT_TIMEOUT_S),
        prefetch=int_option(opts, "prefetch", DEFAULT_PREFETCH),
        stream_pattern=pattern,
        starting_default=default_start,
        ending_default=default_end,
        min_records_per_trigger=int_option(opts, "minRecordsPerTrigger", None),
        max_trigger_delay_s=duration_option(opts, "maxTriggerDelay", DEFAULT_MAX_TRIGGER_DELAY_S),
    )


# --- draining a classic queue ---------------------------------------------------------------


@dataclass(frozen=True)
class DrainOptions:
    queue: str
    url: str = DEFAULT_URL
    partitions: int = 1
    max_records: int | None = None  # all partitions together
    batch_size: int = 1000
    idle_timeout: float = 10.0
    connect_timeout: float = 10.0

    @classmethod
    def from_options(cls, options) -> DrainOptions:
        o = option_map(options)
        queue = o.get("queue")
        if not queue:
            raise OptionError("mode=drain needs the queue option (the classic queue to empty)")
        if o.get("stream"):
            raise OptionError("mode=drain empties a classic queue (option queue); streams are read by offset")
        url = o.get("url", DEFAULT_URL)
        parse_url(url)
        return cls(
            queue=queue, url=url,
            partitions=int_option(o, "numPartitions", 1),
            max_records=int_option(o, "maxRecords", None),
            batch_size=int_option(o, "batchSize", 1000),
            idle_timeout=float_option(o, "idleTimeout", 10.0),
            connect_timeout=float_option(o, "connectTimeout", 10.0),
        )


# --- writing --------------------------------------------------------------------------------

DEFAULT_CONFIRM_WINDOW = 1000
DEFAULT_CONFIRM_TIMEOUT = 30.0
MAX_WRITE_ID = 200


@dataclass(frozen=True)
class WriteOptions:
    url: str = DEFAULT_URL
    exchange: str | None = None  # None: every row's exchange column
    routing_key: str | None = None  # None: every row's routing_key column
    mandatory: bool = False
    confirm_window: int = DEFAULT_CONFIRM_WINDOW
    confirm_timeout: float = DEFAULT_CONFIRM_TIMEOUT
    connect_timeout: float = 10.0
    write_id: str | None = None
    dedup_header: str | None = DEDUPLICATION_HEADER  # None: no deduplication header
    # a row's user_id that is not the user of the URL: the broker refuses the publish (406, as
    # RabbitMQ); True publishes it without that property instead
    drop_foreign_user_id: bool = False

    @classmethod
    def from_options(cls, options) -> WriteOptions:
        o = option_map(options)
        url = o.get("url", DEFAULT_URL)
        parse_url(url)  # a bad URL fails here, on the driver
        dedup = o.get("dedupheader", DEDUPLICATION_HEADER)
        write_id = o.get("writeid") or None
        if write_id is not None and len(write_id.encode()) > MAX_WRITE_ID:
            # the id (write id, batch, partition, row) must fit the message-id shortstr
            raise OptionError(f"option writeId: at most {MAX_WRITE_ID} octets, got {len(write_id.encode())}")
        return cls(
            url=url,
            exchange=o.get("exchange"),
            routing_key=o.get("routingkey"),
            mandatory=bool_option(o, "mandatory", False),
            confirm_window=int_option(o, "confirmWindow", DEFAULT_CONFIRM_WINDOW),
            confirm_timeout=float_option(o, "confirmTimeout", DEFAULT_CONFIRM_TIMEOUT),
            connect_timeout=float_option(o, "connectTimeout", 10.0),
            write_id=write_id,
            # "" or "none" turns the header off (message_id is still set)
            dedup_header=None if dedup.lower() in ("", "none") else dedup,
            drop_foreign_user_id=bool_option(o, "dropForeignUserId", False),
        )
