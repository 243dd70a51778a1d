"""`warren serve`: run the broker.

Every option can also come from the environment (``WARREN_<OPTION>``) or a TOML file
(``--config FILE`` or ``$WARREN_CONFIG_FILE``); the command line wins over the environment,
which wins over the file, which wins over the built-in default (``warren/config_sources.py``,
``docs/configuration.md``). Only options actually given on the command line count as such:
a click default here is for ``--help`` only, the value used comes from ``Config``.
An option added here needs a field of the same name in ``Config``; the file and the
environment support it with no further code.

Errors (a bad value, a port in use, a locked data folder) are one line on stderr and exit
status 1 (2 for a malformed command line), never a traceback.
"""

from __future__ import annotations

import logging
from pathlib import Path

import click
from click.core import ParameterSource

from warren.config import Config

__all__ = ["serve"]

log = logging.getLogger("warren.server")


class _OneLineUsageError(click.ClickException):
    exit_code = 2


class OneLineErrors(click.Command):
    """A command whose malformed command line is reported as one line (no usage block)."""

    def make_context(self, info_name, args, parent=None, **extra):
        try:
            return super().make_context(info_name, args, parent=parent, **extra)
        except click.UsageError as e:
            raise _OneLineUsageError(e.format_message()) from None


@click.command(cls=OneLineErrors)
@click.option("--config", "config_file", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="A warren.toml with any of these options (default: $WARREN_CONFIG_FILE, else none).")
@click.option("--print-config", is_flag=True, default=False,
              help="Print the effective settings and where each came from (as TOML), then exit.")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=5672, show_default=True, type=int,
              help="AMQP port (0 = ephemeral, -1 = no plain AMQP: TLS only).")
@click.option("--tls-port", default=-1, show_default=True, type=int,
              help="AMQP over TLS (amqps) port, RabbitMQ's is 5671 (0 = ephemeral, -1 = off; docs/security.md).")
@click.option("--tls-cert", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="The server's PEM certificate (chain, leaf first), for --tls-port and --http-tls.")
@click.option("--tls-key", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="Its PEM private key, unencrypted (default: in the --tls-cert file).")
@click.option("--tls-ca", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="PEM CA certificates that client certificates must chain to (--tls-verify peer/require).")
@click.option("--tls-verify", default="none", show_default=True, type=click.Choice(["none", "peer", "require"]),
              help="Client certificates: none (not asked), peer (verified if sent: RabbitMQ's verify_peer), "
                   "require (verify_peer + fail_if_no_peer_cert).")
@click.option("--tls-versions", default="tlsv1.2,tlsv1.3", show_default=True,
              help="TLS versions allowed (tlsv1.2, tlsv1.3, comma-separated).")
@click.option("--tls-ciphers", default=None,
              help="OpenSSL cipher list for TLS 1.2 (default: Python's; TLS 1.3 suites are OpenSSL's).")
@click.option("--http-tls/--no-http-tls", default=False, show_default=True,
              help="Serve the HTTP API port (and the Prometheus port) over TLS with --tls-cert/--tls-key.")
@click.option("--tls-login-from", default="common_name", show_default=True,
              type=click.Choice(["common_name", "distinguished_name", "subject_alternative_name", "subject_alt_name"]),
              help="Certificate login (SASL EXTERNAL): the part of the client certificate that names the user "
                   "(RabbitMQ's ssl_cert_login_from).")
@click.option("--tls-login-san-type", default="dns", show_default=True,
              type=click.Choice(["dns", "email", "uri", "ip"]),
              help="With subject_alternative_name: which kind of SAN (ssl_cert_login_san_type).")
@click.option("--tls-login-san-index", default=0, show_default=True, type=int,
              help="With subject_alternative_name: which SAN of that kind, from 0 (ssl_cert_login_san_index).")
@click.option("--data-dir", default="data", show_default=True, type=click.Path(path_type=Path),
              help="Folder for durable state.")
@click.option("--heartbeat", default=60, show_default=True, type=int, help="Heartbeat seconds offered to clients.")
@click.option("--handshake-timeout", default=10.0, show_default=True, type=float,
              help="Seconds a client has from connecting to connection.open-ok (RabbitMQ's handshake_timeout).")
@click.option("--max-message-size", default=Config.max_message_size, show_default=True, type=int,
              help="Largest message body in octets; a larger publish closes its channel with 406 "
                   "(RabbitMQ's max_message_size: 128 MiB, at most 512 MiB).")
