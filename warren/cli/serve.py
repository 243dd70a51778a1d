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


# `warren serve --help` by topic (issue 34): every visible option belongs to one of these, in this
# order (tests/cli/test_serve.py checks that none is left out)
OPTION_GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Listeners (beside RabbitMQ, move them: docs/beside-rabbitmq.md)",
     ("host", "port", "http_port", "http_host", "prometheus_port", "prometheus_host", "tls_port", "ready_file")),
    ("Storage", ("data_dir", "fsync", "memory_budget", "definitions")),
    ("Limits, time-outs and flow control",
     ("max_message_size", "connection_max", "consumer_max_per_channel", "max_unauthenticated_connections",
      "max_output_buffer", "channel_max", "frame_max", "heartbeat", "handshake_timeout", "consumer_timeout",
      "memory_high_watermark", "disk_free_limit", "queue_flow_high", "queue_flow_high_bytes",
      "http_header_timeout", "http_body_timeout", "http_max_body_size")),
    ("Users, virtual hosts and logins",
     ("vhosts", "default_user", "default_pass", "loopback_users", "anonymous_user", "auth_mechanisms",
      "login_failure_delay",
      "login_failure_limit", "login_block_time", "login_throttle_loopback")),
    ("TLS (docs/security.md)",
     ("tls_cert", "tls_key", "tls_ca", "tls_verify", "tls_versions", "tls_ciphers", "http_tls", "tls_login_from",
      "tls_login_san_type", "tls_login_san_index")),
    ("Cluster: worker processes", ("workers", "worker_mode")),
    ("Cluster on etcd (docs/clustering.md)",
     ("cluster_etcd", "node_name", "cluster_name", "cluster_secret_file", "cluster_lease_ttl", "cluster_port",
      "cluster_advertise", "cluster_tls", "queue_leader_locator")),
    ("Tuning", ("loop", "publish_runs", "yield_after_confirms")),
    ("Logging", ("log_level", "log_format", "log_file")),
    ("Settings", ("config_file", "print_config", "help")),
)


class ServeCommand(OneLineErrors):
    """`warren serve`: its --help lists the options under OPTION_GROUPS' headings."""

    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        records = {}
        help_option = self.get_help_option(ctx)
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx)
            if record is not None:  # click names its --help option as it likes: filed as "help"
                records["help" if param is help_option else param.name] = record
        for title, names in OPTION_GROUPS:
            rows = [records.pop(name) for name in names if name in records]
            if rows:
                with formatter.section(title):
                    formatter.write_dl(rows)
        if records:  # an option added without a group still shows
            with formatter.section("Other options"):
                formatter.write_dl(list(records.values()))


@click.command(cls=ServeCommand)
@click.option("--config", "config_file", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="A warren.toml with any of these options (default: $WARREN_CONFIG_FILE, else none).")
@click.option("--print-config", is_flag=True, default=False,
              help="Print the effective settings and where each came from (as TOML), then exit.")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to listen on (0.0.0.0 for every interface).")
@click.option("--port", default=5672, show_default=True, type=int,
              help="AMQP port, every protocol version (RabbitMQ's is 5672 too; 0 = ephemeral, -1 = no plain AMQP: "
                   "TLS only).")
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
              help="Folder for durable state, locked while the broker runs (relative to the current folder; the "
                   "log gives its absolute path).")
@click.option("--heartbeat", default=60, show_default=True, type=int,
              help="Heartbeat seconds offered to clients (RabbitMQ's heartbeat).")
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
@click.option("--auth-mechanisms", default=",".join(Config.auth_mechanisms), show_default=True,
              help="SASL mechanisms offered, in this order, where each can be used (RabbitMQ's auth_mechanisms; "
                   "PLAIN,AMQPLAIN is RabbitMQ 3.10's, without EXTERNAL; docs/security.md).")
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
@click.option("--frame-max", default=131072, show_default=True, type=int,
              help="Largest frame in octets (RabbitMQ's frame_max).")
@click.option("--channel-max", default=2047, show_default=True, type=int,
              help="Most channels per connection (RabbitMQ's channel_max).")
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
@click.option("--loop", default="auto", show_default=True, type=click.Choice(["auto", "uvloop", "asyncio"]),
              help="Event loop: uvloop when installed (auto), or asyncio's own.")
@click.option("--ready-file", type=click.Path(path_type=Path), default=None,
              help="Write the bound ports as JSON here once listening (for scripts and service managers).")
@click.option("--http-port", default=15672, show_default=True, type=int,
              help="The web UI and the HTTP API (RabbitMQ's management port is 15672 too; 0 = ephemeral, -1 = off).")
@click.option("--http-host", default=None, help="Address of the web UI and HTTP API (default: the same as --host).")
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
              help="A virtual host served from the start (repeat for several; more can be added at run time).")
@click.option("--workers", default=1, show_default=True, type=int,
              help="Broker processes: with N > 1 each virtual host is owned by one of N worker processes "
                   "(docs/performance.md, 'Both cores').")
@click.option("--worker-mode", default="vhosts", show_default=True, type=click.Choice(["vhosts", "queues"]),
              help="With --workers N: each worker owns whole vhosts, or (experimental) some queues of every vhost "
                   "(docs/performance.md, 'One vhost over worker processes').")
@click.option("--cluster-etcd", default=None,
              help="Join (or create) a cluster through these etcd members: http://HOST:PORT[,...] "
                   "(docs/clustering.md; default: a single node).")
@click.option("--node-name", default=None, help="This node's name in the cluster (with --cluster-etcd).")
@click.option("--cluster-name", default=Config.cluster_name, show_default=True,
              help="The cluster to join or create: its keys live under /warren/NAME/ in etcd.")
@click.option("--cluster-secret-file", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="The cluster secret, in a file of mode 0600 (default: the first node makes one, kept in etcd).")
@click.option("--cluster-lease-ttl", default=Config.cluster_lease_ttl, show_default=True, type=int,
              help="Seconds after which a node that stopped renewing its lease (killed, cut off) leaves the "
                   "member list.")
@click.option("--cluster-port", default=Config.cluster_port, show_default=True, type=int,
              help="The port other nodes of the cluster link to (0: any free one, announced in etcd).")
@click.option("--cluster-advertise", default=None, metavar="HOST:PORT",
              help="Where the other nodes dial this one, when not --host and the cluster port (a NAT, a proxy).")
@click.option("--cluster-tls/--no-cluster-tls", default=Config.cluster_tls, show_default=True,
              help="TLS on the inter-node links, with --tls-cert/--tls-key and --tls-ca (both sides verified).")
@click.option("--queue-leader-locator", default=Config.queue_leader_locator, show_default=True,
              help="Where a new queue is placed in a cluster: client-local, balanced (the node with the fewest "
                   "queues), or a node's name.")
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
    """Run the broker until SIGTERM or SIGINT.

    Every option can also be set in a TOML file (--config) or as WARREN_<OPTION> in the
    environment (docs/configuration.md); the command line wins.
    """
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
