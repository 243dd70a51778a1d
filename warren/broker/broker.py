"""The broker: virtual hosts, users, and the identity it announces to clients.

Users, vhosts and permissions are the access model's (``warren.access.AccessControl``, durable
in ``<data>/access.json``); the broker follows it: a vhost added there gets its running
``VirtualHost`` here, a vhost deleted there has its connections closed (320) and its queues
and exchanges removed with their stored data. ``admit`` is the connection.open check.
"""

from __future__ import annotations

import logging
import platform
from contextlib import nullcontext
from pathlib import Path

from warren import __version__
from warren.access import FILE_NAME as ACCESS_FILE_NAME, AccessControl
from warren.access.vhosts import MAX_CONNECTIONS
from warren.broker.directory import LocalDirectory
from warren.broker.dtx import manager as dtx_manager
from warren.broker.limits import NO_LIMITS
from warren.broker.consumer_timeout import DEFAULT_CONSUMER_TIMEOUT_MS, ConsumerTimeout
from warren.broker.authz import forget_publish_checks
from warren.broker.memory import MemoryBudget
from warren.broker.policies import FILE_NAME, PolicyFile
from warren.broker.vhost import VirtualHost
from warren.errors import NotAllowed

__all__ = ["Broker", "TICK", "POLICY_CHECK"]

log = logging.getLogger("warren.broker")

POLICY_CHECK = 0.5  # seconds between two looks at policies.json for changes
TICK = 0.02  # seconds between two Broker.tick calls: the precision of timed work (delayed messages)

# The product and version Warren announces (docs/compatibility.md, "What Warren announces").
# kombu, and so Celery, choose their QoS mode from these two alone (qos_semantics_matches_spec):
# "RabbitMQ" 3.3 to 3.x gets basic.qos global=true for a worker's prefetch, a per-channel limit
# that takes effect at once (RabbitMQ's semantics, which Warren implements), so Celery's prefetch
# bumps for ETA tasks work; any other product (or RabbitMQ 4+) gets per-consumer prefetch fixed
# at basic.consume, and a worker holding ETA tasks starves. So Warren names the RabbitMQ it is
# checked against; clients that gate tests or features on the version see the same as there.
ANNOUNCED_PRODUCT = "RabbitMQ"
ANNOUNCED_VERSION = "3.10.8"

# INVENTORY.md §10.7: what RabbitMQ advertises in server-properties.capabilities
SERVER_CAPABILITIES = {
    "publisher_confirms": True,
    "exchange_exchange_bindings": True,
    "basic.nack": True,
    "consumer_cancel_notify": True,
    "connection.blocked": True,
    "consumer_priorities": True,
    "authentication_failure_close": True,
    "per_consumer_qos": True,
    "direct_reply_to": True,
}


