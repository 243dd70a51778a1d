"""Broker settings: one validated dataclass, built by the CLI, handed to the server."""

from __future__ import annotations

import os
import re
import ssl
from dataclasses import dataclass
from pathlib import Path

from warren.broker.memory import default_budget
from warren.broker.queues.flow_marks import FLOW_HIGH, FLOW_HIGH_BYTES
from warren.protocol.amqp0_9_1.connection import CHANNEL_MAX_DEFAULT, FRAME_MAX_DEFAULT, MAX_MESSAGE_SIZE

__all__ = ["AUTH_MECHANISMS", "Config", "INTERNAL_FIELDS", "LOG_LEVELS", "LOG_FORMATS", "LOOPS", "WORKER_MODES"]

LOG_LEVELS = ("debug", "info", "warning", "error")
LOG_FORMATS = ("text", "json")
LOOPS = ("auto", "uvloop", "asyncio")
# fields the supervisor sets for its workers: not options of the file or the environment
INTERNAL_FIELDS = frozenset({"handoff_socket", "policy_file", "access_file", "global_parameters_file", "peer_fds",
                             "worker_index", "worker_placement"})
WORKER_MODES = ("vhosts", "queues")
# the SASL mechanisms Warren can offer (RabbitMQ's auth_mechanisms names them so too), in the
# order Warren has always offered them: the default of auth_mechanisms (warren/access/login.py)
AUTH_MECHANISMS = ("PLAIN", "AMQPLAIN", "ANONYMOUS", "EXTERNAL")


# The TLS settings' valid values, with RabbitMQ's names (warren/server/tls.py applies them):
# ssl_options.verify, ssl_cert_login_from (subject_alt_name is its older spelling),
# ssl_cert_login_san_type, and the protocol versions offered (older ones are broken).
# --cluster-etcd: plain HTTP to etcd's JSON gateway for now (https: not built yet)
CLUSTER_URL = re.compile(r"http://[A-Za-z0-9.\-\[\]:]+:[0-9]{1,5}/?")
CLUSTER_NAME = re.compile(r"[A-Za-z0-9._-]{1,64}")
NODE_NAME = re.compile(r"[A-Za-z0-9._-]{1,64}(@[A-Za-z0-9._-]{1,64})?")  # RabbitMQ's rabbit@host form allowed

TLS_VERIFY_MODES = ("none", "peer", "require")
TLS_LOGIN_FROM = ("common_name", "distinguished_name", "subject_alternative_name", "subject_alt_name")
TLS_SAN_TYPES = ("dns", "email", "uri", "ip")
TLS_VERSIONS = {"tlsv1.2": ssl.TLSVersion.TLSv1_2, "tlsv1.3": ssl.TLSVersion.TLSv1_3}


def parse_tls_versions(names) -> tuple[ssl.TLSVersion, ssl.TLSVersion]:
    """(minimum, maximum) of RabbitMQ-style version names; ValueError for anything but
    tlsv1.2 and tlsv1.3."""
    names = tuple(n.strip().lower() for n in names)
    if not names:
        raise ValueError("tls-versions is empty: give tlsv1.2, tlsv1.3 or both")
    bad = [n for n in names if n not in TLS_VERSIONS]
    if bad:
        raise ValueError(f"tls-versions may hold only tlsv1.2 and tlsv1.3, not {', '.join(bad)}")
    versions = sorted(TLS_VERSIONS[n] for n in names)
    return versions[0], versions[-1]