@click.option("--connection-max", default=Config.connection_max, show_default=True, type=int,
              help="Open connections on this node; more are refused at connection.open with 530 "
                   "(RabbitMQ's connection_max; 0 = no limit; docs/security.md).")
@click.option("--consumer-max-per-channel", default=Config.consumer_max_per_channel, show_default=True, type=int,
              help="Consumers on one channel; one more is refused with 530 (RabbitMQ's consumer_max_per_channel; "
                   "0 = no limit).")
@click.option("--max-unauthenticated-connections", default=None, type=int,
              help="Sockets at once that have not completed the handshake; more are closed at accept "
                   "(default: a quarter of the open-file limit, at most 4096; 0 = no limit).")
@click.option("--max-output-buffer", default=Config.max_output_buffer, show_default=True, type=int,
              help="Octets of output a client may leave unread before it is closed (at least one "
                   "max-message-size message plus 1 MiB).")
@click.option("--loopback-users", default="guest", show_default=True,
              help="Users who may only log in from a loopback address, comma-separated "
                   "(RabbitMQ's loopback_users; '' = none).")
@click.option("--anonymous-user", default=None,
              help="AMQP 0-10 clients may log in with SASL ANONYMOUS, as this user (off by default).")
@click.option("--login-failure-delay", default=Config.login_failure_delay, show_default=True, type=float,
              help="Seconds a failed login's answer waits after a few failures from its address (0 = off).")
@click.option("--login-failure-limit", default=Config.login_failure_limit, show_default=True, type=int,
              help="Failed logins from one address within --login-block-time before its logins are "
                   "refused for that long (0 = off).")
@click.option("--login-block-time", default=Config.login_block_time, show_default=True, type=float,
              help="Seconds of the failed-login window and of the refusals that follow it.")
@click.option("--login-throttle-loopback/--no-login-throttle-loopback", default=False, show_default=True,
              help="Throttle failed logins from loopback addresses too (exempt by default).")
@click.option("--consumer-timeout", default=1_800_000, show_default=True, type=int,
              help="Milliseconds a delivery may stay unacknowledged before its channel is closed with 406 "
                   "(RabbitMQ's consumer_timeout; 0 = off).")
@click.option("--frame-max", default=131072, show_default=True, type=int, help="Largest frame in octets.")
@click.option("--channel-max", default=2047, show_default=True, type=int, help="Most channels per connection.")
@click.option("--fsync/--no-fsync", default=True, show_default=True,
              help="fsync persistent messages before confirming them (group commit).")
@click.option("--memory-high-watermark", default=0.4, show_default=True, type=float,
              help="Block publishers when Warren's memory passes this: a fraction of RAM (<1) or octets "
                   "(0 = off; docs/flow-control.md).")
@click.option("--disk-free-limit", default=50 * 1024 * 1024, show_default=True, type=int,
              help="Block publishers while the data folder's disk has less free space (octets; 0 = off).")
@click.option("--memory-budget", default=None, type=int,
              help="Octets of queued messages kept in memory before queues page to disk "
                   "(default: half the memory watermark, at most a fifth of physical memory; 0 = never page).")
@click.option("--queue-flow-high", default=Config.queue_flow_high, show_default=True, type=int,
              help="Flow control: stop reading from publishers of a consumed queue holding more ready "
                   "messages than this, until it drains to half (0 = off).")
@click.option("--queue-flow-high-bytes", default=Config.queue_flow_high_bytes, show_default=True, type=int,
              help="The same mark in octets of ready message bodies (0 = off).")
@click.option("--publish-runs/--no-publish-runs", default=None,
              help="Take consecutive publishes as one run on every connection, or on none (default: on a "
                   "connection once one of its channels selects confirms; docs/configuration.md).")
@click.option("--yield-after-confirms/--no-yield-after-confirms", default=True, show_default=True,
              help="At the end of a loop turn that read little and confirmed publishes, give the core to a "
                   "thread waiting for it (docs/performance.md, session 12).")
@click.option("--loop", default="auto", show_default=True, type=click.Choice(["auto", "uvloop", "asyncio"]))
@click.option("--ready-file", type=click.Path(path_type=Path), default=None,
              help="Write the bound port as JSON here once listening (for tests and scripts).")
@click.option("--http-port", default=15672, show_default=True, type=int,
              help="HTTP API port (stream records in bulk; 0 = ephemeral, -1 = off).")
