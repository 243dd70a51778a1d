"""Permissions: per user and vhost, three regular expressions (configure, write, read) over
resource names; per user, vhost and topic exchange, two (write, read) over routing keys.

RabbitMQ's check semantics, which Warren follows:

* A resource permission matches with ``re:run`` unanchored (Python ``re.search``): ``.*``
  allows everything, ``^amq\\.gen`` what starts so, ``q`` any name containing a ``q``; the
  empty string allows nothing (RabbitMQ special-cases it; ``^$`` would match only the empty
  name, which is the default exchange's).
* The default exchange is checked under the name ``amq.default`` (so ``^amq\\.default$``
  grants it), and refusals name it that way too.
* A topic permission applies only to exchanges of type ``topic``; when the user has none for
  that exchange, everything is allowed. Its patterns may contain ``{username}`` and
  ``{vhost}``, replaced literally by the connection's user and vhost before matching; an empty
  pattern matches only the empty routing key (RabbitMQ reads it as ``^$``).
* A user with no ``Permission`` in a vhost may not open a connection to it.

``ConnectionAccess`` is what a connection asks: one per connection, answering from a dict
cache that is cleared whenever ``AccessControl.version`` moved (any change of users,
permissions, topic permissions or vhosts), so the publish path costs a version compare and
a dict lookup, never a regex, and a change applies to open connections at once.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from types import MappingProxyType
from typing import Mapping

from warren.access.errors import Invalid

__all__ = ["CONFIGURE", "WRITE", "READ", "Permission", "TopicPermission", "ConnectionAccess",
           "validate_regex", "resource_matches", "topic_matches", "expand_topic_pattern", "DEFAULT_EXCHANGE_NAME"]

CONFIGURE = "configure"
WRITE = "write"
READ = "read"
DEFAULT_EXCHANGE_NAME = "amq.default"


@dataclass(frozen=True)
class Permission:
    """configure/write/read regexes of ``user`` in ``vhost`` (RabbitMQ's set_permissions)."""

    user: str
    vhost: str
    configure: str
    write: str
    read: str

    def pattern(self, permission: str) -> str:
        return getattr(self, permission)

    def allows(self, permission: str, name: str) -> bool:
        """True if ``permission`` (CONFIGURE, WRITE or READ) on the resource ``name`` is granted."""
        return resource_matches(getattr(self, permission), name)

    def to_json(self) -> dict:
        return {"user": self.user, "vhost": self.vhost, "configure": self.configure,
                "write": self.write, "read": self.read}


@dataclass(frozen=True)
class TopicPermission:
    """write/read routing-key regexes of ``user`` on the topic exchange ``exchange`` in ``vhost``
    (RabbitMQ's set_topic_permissions)."""

    user: str
    vhost: str
    exchange: str
    write: str
    read: str

    def allows(self, permission: str, routing_key: str, username: str, vhost: str) -> bool:
        return topic_matches(getattr(self, permission), routing_key, username, vhost)

    def to_json(self) -> dict:
        return {"user": self.user, "vhost": self.vhost, "exchange": self.exchange,
                "write": self.write, "read": self.read}


def validate_regex(pattern: str, what: str = "permission") -> str:
    """``pattern`` if it compiles, else ``Invalid`` naming it."""
    if not isinstance(pattern, str):
        raise Invalid(f"{what} must be a string, not {type(pattern).__name__}")
    try:
        _compiled(pattern)
    except re.error as e:
        raise Invalid(f"{what} {pattern!r} is not a valid regular expression: {e}") from None
    return pattern


@functools.lru_cache(maxsize=4096)
def _compiled(pattern: str) -> re.Pattern:
    return re.compile(pattern)


def resource_matches(pattern: str, name: str) -> bool:
    """RabbitMQ's resource check: empty pattern = nothing, else an unanchored search."""
    if not pattern:
        return False
    try:
        return _compiled(pattern).search(name) is not None
    except re.error:
        return False


def expand_topic_pattern(pattern: str, username: str, vhost: str) -> str:
    """``{username}`` and ``{vhost}`` replaced by the values, literally (as RabbitMQ does)."""
    return pattern.replace("{username}", username).replace("{vhost}", vhost)


def topic_matches(pattern: str, routing_key: str, username: str, vhost: str) -> bool:
    """RabbitMQ's topic check: variables expanded, empty pattern = ``^$``, unanchored search."""
    expanded = expand_topic_pattern(pattern, username, vhost) if "{" in pattern else pattern
    if not expanded:
        expanded = "^$"
    try:
        return _compiled(expanded).search(routing_key) is not None
    except re.error:
        return False


NO_TOPICS: Mapping = MappingProxyType({})  # a connection whose user has no topic permission


class ConnectionAccess:
    """The access answers of one connection (``username`` in ``vhost``), cached until the
    access model's version changes.

    ``allowed(permission, kind, name)``: may this connection do ``permission`` on the queue or
    exchange ``name`` (kind "queue" or "exchange"; "" as exchange means the default exchange)?
    ``topic_allowed(permission, exchange, routing_key)``: the topic-permission check for a topic
    exchange. ``vhost_allowed()``: does the user still have any permission in the vhost?
    """

    __slots__ = ("control", "username", "vhost", "_version", "_cache", "_perm", "_topics", "_user")

    def __init__(self, control, username: str, vhost: str) -> None:
        self.control = control
        self.username = username
        self.vhost = vhost
        # Filled by the first question (the version never matches -1), not here: an idle
        # connection asks nothing, and two empty dicts were 128 B of it.
        self._version = -1
        self._cache: dict | None = None
        self._perm: Permission | None = None
        self._topics: Mapping[str, TopicPermission] = NO_TOPICS
        self._user = None

    def _refresh(self) -> None:
        c = self.control
        self._version = c.version
        self._cache = {}
        self._perm = c.permission(self.username, self.vhost)
        topics = {t.exchange: t for t in c.topic_permissions(user=self.username, vhost=self.vhost)}
        self._topics = topics or NO_TOPICS  # most users have none: one shared empty mapping
        self._user = c.user(self.username)

    def allowed(self, permission: str, kind: str, name: str) -> bool:
        if self._version != self.control.version:
            self._refresh()
        key = (permission, kind, name)
        answer = self._cache.get(key)
        if answer is None:
            perm = self._perm
            if kind == "exchange" and name == "":
                name = DEFAULT_EXCHANGE_NAME
            answer = perm is not None and self._user is not None and perm.allows(permission, name)
            self._cache[key] = answer
        return answer

    def topic_allowed(self, permission: str, exchange: str, routing_key: str) -> bool:
        if self._version != self.control.version:
            self._refresh()
        if not self._topics:
            return True
        key = ("topic", permission, exchange, routing_key)
        answer = self._cache.get(key)
        if answer is None:
            t = self._topics.get(exchange)
            answer = t is None or t.allows(permission, routing_key, self.username, self.vhost)
            if len(self._cache) < 100_000:  # routing keys are unbounded: do not grow without limit
                self._cache[key] = answer
        return answer

    def has_topic_permission(self, exchange: str) -> bool:
        """Does a topic permission of this user and vhost name ``exchange``?"""
        if self._version != self.control.version:
            self._refresh()
        return exchange in self._topics

    def vhost_allowed(self) -> bool:
        if self._version != self.control.version:
            self._refresh()
        return self._perm is not None and self._user is not None

    @property
    def user(self):
        """The user as the model has it now (None once deleted)."""
        if self._version != self.control.version:
            self._refresh()
        return self._user
