"""rabbitmq-queues' membership commands for a cluster's replicated quorum queues
(warren/cluster/replicas.py), over the HTTP API's ``/api/queues/quorum/...`` routes
(warren/management/api/quorum.py): `add_member`, `delete_member`, `grow`, `shrink`,
`quorum_status`."""

from __future__ import annotations

import click

from warren.cli.ctl import api, common_options, ctl, settings, vhost_option
from warren.cli.ctl.client import EX_DATAERR, EX_UNAVAILABLE, ApiError, CtlError
from warren.cli.ctl.output import emit_rows, info

__all__ = ["STATUS_COLUMNS"]

STATUS_COLUMNS = ("Node Name", "Raft State", "Log Index", "Commit Index", "Snapshot Index", "Term")


def _refused(e: ApiError) -> CtlError:
    reason = " ".join((e.reason or "").split())
    return CtlError(EX_UNAVAILABLE if e.status in (404, 503) else EX_DATAERR, reason)


def _member(queue: str, node: str, vhost: str, adding: bool) -> None:
    s = settings()
    info(s, f"Adding a replica for queue {queue} on node {node}..." if adding
         else f"Removing a replica of queue {queue} on node {node}...")
    try:
        if adding:
            api(s).post("queues", "quorum", vhost, queue, "replicas", "add", body={"node": node})
        else:
            api(s).delete("queues", "quorum", vhost, queue, "replicas", "delete", body={"node": node})
    except ApiError as e:
        raise _refused(e) from None


@ctl.command("add_member")
@click.argument("queue")
@click.argument("node")
@vhost_option
@common_options
def add_member(queue: str, node: str, vhost: str) -> None:
    """Adds NODE as a member of quorum queue QUEUE (its leader sends it a snapshot)."""
    _member(queue, node, vhost, adding=True)


@ctl.command("delete_member")
@click.argument("queue")
@click.argument("node")
@vhost_option
@common_options
def delete_member(queue: str, node: str, vhost: str) -> None:
    """Removes NODE from the members of quorum queue QUEUE (not its leader)."""
    _member(queue, node, vhost, adding=False)


@ctl.command("grow")
@click.argument("node")
@click.argument("strategy", type=click.Choice(["all", "even"]))
@click.option("--vhost-pattern", default=".*", show_default=True, help="Virtual hosts to match (a regular expression).")
@click.option("--queue-pattern", default=".*", show_default=True, help="Queues to match (a regular expression).")
@common_options
def grow(node: str, strategy: str, vhost_pattern: str, queue_pattern: str) -> None:
    """Adds NODE as a member of every matching quorum queue (`even`: only those with an even
    number of members)."""
    s = settings()
    info(s, f"Growing {strategy} quorum queues matching {queue_pattern} in {vhost_pattern} to {node}...")
    try:
        api(s).post("queues", "quorum", "replicas", "on", node, "grow",
                    body={"strategy": strategy, "vhost_pattern": vhost_pattern, "queue_pattern": queue_pattern})
    except ApiError as e:
        raise _refused(e) from None


@ctl.command("shrink")
@click.argument("node")
@common_options
def shrink(node: str) -> None:
    """Removes NODE from every quorum queue it follows (those it leads keep it)."""
    s = settings()
    info(s, f"Shrinking quorum queues on {node}...")
    try:
        api(s).delete("queues", "quorum", "replicas", "on", node, "shrink")
    except ApiError as e:
        raise _refused(e) from None


@ctl.command("quorum_status")
@click.argument("queue")
@vhost_option
@common_options
def quorum_status(queue: str, vhost: str) -> None:
    """Each member of quorum queue QUEUE: its state and how far it is (asked of its leader)."""
    s = settings()
    info(s, f"Status of quorum queue {queue} ...")
    try:
        rows = api(s).get("queues", "quorum", vhost, queue, "status")
    except ApiError as e:
        raise _refused(e) from None
    emit_rows(s, STATUS_COLUMNS, [[row.get(c) for c in STATUS_COLUMNS] for row in rows or []])
