"""Queues, connections and policies: `purge_queue`, `delete_queue`, `close_connection`,
`set_policy`, `clear_policy`, `list_policies`.

A queue, policy or connection that does not exist exits 69, rabbitmqctl's code for them
(its `delete_queue` says 64 there, its `purge_queue` 69; ctl says 69 for both); a vhost
that does not exist exits 65. Policies are set through the running broker, which validates
them (an unknown key or an unknown vhost is refused) and applies them at once.
"""

from __future__ import annotations

import click

from warren.cli.ctl import api, common_options, ctl, settings, vhost_option
from warren.cli.ctl.access import missing_in_vhost, no_such_vhost, parse_json_argument
from warren.cli.ctl.client import EX_UNAVAILABLE, CtlError, not_found_as
from warren.cli.ctl.listing import LISTINGS, fetch
from warren.cli.ctl.output import emit_rows, info

__all__ = ["do_set_policy", "do_clear_policy", "do_list_policies"]


@ctl.command("purge_queue")
@click.argument("queue")
@vhost_option
@common_options
def purge_queue(queue: str, vhost: str) -> None:
    """Removes all ready messages of a queue."""
    s = settings()
    client = api(s)
    info(s, f"Purging queue '{queue}' in vhost '{vhost}' ...")
    with not_found_as(lambda: missing_in_vhost(client, vhost, f"Queue '{queue}' in vhost '{vhost}'")):
        client.delete("queues", vhost, queue, "contents")


@ctl.command("delete_queue")
@click.argument("queue")
@click.option("--if-empty", "-e", is_flag=True, help="Only if the queue has no ready messages.")
@click.option("--if-unused", "-u", "if_unused", is_flag=True, help="Only if the queue has no consumers.")
@vhost_option
@common_options
def delete_queue(queue: str, if_empty: bool, if_unused: bool, vhost: str) -> None:
    """Deletes a queue (with --if-empty/--if-unused, only when it is so: exit 65 otherwise)."""
    s = settings()
    client = api(s)
    info(s, f"Deleting queue '{queue}' on vhost '{vhost}' ...")
    query = {}
    if if_empty:
        query["if-empty"] = "true"
    if if_unused:
        query["if-unused"] = "true"
    with not_found_as(lambda: missing_in_vhost(client, vhost, f"Queue '{queue}' in vhost '{vhost}'")):
        client.delete("queues", vhost, queue, query=query or None)


@ctl.command("close_connection")
@click.argument("connection")
@click.argument("explanation")
@common_options
def close_connection(connection: str, explanation: str) -> None:
    """Closes a connection (its name as list_connections shows it) with 320 CONNECTION_FORCED
    and EXPLANATION as the reply text."""
    s = settings()
    info(s, f"Closing connection {connection}, reason: {explanation}...")
    with not_found_as(lambda: CtlError(EX_UNAVAILABLE, f"Connection '{connection}' not found")):
        api(s).delete("connections", connection, headers={"X-Reason": explanation})


# --- policies (also `warren policy set|clear|list`) --------------------------------------------

def do_set_policy(name: str, pattern: str, definition: str, vhost: str, priority: int, apply_to: str) -> None:
    s = settings()
    parsed = parse_json_argument(definition, "the policy definition")
    client = api(s)
    info(s, f'Setting policy "{name}" for pattern "{pattern}" to "{definition}" with priority "{priority}" '
            f'for vhost "{vhost}" ...')
    with not_found_as(lambda: no_such_vhost(vhost)):
        client.put("policies", vhost, name,
                   body={"pattern": pattern, "definition": parsed, "priority": priority, "apply-to": apply_to})


def do_clear_policy(name: str, vhost: str) -> None:
    s = settings()
    client = api(s)
    info(s, f'Clearing policy "{name}" on vhost "{vhost}" ...')
    with not_found_as(lambda: missing_in_vhost(client, vhost, f"Policy '{name}' in vhost '{vhost}'")):
        client.delete("policies", vhost, name)


def do_list_policies(vhost: str | None) -> None:
    """The policies of one vhost, or of every vhost when `vhost` is None."""
    s = settings()
    listing = LISTINGS["policies"]
    info(s, f'Listing policies for vhost "{vhost}" ...' if vhost is not None else "Listing policies ...")
    objects = fetch(listing, vhost) if vhost is not None else (api(s).get("policies") or [])
    emit_rows(s, listing.defaults, ([listing.value(c, o) for c in listing.defaults] for o in objects))


_priority_option = click.option("--priority", default=0, show_default=True, type=int,
                                help="Of the policies matching a name, the highest priority applies.")
_apply_to_option = click.option("--apply-to", default="all", show_default=True,
                                type=click.Choice(["queues", "exchanges", "all"]))


@ctl.command("set_policy")
@click.argument("name")
@click.argument("pattern")
@click.argument("definition")
@_priority_option
@_apply_to_option
@vhost_option
@common_options
def set_policy(name: str, pattern: str, definition: str, priority: int, apply_to: str, vhost: str) -> None:
    """Sets (creates or replaces) policy NAME: queues/exchanges whose name PATTERN (a regular
    expression) matches get DEFINITION, a JSON object such as '{"max-length": 100}'."""
    do_set_policy(name, pattern, definition, vhost, priority, apply_to)


@ctl.command("clear_policy")
@click.argument("name")
@vhost_option
@common_options
def clear_policy(name: str, vhost: str) -> None:
    """Removes a policy."""
    do_clear_policy(name, vhost)


@ctl.command("list_policies")
@vhost_option
@common_options
def list_policies(vhost: str) -> None:
    """Lists the policies of a vhost."""
    do_list_policies(vhost)
