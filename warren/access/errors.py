"""What the access model refuses, as exceptions the HTTP API and the CLI map to their answers.

``NotFound`` (HTTP 404), ``AlreadyExists`` (rabbitmqctl's "already exists"; the HTTP API's PUT
updates instead and never sees it), ``Invalid`` (HTTP 400: a malformed name, regex, hash,
algorithm or limit). All are ``AccessModelError``, whose ``str()`` is a message for the operator.
``LoginRefused`` is separate: a failed login, with the reason for the log (never sent to the client).
"""

from __future__ import annotations

__all__ = ["AccessModelError", "NotFound", "AlreadyExists", "Invalid", "LoginRefused"]


class AccessModelError(Exception):
    """A change or lookup of users, vhosts, permissions or limits that cannot be done."""


class NotFound(AccessModelError):
    """The user, vhost or permission named does not exist."""


class AlreadyExists(AccessModelError):
    """A user or vhost of that name exists already."""


class Invalid(AccessModelError):
    """A value that cannot be stored: bad regex, hash, algorithm, limit name or value."""


class LoginRefused(Exception):
    """A refused password login. ``reason`` says why, for the broker log only: clients get
    RabbitMQ's generic text, so a refusal does not reveal which user names exist."""

    UNKNOWN_USER = "unknown user"
    WRONG_PASSWORD = "wrong password"
    NO_PASSWORD = "user has no password (passwordless users log in by certificate only)"
    LOOPBACK_ONLY = "user may only connect via localhost (loopback_users)"

    def __init__(self, username: str, reason: str) -> None:
        super().__init__(f"user '{username}': {reason}")
        self.username = username
        self.reason = reason