@click.option("--http-host", default=None, help="Address of the HTTP API (default: the same as --host).")
@click.option("--prometheus-port", default=Config.prometheus_port, show_default=True, type=int,
              help="Prometheus metrics port, /metrics and /metrics/per-object (RabbitMQ's is 15692; "
                   "0 = ephemeral, -1 = off; docs/metrics.md).")
@click.option("--prometheus-host", default=None,
              help="Address of the Prometheus metrics (default: the HTTP API's address).")
@click.option("--http-header-timeout", default=Config.http_header_timeout, show_default=True, type=float,
              help="Seconds an HTTP client has to send a request's line and headers (408 and close after).")
@click.option("--http-body-timeout", default=Config.http_body_timeout, show_default=True, type=float,
              help="Seconds an HTTP client has to send a request's body (408 and close after).")
@click.option("--http-max-body-size", default=Config.http_max_body_size, show_default=True, type=int,
              help="Largest HTTP request body in octets (413 above).")
@click.option("--log-level", default="info", show_default=True,
              type=click.Choice(["debug", "info", "warning", "error"]))
@click.option("--log-format", default="text", show_default=True, type=click.Choice(["text", "json"]),
              help="text, or json: one object per line (time, level, logger, message, fields).")
@click.option("--log-file", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="Append the log to this file instead of stderr; reopened on SIGHUP (logrotate).")
@click.option("--default-user", default=None,
              help="The user a new data folder gets instead of guest (with --default-pass).")
@click.option("--default-pass", default=None, help="That user's password.")
@click.option("--vhost", "vhosts", multiple=True, default=("/",), show_default=True,
              help="A virtual host (repeat for several).")
@click.option("--workers", default=1, show_default=True, type=int,
              help="Broker processes: with N > 1 each virtual host is owned by one of N worker processes "
                   "(docs/performance.md, 'Both cores').")
@click.option("--worker-mode", default="vhosts", show_default=True, type=click.Choice(["vhosts", "queues"]),
              help="With --workers N: each worker owns whole vhosts, or (experimental) some queues of every vhost "
                   "(docs/performance.md, 'One vhost over worker processes').")
@click.option("--handoff-socket", type=click.Path(path_type=Path), default=None, hidden=True)
@click.option("--worker-index", default=0, type=int, hidden=True)
@click.option("--worker-placement", default=2, type=int, hidden=True)
@click.option("--peer-fd", "peer_fds", multiple=True, default=(), hidden=True)
@click.option("--policy-file", type=click.Path(path_type=Path), default=None, hidden=True)
@click.option("--access-file", type=click.Path(path_type=Path), default=None, hidden=True)
@click.option("--global-parameters-file", type=click.Path(path_type=Path), default=None, hidden=True)
@click.option("--definitions", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="Import this definitions file (RabbitMQ's JSON export) at start-up, as load_definitions.")
@click.pass_context
def serve(ctx: click.Context, config_file: Path | None, print_config: bool, **options) -> None:
    """Run the broker until SIGTERM or SIGINT."""
    from warren.config_sources import SettingsError, resolve, to_toml
    from warren.server.logs import setup_logging
    from warren.server.server import StartupError, run

    given = {name: value for name, value in options.items()
             if ctx.get_parameter_source(name) is ParameterSource.COMMANDLINE}
    try:
        # a worker (--handoff-socket) takes everything from its supervisor's command line and file
        config, sources = resolve(given, config_file=config_file, aliases=_option_aliases(ctx.command),
                                  use_environment="handoff_socket" not in given)
    except SettingsError as e:
        raise click.ClickException(str(e)) from None
    if print_config:
        click.echo(to_toml(config, sources), nl=False)
        return
    try:
        setup_logging(config.log_level, config.log_format, config.log_file)
    except OSError as e:
        raise click.ClickException(f"cannot open log file {config.log_file}: {e.strerror or e}") from None
    try:
        run(config)
    except StartupError as e:
        if config.log_file is not None:  # the file says why too; stderr gets the one line
            log.critical("cannot start: %s", e)
        raise click.ClickException(str(e)) from None


def _option_aliases(command: click.Command) -> dict[str, str]:
    """Command-line spellings that differ from the Config field (``vhost`` for ``vhosts``)."""
    aliases = {}
    for param in command.params:
        for opt in getattr(param, "opts", ()):
            if opt.startswith("--") and param.name:
                aliases[opt[2:]] = param.name
    return aliases
