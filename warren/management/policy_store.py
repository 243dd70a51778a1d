"""Policies changed through the running broker (HTTP API, definitions import, ``warren ctl``):
written to ``policies.json`` (temporary file, fsync, rename, fsync of the folder) before the
change is answered, then applied to every matching queue and exchange at once.

Without a data folder (tests of the model alone) the policies live only in the vhosts.
"""

from __future__ import annotations

from warren.broker.policies import Policy, save_policies

__all__ = ["all_policies", "replace_policy", "remove_policy", "remove_vhost_policies"]


def all_policies(broker) -> list[Policy]:
    """Every policy of every vhost, as in force (the file's content when there is one)."""
    pf = getattr(broker, "policy_file", None)
    if pf is not None and pf.path is not None:
        loaded = pf.load()
        if loaded is not None:
            return loaded
    return [p for v in broker.vhosts.values() for p in getattr(v, "policies", ())]


def _commit(broker, policies: list[Policy]) -> None:
    pf = getattr(broker, "policy_file", None)
    if pf is not None and pf.path is not None:
        save_policies(pf.path, policies)  # durable first
        broker.reload_policies()  # then in force, and the file's stamp taken (no second reload)
    else:
        broker.set_policies(policies)


def replace_policy(broker, policy: Policy) -> bool:
    """Add or replace ``policy`` (same vhost and name); True if it is new."""
    policies = all_policies(broker)
    kept = [p for p in policies if (p.vhost, p.name) != (policy.vhost, policy.name)]
    _commit(broker, kept + [policy])
    return len(kept) == len(policies)


def remove_policy(broker, vhost: str, name: str) -> bool:
    policies = all_policies(broker)
    kept = [p for p in policies if (p.vhost, p.name) != (vhost, name)]
    if len(kept) == len(policies):
        return False
    _commit(broker, kept)
    return True


def remove_vhost_policies(broker, vhost: str) -> None:
    policies = all_policies(broker)
    kept = [p for p in policies if p.vhost != vhost]
    if len(kept) != len(policies):
        _commit(broker, kept)
