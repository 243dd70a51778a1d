"""Virtual hosts as the access model keeps them: name, metadata and limits.

Metadata as RabbitMQ 3.10 keeps it: ``description``, ``tags`` (strings) and
``default_queue_type`` (``classic``, ``quorum`` or ``stream``; None = the broker default,
classic). Limits as RabbitMQ's ``set_vhost_limits``: ``max-connections`` and ``max-queues``,
each an integer; a negative value (RabbitMQ writes -1) means unlimited, 0 means none allowed,
an absent limit means unlimited.

The running objects of a vhost (queues, exchanges, connections) live in
``warren.broker.vhost.VirtualHost``; this is the durable record the broker creates them from.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from warren.access.errors import Invalid
from warren.access.users import normalize_tags

__all__ = ["VhostInfo", "LIMIT_NAMES", "MAX_CONNECTIONS", "MAX_QUEUES", "QUEUE_TYPES", "validate_vhost_name",
           "validate_limits", "DEFAULT_VHOST_DESCRIPTION"]

MAX_CONNECTIONS = "max-connections"
MAX_QUEUES = "max-queues"
LIMIT_NAMES = (MAX_CONNECTIONS, MAX_QUEUES)
QUEUE_TYPES = ("classic", "quorum", "stream")
DEFAULT_VHOST_DESCRIPTION = "Default virtual host"  # what RabbitMQ gives "/" on a new node
NAME_MAX = 255  # connection.open carries the name as a shortstr


@dataclass(frozen=True)
class VhostInfo:
    name: str
    description: str = ""
    tags: tuple[str, ...] = field(default_factory=tuple)
    default_queue_type: str | None = None
    limits: dict = field(default_factory=dict)  # {"max-connections": n, "max-queues": n}

    def limit(self, name: str) -> int | None:
        """The limit's value, or None when unlimited (absent or negative)."""
        v = self.limits.get(name)
        return None if v is None or v < 0 else v

    def with_(self, **changes) -> "VhostInfo":
        return replace(self, **changes)

    def to_json(self) -> dict:
        """RabbitMQ's definitions form of a vhost (limits are exported by callers as RabbitMQ
        does, separately)."""
        metadata: dict = {"description": self.description, "tags": list(self.tags)}
        if self.default_queue_type:
            metadata["default_queue_type"] = self.default_queue_type
        return {"name": self.name, "description": self.description, "tags": list(self.tags),
                "default_queue_type": self.default_queue_type, "metadata": metadata, "limits": dict(self.limits)}

    @classmethod
    def from_json(cls, d: dict) -> "VhostInfo":
        """From RabbitMQ's definitions form (fields at the top or under ``metadata``)."""
        name = validate_vhost_name(d.get("name"))
        meta = d.get("metadata") if isinstance(d.get("metadata"), dict) else {}
        description = d.get("description", meta.get("description", "")) or ""
        tags = normalize_tags(d.get("tags", meta.get("tags", ())))
        dqt = d.get("default_queue_type", meta.get("default_queue_type")) or None
        if dqt is not None and dqt not in QUEUE_TYPES:
            raise Invalid(f"vhost '{name}': default_queue_type must be one of {', '.join(QUEUE_TYPES)}")
        return cls(name, str(description), tags, dqt, validate_limits(d.get("limits") or {}))


def validate_vhost_name(name) -> str:
    if not isinstance(name, str) or not name:
        raise Invalid("a vhost needs a non-empty name")
    if len(name.encode("utf-8", "surrogateescape")) > NAME_MAX:
        raise Invalid(f"vhost name longer than {NAME_MAX} octets")
    return name


def validate_limits(limits) -> dict:
    """A copy of ``limits`` if each key is a known limit and each value an integer; else ``Invalid``.
    (RabbitMQ's HTTP API and rabbitmqctl refuse other names the same way.)"""
    if not isinstance(limits, dict):
        raise Invalid("limits must be a JSON object")
    out = {}
    for k, v in limits.items():
        if k not in LIMIT_NAMES:
            raise Invalid(f"unknown vhost limit {k!r} (known: {', '.join(LIMIT_NAMES)})")
        if isinstance(v, bool) or not isinstance(v, int):
            raise Invalid(f"vhost limit {k} must be an integer, not {v!r}")
        out[k] = v
    return out
