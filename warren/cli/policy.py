"""`warren policy set|clear|list`: policies in the data folder (warren/broker/policies.py)."""

from __future__ import annotations

from pathlib import Path

import click

__all__ = ["policy"]

_data_dir_option = click.option("--data-dir", default="data", show_default=True, type=click.Path(path_type=Path),
                                help="The broker's data folder (policies.json lives there).")
_vhost_option = click.option("--vhost", default="/", show_default=True, help="Virtual host of the policy.")


@click.group()
def policy() -> None:
    """Policies: arguments applied to matching queues and exchanges without redeclaring.

    The running broker picks changes up within a second."""


def _policy_path(data_dir: Path) -> Path:
    from warren.broker.policies import FILE_NAME
    return data_dir / FILE_NAME


def _load(data_dir: Path) -> list:
    from warren.broker.policies import PolicyError, load_policies
    try:
        return load_policies(_policy_path(data_dir))
    except PolicyError as e:
        raise click.ClickException(str(e)) from None


@policy.command("set")
@click.argument("name")
@click.argument("pattern")
@click.argument("definition")
@click.option("--apply-to", default="all", show_default=True, type=click.Choice(["queues", "exchanges", "all"]))
@click.option("--priority", default=0, show_default=True, type=int, help="The highest matching priority applies.")
@_vhost_option
@_data_dir_option
def policy_set(name: str, pattern: str, definition: str, apply_to: str, priority: int, vhost: str,
               data_dir: Path) -> None:
    """Set (create or replace) policy NAME: queues/exchanges whose name PATTERN (a regular
    expression) finds get DEFINITION, a JSON object such as '{"max-length": 100}'."""
    import json

    from warren.broker.policies import PolicyError, save_policies, validate_policy
    try:
        parsed = json.loads(definition)
    except ValueError as e:
        raise click.BadParameter(f"not valid JSON: {e}", param_hint="DEFINITION") from None
    try:
        new = validate_policy(vhost, name, pattern, apply_to, priority, parsed)
    except PolicyError as e:
        raise click.BadParameter(str(e), param_hint="DEFINITION" if "pattern" not in str(e) else "PATTERN") from None
    policies = [p for p in _load(data_dir) if (p.vhost, p.name) != (vhost, name)]
    policies.append(new)
    save_policies(_policy_path(data_dir), policies)
    click.echo(f"Policy '{name}' set for vhost '{vhost}'.")


@policy.command("clear")
@click.argument("name")
@_vhost_option
@_data_dir_option
def policy_clear(name: str, vhost: str, data_dir: Path) -> None:
    """Remove policy NAME."""
    from warren.broker.policies import save_policies
    policies = _load(data_dir)
    kept = [p for p in policies if (p.vhost, p.name) != (vhost, name)]
    if len(kept) == len(policies):
        raise click.ClickException(f"no policy '{name}' in vhost '{vhost}'")
    save_policies(_policy_path(data_dir), kept)
    click.echo(f"Policy '{name}' cleared for vhost '{vhost}'.")


@policy.command("list")
@_data_dir_option
def policy_list(data_dir: Path) -> None:
    """List the policies of every vhost."""
    import json

    rows = [("vhost", "name", "pattern", "apply-to", "priority", "definition")]
    for p in sorted(_load(data_dir), key=lambda p: (p.vhost, -p.priority, p.name)):
        rows.append((p.vhost, p.name, p.pattern, p.apply_to, str(p.priority),
                     json.dumps(p.definition, sort_keys=True)))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    for r in rows:
        click.echo("  ".join(c.ljust(w) for c, w in zip(r, widths)) + "  " + r[-1])
