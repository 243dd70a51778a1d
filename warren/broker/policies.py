"""Policies: queue and exchange arguments set by the operator, without redeclaring (RabbitMQ's).

A policy is ``(vhost, name, pattern, apply-to, priority, definition)``. It matches the queues
and/or exchanges (``apply-to``: ``queues``, ``exchanges`` or ``all``) of its vhost whose name the
regular expression ``pattern`` finds (``re.search``, unanchored as RabbitMQ's ``re:run``).
Only one policy applies to an entity, as in RabbitMQ: the matching one with the highest
``priority`` (on a tie, the first name in sort order).

The definition's keys are RabbitMQ's policy keys (``POLICY_KEYS``); each stands for an
argument (``message-ttl`` for ``x-message-ttl``...). The *effective* arguments of an entity are
its declared arguments plus the policy's (``effective_arguments``): an argument given on the
declare wins, except for the numeric limits (``LOWEST_WINS``) where the lower value applies.
The declared arguments are left alone: they are what the equivalence check of a redeclare and
the definitions store use.

The policies live in the data folder as ``policies.json`` (a JSON list), written atomically by
the ``warren policy`` command line; the running broker re-reads it when it changes
(``PolicyFile.changed``, checked from ``Broker.tick``).
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass, field
from pathlib import Path

from warren.store.node_file import file_stamp, replace_durably

__all__ = ["Policy", "PolicyError", "PolicyFile", "POLICY_KEYS", "LOWEST_WINS", "APPLY_TO",
           "FORBIDDEN_KEYS", "validate_definition", "validate_policy", "pick", "effective_arguments",
           "load_policies", "save_policies", "FILE_NAME"]

log = logging.getLogger("warren.policies")

FILE_NAME = "policies.json"
APPLY_TO = ("queues", "exchanges", "all")


class PolicyError(ValueError):
    """A policy or definition that cannot be used (the message says why)."""


def _int_at_least(low: int):
    def check(v) -> str | None:
        if isinstance(v, bool) or not isinstance(v, int):
            return "must be an integer"
        if v < low:
            return f"must be an integer >= {low}"
        return None
    return check


def _string(v) -> str | None:
    return None if isinstance(v, str) else "must be a string"


def _boolean(v) -> str | None:
    return None if isinstance(v, bool) else "must be true or false"


def _duration(v) -> str | None:
    from warren.broker.queues.stream_args import parse_duration
    return None if parse_duration(v) else "must be a duration such as \"7D\", \"12h\" or \"30m\" (Y M D h m s)"


def _overflow(v) -> str | None:
    from warren.broker.queues.length_limits import OVERFLOW_MODES
    if v in OVERFLOW_MODES and isinstance(v, str):
        return None
    return "must be one of " + ", ".join(OVERFLOW_MODES)


QUEUE, EXCHANGE = "queue", "exchange"
# policy key -> (argument, kinds of entity it applies to, value check)
POLICY_KEYS: dict[str, tuple[str, tuple[str, ...], object]] = {
    "message-ttl": ("x-message-ttl", (QUEUE,), _int_at_least(0)),
    "expires": ("x-expires", (QUEUE,), _int_at_least(1)),
    "max-length": ("x-max-length", (QUEUE,), _int_at_least(0)),
    "max-length-bytes": ("x-max-length-bytes", (QUEUE,), _int_at_least(0)),
    "overflow": ("x-overflow", (QUEUE,), _overflow),
    "dead-letter-exchange": ("x-dead-letter-exchange", (QUEUE,), _string),
    "dead-letter-routing-key": ("x-dead-letter-routing-key", (QUEUE,), _string),
    "delivery-limit": ("x-delivery-limit", (QUEUE,), _int_at_least(0)),
    "max-age": ("x-max-age", (QUEUE,), _duration),  # stream queues only (queues/stream.py)
    "stream-max-segment-size-bytes": ("x-stream-max-segment-size-bytes", (QUEUE,), _int_at_least(0)),
    "alternate-exchange": ("alternate-exchange", (EXCHANGE,), _string),
    "message-deduplication": ("x-message-deduplication", (QUEUE, EXCHANGE), _boolean),
    "cache-size": ("x-cache-size", (QUEUE, EXCHANGE), _int_at_least(1)),
    "cache-ttl": ("x-cache-ttl", (QUEUE, EXCHANGE), _int_at_least(0)),
    "deduplication-header": ("x-deduplication-header", (QUEUE, EXCHANGE), _string),
}
# keys that are not arguments but name what acts on the entity (warren/federation): checked, never
# turned into arguments
PLUGIN_KEYS: dict[str, object] = {
    "federation-upstream": _string,
    "federation-upstream-set": _string,
}
# arguments where the lower of the declared value and the policy's applies (RabbitMQ)
LOWEST_WINS = frozenset({"x-message-ttl", "x-expires", "x-max-length", "x-max-length-bytes",
                         "x-delivery-limit"})
# what RabbitMQ only takes from the declare
FORBIDDEN_KEYS = ("max-priority", "queue-type", "single-active-consumer", "x-max-priority",
                  "x-queue-type", "x-single-active-consumer")


@dataclass
class Policy:
    vhost: str
    name: str
    pattern: str
    apply_to: str = "all"
    priority: int = 0
    definition: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._regex = re.compile(self.pattern)

    def applies_to(self, kind: str) -> bool:
        return self.apply_to == "all" or self.apply_to == kind + "s"

    def matches(self, vhost: str, kind: str, name: str) -> bool:
        return self.vhost == vhost and self.applies_to(kind) and self._regex.search(name) is not None

    def to_json(self) -> dict:
        return {"vhost": self.vhost, "name": self.name, "pattern": self.pattern,
                "apply-to": self.apply_to, "priority": self.priority, "definition": self.definition}

    @classmethod
    def from_json(cls, d) -> "Policy":
        if not isinstance(d, dict):
            raise PolicyError("a policy must be a JSON object")
        p = validate_policy(d.get("vhost", "/"), d.get("name"), d.get("pattern"), d.get("apply-to", "all"),
                            d.get("priority", 0), d.get("definition"))
        return p


def validate_definition(definition) -> dict:
    """The definition if every key is known and every value fits; else PolicyError."""
    if not isinstance(definition, dict):
        raise PolicyError("the definition must be a JSON object")
    if not definition:
        raise PolicyError("the definition is empty")
    for key, value in definition.items():
        if key in FORBIDDEN_KEYS:
            raise PolicyError(f"'{key}' cannot be set by a policy (declare it with the queue)")
        if key in PLUGIN_KEYS:
            problem = PLUGIN_KEYS[key](value)
            if problem:
                raise PolicyError(f"'{key}' {problem}, got {json.dumps(value)}")
            continue
        spec = POLICY_KEYS.get(key)
        if spec is None:
            raise PolicyError(f"unknown policy key '{key}' (known: {', '.join((*POLICY_KEYS, *PLUGIN_KEYS))})")
        problem = spec[2](value)
        if problem:
            raise PolicyError(f"'{key}' {problem}, got {json.dumps(value)}")
    return definition


def validate_policy(vhost, name, pattern, apply_to, priority, definition) -> Policy:
    """A checked Policy; PolicyError for anything wrong."""
    if not isinstance(vhost, str) or not vhost:
        raise PolicyError("the vhost must be a non-empty string")
    if not isinstance(name, str) or not name:
        raise PolicyError("the policy name must be a non-empty string")
    if not isinstance(pattern, str):
        raise PolicyError("the pattern must be a string")
    try:
        re.compile(pattern)
    except re.error as e:
        raise PolicyError(f"invalid pattern {pattern!r}: {e}") from None
    if apply_to not in APPLY_TO:
        raise PolicyError(f"apply-to must be one of {', '.join(APPLY_TO)}, got {apply_to!r}")
    if isinstance(priority, bool) or not isinstance(priority, int):
        raise PolicyError("the priority must be an integer")
    validate_definition(definition)
    return Policy(vhost, name, pattern, apply_to, priority, dict(definition))


def pick(policies, vhost: str, kind: str, name: str) -> Policy | None:
    """The one policy that applies to the ``kind`` (``queue``/``exchange``) named ``name``."""
    best = None
    for p in policies:
        if p.matches(vhost, kind, name):
            if best is None or p.priority > best.priority or (p.priority == best.priority and p.name < best.name):
                best = p
    return best


def effective_arguments(kind: str, declared: dict, policy: Policy | None) -> dict:
    """The arguments that apply: declared ones win, except LOWEST_WINS where the lower does."""
    if policy is None:
        return declared
    out = dict(declared)
    for key, value in policy.definition.items():
        spec = POLICY_KEYS.get(key)
        if spec is None or kind not in spec[1]:
            continue
        arg = spec[0]
        if arg not in declared:
            out[arg] = value
        elif arg in LOWEST_WINS:
            mine = declared[arg]
            if isinstance(mine, int) and not isinstance(mine, bool) and isinstance(value, int):
                out[arg] = min(mine, value)
    return out


# --- the file --------------------------------------------------------------------------------


def load_policies(path: Path) -> list[Policy]:
    """The policies in ``path`` (none if it does not exist). Raises PolicyError if unreadable;
    a single bad entry is skipped with a warning (the file may have been edited by hand)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    try:
        data = json.loads(text) if text.strip() else []
    except ValueError as e:
        raise PolicyError(f"{path}: not valid JSON: {e}") from None
    if not isinstance(data, list):
        raise PolicyError(f"{path}: expected a JSON list of policies")
    out = []
    for d in data:
        try:
            out.append(Policy.from_json(d))
        except PolicyError as e:
            log.warning("%s: policy %r skipped: %s", path, d.get("name") if isinstance(d, dict) else d, e)
    return out


def save_policies(path: Path, policies) -> None:
    """Write the policies atomically and durably (warren/store/node_file.py)."""
    data = json.dumps([p.to_json() for p in sorted(policies, key=lambda p: (p.vhost, p.name))], indent=2)
    replace_durably(path, (data + "\n").encode("utf-8"))


class PolicyFile:
    """The broker's view of ``policies.json``: ``changed()`` is a cheap stat, ``load()`` reads it."""

    def __init__(self, path: Path | None) -> None:
        self.path = Path(path) if path is not None else None
        self._stamp = None

    def changed(self) -> bool:
        return self.path is not None and file_stamp(self.path) != self._stamp

    def load(self) -> list[Policy]:
        """The current policies; on a file that cannot be read, the error is logged and None is
        returned (the policies in force are kept)."""
        if self.path is None:
            return []
        self._stamp = file_stamp(self.path)
        try:
            return load_policies(self.path)
        except (PolicyError, OSError) as e:
            log.error("cannot read the policies: %s", e)
            return None
