"""Qpid's queue arguments, read the same way whichever protocol declared the queue.

Qpid's brokers (and its 0-10 clients' ``x-declare``) configure queues with their own argument
names. Warren maps them onto queue kinds chosen at declare time (``factory.py``), so a queue
without them pays nothing:

* ``qpid.last_value_queue_key`` (and Qpid's older forms ``qpid.last_value_queue`` /
  ``qpid.last_value_queue_no_browse`` set to true, keyed by the ``qpid.LVQ_key`` header):
  a last-value queue (``last_value.py``);
* ``qpid.group_header_key`` (with ``qpid.shared_msg_group``): message groups
  (``message_groups.py``);
* ``qpid.priorities`` or ``x-qpid-priorities``: 1..10 priority levels, Qpid's mapping of
  message priorities onto them (``priority.py``: ``QpidPriorityQueue``); an ``x-max-priority``
  beside them is ignored (the 0-10 adapter adds one); with ``x-qpid-fairshare`` /
  ``qpid.fairshare`` (a limit for every level) or ``x-qpid-fairshare-N`` / ``qpid.fairshare-N``
  (for level N), at most that many messages of a level in a row before the lower levels get
  their turn (``fairshare_limits``);
* ``qpid.max_count``, ``qpid.max_size`` (0 = no limit; integers or strings of digits, as Qpid
  accepts) and ``qpid.policy_type`` (``reject``, ``ring``, ``ring_strict``, ``flow_to_disk``):
  length limits, read as ``x-max-length``, ``x-max-length-bytes`` and ``x-overflow`` where those
  are not given themselves (``QpidLimits``). With a limit and no policy type Qpid rejects
  (``reject-publish``); ``flow_to_disk`` sets no limit (Warren pages on its own).

* ``no-local`` (true, a non-zero number, or "true"/"1"/"yes"): messages the queue's own
  connection publishes over 0-10 are dropped, not enqueued (``no_local``).

``check(arguments, where)`` refuses a bad value or a combination Warren does not serve with
406 PRECONDITION_FAILED, before the queue exists.
"""

from __future__ import annotations

from functools import cache

from warren.errors import PreconditionFailed

__all__ = ["LVQ_KEY", "GROUP_KEY", "SHARED_GROUPS", "PRIORITIES", "DEFAULT_GROUP", "LEGACY_LVQ_HEADER",
           "fairshare_limits", "lvq_header", "group_header", "priority_levels", "has_limits", "check", "with_limits",
           "QpidLimits", "with_qpid_limits", "header_key", "truthy", "no_local"]

LVQ_KEY = "qpid.last_value_queue_key"
LEGACY_LVQ = ("qpid.last_value_queue", "qpid.last_value_queue_no_browse")
LEGACY_LVQ_HEADER = "qpid.LVQ_key"  # the header the legacy forms key on
GROUP_KEY = "qpid.group_header_key"
SHARED_GROUPS = "qpid.shared_msg_group"
DEFAULT_GROUP = "qpid.no-group"  # the group of a message without the group header (Qpid's default)
PRIORITIES = ("qpid.priorities", "x-qpid-priorities")
MAX_LEVELS = 10
LIMITS = {"qpid.max_count": "x-max-length", "qpid.max_size": "x-max-length-bytes"}
POLICY = "qpid.policy_type"
POLICIES = {"reject": "reject-publish", "ring": "drop-head", "ring_strict": "drop-head", "flow_to_disk": None}


def _int(v):
    """An integer argument as Qpid reads one: an integer, or a string of decimal digits."""
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, bytes):
        v = v.decode("ascii", "replace")
    if isinstance(v, str) and v.isascii() and v.isdigit():
        return int(v)
    return None


def _true(v) -> bool:
    return v is True or (isinstance(v, int) and not isinstance(v, bool) and v != 0) or v in ("1", "true", "True")


def lvq_header(arguments: dict) -> str | None:
    """The header a last-value queue keys on, or None for any other queue."""
    key = arguments.get(LVQ_KEY)
    if isinstance(key, bytes):
        key = key.decode("utf-8", "replace")
    if isinstance(key, str) and key:
        return key
    if any(_true(arguments.get(k)) for k in LEGACY_LVQ):
        return LEGACY_LVQ_HEADER
    return None


def group_header(arguments: dict) -> str | None:
    key = arguments.get(GROUP_KEY)
    if isinstance(key, bytes):
        key = key.decode("utf-8", "replace")
    return key if isinstance(key, str) and key else None


def priority_levels(arguments: dict) -> int | None:
    for name in PRIORITIES:
        if name in arguments:
            return _int(arguments[name])
    return None


FAIRSHARE = ("x-qpid-fairshare", "qpid.fairshare")


def fairshare_limits(arguments: dict, levels: int) -> list[int] | None:
    """Each level's fairshare limit (0: none), or None when no fairshare argument is given."""
    default = 0
    for name in FAIRSHARE:
        if name in arguments:
            default = _int(arguments[name]) or 0
            break
    limits = [default] * levels
    found = any(name in arguments for name in FAIRSHARE)
    for level in range(levels):
        for name in FAIRSHARE:
            key = f"{name}-{level}"
            if key in arguments:
                limits[level] = _int(arguments[key]) or 0
                found = True
                break
    return limits if found and any(limits) else None


def _fairshare_names(arguments: dict) -> list[str]:
    return [k for k in arguments if isinstance(k, str) and k.startswith(FAIRSHARE)]


