"""The `warren` command line."""

from __future__ import annotations

import logging
from pathlib import Path

import click

from warren import __version__
from warren.config import Config

__all__ = ["main"]


@click.group()
@click.version_option(__version__, prog_name="warren")
def main() -> None:
    """Warren, an AMQP message broker."""


@main.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=5672, show_default=True, type=int, help="AMQP port (0 = ephemeral).")
@click.option("--data-dir", default="data", show_default=True, type=click.Path(path_type=Path),
              help="Folder for durable state.")
@click.option("--heartbeat", default=60, show_default=True, type=int, help="Heartbeat seconds offered to clients.")
@click.option("--frame-max", default=131072, show_default=True, type=int, help="Largest frame in octets.")
@click.option("--channel-max", default=2047, show_default=True, type=int, help="Most channels per connection.")
@click.option("--fsync/--no-fsync", default=True, show_default=True,
              help="fsync persistent messages before confirming them (group commit).")
@click.option("--memory-high-watermark", default=0.4, show_default=True, type=float,
              help="Block publishers above this resident memory: a fraction of RAM (<1) or octets (0 = off).")
@click.option("--disk-free-limit", default=50 * 1024 * 1024, show_default=True, type=int,
              help="Block publishers while the data folder's disk has less free space (octets; 0 = off).")
@click.option("--memory-budget", default=None, type=int,
              help="Octets of queued messages kept in memory before queues page to disk "
                   "(default: a fifth of physical memory; 0 = never page).")
@click.option("--queue-flow-high", default=Config.queue_flow_high, show_default=True, type=int,
              help="Flow control: stop reading from publishers of a consumed queue holding more ready "
                   "messages than this, until it drains to half (0 = off).")
@click.option("--queue-flow-high-bytes", default=Config.queue_flow_high_bytes, show_default=True, type=int,
              help="The same mark in octets of ready message bodies (0 = off).")
@click.option("--loop", default="auto", show_default=True, type=click.Choice(["auto", "uvloop", "asyncio"]))
@click.option("--ready-file", type=click.Path(path_type=Path), default=None,
              help="Write the bound port as JSON here once listening (for tests and scripts).")
@click.option("--http-port", default=15672, show_default=True, type=int,
              help="HTTP API port (stream records in bulk; 0 = ephemeral, -1 = off).")
@click.option("--http-host", default=None, help="Address of the HTTP API (default: the same as --host).")
@click.option("--log-level", default="info", show_default=True,
              type=click.Choice(["debug", "info", "warning", "error"]))
@click.option("--vhost", "vhosts", multiple=True, default=("/",), show_default=True,
              help="A virtual host (repeat for several).")
@click.option("--workers", default=1, show_default=True, type=int,
              help="Broker processes: with N > 1 each virtual host is owned by one of N worker processes "
                   "(docs/performance.md, 'Both cores').")
@click.option("--handoff-socket", type=click.Path(path_type=Path), default=None, hidden=True)
@click.option("--policy-file", type=click.Path(path_type=Path), default=None, hidden=True)
def serve(**options) -> None:
    """Run the broker until SIGTERM or SIGINT."""
    from warren.server.server import run

    if options["memory_budget"] is None:
        del options["memory_budget"]
    config = Config(**options).validate()
    logging.basicConfig(level=config.log_level.upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    run(config)


# --- policies (warren/broker/policies.py) ----------------------------------------------------

_data_dir_option = click.option("--data-dir", default="data", show_default=True, type=click.Path(path_type=Path),
                                help="The broker's data folder (policies.json lives there).")
_vhost_option = click.option("--vhost", default="/", show_default=True, help="Virtual host of the policy.")


@main.group()
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


# `warren pipeline archive|replay`: Spark jobs (warren/spark/pipeline.py); pyspark itself is
# imported only when one of them runs, so the broker's start-up does not pay for it
from warren.spark.pipeline import pipeline  # noqa: E402

main.add_command(pipeline)
