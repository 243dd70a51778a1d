"""`warren serve`: run the broker."""

from __future__ import annotations

import logging
from pathlib import Path

import click

from warren.config import Config

__all__ = ["serve"]


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=5672, show_default=True, type=int, help="AMQP port (0 = ephemeral).")
@click.option("--data-dir", default="data", show_default=True, type=click.Path(path_type=Path),
              help="Folder for durable state.")
@click.option("--heartbeat", default=60, show_default=True, type=int, help="Heartbeat seconds offered to clients.")
@click.option("--handshake-timeout", default=10.0, show_default=True, type=float,
              help="Seconds a client has from connecting to connection.open-ok (RabbitMQ's handshake_timeout).")
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
@click.option("--http-header-timeout", default=Config.http_header_timeout, show_default=True, type=float,
              help="Seconds an HTTP client has to send a request's line and headers (408 and close after).")
@click.option("--http-body-timeout", default=Config.http_body_timeout, show_default=True, type=float,
              help="Seconds an HTTP client has to send a request's body (408 and close after).")
@click.option("--http-max-body-size", default=Config.http_max_body_size, show_default=True, type=int,
              help="Largest HTTP request body in octets (413 above).")
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
