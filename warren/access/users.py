"""Users: a name, a password hash in RabbitMQ's format, and tags; and the password login check.

Tags are kept as RabbitMQ keeps them: any strings, in the order given, duplicates dropped.
Those with a meaning (RabbitMQ's):

* ``administrator``: everything ``policymaker`` and ``monitoring`` may, plus users, vhosts,
  permissions and definitions (HTTP API);
* ``monitoring``: sees every vhost's objects and the node (HTTP API);
* ``policymaker``: manages policies and parameters of the vhosts it has permissions in;
* ``management``: may use the HTTP API, sees its own vhosts' objects;
* ``impersonator``: may publish messages whose ``user_id`` property names another user.

Tags grant nothing over AMQP except ``impersonator``: AMQP access is by permissions alone.

``loopback_users`` (RabbitMQ's setting, default ``["guest"]``): those users may only log in
from a loopback address.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field

from warren.access import passwords
from warren.access.errors import Invalid, LoginRefused

__all__ = ["User", "KNOWN_TAGS", "ADMINISTRATOR", "MONITORING", "POLICYMAKER", "MANAGEMENT", "IMPERSONATOR",
           "DEFAULT_LOOPBACK_USERS", "normalize_tags", "check_login", "is_loopback"]

ADMINISTRATOR = "administrator"
MONITORING = "monitoring"
POLICYMAKER = "policymaker"
MANAGEMENT = "management"
IMPERSONATOR = "impersonator"
KNOWN_TAGS = (ADMINISTRATOR, MONITORING, POLICYMAKER, MANAGEMENT, IMPERSONATOR)
DEFAULT_LOOPBACK_USERS = ("guest",)


@dataclass(frozen=True)
class User:
    """One user, immutable: a change replaces the object (so a reference held by a connection
    keeps the user as it was at login; connections look the user up again by name for checks)."""

    name: str
    password_hash: str = ""  # "" = no password: cannot log in by password
    hashing_algorithm: str = passwords.DEFAULT_ALGORITHM
    tags: tuple[str, ...] = field(default_factory=tuple)

    @property
    def has_password(self) -> bool:
        return bool(self.password_hash)

    def has_tag(self, tag: str) -> bool:
        return tag in self.tags

    @property
    def is_administrator(self) -> bool:
        return ADMINISTRATOR in self.tags

    @property
    def is_impersonator(self) -> bool:
        return IMPERSONATOR in self.tags

    def to_json(self) -> dict:
        """RabbitMQ's definitions form: ``{"name", "password_hash", "hashing_algorithm", "tags": [..]}``
        (RabbitMQ 3.10 exports ``tags`` as a list; its HTTP API accepts a comma-separated string)."""
        return {"name": self.name, "password_hash": self.password_hash,
                "hashing_algorithm": self.hashing_algorithm, "tags": list(self.tags), "limits": {}}

    @classmethod
    def from_json(cls, d: dict) -> "User":
        """A user from RabbitMQ's definitions form (``tags`` a list or a comma-separated string;
        ``hashing_algorithm`` defaults to SHA-256, as RabbitMQ's import does). ``Invalid`` if malformed."""
        name = d.get("name")
        if not isinstance(name, str) or not name:
            raise Invalid("a user needs a non-empty name")
        algorithm = d.get("hashing_algorithm") or passwords.DEFAULT_ALGORITHM
        password_hash = d.get("password_hash") or ""
        if not isinstance(password_hash, str) or not passwords.is_valid_hash(password_hash, algorithm):
            raise Invalid(f"user '{name}': password_hash is not a valid {algorithm} hash")
        return cls(name, password_hash, algorithm, normalize_tags(d.get("tags", ())))


def normalize_tags(tags) -> tuple[str, ...]:
    """Tags from a list or a comma-separated string (RabbitMQ's HTTP API form), trimmed, empty
    ones and duplicates dropped, order kept."""
    if tags is None:
        return ()
    if isinstance(tags, str):
        tags = tags.split(",")
    out: list[str] = []
    for t in tags:
        if not isinstance(t, str):
            raise Invalid(f"tags must be strings, not {type(t).__name__}")
        t = t.strip()
        if t and t not in out:
            out.append(t)
    return tuple(out)


def check_login(user: User | None, username: str, password: str, peer_host: str | None,
                loopback_users=DEFAULT_LOOPBACK_USERS) -> User:
    """The user if ``password`` logs ``username`` in from ``peer_host``; else ``LoginRefused``
    with the reason (unknown user, no password set, wrong password, loopback-only user from a
    remote address). The loopback rule is checked after the password, as RabbitMQ does."""
    if user is None:
        raise LoginRefused(username, LoginRefused.UNKNOWN_USER)
    if not user.has_password:
        raise LoginRefused(username, LoginRefused.NO_PASSWORD)
    if not passwords.check_password(password, user.password_hash, user.hashing_algorithm):
        raise LoginRefused(username, LoginRefused.WRONG_PASSWORD)
    if user.name in loopback_users and not is_loopback(peer_host):
        raise LoginRefused(username, LoginRefused.LOOPBACK_ONLY)
    return user


def is_loopback(host: str | None) -> bool:
    """True for 127.0.0.0/8, ::1 (with or without a zone) and IPv4-mapped loopback addresses."""
    if not host:
        return False
    try:
        addr = ipaddress.ip_address(host.split("%")[0])
    except ValueError:
        return host == "localhost"
    mapped = getattr(addr, "ipv4_mapped", None)
    return addr.is_loopback or (mapped is not None and mapped.is_loopback)
