"""Access control: users, virtual hosts, permissions, topic permissions and vhost limits.

One model (``control.AccessControl``), durable in ``<data>/access.json``, shared by the AMQP
side (login, connection.open, every channel operation), the HTTP API and ``warren ctl``:

* ``passwords``: RabbitMQ's password hashes (SHA-256 for new ones; SHA-512 and MD5 verified);
* ``users``: ``User`` (name, hash, algorithm, tags) and the password login check;
* ``vhosts``: ``VhostInfo`` (metadata and limits ``max-connections``/``max-queues``);
* ``permissions``: ``Permission``, ``TopicPermission``, RabbitMQ's matching rules, and
  ``ConnectionAccess``, the cached per-connection checker the broker asks;
* ``errors``: ``NotFound``/``AlreadyExists``/``Invalid`` (HTTP 404/409-ish/400) and ``LoginRefused``;
* ``control``: ``AccessControl``, reading and changing all of the above.

The broker holds one as ``Broker.access`` and follows its vhost additions and deletions.
"""

from warren.access.control import FILE_NAME, AccessControl
from warren.access.errors import AccessModelError, AlreadyExists, Invalid, LoginRefused, NotFound
from warren.access.permissions import CONFIGURE, READ, WRITE, ConnectionAccess, Permission, TopicPermission
from warren.access.users import User
from warren.access.vhosts import MAX_CONNECTIONS, MAX_QUEUES, VhostInfo

__all__ = ["AccessControl", "FILE_NAME", "AccessModelError", "AlreadyExists", "Invalid", "LoginRefused", "NotFound",
           "CONFIGURE", "READ", "WRITE", "ConnectionAccess", "Permission", "TopicPermission", "User",
           "MAX_CONNECTIONS", "MAX_QUEUES", "VhostInfo"]
