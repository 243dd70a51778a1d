"""What a stream queue accepts on queue.declare and basic.consume, with RabbitMQ 3.10's answers.

Checked against RabbitMQ 3.10.8 (``docs/streams.md`` lists each case). Declare, in RabbitMQ's
order: the values of the arguments a stream supports, then the arguments of other queue types
(refused whatever their value), then the properties (a stream is durable, not exclusive, not
auto-delete). Unknown arguments are accepted and ignored, as for any queue. Two deliberate differences: an ``x-max-age`` or
``x-stream-offset`` string that does not start with a digit, or an ``x-stream-offset`` of an
unexpected type, is a 406 here where RabbitMQ crashes the connection (541 INTERNAL_ERROR).

Durations (``x-max-age``, and ``x-stream-offset`` intervals) are RabbitMQ's: digits then one
unit, ``Y`` (365 days), ``M`` (30 days), ``D``, ``h``, ``m`` or ``s``, case-sensitive: "7D", "1h".
"""

from __future__ import annotations

import datetime
import re

from warren.errors import NotImplemented_, PreconditionFailed

__all__ = [
    "STREAM_TYPE", "is_stream_declare", "parse_duration", "check_stream_declare", "stream_settings",
    "check_stream_consumer", "MAX_SEGMENT_SIZE",
]

STREAM_TYPE = "stream"
MAX_SEGMENT_SIZE = 3_000_000_000  # RabbitMQ's upper bound on x-stream-max-segment-size-bytes
_DURATION = re.compile(r"([0-9]+)([YMDhms])")
_UNIT_S = {"Y": 365 * 86400, "M": 30 * 86400, "D": 86400, "h": 3600, "m": 60, "s": 1}
# RabbitMQ's queue arguments that a stream refuses ("invalid arg ... of queue type rabbit_stream_queue")
UNSUPPORTED = (
    "x-expires", "x-message-ttl", "x-dead-letter-exchange", "x-dead-letter-routing-key", "x-max-length",
    "x-max-in-memory-length", "x-max-in-memory-bytes", "x-max-priority", "x-overflow", "x-queue-mode",
    "x-queue-version", "x-single-active-consumer", "x-quorum-initial-group-size", "x-delivery-limit",
    "x-queue-master-locator", "x-dead-letter-strategy",
)
LEADER_LOCATORS = ("client-local", "balanced", "random", "least-leaders")


def is_stream_declare(arguments: dict | None) -> bool:
    return bool(arguments) and arguments.get("x-queue-type") == STREAM_TYPE


def parse_duration(value) -> int | None:
    """Seconds of a RabbitMQ duration string ("7D", "1h", "30m"), None if it is not one."""
    if not isinstance(value, str):
        return None
    m = _DURATION.fullmatch(value)
    if m is None:
        return None
    return int(m.group(1)) * _UNIT_S[m.group(2)]


def _type_name(v) -> str:
    for kind, name in ((bool, "bool"), (int, "signedint"), (str, "longstr"), (float, "double"),
                       (dict, "table"), (list, "array"), (bytes, "binary"), (datetime.datetime, "timestamp")):
        if isinstance(v, kind):
            return name
    return "void" if v is None else type(v).__name__


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _check_int(where: str, arguments: dict, key: str, low: int) -> None:
    if key in arguments:
        v = arguments[key]
        if not _is_int(v):
            raise PreconditionFailed(f"invalid arg '{key}' for {where}: \"expected integer, got {_type_name(v)}\"")
        if v < 0:
            raise PreconditionFailed(f"invalid arg '{key}' for {where}: {{value_negative,{v}}}")
        if v < low:
            raise PreconditionFailed(f"invalid arg '{key}' for {where}: {{value_zero,{v}}}")


def check_stream_declare(where: str, durable: bool, exclusive: bool, auto_delete: bool, arguments: dict) -> None:
    """Refuse a stream declare as RabbitMQ does; ``where`` is "queue 'q' in vhost '/'"."""
    _check_int(where, arguments, "x-max-length-bytes", 0)
    if "x-max-age" in arguments:
        v = arguments["x-max-age"]
        if not isinstance(v, str):
            raise PreconditionFailed(f"invalid arg 'x-max-age' for {where}: {{unacceptable_type,{_type_name(v)}}}")
        if not parse_duration(v):  # 0 is refused too
            raise PreconditionFailed(f"invalid arg 'x-max-age' for {where}: invalid_max_age")
    _check_int(where, arguments, "x-stream-max-segment-size-bytes", 0)
    if arguments.get("x-stream-max-segment-size-bytes", 0) > MAX_SEGMENT_SIZE:
        raise PreconditionFailed("Exceeded max value for x-stream-max-segment-size-bytes")
    _check_int(where, arguments, "x-initial-cluster-size", 1)
    _check_int(where, arguments, "x-stream-filter-size-bytes", 16)  # the Bloom filter's octets (stream_filter.py)
    if arguments.get("x-stream-filter-size-bytes", 16) > 255:
        raise PreconditionFailed(f"invalid arg 'x-stream-filter-size-bytes' for {where}: {{value_too_large,"
                                 f"{arguments['x-stream-filter-size-bytes']}}}")
    if "x-queue-leader-locator" in arguments and arguments["x-queue-leader-locator"] not in LEADER_LOCATORS:
        raise PreconditionFailed(f"invalid arg 'x-queue-leader-locator' for {where}: invalid_queue_locator_arg")
    for key in UNSUPPORTED:
        if key in arguments:
            raise PreconditionFailed(f"invalid arg '{key}' for {where} of queue type rabbit_stream_queue")
    for refused, name in ((auto_delete, "auto-delete"), (exclusive, "exclusive-owner"), (not durable, "non-durable")):
        if refused:
            raise PreconditionFailed(f"invalid property '{name}' for {where}")


def stream_settings(effective: dict) -> tuple[int | None, float | None]:
    """(max_bytes, max_age_s) from the effective arguments (declared ones plus a policy's)."""
    max_bytes = effective.get("x-max-length-bytes")
    max_age = parse_duration(effective.get("x-max-age"))
    return (max_bytes if _is_int(max_bytes) else None), (float(max_age) if max_age else None)


def check_stream_consumer(where: str, consumer) -> None:
    """basic.consume on a stream: a prefetch count is required, automatic acks and
    consumer priorities are refused (RabbitMQ's codes and texts, in its order)."""
    if not consumer.prefetch_count:
        raise PreconditionFailed(f"consumer prefetch count is not set for '{where}'")
    if consumer.no_ack:
        raise NotImplemented_(f"automatic acknowledgement not supported by stream queues {where}")
    if consumer.arguments and "x-priority" in consumer.arguments:
        raise PreconditionFailed(f"invalid arg 'x-priority' for {where} of queue type rabbit_stream_queue")


def invalid_offset(where: str, value) -> PreconditionFailed:
    if isinstance(value, (str, bytes)):  # as Erlang prints a binary
        shown = f"<<\"{value if isinstance(value, str) else value.decode('utf-8', 'replace')}\">>"
    else:
        shown = str(value).lower() if isinstance(value, bool) else repr(value)
    return PreconditionFailed(f"invalid arg 'x-stream-offset' for {where}: "
                              f"{{invalid_stream_offset_arg,{{{_type_name(value)},{shown}}}}}")
