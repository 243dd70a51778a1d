"""Queue types on queue.declare (``x-queue-type``) and what a quorum queue accepts, with
RabbitMQ 3.10's answers (checked against RabbitMQ 3.10.8, ``docs/features.md``, "Quorum queues").

``x-queue-type`` is checked first: ``classic``, ``quorum`` or ``stream``, anything else is 406
``unsupported queue type``; a value that is not a string is 406 ``unacceptable_type``.

A quorum queue declare is checked in RabbitMQ's order: the values of the arguments a quorum
queue supports (the generic checks, ``VirtualHost._validate_queue_arguments``, plus the quorum
ones here), then the arguments of other queue types in the order the client sent them (406
"... of queue type rabbit_quorum_queue", whatever their value), then the properties: a quorum
queue is durable, not exclusive, not auto-delete (and never server-named: the vhost refuses
that first). A classic queue likewise refuses the quorum and stream arguments, except
``x-delivery-limit``, which Warren gives classic queues on purpose. As RabbitMQ 3.10,
``x-delivery-limit`` is not validated on a quorum queue: an integer of 0 or more is the limit, a
negative integer means no limit (RabbitMQ 4's -1), anything else (or nothing) is the default.
"""

from __future__ import annotations

from warren.errors import PreconditionFailed

__all__ = [
    "CLASSIC_TYPE", "QUORUM_TYPE", "STREAM_TYPE", "QUEUE_TYPES", "declared_type", "check_queue_type",
    "check_quorum_declare", "is_quorum_declare", "QUORUM_GENERIC_SKIPPED", "DEAD_LETTER_STRATEGIES",
    "CLASSIC_REFUSED",
]

CLASSIC_TYPE, QUORUM_TYPE, STREAM_TYPE = "classic", "quorum", "stream"
QUEUE_TYPES = (CLASSIC_TYPE, QUORUM_TYPE, STREAM_TYPE)
AT_MOST_ONCE, AT_LEAST_ONCE = "at-most-once", "at-least-once"
DEAD_LETTER_STRATEGIES = (AT_MOST_ONCE, AT_LEAST_ONCE)
LEADER_LOCATORS = ("client-local", "balanced", "random", "least-leaders")

# arguments of other queue types that a quorum queue refuses whatever their value
QUORUM_REFUSED = frozenset((
    "x-max-priority", "x-queue-mode", "x-queue-version", "x-queue-master-locator", "x-max-age",
    "x-stream-max-segment-size-bytes", "x-initial-cluster-size",
))
# quorum-only arguments a classic queue refuses (x-delivery-limit is accepted on classic queues
# here on purpose: docs/features.md, "Delivery limit")
CLASSIC_REFUSED = frozenset((
    "x-dead-letter-strategy", "x-quorum-initial-group-size", "x-max-in-memory-length",
    "x-max-in-memory-bytes", "x-queue-leader-locator", "x-max-age", "x-stream-max-segment-size-bytes",
    "x-initial-cluster-size",
))
# the generic checks (VirtualHost._validate_queue_arguments) skip these for a quorum queue:
# refused above instead, or (x-delivery-limit) not validated at all, as RabbitMQ 3.10
QUORUM_GENERIC_SKIPPED = QUORUM_REFUSED | {"x-delivery-limit"}


def _type_name(v) -> str:
    for kind, name in ((bool, "bool"), (int, "signedint"), (str, "longstr"), (float, "double"),
                       (dict, "table"), (list, "array"), (bytes, "binary")):
        if isinstance(v, kind):
            return name
    return "void" if v is None else type(v).__name__


def declared_type(arguments: dict | None) -> str:
    """The queue type a declare asks for (``classic`` without ``x-queue-type``)."""
    t = arguments.get("x-queue-type") if arguments else None
    return t if t in QUEUE_TYPES else CLASSIC_TYPE


def is_quorum_declare(arguments: dict | None) -> bool:
    return bool(arguments) and arguments.get("x-queue-type") == QUORUM_TYPE


def check_queue_type(where: str, arguments: dict) -> None:
    """406 for an ``x-queue-type`` RabbitMQ does not know; ``where`` is "queue 'q' in vhost '/'"."""
    if "x-queue-type" not in arguments:
        return
    v = arguments["x-queue-type"]
    if not isinstance(v, str):
        raise PreconditionFailed(f"invalid arg 'x-queue-type' for {where}: {{unacceptable_type,{_type_name(v)}}}")
    if v not in QUEUE_TYPES:
        raise PreconditionFailed(f"invalid arg 'x-queue-type' for {where}: \"unsupported queue type '{v}'\"")


def _check_int(where: str, arguments: dict, key: str, low: int) -> None:
    if key in arguments:
        v = arguments[key]
        if isinstance(v, bool) or not isinstance(v, int):
            raise PreconditionFailed(f"invalid arg '{key}' for {where}: \"expected integer, got {_type_name(v)}\"")
        if v < 0:
            raise PreconditionFailed(f"invalid arg '{key}' for {where}: {{value_negative,{v}}}")
        if v < low:
            raise PreconditionFailed(f"invalid arg '{key}' for {where}: {{value_zero,{v}}}")


def check_quorum_values(where: str, arguments: dict) -> None:
    """The quorum-only arguments' values (the generic ones are the vhost's checks)."""
    _check_int(where, arguments, "x-max-in-memory-length", 0)
    _check_int(where, arguments, "x-max-in-memory-bytes", 0)
    _check_int(where, arguments, "x-quorum-initial-group-size", 1)
    if "x-dead-letter-strategy" in arguments:
        v = arguments["x-dead-letter-strategy"]
        if not isinstance(v, str):
            raise PreconditionFailed(f"invalid arg 'x-dead-letter-strategy' for {where}: "
                                     f"{{unacceptable_type,{_type_name(v)}}}")
        if v not in DEAD_LETTER_STRATEGIES:
            raise PreconditionFailed(f"invalid arg 'x-dead-letter-strategy' for {where}: invalid_dlx_strategy")
    if "x-queue-leader-locator" in arguments and arguments["x-queue-leader-locator"] not in LEADER_LOCATORS:
        raise PreconditionFailed(f"invalid arg 'x-queue-leader-locator' for {where}: invalid_queue_locator_arg")


def check_quorum_declare(where: str, durable: bool, exclusive: bool, auto_delete: bool, arguments: dict) -> None:
    """After the generic checks: quorum values, refused arguments, properties (RabbitMQ's order)."""
    check_quorum_values(where, arguments)
    for key in arguments:  # in the order the client sent them, as RabbitMQ reports the first
        if key in QUORUM_REFUSED:
            raise PreconditionFailed(f"invalid arg '{key}' for {where} of queue type rabbit_quorum_queue")
    for refused, name in ((auto_delete, "auto-delete"), (exclusive, "exclusive-owner"), (not durable, "non-durable")):
        if refused:
            raise PreconditionFailed(f"invalid property '{name}' for {where}")


def check_classic_declare(where: str, arguments: dict) -> None:
    """A classic queue refuses the arguments of the other queue types, in the order sent."""
    for key in arguments:
        if key in CLASSIC_REFUSED:
            raise PreconditionFailed(f"invalid arg '{key}' for {where} of queue type rabbit_classic_queue")