@dataclass
class Config:
    host: str = "127.0.0.1"
    port: int = 5672
    data_dir: Path = Path("data")
    heartbeat: int = 60  # seconds the server proposes in connection.tune (RabbitMQ: 60)
    frame_max: int = FRAME_MAX_DEFAULT
    channel_max: int = CHANNEL_MAX_DEFAULT
    max_message_size: int = MAX_MESSAGE_SIZE
    handshake_timeout: float = 10.0  # seconds from accept to connection.open-ok (RabbitMQ: 10)
    # Limits and abuse (warren/server/limits.py, warren/broker/limits.py,
    # warren/access/login_throttle.py; the table in docs/security.md). 0 = no limit where
    # RabbitMQ's default is infinity.
    connection_max: int = 0  # open connections on this node (RabbitMQ's connection_max)
    consumer_max_per_channel: int = 0  # consumers on one channel (RabbitMQ's consumer_max_per_channel)
    # sockets at once that have not reached connection.open-ok; more are closed at accept.
    # None: a quarter of the open-file limit, at most 4096 (RabbitMQ has no such limit); 0 = off
    max_unauthenticated_connections: int | None = None
    # octets written to one client and not yet taken by it; past this the client is closed
    # (a consumer or a reader of returns that stopped reading); never less than one message
    # of max_message_size plus 1 MiB (warren/server/limits.py, output_bound)
    max_output_buffer: int = 256 * 1024 * 1024
    # users that may only log in from a loopback address (RabbitMQ's loopback_users; () = none)
    loopback_users: tuple[str, ...] = ("guest",)
    # failed logins per source address: after a few, each answer waits login_failure_delay
    # seconds; at login_failure_limit failures within login_block_time seconds the address is
    # refused for login_block_time seconds (0 turns each off); loopback addresses are exempt
    # unless login_throttle_loopback (as fail2ban's ignoreip)
    login_failure_delay: float = 1.0
    login_failure_limit: int = 10
    login_block_time: float = 60.0
    login_throttle_loopback: bool = False
    # AMQP 0-10's ANONYMOUS login (Qpid's clients offer it): off unless this names the user it
    # logs in as (docs/versions.md)
    anonymous_user: str | None = None
    # the SASL mechanisms offered, in this order, by every protocol's handshake (RabbitMQ's
    # auth_mechanisms), each only where the connection can use it (warren/access/login.py
    # ``mechanisms_offered``). The default offers what Warren always has; PLAIN,AMQPLAIN is
    # RabbitMQ 3.10's default, which never offers EXTERNAL
    auth_mechanisms: tuple[str, ...] = AUTH_MECHANISMS
    # milliseconds a delivery may stay unacked before its channel is closed with 406 (RabbitMQ's
    # consumer_timeout, default 30 min; 0 = off; warren/broker/consumer_timeout.py)
    consumer_timeout: int = 1_800_000
    shutdown_timeout: float = 5.0  # seconds to wait for close-ok from clients on shutdown
    loop: str = "auto"
    # fsync before confirming persistent messages (group commit). False trades the power-cut
    # guarantee for speed: a killed process still loses nothing that was confirmed.
    fsync: bool = True
    # octets of queued messages in memory before queues page to disk (0 = never page); None:
    # half the memory watermark, at most a fifth of RAM (paging_budget, docs/flow-control.md)
    memory_budget: int | None = None
    # block publishers when Warren's memory passes this: a fraction of RAM (< 1) or octets
    memory_high_watermark: float = 0.4
    disk_free_limit: int = 50 * 1024 * 1024  # block publishers below this many free octets (0 = off)
    # flow control (warren/broker/queues/flow_marks.py): publishers of a consumed queue over these marks
    # are not read until it drains to half of them (0 = that mark is off)
    queue_flow_high: int = FLOW_HIGH  # ready messages
    queue_flow_high_bytes: int = FLOW_HIGH_BYTES  # octets of ready message bodies
    # runs of publishes (warren/protocol/amqp0_9_1/adapter.py; docs/performance.md, "Runs of
    # publishes"): None takes consecutive publishes as one run once a channel of the connection
    # selects confirms, and from reads of 64 KiB or more while the broker is behind two
    # connections or more; True on every connection from the start; False never
    publish_runs: bool | None = None
    # at the end of a loop turn that read little and confirmed publishes, give the core to a
    # thread waiting for it (warren/server/pacing.py)
    yield_after_confirms: bool = True
    ready_file: Path | None = None  # written (JSON with the port) once listening; for tests
    http_port: int = 15672  # the HTTP API (warren/management): 0 = ephemeral, -1 = off
    http_host: str | None = None  # None: the same address as the AMQP listener
    # Prometheus metrics (warren/metrics, docs/metrics.md): RabbitMQ's port is 15692; off unless
    # given, as RabbitMQ's rabbitmq_prometheus plugin is (0 = ephemeral, -1 = off)
    prometheus_port: int = -1
    prometheus_host: str | None = None  # None: the HTTP API's address
    # limits of the HTTP port (warren/http/limits.py)
    http_header_timeout: float = 10.0  # seconds for a request's line and headers
    http_body_timeout: float = 30.0  # seconds for a request's body
    http_max_header_size: int = 16 * 1024  # octets of request line and headers (431 above)
    http_max_body_size: int = 20 * 1024 * 1024  # octets of request body (413 above; RabbitMQ: 20 MiB)
    log_level: str = "info"
    log_format: str = "text"  # text, or json: one object per line (warren/server/logs.py)
    log_file: Path | None = None  # append the log here instead of stderr; reopened on SIGHUP (logrotate)
    # the user a new data folder gets instead of guest/guest (RabbitMQ's default_user/default_pass)
    default_user: str | None = None
    default_pass: str | None = None
    # Both cores (warren/server/workers.py): with workers > 1 this process accepts connections
    # and hands each to the worker process that owns its virtual host.
    workers: int = 1
    # what a worker owns: whole vhosts, or (experimental, warren/spread) some queues of every vhost
    worker_mode: str = "vhosts"
    vhosts: tuple[str, ...] = ("/",)
    # set by the supervisor for its workers only
    handoff_socket: Path | None = None  # take connections from the supervisor here, no TCP listener
    # --worker-mode queues: this worker's number and its links to the others ("PEER:FD", warren/spread)
    worker_index: int = 0
    worker_placement: int = 2  # the data folder's rule for who owns a queue (warren/broker/ownership.py)
    peer_fds: tuple[str, ...] = ()
    policy_file: Path | None = None  # None: policies.json in the data folder
    access_file: Path | None = None  # None: access.json in the data folder (workers: the supervisor's)
    # the node's global runtime parameters shared by the workers (management/parameters.py);
    # None: in parameters.json with the rest
    global_parameters_file: Path | None = None
    # a definitions file (RabbitMQ's JSON) imported at start-up, as RabbitMQ's load_definitions
    definitions: Path | None = None
    # TLS (warren/server/tls.py, docs/security.md). AMQP over TLS listens on tls_port (RabbitMQ's
    # amqps port is 5671; -1 = off, 0 = ephemeral), beside the plain port (port -1 turns it off).
    tls_port: int = -1
    tls_cert: Path | None = None  # the server's PEM certificate (chain: leaf first)
    tls_key: Path | None = None  # its PEM private key, unencrypted (None: in tls_cert)
    tls_ca: Path | None = None  # PEM CA certificates that client certificates must chain to
    # none: no client certificate asked; peer: verify_peer (a certificate, if sent, must verify);
    # require: verify_peer + fail_if_no_peer_cert (no certificate, no connection)
    tls_verify: str = "none"
    tls_versions: tuple[str, ...] = ("tlsv1.2", "tlsv1.3")  # TLS 1.2 and 1.3 only
    tls_ciphers: str | None = None  # OpenSSL cipher list for TLS 1.2 (None: Python's secure default)
    http_tls: bool = False  # HTTPS on the HTTP API (and metrics) port, with tls_cert/tls_key
    # the SASL EXTERNAL login (certificate login): which part of the client certificate is the
    # user name, with RabbitMQ's ssl_cert_login_from / _san_type / _san_index values
    tls_login_from: str = "common_name"
    tls_login_san_type: str = "dns"
    tls_login_san_index: int = 0

    # A cluster on etcd (warren/cluster, docs/clustering.md): the etcd members' client URLs
    # (empty: a single node, and warren.cluster is never imported), this node's name in the
    # cluster, the cluster's name (its keys live under /warren/<cluster_name>/), a file holding
    # the cluster secret (mode 0600; None: the node that creates the cluster makes one and keeps
    # it in etcd), and the TTL in seconds of the lease that holds this node's membership
    cluster_etcd: tuple[str, ...] = ()
    node_name: str | None = None
    cluster_name: str = "warren"
    cluster_secret_file: Path | None = None
    cluster_lease_ttl: int = 10
    # the inter-node links' port (warren/cluster/links.py; 0: any free one, announced in etcd)
    cluster_port: int = 0
    # where the other nodes dial this one, HOST:PORT, when not the cluster port itself: a NAT, a
    # proxy in front of it (the fault harness of tests/cluster/faults puts one there); None: the
    # host and the cluster port
    cluster_advertise: str | None = None
    # TLS on the inter-node links, with tls_cert/tls_key and tls_ca: each node presents its
    # certificate and verifies the other's against tls_ca (warren/server/tls.py node_link_contexts)
    cluster_tls: bool = False
    # where a new queue is placed in a cluster (RabbitMQ's queue_leader_locator): client-local
    # (the node the client is connected to), balanced (the running node with the fewest queues),
    # or a node's name (Warren's: every new queue on that node while it runs); a queue's
    # x-queue-leader-locator (or 3.x's x-queue-master-locator) argument chooses for itself
    queue_leader_locator: str = "client-local"

    def _validate_cluster(self) -> None:
        if isinstance(self.cluster_etcd, str):  # the command line's "http://a:2379,http://b:2379"
            self.cluster_etcd = tuple(u.strip() for u in self.cluster_etcd.split(",") if u.strip())
        self.cluster_etcd = tuple(self.cluster_etcd)
        if not self.cluster_etcd:
            if self.node_name is not None or self.cluster_secret_file is not None:
                raise ValueError("node-name and cluster-secret-file need cluster-etcd (the etcd members' URLs)")
            return
        bad = [u for u in self.cluster_etcd if not CLUSTER_URL.fullmatch(u)]
        if bad:
            raise ValueError(f"cluster-etcd takes http://HOST:PORT URLs of etcd members, not {', '.join(bad)}")
        if self.node_name is None:
            raise ValueError("cluster-etcd needs node-name (this node's name in the cluster)")
        if not NODE_NAME.fullmatch(self.node_name):
            raise ValueError(f"node-name {self.node_name!r} must be NAME or NAME@HOST, each 1 to 64 letters, "
                             "digits, '.', '_' or '-'")
        if not CLUSTER_NAME.fullmatch(self.cluster_name):
            raise ValueError(f"cluster-name {self.cluster_name!r} must be 1 to 64 letters, digits, '.', '_' or '-'")
        if not 0 <= self.cluster_port <= 65535:
            raise ValueError("cluster-port must be 0..65535")
        if self.cluster_advertise is not None:
            host, _, port = self.cluster_advertise.rpartition(":")
            if not host or not port.isdigit() or not 0 < int(port) <= 65535:
                raise ValueError(f"cluster-advertise takes HOST:PORT, not {self.cluster_advertise!r}")
        if self.cluster_tls and (self.tls_cert is None or self.tls_ca is None):
            raise ValueError("cluster-tls needs tls-cert (this node's certificate, tls-key if apart) and tls-ca "
                             "(the CA the other nodes' certificates chain to)")
        if not 2 <= self.cluster_lease_ttl <= 300:
            raise ValueError("cluster-lease-ttl must be 2..300 seconds")
        if self.workers > 1:
            raise ValueError("cluster-etcd does not run with workers > 1 yet (docs/clustering.md)")
        if not self.queue_leader_locator:
            raise ValueError("queue-leader-locator must be client-local, balanced or a node's name")
        if self.cluster_secret_file is not None:
            self.cluster_secret_file = Path(self.cluster_secret_file)

    def _validate_tls(self) -> None:
        if not -1 <= self.tls_port <= 65535:
            raise ValueError(f"tls port {self.tls_port} out of range (-1 = off)")
        if self.port < 0 and self.tls_port < 0 and self.handoff_socket is None:
            raise ValueError("no AMQP listener: port -1 turns plain AMQP off, so give a tls-port")
        if (self.tls_port >= 0 or self.http_tls) and self.tls_cert is None:
            raise ValueError("tls-port and http-tls need tls-cert (and tls-key, unless the key is in that file)")
        if self.tls_verify not in TLS_VERIFY_MODES:
            raise ValueError(f"tls-verify must be one of {', '.join(TLS_VERIFY_MODES)}, not {self.tls_verify!r}")
        if self.tls_verify != "none" and self.tls_ca is None:
            raise ValueError(f"tls-verify {self.tls_verify} needs tls-ca (the CA that signs client certificates)")
        if isinstance(self.tls_versions, str):  # the command line's "tlsv1.2,tlsv1.3"
            self.tls_versions = tuple(v.strip() for v in self.tls_versions.split(",") if v.strip())
        self.tls_versions = tuple(self.tls_versions)
        parse_tls_versions(self.tls_versions)  # ValueError names what is not allowed
        if self.tls_login_from not in TLS_LOGIN_FROM:
            raise ValueError(f"tls-login-from must be one of {', '.join(TLS_LOGIN_FROM)}, not {self.tls_login_from!r}")
        if self.tls_login_san_type not in TLS_SAN_TYPES:
            raise ValueError(f"tls-login-san-type must be one of {', '.join(TLS_SAN_TYPES)}, "
                             f"not {self.tls_login_san_type!r}")
        if self.tls_login_san_index < 0:
            raise ValueError("tls-login-san-index must be 0 or more")

    def _validate_limits(self) -> None:
        if self.connection_max < 0 or self.consumer_max_per_channel < 0:
            raise ValueError("connection-max and consumer-max-per-channel must be 0 (no limit) or more")
        if self.max_unauthenticated_connections is not None and self.max_unauthenticated_connections < 0:
            raise ValueError("max-unauthenticated-connections must be 0 (off) or more")
        if not 1 <= self.max_message_size <= 512 * 1024 * 1024:
            raise ValueError("max-message-size must be 1..536870912 octets (512 MiB, RabbitMQ's ceiling)")
        if self.max_output_buffer < 1024 * 1024:
            raise ValueError("max-output-buffer must be at least 1 MiB (1048576)")
        if isinstance(self.loopback_users, str):  # the command line's "guest,admin"
            self.loopback_users = tuple(u.strip() for u in self.loopback_users.split(",") if u.strip())
        self.loopback_users = tuple(self.loopback_users)
        self._validate_auth_mechanisms()
        if self.login_failure_delay < 0 or self.login_failure_limit < 0 or self.login_block_time < 0:
            raise ValueError("login-failure-delay, login-failure-limit and login-block-time must be 0 (off) or more")
        if self.login_failure_delay >= self.handshake_timeout:
            raise ValueError("login-failure-delay must be shorter than handshake-timeout")

    def _validate_auth_mechanisms(self) -> None:
        if isinstance(self.auth_mechanisms, str):  # the command line's "PLAIN,AMQPLAIN"
            self.auth_mechanisms = tuple(m.strip() for m in self.auth_mechanisms.split(",") if m.strip())
        names = tuple(dict.fromkeys(str(m).upper() for m in self.auth_mechanisms))  # RabbitMQ's are upper case
        unknown = [m for m in names if m not in AUTH_MECHANISMS]
        if unknown:
            raise ValueError(f"auth-mechanisms: unknown mechanism {unknown[0]!r} "
                             f"(known: {', '.join(AUTH_MECHANISMS)})")
        if not names:
            raise ValueError(f"auth-mechanisms names no mechanism (known: {', '.join(AUTH_MECHANISMS)})")
        self.auth_mechanisms = names

    def paging_budget(self) -> int:
        """The memory budget in octets: as given, or below the watermark so queues page first."""
        if self.memory_budget is not None:
            return self.memory_budget
        return default_budget(self.memory_limit())

    def memory_limit(self) -> int:
        w = self.memory_high_watermark
        if w <= 0:
            return 0
        if w < 1:
            return int(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") * w)
        return int(w)

    def validate(self) -> "Config":
        if not -1 <= self.port <= 65535:
            raise ValueError(f"port {self.port} out of range (-1 = off)")
        self._validate_tls()
        if not -1 <= self.http_port <= 65535:
            raise ValueError(f"http port {self.http_port} out of range (-1 = off)")
        if not -1 <= self.prometheus_port <= 65535:
            raise ValueError(f"prometheus port {self.prometheus_port} out of range (-1 = off)")
        if self.frame_max and self.frame_max < 4096:
            raise ValueError("frame-max must be 0 or at least 4096 (frame-min-size)")
        if not 0 <= self.channel_max <= 65535:
            raise ValueError("channel-max must be 0..65535")
        if not 0 <= self.heartbeat <= 65535:
            raise ValueError("heartbeat must be 0..65535 seconds")
        if not (self.http_header_timeout > 0 and self.http_body_timeout > 0):
            raise ValueError("http header and body timeouts must be more than 0 seconds")
        if self.http_max_header_size < 1024 or self.http_max_body_size < 1:
            raise ValueError("http-max-header-size must be at least 1024 and http-max-body-size at least 1")
        if not 0 < self.handshake_timeout <= 3600:
            raise ValueError("handshake-timeout must be more than 0 and at most 3600 seconds")
        self._validate_limits()
        self._validate_cluster()
        if self.consumer_timeout < 0:
            raise ValueError("consumer-timeout must be 0 (off) or a number of milliseconds")
        if self.log_level not in LOG_LEVELS:
            raise ValueError(f"log-level must be one of {', '.join(LOG_LEVELS)}, not {self.log_level!r}")
        if self.log_format not in LOG_FORMATS:
            raise ValueError(f"log-format must be one of {', '.join(LOG_FORMATS)}, not {self.log_format!r}")
        if self.loop not in LOOPS:
            raise ValueError(f"loop must be one of {', '.join(LOOPS)}, not {self.loop!r}")
        if (self.default_user is None) != (self.default_pass is None):
            raise ValueError("default-user and default-pass go together: give both or neither")
        if not 1 <= self.workers <= 64:
            raise ValueError("workers must be 1..64")
        if self.worker_mode not in WORKER_MODES:
            raise ValueError(f"worker-mode must be one of {', '.join(WORKER_MODES)}, not {self.worker_mode!r}")
        self.peer_fds = tuple(self.peer_fds)
        if not self.vhosts or len(set(self.vhosts)) != len(self.vhosts):
            raise ValueError("vhosts must be given once each")
        self.vhosts = tuple(self.vhosts)
        self.data_dir = Path(self.data_dir)
        for name in ("tls_cert", "tls_key", "tls_ca"):
            if getattr(self, name) is not None:
                setattr(self, name, Path(getattr(self, name)))
        if self.log_file is not None:
            self.log_file = Path(self.log_file)
        return self
