"""Options of the ``warren`` stream readers, parsed once in the driver.

Values are parsed by ``option_values`` (keys case-insensitive, as Spark lower-cases them). The parsed
``ReadOptions`` is a plain frozen dataclass: it is pickled to the executors with the reader.

Where the broker is: ``url`` is the AMQP URL (``amqp://user:password@host:5672/%2F``; the path
is the URL-encoded vhost, ``/`` when empty). The bulk path talks to the HTTP API at
``httpUrl``, by default the same host on port 15672, with the same user and password.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from urllib.parse import unquote, urlsplit

from warren.spark.option_values import OptionError, bool_option, float_option, int_option, option_map

__all__ = [
    "ReadOptions", "parse_read_options", "parse_offsets", "OptionError", "EARLIEST", "LATEST",
    "DEFAULT_HTTP_PORT",
]

EARLIEST = "earliest"
LATEST = "latest"
DEFAULT_HTTP_PORT = 15672
DEFAULT_RECORDS_PER_PARTITION = 100_000
DEFAULT_FETCH_MAX_BYTES = 4 * 1024 * 1024
DEFAULT_FETCH_MAX_RECORDS = 100_000
DEFAULT_TIMEOUT_S = 30.0
DEFAULT_PREFETCH = 2000


@dataclass(frozen=True)
class ReadOptions:
    url: str
    http_url: str
    user: str
    password: str
    vhost: str
    streams: tuple[str, ...]
    transport: str = "http"
    starting: dict = field(default_factory=dict)   # stream -> "earliest" | "latest" | int
    ending: dict = field(default_factory=dict)
    max_records_per_trigger: int | None = None
    max_bytes_per_trigger: int | None = None
    records_per_partition: int = DEFAULT_RECORDS_PER_PARTITION
    fail_on_data_loss: bool = True
    verify_crc: bool = False
    fetch_max_bytes: int = DEFAULT_FETCH_MAX_BYTES
    fetch_max_records: int = DEFAULT_FETCH_MAX_RECORDS
    timeout_s: float = DEFAULT_TIMEOUT_S
    prefetch: int = DEFAULT_PREFETCH


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


def _http_base(opts: dict, host: str | None) -> str:
    given = opts.get("httpurl")
    if given:
        return str(given).rstrip("/")
    port = int_option(opts, "httpPort", DEFAULT_HTTP_PORT)
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
    if not streams:
        raise OptionError("option stream is required: the stream queue to read (several: comma-separated)")
    if len(set(streams)) != len(streams):
        raise OptionError(f"option stream names a stream twice: {opts['stream']!r}")
    transport = str(opts.get("transport", "http")).strip().lower()
    if transport not in ("http", "amqp"):
        raise OptionError(f"option transport must be http or amqp, not {transport!r}")
    if not batch and opts.get("endingoffsets"):
        raise OptionError("option endingOffsets is for batch reads (spark.read), not readStream")
    starting = parse_offsets(opts.get("startingoffsets"), "startingOffsets", streams,
                             EARLIEST if batch else LATEST)
    ending = parse_offsets(opts.get("endingoffsets"), "endingOffsets", streams, LATEST)
    if any(v == LATEST for v in starting.values()) and batch:
        raise OptionError("startingOffsets=latest makes no sense for a batch read (it reads nothing)")
    return ReadOptions(
        url=str(url),
        http_url=_http_base(opts, parts.hostname),
        user=unquote(parts.username) if parts.username else "guest",
        password=unquote(parts.password) if parts.password else "guest",
        vhost=vhost,
        streams=streams,
        transport=transport,
        starting=starting,
        ending=ending,
        max_records_per_trigger=int_option(opts, "maxRecordsPerTrigger", None),
        max_bytes_per_trigger=int_option(opts, "maxBytesPerTrigger", None),
        records_per_partition=int_option(opts, "recordsPerPartition", DEFAULT_RECORDS_PER_PARTITION),
        fail_on_data_loss=bool_option(opts, "failOnDataLoss", True),
        verify_crc=bool_option(opts, "verifyCrc", False),
        fetch_max_bytes=int_option(opts, "fetchMaxBytes", DEFAULT_FETCH_MAX_BYTES),
        fetch_max_records=int_option(opts, "fetchMaxRecords", DEFAULT_FETCH_MAX_RECORDS),
        timeout_s=float_option(opts, "timeout", DEFAULT_TIMEOUT_S),
        prefetch=int_option(opts, "prefetch", DEFAULT_PREFETCH),
    )
