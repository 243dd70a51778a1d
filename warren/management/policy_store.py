"""Policies changed through the running broker (HTTP API, definitions import, ``warren ctl``):
written to ``policies.json`` (temporary file, fsync, rename, fsync of the folder) before the
change is answered, then applied to every matching queue and exchange at once.

With ``--workers N`` every worker and the supervisor share one ``policies.json`` (the
supervisor passes its path as ``--policy-file``), and each worker's HTTP API may change it. So
a change is a read-modify-write of the file under an exclusive ``flock`` on
``policies.json.lock``: the file is read again inside the lock, so two processes changing
policies at the same moment both keep their change (without the lock, the later rename would
drop the other's). The other workers see the new file at their next look (``Broker.tick``,
every ``POLICY_CHECK`` = 0.5 s) and apply it to their vhosts' queues and exchanges.

Without a data folder (tests of the model alone) the policies live only in the vhosts.
"""

from __future__ import annotations

import logging
from contextlib import contextmanager
from pathlib import Path

from warren.broker.policies import Policy, PolicyError, load_policies, save_policies
from warren.store.node_file import locked, on_loop

__all__ = ["all_policies", "replace_policy", "remove_policy", "remove_vhost_policies", "replace_policies_in_file"]

log = logging.getLogger("warren.management")


def all_policies(broker) -> list[Policy]:
    """Every policy of every vhost, as in force (the file's content when there is one).

    The file is read without ``PolicyFile.load``, which would take its stamp: a change another
    worker made would then look already applied to this process's ``Broker.tick`` and never
    reach its queues and exchanges."""
    pf = broker.policy_file
    if pf.path is not None:
        try:
            return load_policies(pf.path)
        except (PolicyError, OSError) as e:
            log.error("cannot read the policies: %s", e)
    return on_loop(lambda: [p for v in broker.vhosts.values() for p in v.policies])


@contextmanager
def _change(broker):
    """Yield the current policies (a list to edit in place); what is in it afterwards is made
    durable, then in force. Under the file's lock, read inside it."""
    pf = broker.policy_file
    if pf.path is None:  # a broker without a data folder: its policies live in memory only
        policies = all_policies(broker)
        before = list(policies)
        yield policies
        if policies != before:
            on_loop(broker.set_policies, policies)
        return
    with locked(pf.path):
        policies = all_policies(broker)  # the file as it is now, whoever wrote it last
        before = list(policies)
        yield policies
        changed = policies != before
        if changed:
            save_policies(pf.path, policies)  # durable first
    if changed:
        # then in force, and the file's stamp taken (no second reload); on the loop, when the
        # HTTP API's thread made the change (warren/store/node_file.py ``on_loop``), and after
        # the lock: the loop may be waiting for it (a vhost's policies removed)
        on_loop(broker.reload_policies)


def replace_policy(broker, policy: Policy) -> bool:
    """Add or replace ``policy`` (same vhost and name); True if it is new."""
    with _change(broker) as policies:
        kept = [p for p in policies if (p.vhost, p.name) != (policy.vhost, policy.name)]
        new = len(kept) == len(policies)
        policies[:] = kept + [policy]
    return new


def remove_policy(broker, vhost: str, name: str) -> bool:
    with _change(broker) as policies:
        kept = [p for p in policies if (p.vhost, p.name) != (vhost, name)]
        found = len(kept) != len(policies)
        policies[:] = kept
    return found


def remove_vhost_policies(broker, vhost: str) -> None:
    with _change(broker) as policies:
        policies[:] = [p for p in policies if p.vhost != vhost]


def replace_policies_in_file(path: Path, new: list[Policy]) -> None:
    """Add or replace each of ``new`` (by vhost and name) in the policies file ``path``, under
    its lock, with no broker (the ``--workers`` supervisor loading a definitions file before
    its workers start). ``PolicyError`` if the file cannot be read."""
    if not new:
        return
    with locked(path):
        keys = {(p.vhost, p.name) for p in new}
        save_policies(path, [p for p in load_policies(path) if (p.vhost, p.name) not in keys] + list(new))
