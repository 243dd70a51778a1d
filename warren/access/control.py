"""``AccessControl``: the one durable model of users, vhosts, permissions, topic permissions and
vhost limits, and the one API that changes them (the HTTP API, ``warren ctl`` through it, the
definitions import, the broker's start-up all go through here).

Durability: everything lives in one JSON file, ``<data>/access.json``. Each change is applied
to a copy, written to ``access.json.tmp``, fsynced, renamed over the file, and the folder is
fsynced, all before the method returns: so a change that was answered survives kill -9 and
power loss, and a crash mid-write leaves the previous file whole. Changes are rare (operators,
not messages), so rewriting the whole file is the simple and safe choice.

Several processes (``--workers N``: the supervisor and each worker) may open the same file:
writers take an exclusive ``flock`` on ``access.json.lock`` and re-read the file first if
another process changed it; ``refresh()`` (called on the broker's tick) picks up others' changes.

A new data folder (no ``access.json`` yet) starts as RabbitMQ's node does: vhost ``/`` and the
default user (``guest``/``guest`` unless ``default_user``/``default_pass`` say otherwise, as
RABBITMQ_DEFAULT_USER/_PASS), tagged administrator, with ``.*`` ``.*`` ``.*`` on ``/``.
An existing file is never re-seeded: deleting guest stays deleted.

Every change bumps ``version`` (``ConnectionAccess`` caches drop their answers then) and vhost
additions and deletions are announced to ``listeners`` (the broker creates or tears down the
running vhost); a listener is any object with ``vhost_added(info)``, ``vhost_deleted(name)`` and
``access_changed()`` (called after every change, after the vhost calls).
"""

from __future__ import annotations

import json
import logging
import os
from contextlib import contextmanager
from pathlib import Path

from warren.access import passwords
from warren.access.errors import AlreadyExists, Invalid, LoginRefused, NotFound
from warren.access.permissions import ConnectionAccess, Permission, TopicPermission, validate_regex
from warren.access.user_limits import validate_user_limits
from warren.access.users import ADMINISTRATOR, DEFAULT_LOOPBACK_USERS, User, check_login, normalize_tags
from warren.store.node_file import file_stamp, locked, on_loop, replace_durably
from warren.access.vhosts import (
    DEFAULT_VHOST_DESCRIPTION, QUEUE_TYPES, VhostInfo, validate_limits, validate_vhost_name,
)

__all__ = ["AccessControl", "FILE_NAME", "FORMAT"]

log = logging.getLogger("warren.access")

FILE_NAME = "access.json"
FORMAT = "warren-access/1"
_UNSET = object()


class _State:
    """The model's content: plain dicts of immutable records, copied (shallowly) per change."""

    __slots__ = ("users", "vhosts", "permissions", "topic_permissions", "user_limits")

    def __init__(self) -> None:
        self.users: dict[str, User] = {}
        self.vhosts: dict[str, VhostInfo] = {}
        self.permissions: dict[tuple[str, str], Permission] = {}
        self.topic_permissions: dict[tuple[str, str, str], TopicPermission] = {}
        # RabbitMQ's user limits: {user: {"max-connections": n, "max-channels": n}} (user_limits.py)
        self.user_limits: dict[str, dict] = {}

    def copy(self) -> "_State":
        s = _State()
        s.users = dict(self.users)
        s.vhosts = dict(self.vhosts)
        s.permissions = dict(self.permissions)
        s.topic_permissions = dict(self.topic_permissions)
        s.user_limits = dict(self.user_limits)
        return s

    def to_json(self) -> dict:
        return {
            "format": FORMAT,
            "users": [{k: v for k, v in u.to_json().items() if k != "limits"} for u in self.users.values()],
            "vhosts": [{"name": v.name, "description": v.description, "tags": list(v.tags),
                        "default_queue_type": v.default_queue_type, "limits": dict(v.limits)}
                       for v in self.vhosts.values()],
            "permissions": [p.to_json() for p in self.permissions.values()],
            "topic_permissions": [t.to_json() for t in self.topic_permissions.values()],
            "user_limits": {name: dict(limits) for name, limits in self.user_limits.items()},
        }

    @classmethod
    def from_json(cls, d: dict) -> "_State":
        if d.get("format") != FORMAT:
            raise ValueError(f"not a {FORMAT} file (format {d.get('format')!r})")
        s = cls()
        for u in d.get("users", ()):
            user = User.from_json(u)
            s.users[user.name] = user
        for v in d.get("vhosts", ()):
            info = VhostInfo.from_json(v)
            s.vhosts[info.name] = info
        for p in d.get("permissions", ()):
            perm = Permission(p["user"], p["vhost"], p["configure"], p["write"], p["read"])
            s.permissions[(perm.user, perm.vhost)] = perm
        for t in d.get("topic_permissions", ()):
            tp = TopicPermission(t["user"], t["vhost"], t["exchange"], t["write"], t["read"])
            s.topic_permissions[(tp.user, tp.vhost, tp.exchange)] = tp
        for name, limits in (d.get("user_limits") or {}).items():
            s.user_limits[name] = validate_user_limits(limits)
        return s


