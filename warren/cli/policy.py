"""`warren policy set|clear|list`: aliases of `warren ctl set_policy|clear_policy|list_policies`.

They go through the running broker's HTTP API (warren/cli/ctl), which validates the policy,
refuses an unknown vhost, makes the change durable and applies it before answering; nothing
edits the data folder behind the broker's back. The general options of `warren ctl` (--url,
--username, --password, the WARREN_CTL_* environment, -q, --formatter, -t) apply, as do its
exit codes (docs/ctl.md).
"""

from __future__ import annotations

import click

from warren.cli.ctl import CtlCommand, CtlGroup, common_options
from warren.cli.ctl.objects import do_clear_policy, do_list_policies, do_set_policy

__all__ = ["policy"]

_vhost_option = click.option("--vhost", "-p", default="/", show_default=True, help="Virtual host of the policy.")


@click.group(cls=CtlGroup, context_settings={"help_option_names": ["-h", "--help"]})
@common_options
def policy() -> None:
    """Policies: arguments applied to matching queues and exchanges without redeclaring
    (aliases of `warren ctl set_policy|clear_policy|list_policies`, through the running broker)."""


@policy.command("set", cls=CtlCommand)
@click.argument("name")
@click.argument("pattern")
@click.argument("definition")
@click.option("--apply-to", default="all", show_default=True, type=click.Choice(["queues", "exchanges", "all"]))
@click.option("--priority", default=0, show_default=True, type=int, help="The highest matching priority applies.")
@_vhost_option
@common_options
def policy_set(name: str, pattern: str, definition: str, apply_to: str, priority: int, vhost: str) -> None:
    """Set (create or replace) policy NAME: queues/exchanges whose name PATTERN (a regular
    expression) finds get DEFINITION, a JSON object such as '{"max-length": 100}'."""
    do_set_policy(name, pattern, definition, vhost, priority, apply_to)


@policy.command("clear", cls=CtlCommand)
@click.argument("name")
@_vhost_option
@common_options
def policy_clear(name: str, vhost: str) -> None:
    """Remove policy NAME."""
    do_clear_policy(name, vhost)


@policy.command("list", cls=CtlCommand)
@click.option("--vhost", "-p", default=None, help="Only this vhost's policies (default: every vhost).")
@common_options
def policy_list(vhost: str | None) -> None:
    """List the policies (of every vhost unless --vhost is given)."""
    do_list_policies(vhost)
