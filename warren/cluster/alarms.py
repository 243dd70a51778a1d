"""Resource alarms are the cluster's: one node's memory or disk alarm blocks publishers on every
node, as in a RabbitMQ cluster (a publisher connected to node b may fill node a's queues).

Each node's alarms travel in its member record (``status``: ``mem_alarm``, ``disk_free_alarm``,
the row of ``/api/nodes``, warren/cluster/node.py): a node writes its record at once when its own
alarm changes, and every node, on each change of the member list, raises or clears the others'
as ``"memory (node c)"`` in its own ``ResourceAlarms`` (warren/server/flow_control.py), which
blocks and unblocks its publishers and shows them in ``/api/health/checks/alarms``. A node that
leaves (stopped, or its lease ended) takes its alarms with it.
"""

from __future__ import annotations

import logging

__all__ = ["share_alarms"]

log = logging.getLogger("warren.cluster")

ALARMS = (("mem_alarm", "memory"), ("disk_free_alarm", "disk"))


def share_alarms(cluster, alarms) -> None:
    """Wire ``cluster`` (a ClusterNode) and ``alarms`` (the server's ResourceAlarms) both ways."""
    applied: set[tuple[str, str]] = set()  # (node, resource) raised here for another node

    def members_changed() -> None:
        wanted = set()
        for name, record in cluster.members.items():
            status = record.get("status")
            if name == cluster.node_name or not isinstance(status, dict):
                continue
            wanted.update((name, resource) for key, resource in ALARMS if status.get(key))
        for node, resource in sorted(wanted - applied):
            alarms.set_alarm(f"{resource} (node {node})", True, f"raised on node {node}", local=False)
        for node, resource in sorted(applied - wanted):
            alarms.set_alarm(f"{resource} (node {node})", False, local=False)
        applied.clear()
        applied.update(wanted)

    def local_changed(name: str, on: bool, detail: str) -> None:
        cluster.report_now()  # the others block (or unblock) their publishers within moments

    cluster.listen("members", members_changed)
    alarms.on_local_change = local_changed