class AccessControl:
    """Users, vhosts, permissions, topic permissions and limits; durable in ``path``
    (None: in memory only, for unit tests and tools)."""

    def __init__(self, path: Path | str | None = None, *, default_user: str = "guest",
                 default_pass: str = "guest", loopback_users=DEFAULT_LOOPBACK_USERS,
                 fsync: bool = True) -> None:
        self.path = Path(path) if path is not None else None
        self.default_user = default_user
        self.loopback_users = tuple(loopback_users)
        self.fsync = fsync
        self.version = 0
        self.listeners: list = []
        self._signature = None
        self._state = _State()
        self.created = False  # True when this call made a new file (a new data folder)
        with self._locked():
            if self.path is not None and self.path.exists():
                self._read()
            else:
                state = _State()
                self._seed(state, default_user, default_pass)
                self._write(state)
                self._state = state
                self.created = True
                log.info("new access store %s: user '%s' (administrator) on vhost '/'",
                         self.path or "(in memory)", default_user)

    @classmethod
    def in_data_dir(cls, data_dir: Path | str, **kw) -> "AccessControl":
        return cls(Path(data_dir) / FILE_NAME, **kw)

    @classmethod
    def for_config(cls, config) -> "AccessControl":
        """The store a server with ``config`` (``warren.config.Config``) uses: ``access_file`` or
        the data folder's, seeded with ``default_user``/``default_pass`` when new."""
        path = config.access_file or Path(config.data_dir) / FILE_NAME
        return cls(path, default_user=config.default_user or "guest", default_pass=config.default_pass or "guest",
                   loopback_users=config.loopback_users, fsync=config.fsync)

    # --- reading -------------------------------------------------------------------------------

    def users(self) -> list[User]:
        return list(self._state.users.values())

    def user(self, name: str) -> User | None:
        return self._state.users.get(name)

    def vhosts(self) -> list[VhostInfo]:
        return list(self._state.vhosts.values())

    def vhost(self, name: str) -> VhostInfo | None:
        return self._state.vhosts.get(name)

    def permission(self, user: str, vhost: str) -> Permission | None:
        return self._state.permissions.get((user, vhost))

    def permissions(self, user: str | None = None, vhost: str | None = None) -> list[Permission]:
        return [p for p in self._state.permissions.values()
                if (user is None or p.user == user) and (vhost is None or p.vhost == vhost)]

    def topic_permissions(self, user: str | None = None, vhost: str | None = None,
                          exchange: str | None = None) -> list[TopicPermission]:
        return [t for t in self._state.topic_permissions.values()
                if (user is None or t.user == user) and (vhost is None or t.vhost == vhost)
                and (exchange is None or t.exchange == exchange)]

    def users_without_permissions(self) -> list[User]:
        with_perms = {p.user for p in self._state.permissions.values()}
        return [u for u in self._state.users.values() if u.name not in with_perms]

    def vhost_limits(self, vhost: str | None = None) -> dict[str, dict]:
        """{vhost name: its limits} for vhosts that have any (or just ``vhost``'s)."""
        return {v.name: dict(v.limits) for v in self._state.vhosts.values()
                if v.limits and (vhost is None or v.name == vhost)}

    # --- login and checks ----------------------------------------------------------------------

    def authenticate(self, username: str, password: str, peer_host: str | None) -> User:
        """The user if the password login is accepted, else ``LoginRefused`` with the reason
        (unknown user, no password set, wrong password, loopback-only user from afar)."""
        return check_login(self._state.users.get(username), username, password, peer_host, self.loopback_users)

    def connection_access(self, username: str, vhost: str) -> ConnectionAccess:
        """The cached per-connection checker (``permissions.ConnectionAccess``)."""
        return ConnectionAccess(self, username, vhost)

    def may_access_vhost(self, username: str, vhost: str) -> bool:
        """RabbitMQ's check at connection.open: the user has a permission entry in the vhost."""
        return username in self._state.users and (username, vhost) in self._state.permissions

    # --- users ---------------------------------------------------------------------------------

    def add_user(self, name: str, password: str | None = None, *, password_hash: str | None = None,
                 hashing_algorithm: str = passwords.DEFAULT_ALGORITHM, tags=()) -> User:
        """A new user (rabbitmqctl add_user): ``AlreadyExists`` if the name is taken. Give a
        ``password`` (hashed here with SHA-256), or a ``password_hash`` in RabbitMQ's format
        with its ``hashing_algorithm``, or neither for a passwordless user."""
        user = self._make_user(name, password, password_hash, hashing_algorithm, tags)
        with self._change() as s:
            if name in s.users:
                raise AlreadyExists(f"user '{name}' already exists")
            s.users[name] = user
        return user

    def put_user(self, name: str, password: str | None = None, *, password_hash: str | None = None,
                 hashing_algorithm: str = passwords.DEFAULT_ALGORITHM, tags=(),
                 limits: dict | None = None) -> tuple[User, bool]:
        """Create or replace a user (the HTTP API's PUT /api/users/{name}, definitions import):
        (user, created). A replaced user keeps its permissions and limits; ``limits`` given
        (``{"max-connections": n, ...}``, as RabbitMQ's ``users[].limits``) are set over them,
        each one named replacing its old value, in the same durable change, as RabbitMQ's
        import and PUT do. ``Invalid`` (nothing changed) for a malformed user or limit."""
        user = self._make_user(name, password, password_hash, hashing_algorithm, tags)
        limits = validate_user_limits(limits) if limits is not None else {}
        with self._change() as s:
            created = name not in s.users
            s.users[name] = user
            if limits:
                s.user_limits[name] = {**s.user_limits.get(name, {}), **limits}
        return user, created

    def delete_user(self, name: str) -> None:
        """Delete a user with its permissions and topic permissions (``NotFound`` if absent).
        Its open connections stay open but are refused every further operation."""
        with self._change() as s:
            if s.users.pop(name, None) is None:
                raise NotFound(f"user '{name}' does not exist")
            for key in [k for k in s.permissions if k[0] == name]:
                del s.permissions[key]
            for key in [k for k in s.topic_permissions if k[0] == name]:
                del s.topic_permissions[key]
            s.user_limits.pop(name, None)

    def change_password(self, name: str, password: str) -> User:
        with self._change() as s:
            user = self._existing(s, name)
            s.users[name] = User(name, passwords.hash_password(password), passwords.DEFAULT_ALGORITHM, user.tags)
        return s.users[name]

    def clear_password(self, name: str) -> User:
        """The user can no longer log in by password (rabbitmqctl clear_password)."""
        with self._change() as s:
            user = self._existing(s, name)
            s.users[name] = User(name, "", user.hashing_algorithm, user.tags)
        return s.users[name]

    def set_user_tags(self, name: str, tags) -> User:
        """Replace the user's tags (a list or a comma-separated string; empty = none)."""
        tags = normalize_tags(tags)
        with self._change() as s:
            user = self._existing(s, name)
            s.users[name] = User(name, user.password_hash, user.hashing_algorithm, tags)
        return s.users[name]

    # --- vhosts --------------------------------------------------------------------------------

    def add_vhost(self, name: str, description: str = "", tags=(), default_queue_type: str | None = None) -> VhostInfo:
        """A new vhost (``AlreadyExists`` if it exists); listeners create its running side."""
        info = self._make_vhost(name, description, tags, default_queue_type)
        with self._change() as s:
            if name in s.vhosts:
                raise AlreadyExists(f"vhost '{name}' already exists")
            s.vhosts[name] = info
        return info

    def put_vhost(self, name: str, description=_UNSET, tags=_UNSET, default_queue_type=_UNSET) -> tuple[VhostInfo, bool]:
        """Create a vhost or update the metadata given (HTTP PUT /api/vhosts/{name}): (info, created).
        Metadata left out is kept on an existing vhost (limits always are)."""
        with self._change() as s:
            old = s.vhosts.get(name)
            created = old is None
            base = old or VhostInfo(validate_vhost_name(name))
            info = self._make_vhost(
                name, base.description if description is _UNSET else description,
                base.tags if tags is _UNSET else tags,
                base.default_queue_type if default_queue_type is _UNSET else default_queue_type)
            s.vhosts[name] = info.with_(limits=dict(base.limits))
        return s.vhosts[name], created

    def ensure_vhost(self, name: str) -> bool:
        """Make sure ``name`` exists (``--vhost``): True if it was created now. A vhost made
        here gives the default user (if it still exists) ``.*`` ``.*`` ``.*`` in it, as RabbitMQ's
        default vhost does, so ``--vhost a`` is usable as before there were permissions."""
        if name in self._state.vhosts:
            return False
        validate_vhost_name(name)
        with self._change() as s:
            if name in s.vhosts:
                return False
            s.vhosts[name] = VhostInfo(name)
            if self.default_user in s.users:
                s.permissions[(self.default_user, name)] = Permission(self.default_user, name, ".*", ".*", ".*")
        return True

    def delete_vhost(self, name: str) -> None:
        """Delete a vhost, its permissions, topic permissions and limits (``NotFound`` if
        absent); listeners close its connections and delete its queues and exchanges."""
        with self._change() as s:
            if s.vhosts.pop(name, None) is None:
                raise NotFound(f"vhost '{name}' does not exist")
            for key in [k for k in s.permissions if k[1] == name]:
                del s.permissions[key]
            for key in [k for k in s.topic_permissions if k[1] == name]:
                del s.topic_permissions[key]

    def set_vhost_limits(self, vhost: str, limits: dict) -> VhostInfo:
        """Replace all of a vhost's limits (rabbitmqctl set_vhost_limits: ``{"max-connections":
        n, "max-queues": n}``; -1 = unlimited; ``{}`` clears them)."""
        limits = validate_limits(limits)
        with self._change() as s:
            info = self._existing_vhost(s, vhost)
            s.vhosts[vhost] = info.with_(limits=limits)
        return s.vhosts[vhost]

    def set_vhost_limit(self, vhost: str, name: str, value: int) -> VhostInfo:
        """Set one limit (HTTP PUT /api/vhost-limits/{vhost}/{name} with ``{"value": n}``)."""
        one = validate_limits({name: value})
        with self._change() as s:
            info = self._existing_vhost(s, vhost)
            s.vhosts[vhost] = info.with_(limits={**info.limits, **one})
        return s.vhosts[vhost]

    def clear_vhost_limit(self, vhost: str, name: str) -> VhostInfo:
        """Remove one limit (HTTP DELETE /api/vhost-limits/{vhost}/{name}); ``NotFound`` if unset."""
        with self._change() as s:
            info = self._existing_vhost(s, vhost)
            if name not in info.limits:
                raise NotFound(f"vhost '{vhost}' has no limit {name}")
            s.vhosts[vhost] = info.with_(limits={k: v for k, v in info.limits.items() if k != name})
        return s.vhosts[vhost]

    # --- user limits (RabbitMQ's set_user_limits; warren/access/user_limits.py) ----------------

    def user_limits(self, user: str | None = None) -> dict[str, dict]:
        """{user: its limits} for users that have any (or just ``user``'s)."""
        return {name: dict(limits) for name, limits in self._state.user_limits.items()
                if limits and (user is None or name == user)}

    def user_limit(self, user: str, name: str) -> int | None:
        """One limit's value, None when unlimited (absent or negative). Cheap: a dict lookup."""
        limits = self._state.user_limits.get(user)
        v = limits.get(name) if limits else None
        return None if v is None or v < 0 else v

    def set_user_limit(self, user: str, name: str, value) -> dict:
        """Set one limit (HTTP PUT /api/user-limits/{user}/{name} with ``{"value": n}``);
        ``NotFound`` for an unknown user, ``Invalid`` for an unknown limit or a non-integer."""
        one = validate_user_limits({name: value})
        with self._change() as s:
            self._existing(s, user)
            s.user_limits[user] = {**s.user_limits.get(user, {}), **one}
        return dict(s.user_limits[user])

    def clear_user_limit(self, user: str, name: str) -> None:
        """Remove one limit (HTTP DELETE /api/user-limits/{user}/{name}); absent is no error,
        as RabbitMQ answers 204 either way."""
        if name not in self._state.user_limits.get(user, {}):
            return
        with self._change() as s:
            rest = {k: v for k, v in s.user_limits.get(user, {}).items() if k != name}
            if rest:
                s.user_limits[user] = rest
            else:
                s.user_limits.pop(user, None)

    # --- permissions ---------------------------------------------------------------------------

    def set_permissions(self, user: str, vhost: str, configure: str, write: str, read: str) -> Permission:
        """Set (replace) ``user``'s permissions in ``vhost``; both must exist (``NotFound``)."""
        for what, p in (("configure", configure), ("write", write), ("read", read)):
            validate_regex(p, f"{what} permission")
        perm = Permission(user, vhost, configure, write, read)
        with self._change() as s:
            self._existing(s, user)
            self._existing_vhost(s, vhost)
            s.permissions[(user, vhost)] = perm
        return perm

    def clear_permissions(self, user: str, vhost: str) -> None:
        """Remove ``user``'s permissions in ``vhost`` (``NotFound`` if there were none)."""
        with self._change() as s:
            if s.permissions.pop((user, vhost), None) is None:
                raise NotFound(f"user '{user}' has no permissions in vhost '{vhost}'")

    def set_topic_permissions(self, user: str, vhost: str, exchange: str, write: str, read: str) -> TopicPermission:
        """Set (replace) ``user``'s routing-key patterns on the topic exchange ``exchange``."""
        validate_regex(write, "write topic permission")
        validate_regex(read, "read topic permission")
        if not isinstance(exchange, str):
            raise Invalid("exchange must be a string")
        tp = TopicPermission(user, vhost, exchange, write, read)
        with self._change() as s:
            self._existing(s, user)
            self._existing_vhost(s, vhost)
            s.topic_permissions[(user, vhost, exchange)] = tp
        return tp

    def clear_topic_permissions(self, user: str, vhost: str, exchange: str | None = None) -> None:
        """Remove ``user``'s topic permissions in ``vhost`` (all, or on one exchange)."""
        with self._change() as s:
            keys = [k for k in s.topic_permissions
                    if k[0] == user and k[1] == vhost and (exchange is None or k[2] == exchange)]
            if not keys:
                raise NotFound(f"user '{user}' has no topic permissions in vhost '{vhost}'"
                               + (f" on exchange '{exchange}'" if exchange is not None else ""))
            for k in keys:
                del s.topic_permissions[k]

    # --- other processes -----------------------------------------------------------------------

    def refresh(self) -> bool:
        """Re-read the file if another process changed it (``--workers``): True if it did."""
        if self.path is None or self._stat() == self._signature:
            return False
        with locked(self.path, wait=False) as got:
            if not got:  # a change is being written (maybe ours, on the HTTP API's thread): next look
                return False
            if self._stat() == self._signature:
                return False
            old = self._state
            self._read()
            self.version += 1
            self._announce(old, self._state)
        return True

    # --- internals -----------------------------------------------------------------------------

    @staticmethod
    def _seed(state: _State, default_user: str, default_pass: str) -> None:
        if not default_user:
            raise Invalid("the default user needs a name")
        state.vhosts["/"] = VhostInfo("/", DEFAULT_VHOST_DESCRIPTION)
        state.users[default_user] = User(default_user, passwords.hash_password(default_pass or ""),
                                         passwords.DEFAULT_ALGORITHM, (ADMINISTRATOR,))
        state.permissions[(default_user, "/")] = Permission(default_user, "/", ".*", ".*", ".*")

    @staticmethod
    def _make_user(name, password, password_hash, hashing_algorithm, tags) -> User:
        if not isinstance(name, str) or not name:
            raise Invalid("a user needs a non-empty name")
        if password is not None and password_hash is not None:
            raise Invalid("give a password or a password_hash, not both")
        if hashing_algorithm not in passwords.ALGORITHMS:
            raise Invalid(f"unknown hashing algorithm {hashing_algorithm!r}")
        if password is not None:
            return User(name, passwords.hash_password(password, hashing_algorithm), hashing_algorithm,
                        normalize_tags(tags))
        password_hash = password_hash or ""
        if not passwords.is_valid_hash(password_hash, hashing_algorithm):
            raise Invalid(f"password_hash is not a valid {hashing_algorithm} hash")
        return User(name, password_hash, hashing_algorithm, normalize_tags(tags))

    @staticmethod
    def _make_vhost(name, description, tags, default_queue_type) -> VhostInfo:
        name = validate_vhost_name(name)
        if default_queue_type is not None and default_queue_type not in QUEUE_TYPES:
            raise Invalid(f"default_queue_type must be one of {', '.join(QUEUE_TYPES)}")
        return VhostInfo(name, str(description or ""), normalize_tags(tags), default_queue_type or None)

    @staticmethod
    def _existing(s: _State, name: str) -> User:
        user = s.users.get(name)
        if user is None:
            raise NotFound(f"user '{name}' does not exist")
        return user

    @staticmethod
    def _existing_vhost(s: _State, name: str) -> VhostInfo:
        info = s.vhosts.get(name)
        if info is None:
            raise NotFound(f"vhost '{name}' does not exist")
        return info

    @contextmanager
    def _change(self):
        """Apply a change to a copy of the state; durable, then in force, then announced."""
        taken = None  # another process's (or, in a cluster, another node's) change read here
        try:
            with self._locked():
                if self.path is not None and self._stat() != self._signature:
                    before = self._state
                    self._read()  # another process wrote since: change its latest state
                    self.version += 1
                    taken = (before, self._state)  # announced as refresh() would have, even if this change fails
                old = self._state
                new = old.copy()
                yield new
                self._write(new)
                self._state = new
                self.version += 1
        finally:
            if taken is not None:
                on_loop(self._announce, *taken)
        on_loop(self._announce, old, new)  # the running broker's part (node_file.py: the HTTP API's thread)

    def _announce(self, old: _State, new: _State) -> None:
        added = [v for name, v in new.vhosts.items() if name not in old.vhosts]
        deleted = [name for name in old.vhosts if name not in new.vhosts]
        for listener in list(self.listeners):
            for name in deleted:
                listener.vhost_deleted(name)
            for info in added:
                listener.vhost_added(info)
            listener.access_changed()

    def _locked(self):
        return locked(self.path)

    def _stat(self):
        return file_stamp(self.path)

    def _read(self) -> None:
        with open(self.path, "rb") as f:
            raw = f.read()
            st = os.fstat(f.fileno())
        try:
            self._state = _State.from_json(json.loads(raw))
        except (ValueError, KeyError, TypeError) as e:
            raise ValueError(f"{self.path}: unreadable access store: {e}") from None
        self._signature = (st.st_ino, st.st_mtime_ns, st.st_size)

    def _write(self, state: _State) -> None:
        if self.path is None:
            return
        data = json.dumps(state.to_json(), indent=1, ensure_ascii=False).encode("utf-8")
        replace_durably(self.path, data, mode=0o600, fsync=self.fsync)  # password hashes: the owner's only
        self._signature = self._stat()