class Broker:
    def __init__(self, vhosts: tuple[str, ...] = ("/",), access: AccessControl | None = None,
                 cluster_name: str = "warren", durability=None, memory_budget: int = 0,
                 policy_file: Path | None = None, directory=None) -> None:
        self.durability = durability
        # the confirms of the channel whose publish is being routed now (BrokerChannel.publish),
        # else None: a queue that learns only later that it refused the message (a cluster's
        # handle of another node's queue, warren/cluster/reach.py) says which confirm to nack.
        # Noted only where such queues exist (``notes_confirming``, set by the cluster): one
        # node's publishes do without it
        self.confirming = None
        self.notes_confirming = False
        # where each vhost's queues live and how changes take effect (directory.py): this
        # process alone, or (--worker-mode queues) this worker's part of the node, warren/spread
        self.directory = directory or LocalDirectory(self)
        self.directory.broker = self
        self.memory = MemoryBudget(memory_budget, self.all_queues)
        if access is None:  # the data folder's access.json; in memory without a data folder
            access = AccessControl(durability.data_dir / ACCESS_FILE_NAME if durability is not None else None)
        self.access = access
        self.users = access  # the password check (``authenticate``), as the session and the HTTP API ask it
        if access.created and durability is not None:
            # a data folder from before access.json: its vhosts with stored definitions live on
            defs = durability.definitions.load()
            stored = {d.vhost for d in defs.exchanges} | {d.vhost for d in defs.queues}
            vhosts = tuple(vhosts) + tuple(sorted(stored - set(vhosts)))
        for name in vhosts:  # --vhost: make sure it exists
            access.ensure_vhost(name)
        self.vhosts = {v.name: self._new_vhost(v.name) for v in access.vhosts()}
        self.connections: dict[str, set] = {}  # vhost name -> its open sessions
        self.consumer_timeout: ConsumerTimeout | None = ConsumerTimeout(DEFAULT_CONSUMER_TIMEOUT_MS)
        self._policies: list = []
        access.listeners.append(self)
        self.cluster_name = cluster_name
        # the HTTP API's port, announced in connection.start (server property http_port) so that
        # a client holding only the AMQP URL finds the API (the Spark data source); set by the server
        self.http_port: int | None = None
        # the failed-login throttle (warren/access/login_throttle.py): the server sets its own,
        # which the HTTP API's logins share; None counts nothing
        self.login_throttle = None
        # node and user limits (warren/broker/limits.py): the server sets its configured ones
        self.limits = NO_LIMITS
        self.dtx = None  # the DtxManager, made on first use (warren/broker/dtx.py ``manager``)
        # policies.json in the data folder (warren/broker/policies.py): in force before the
        # durable queues and exchanges come back, re-read when the file changes
        if policy_file is None and durability is not None:
            policy_file = durability.data_dir / FILE_NAME
        self.policy_file = PolicyFile(policy_file)
        self._policy_check = 0.0
        self.reload_policies()
        if durability is not None:
            durability.restore(self)
            # prepared dtx branches hold the messages they consumed again (warren/broker/dtx.py)
            dtx_manager(self).recover_prepared()

    def _new_vhost(self, name: str) -> VirtualHost:
        vhost = VirtualHost(name, self.durability, self.memory)
        vhost.directory = self.directory
        return vhost

    def reload_policies(self) -> None:
        """Read policies.json and apply it to every vhost (kept as is if it cannot be read)."""
        policies = self.policy_file.load()
        if policies is None:
            return
        self._policies = policies
        for vhost in self.vhosts.values():
            vhost.set_policies(policies)
        if self.policy_file.path is not None:
            log.info("policies in force: %d", len(policies))

    def set_policies(self, policies: list) -> None:
        """Apply these policies now (tests; the file is the usual source)."""
        for vhost in self.vhosts.values():
            vhost.set_policies(policies)

    def all_queues(self):
        for vhost in self.vhosts.values():
            yield from vhost.queues.values()

    def tick(self, now: float) -> None:
        """Timed work, called by the server every ``TICK`` seconds with ``time.monotonic()``:
        each object in a vhost's ``timers`` (delayed-message exchanges, queues with TTLs) does
        what has fallen due; one that returns False is dropped until it registers again.
        Every ``POLICY_CHECK`` seconds, a stat of policies.json: re-applied when it changed."""
        if now - self._policy_check >= POLICY_CHECK:
            self._policy_check = now
            if self.policy_file.changed():
                self.reload_policies()
            self.access.refresh()  # users, vhosts, permissions changed by another process (--workers)
        # what a timer deletes (x-expires) is fsynced by the next group commit, off the loop:
        # nobody waits for an answer (warren/store/aside.py)
        with self.durability.definitions.deferred() if self.durability is not None else nullcontext():
            for vhost in self.vhosts.values():
                if vhost.timers:
                    for t in list(vhost.timers):
                        if not t.tick(now):
                            vhost.timers.discard(t)
        timeout = self.consumer_timeout
        if timeout is not None and now >= timeout.next_check:  # warren/broker/consumer_timeout.py
            timeout.check([s for sessions in self.connections.values() for s in sessions], now)

    def set_consumer_timeout(self, timeout_ms: int) -> None:
        """RabbitMQ's consumer_timeout in milliseconds (0 = off), checked from ``tick``."""
        self.consumer_timeout = ConsumerTimeout(timeout_ms) if timeout_ms > 0 else None

    # --- vhosts at run time, connections --------------------------------------------------------

    def vhost_added(self, info) -> None:
        """The access model has a new vhost: serve it (policies in force)."""
        if info.name in self.vhosts:
            return
        vhost = self.vhosts[info.name] = self._new_vhost(info.name)
        vhost.set_policies(self._policies)
        log.info("vhost '%s' created", info.name)

    def vhost_deleted(self, name: str) -> None:
        """The access model deleted a vhost: close its connections (320), remove its queues
        (with their stored messages) and exchanges (with their stored definitions)."""
        vhost = self.vhosts.pop(name, None)
        if vhost is None:
            return
        sessions = self.connections.pop(name, set())
        # its deletes are fsynced by the next group commit, off the loop; the HTTP API's answer
        # waits for it (management/api/vhosts.py)
        with self.durability.definitions.deferred() if self.durability is not None else nullcontext():
            for session in list(sessions):
                session.shutdown(f"vhost '{name}' is deleted")
            for q in list(vhost.queues.values()):
                vhost.delete_queue(q)
            self.directory.vhost_deleted(vhost)  # what stood for queues elsewhere (warren/spread) too
            for ex in list(vhost.exchanges.values()):
                if ex.name and vhost.exchanges.get(ex.name) is ex:
                    vhost.remove_exchange(ex)
        vhost.timers.clear()
        log.info("vhost '%s' deleted (%d connections closed)", name, len(sessions))

    def access_changed(self) -> None:
        """Users, vhosts or permissions changed: every channel checks its next publish again
        (the other checks ask the connection's ConnectionAccess, which follows by itself)."""
        for sessions in self.connections.values():
            for session in sessions:
                for channel in session.channels.values():
                    forget_publish_checks(channel)

    def admit(self, session, vhost: VirtualHost):
        """connection.open of ``session`` to ``vhost``, as RabbitMQ checks it: the vhost's
        ``max-connections``, then the user's permission in it (530 NOT_ALLOWED with RabbitMQ's
        texts). Returns the connection's ``ConnectionAccess``; ``release`` undoes it."""
        user = session.username
        sessions = self.connections.setdefault(vhost.name, set())
        info = self.access.vhost(vhost.name)
        limit = info.limit(MAX_CONNECTIONS) if info is not None else None
        # --worker-mode queues: the other workers' connections count too (a connection moving
        # here was admitted where it came from already: warren/server/placement.py)
        count = len(sessions) + self.directory.counted_elsewhere(("vhost", vhost.name))
        if limit is not None and count >= limit and not session.replaying:
            raise NotAllowed(f"access to vhost '{vhost.name}' refused for user '{user}': connection limit "
                             f"({limit}) is reached", 10, 40)
        if not self.access.may_access_vhost(user, vhost.name):
            raise NotAllowed(f"access to vhost '{vhost.name}' refused for user '{user}'", 10, 40)
        sessions.add(session)
        self.directory.count_changed(("vhost", vhost.name), len(sessions))
        return self.access.connection_access(user, vhost.name)

    def release(self, session) -> None:
        """The connection admitted by ``admit`` has ended."""
        if session.vhost is not None:
            sessions = self.connections.get(session.vhost.name, set())
            sessions.discard(session)
            self.directory.count_changed(("vhost", session.vhost.name), len(sessions))

    def server_properties(self) -> dict:
        """What connection.start tells a client it talks to: RabbitMQ's product and version on
        purpose (``ANNOUNCED_PRODUCT``), Warren's name and version in platform and information."""
        return {
            "product": ANNOUNCED_PRODUCT,
            "version": ANNOUNCED_VERSION,
            "platform": f"Warren {__version__} on Python {platform.python_version()}",
            "cluster_name": self.cluster_name,
            "copyright": "Warren authors",
            "information": f"Warren {__version__}, an AMQP 0-9-1 broker that behaves as RabbitMQ "
                           f"{ANNOUNCED_VERSION}. Licensed under the Apache License 2.0",
            "capabilities": dict(SERVER_CAPABILITIES),
            **({} if self.http_port is None else {"http_port": self.http_port}),
        }