def has_limits(arguments: dict) -> bool:
    return POLICY in arguments or any(name in arguments for name in LIMITS)


def check(arguments: dict, where: str, queue_kind: str = "classic") -> None:
    """406 for a Qpid argument Warren cannot honour: a bad value, or kinds it does not combine."""
    for name in LIMITS:
        if name in arguments:
            v = _int(arguments[name])
            if v is None or v < 0:
                raise PreconditionFailed(f"invalid arg '{name}' for {where}: expected a non-negative integer, "
                                         f"got {arguments[name]!r}")
    if POLICY in arguments:
        policy = arguments[POLICY]
        if isinstance(policy, bytes):
            policy = policy.decode("utf-8", "replace")
        if policy not in POLICIES:
            raise PreconditionFailed(f"invalid arg '{POLICY}' for {where}: {policy!r} is not one of "
                                     f"{', '.join(POLICIES)}")
    kinds = []
    if LVQ_KEY in arguments or any(k in arguments for k in LEGACY_LVQ):
        if LVQ_KEY in arguments and lvq_header(arguments) is None:
            raise PreconditionFailed(f"invalid arg '{LVQ_KEY}' for {where}: expected a header name")
        if lvq_header(arguments) is not None:
            kinds.append("a last-value queue")
    if GROUP_KEY in arguments:
        if group_header(arguments) is None:
            raise PreconditionFailed(f"invalid arg '{GROUP_KEY}' for {where}: expected a header name")
        kinds.append("message groups")
    for name in PRIORITIES:
        if name in arguments:
            levels = _int(arguments[name])
            if levels is None or not 1 <= levels <= MAX_LEVELS:
                raise PreconditionFailed(f"invalid arg '{name}' for {where}: expected 1 to {MAX_LEVELS} priority "
                                         f"levels, got {arguments[name]!r}")
            kinds.append("priorities")
            break
    for name in _fairshare_names(arguments):
        suffix = name.split("fairshare", 1)[1]
        v = _int(arguments[name])
        if v is None or v < 0 or not (suffix == "" or (suffix[0] == "-" and suffix[1:].isdigit())):
            raise PreconditionFailed(f"invalid arg '{name}' for {where}: expected a non-negative integer "
                                     f"(x-qpid-fairshare or x-qpid-fairshare-LEVEL), got {arguments[name]!r}")
        if "priorities" not in kinds:
            raise PreconditionFailed(f"invalid arg '{name}' for {where}: fairshare needs qpid.priorities")
    if kinds and queue_kind != "classic":
        raise PreconditionFailed(f"{where}: {kinds[0]} is a classic queue feature, not one of a {queue_kind} queue")
    if len(kinds) > 1:
        raise PreconditionFailed(f"{where}: Warren does not combine {kinds[0]} with {kinds[1]}")


def with_limits(arguments: dict) -> dict:
    """The arguments with Qpid's limits and policy also under RabbitMQ's names (those given
    under RabbitMQ's names win)."""
    args = dict(arguments)
    policy = args.get(POLICY)
    if isinstance(policy, bytes):
        policy = policy.decode("utf-8", "replace")
    if policy == "flow_to_disk":
        return args  # Qpid moves the excess to disk; Warren pages past its memory budget anyway
    limited = False
    for name, ours in LIMITS.items():
        v = _int(args.get(name))
        if v:  # 0: no limit, as in Qpid
            limited = True
            args.setdefault(ours, v)
    if limited and "x-overflow" not in args:
        args["x-overflow"] = POLICIES.get(policy) or "reject-publish"  # no policy: Qpid rejects
    return args


class QpidLimits:
    """Mixed into a queue class declared with Qpid's limit arguments: ``apply_arguments``
    reads them as RabbitMQ's (declare and policy changes only: nothing on the message path)."""

    def apply_arguments(self, effective: dict) -> None:
        super().apply_arguments(with_limits(effective))


@cache
def with_qpid_limits(cls: type) -> type:
    """``cls`` reading Qpid's limit arguments too (one class per base, made once)."""
    return type(cls.__name__, (QpidLimits, cls), {"__module__": cls.__module__, "__doc__": cls.__doc__})


def header_key(value) -> str | None:
    """A header value as a key: Qpid compares the values as strings ("3" and 3 are one key)."""
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", "replace")
    return str(value)


def truthy(value) -> bool:
    """A Qpid boolean argument: true, a non-zero number, or the text "true"/"1"/"yes"."""
    if isinstance(value, str):
        return value.strip().lower() in ("true", "1", "yes")
    return bool(value) if isinstance(value, (bool, int, float)) else False


def no_local(queue) -> None:
    """Qpid's ``no-local`` queue (made so by ``factory.new_queue``): messages its own connection
    publishes are dropped, not enqueued. Its own connection is the one that owns it exclusively,
    or the one holding an exclusive subscription on it. The queue's ``publish`` is wrapped for
    this queue alone (no other queue pays for the check); the publishing connection is known for
    messages published over 0-10 (their ``publisher``, warren/protocol/amqp0_10/channel.py), the
    only ones that can come from the same connection."""
    enqueue = queue.publish

    def publish(message) -> int:
        publisher = getattr(message, "publisher", None)
        if publisher is not None:
            owner = queue.exclusive_owner
            if (owner is not None and getattr(owner, "publisher_id", None) == publisher) or any(
                    c.exclusive and c.channel.session.publisher_id == publisher for c in queue.consumers):
                return 0  # a local message: dropped
        return enqueue(message)
    queue.publish = publish
