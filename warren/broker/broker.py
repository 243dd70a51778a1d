"""The broker: virtual hosts, users, and the identity it announces to clients."""

from __future__ import annotations

import logging
import platform
from pathlib import Path

from warren import __version__
from warren.broker.auth import UserDB
from warren.broker.memory import MemoryBudget
from warren.broker.policies import FILE_NAME, PolicyFile
from warren.broker.vhost import VirtualHost

__all__ = ["Broker", "TICK", "POLICY_CHECK"]

log = logging.getLogger("warren.broker")

POLICY_CHECK = 0.5  # seconds between two looks at policies.json for changes
TICK = 0.02  # seconds between two Broker.tick calls: the precision of timed work (delayed messages)

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
    def __init__(self, vhosts: tuple[str, ...] = ("/",), users: UserDB | None = None,
                 cluster_name: str = "warren", durability=None, memory_budget: int = 0,
                 policy_file: Path | None = None) -> None:
        self.durability = durability
        self.memory = MemoryBudget(memory_budget, self.all_queues)
        self.vhosts = {name: VirtualHost(name, durability, self.memory) for name in vhosts}
        self.users = users or UserDB()
        self.cluster_name = cluster_name
        # policies.json in the data folder (warren/broker/policies.py): in force before the
        # durable queues and exchanges come back, re-read when the file changes
        if policy_file is None and durability is not None:
            policy_file = durability.data_dir / FILE_NAME
        self.policy_file = PolicyFile(policy_file)
        self._policy_check = 0.0
        self.reload_policies()
        if durability is not None:
            durability.restore(self)

    def reload_policies(self) -> None:
        """Read policies.json and apply it to every vhost (kept as is if it cannot be read)."""
        policies = self.policy_file.load()
        if policies is None:
            return
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
        for vhost in self.vhosts.values():
            if vhost.timers:
                for t in list(vhost.timers):
                    if not t.tick(now):
                        vhost.timers.discard(t)

    def server_properties(self) -> dict:
        return {
            "product": "Warren",
            "version": __version__,
            "platform": f"Python {platform.python_version()}",
            "cluster_name": self.cluster_name,
            "copyright": "Warren authors",
            "information": "Licensed under the Apache License 2.0",
            "capabilities": dict(SERVER_CAPABILITIES),
        }
