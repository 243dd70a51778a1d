"""TLS for Warren's listeners: AMQP over TLS (amqps), HTTPS for the HTTP API, certificate logins.

Contexts. ``TlsContexts`` builds the server contexts from ``Config`` with the standard
library's ``ssl``: TLS 1.2 and 1.3 only (``tls_versions`` may narrow that, never widen it), the
cipher list of ``tls_ciphers`` for TLS 1.2 (TLS 1.3's suites are OpenSSL's, which Python cannot
set), no compression, no renegotiation. ``tls_verify`` maps RabbitMQ's settings: ``none`` asks
no client certificate (verify_none); ``peer`` asks for one and refuses one that does not chain
to ``tls_ca`` but accepts a client that sends none (verify_peer, fail_if_no_peer_cert=false);
``require`` refuses a client without a valid certificate (verify_peer +
fail_if_no_peer_cert=true). The HTTP port (``http_tls``) uses the same certificate and key and
never asks for a client certificate: API logins are passwords, as RabbitMQ's management
listener does by default.

Reloading (SIGHUP). ``reload`` builds new contexts from the same files; if that fails (a
missing file, a key that does not match) the old ones stay and the log says why. AMQP: every
TLS handshake takes the newest context (``TlsAmqpListener``), so new connections get the new
certificate and open ones keep the session they negotiated. HTTP: aiohttp's listener holds one
context for its life, so it gets a front context whose ``sni_callback`` (run by OpenSSL during
every ClientHello, with or without SNI) moves the new connection onto the newest context.

The AMQP listener accepts sockets itself and runs each handshake with
``connect_accepted_socket`` instead of passing ``ssl=`` to ``create_server``: asyncio and uvloop
drop a failed server-side handshake without a word, while an operator needs one line for a
plain client on the TLS port, a wrong CA or an expired certificate. The handshake has ``handshake_timeout`` seconds; the AMQP handshake that follows
has the same again (connection.py).

TLS and ``--workers``. The supervisor hands an accepted socket to a worker process with
SCM_RIGHTS after connection.open (workers.py). A TLS session cannot follow: its keys and
record sequence numbers live inside the supervisor's OpenSSL objects, and Python's ``ssl``
cannot export them (kernel TLS offload would be the only way, and is not in ``ssl``). So the
supervisor keeps TLS connections and relays their plaintext to the workers (relay.py), and
the worker learns the session from the hand-over (``TlsSession``).

Certificate login (SASL EXTERNAL, RabbitMQ's rabbitmq_auth_mechanism_ssl): usable only on a
TLS connection whose client sent a certificate that verified (``TlsSession.mechanisms``), and
offered there when ``auth_mechanisms`` names it, as it does by default (the handshake,
warren/server/handshake.py); the user name comes from the certificate as ``tls_login_from`` says
(``login_name``), and the login checks that the user exists (warren/access/login.py).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import socket
import ssl
from dataclasses import dataclass
from pathlib import Path

from warren.access.login import MECHANISMS, MECHANISMS_WITH_EXTERNAL
from warren.config import parse_tls_versions

__all__ = ["node_link_contexts", "TlsContexts", "TlsError", "TlsAmqpListener", "CertificateLogin", "login_name", "distinguished_name", "TlsSession",
           "session_of"]

log = logging.getLogger("warren.tls")

# how Python's getpeercert() names each of the ssl_cert_login_san_type values (warren/config.py)
_SAN_KEYS = {"dns": "DNS", "email": "email", "uri": "URI", "ip": "IP Address"}
# RFC 4514 short names of subject attributes (others keep the name OpenSSL gives them)
_SHORT_NAMES = {"commonName": "CN", "countryName": "C", "localityName": "L", "stateOrProvinceName": "ST",
                "organizationName": "O", "organizationalUnitName": "OU", "streetAddress": "STREET",
                "domainComponent": "DC", "userId": "UID"}


class TlsError(Exception):
    """A TLS context cannot be made (a file missing or unreadable, a key that does not match
    its certificate, a bad cipher list); ``str()`` is one line for the operator."""


def _load_chain(ctx: ssl.SSLContext, cert: Path, key: Path | None) -> None:
    def refuse_password():  # never let OpenSSL prompt on a terminal (a daemon, a SIGHUP)
        raise TlsError(f"the TLS key {key or cert} is encrypted: Warren needs an unencrypted key file "
                       "(readable by its user only)")
    try:
        ctx.load_cert_chain(str(cert), str(key) if key is not None else None, password=refuse_password)
    except TlsError:
        raise
    except FileNotFoundError as e:
        raise TlsError(f"TLS certificate or key file not found: {e.filename}") from None
    except ssl.SSLError as e:
        raise TlsError(f"cannot load TLS certificate {cert} with key {key or cert}: "
                       f"{e.reason or e} (PEM files, and a key that matches the certificate?)") from None
    except OSError as e:
        raise TlsError(f"cannot read TLS certificate {cert} or key {key or cert}: {e.strerror or e}") from None


def build_context(config, *, client_certificates: bool = True) -> ssl.SSLContext:
    """A server context from ``config``'s TLS settings; TlsError says what is wrong.
    ``client_certificates=False`` (the HTTP port) never asks for a client certificate."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version, ctx.maximum_version = parse_tls_versions(config.tls_versions)
    ctx.options |= ssl.OP_NO_COMPRESSION | ssl.OP_NO_RENEGOTIATION
    if config.tls_ciphers:
        try:
            ctx.set_ciphers(config.tls_ciphers)
        except ssl.SSLError:
            raise TlsError(f"tls-ciphers {config.tls_ciphers!r} names no cipher OpenSSL knows") from None
    _load_chain(ctx, Path(config.tls_cert), Path(config.tls_key) if config.tls_key else None)
    if client_certificates and config.tls_verify != "none":
        try:
            ctx.load_verify_locations(cafile=str(config.tls_ca))
        except FileNotFoundError:
            raise TlsError(f"TLS CA file not found: {config.tls_ca}") from None
        except (ssl.SSLError, OSError) as e:
            raise TlsError(f"cannot load TLS CA file {config.tls_ca}: {getattr(e, 'reason', None) or e}") from None
        ctx.verify_mode = ssl.CERT_REQUIRED if config.tls_verify == "require" else ssl.CERT_OPTIONAL
    return ctx


def node_link_contexts(config) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """The inter-node links' contexts (``--cluster-tls``, warren/cluster/links.py): as listener
    and as dialler, each presenting the node's certificate and requiring the other's to chain
    to ``tls_ca``; the dialler checks the name it dialled (an address: an IP SAN) too."""
    listener = build_context(config, client_certificates=False)
    dialler = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    dialler.minimum_version, dialler.maximum_version = listener.minimum_version, listener.maximum_version
    _load_chain(dialler, Path(config.tls_cert), Path(config.tls_key) if config.tls_key else None)
    for ctx in (listener, dialler):
        try:
            ctx.load_verify_locations(cafile=str(config.tls_ca))
        except (ssl.SSLError, OSError) as e:
            raise TlsError(f"cannot load TLS CA file {config.tls_ca}: {getattr(e, 'reason', None) or e}") from None
        ctx.verify_mode = ssl.CERT_REQUIRED
    return listener, dialler


class TlsContexts:
    """The current contexts of the AMQP TLS port (``amqp``) and the HTTPS port (``http``), and
    ``reload`` for SIGHUP. Built at start-up: a TlsError there stops the start."""

    def __init__(self, config) -> None:
        self.config = config
        self.amqp: ssl.SSLContext | None = build_context(config) if config.tls_port >= 0 else None
        self.http: ssl.SSLContext | None = None
        self._http_front: ssl.SSLContext | None = None
        if config.http_tls:
            self.http = self._http_front = build_context(config, client_certificates=False)
            self._http_front.sni_callback = self._newest_http_context

    @property
    def enabled(self) -> bool:
        return self.amqp is not None or self.http is not None

    def http_server_context(self) -> ssl.SSLContext | None:
        """The context to give an HTTPS listener (the API's; the metrics port's too) for its life:
        each new connection is moved onto the newest context (reload)."""
        return self._http_front

    def _newest_http_context(self, ssl_object, server_name, context) -> None:
        newest = self.http
        if newest is not None and newest is not context:
            ssl_object.context = newest  # the certificate and key reloaded on SIGHUP
        return None  # go on with the handshake

    def reload(self) -> bool:
        """Read the certificate, key and CA files again (SIGHUP). New connections use them, open
        ones keep theirs; on failure the old contexts stay and the log says why."""
        if not self.enabled:
            return False
        try:
            amqp = build_context(self.config) if self.amqp is not None else None
            http = build_context(self.config, client_certificates=False) if self.http is not None else None
        except TlsError as e:
            log.error("TLS certificates NOT reloaded (SIGHUP), the previous ones stay in use: %s", e)
            return False
        if amqp is not None:
            self.amqp = amqp
        if http is not None:
            self.http = http
        log.info("TLS certificates reloaded (SIGHUP) from %s: new connections use them", self.config.tls_cert)
        return True


# --- certificate logins ---------------------------------------------------------------------


@dataclass(frozen=True)
class CertificateLogin:
    """What a verified client certificate offers the EXTERNAL login: the user ``name``, or
    None with ``error`` saying why the certificate gives none (no CN, no such SAN)."""

    name: str | None
    error: str | None = None


def _escape_dn_value(value: str) -> str:
    """RFC 4514 escaping of an attribute value."""
    out = []
    for i, ch in enumerate(value):
        if ch in ',+"\\<>;' or (ch == "#" and i == 0) or (ch == " " and i in (0, len(value) - 1)):
            out.append("\\" + ch)
        elif ch == "\x00":
            out.append("\\00")
        else:
            out.append(ch)
    return "".join(out)


def distinguished_name(subject) -> str:
    """The RFC 4514 string of a ``getpeercert()`` subject ("CN=alice,O=Example,C=GB": the last
    RDN first, as OpenSSL's -nameopt RFC2253 and RabbitMQ's distinguished_name login print it)."""
    rdns = []
    for rdn in reversed(subject):
        rdns.append("+".join(f"{_SHORT_NAMES.get(k, k)}={_escape_dn_value(v)}" for k, v in rdn))
    return ",".join(rdns)


def login_name(cert: dict, login_from: str = "common_name", san_type: str = "dns", san_index: int = 0) -> CertificateLogin:
    """The user name a verified client certificate (``getpeercert()``) gives, as RabbitMQ's
    ``ssl_cert_login_from`` says: ``common_name`` (several CNs are joined with ","),
    ``distinguished_name`` (RFC 4514), ``subject_alternative_name`` (the ``san_index``-th SAN
    of ``san_type``, counting from 0)."""
    subject = cert.get("subject", ())
    if login_from == "common_name":
        names = [v for rdn in subject for k, v in rdn if k == "commonName"]
        if not names:
            return CertificateLogin(None, "the client certificate has no common name (CN)")
        return CertificateLogin(",".join(names))
    if login_from == "distinguished_name":
        if not subject:
            return CertificateLogin(None, "the client certificate has an empty subject")
        return CertificateLogin(distinguished_name(subject))
    if login_from in ("subject_alternative_name", "subject_alt_name"):
        key = _SAN_KEYS[san_type]
        values = [v for k, v in cert.get("subjectAltName", ()) if k == key]
        if san_index >= len(values):
            return CertificateLogin(None, f"the client certificate has {len(values)} {san_type} subject "
                                          f"alternative name(s), none at index {san_index}")
        return CertificateLogin(values[san_index])
    raise ValueError(f"unknown tls-login-from {login_from!r}")


@dataclass(frozen=True)
class TlsSession:
    """What a connection's TLS session shows the broker: the HTTP API's ``ssl`` columns and the
    EXTERNAL login. Read where the TLS ends (``session_of``): in the connection's own process,
    or in a --workers supervisor, which sends it to the worker with the hand-over (relay.py)."""

    protocol: str  # "TLSv1.3"
    cipher: str  # OpenSSL's name of the cipher suite
    login: CertificateLogin | None  # None: no verified client certificate (no EXTERNAL)

    @property
    def mechanisms(self) -> bytes:
        """The SASL mechanisms this session allows, EXTERNAL only with a verified certificate;
        the handshake offers those of them ``auth_mechanisms`` names (warren/access/login.py)."""
        return MECHANISMS_WITH_EXTERNAL if self.login is not None else MECHANISMS

    def to_record(self) -> dict:
        login = None if self.login is None else [self.login.name, self.login.error]
        return {"protocol": self.protocol, "cipher": self.cipher, "login": login}

    @classmethod
    def from_record(cls, record: dict) -> "TlsSession":
        login = record.get("login")
        return cls(str(record["protocol"]), str(record["cipher"]),
                   None if login is None else CertificateLogin(login[0], login[1]))


def session_of(transport, config) -> TlsSession | None:
    """The TLS session of a new connection's transport, None if it is plain. A client
    certificate counts only when it verified (a context with tls_verify none asks for none,
    and getpeercert() then gives nothing)."""
    ssl_object = transport.get_extra_info("ssl_object") if transport is not None else None
    if ssl_object is None:
        return None
    cert = ssl_object.getpeercert()
    login = login_name(cert, config.tls_login_from, config.tls_login_san_type,
                       config.tls_login_san_index) if cert else None
    cipher = ssl_object.cipher()
    return TlsSession(ssl_object.version() or "", cipher[0] if cipher else "", login)


# --- the AMQP TLS listener ------------------------------------------------------------------


def describe_handshake_error(exc: BaseException) -> str:
    """One line on why a TLS handshake failed, with a hint where the cause is common."""
    if isinstance(exc, ssl.SSLCertVerificationError):
        return f"client certificate refused: {exc.verify_message}"
    if isinstance(exc, ssl.SSLError):
        reason = exc.reason or ""
        text = exc.strerror or str(exc)
        if reason in ("WRONG_VERSION_NUMBER", "HTTP_REQUEST", "UNKNOWN_PROTOCOL", "PACKET_LENGTH_TOO_LONG",
                      "RECORD_LAYER_FAILURE"):
            return f"not a TLS client ({text}): a plain AMQP or HTTP client on the TLS port?"
        if reason == "UNSUPPORTED_PROTOCOL":
            return f"the client offers no TLS version allowed here ({text}; tls-versions)"
        if reason == "PEER_DID_NOT_RETURN_A_CERTIFICATE":
            return "the client sent no certificate, and tls-verify is require"
        if reason.startswith("TLSV1_ALERT_") or reason.startswith("SSLV3_ALERT_"):
            return f"the client refused the handshake ({text}): does it trust the CA of our certificate?"
        return text
    if isinstance(exc, ConnectionAbortedError) and "handshake" in str(exc):
        return f"no TLS handshake within the time limit ({exc})"
    if isinstance(exc, (ConnectionResetError, BrokenPipeError)):
        return "the client closed the socket during the handshake"
    return f"{exc.__class__.__name__}: {exc}"


def _peer_text(peer) -> str:
    if isinstance(peer, tuple) and len(peer) >= 2:
        host, port = peer[:2]
        return f"[{host}]:{port}" if ":" in str(host) else f"{host}:{port}"
    return str(peer or "?")


class TlsAmqpListener:
    """AMQP over TLS: accepts TCP connections, runs each TLS handshake with the newest context,
    and connects the TLS transport to a new ``protocol_factory()`` (an AMQPConnection).

    The accept loop is ours (``sock_accept``, then ``connect_accepted_socket`` per socket) rather
    than ``create_server(ssl=...)``, so that a failed handshake raises here, where the peer's
    address is known, and gets its log line."""

    def __init__(self, loop, contexts: TlsContexts, protocol_factory, handshake_timeout: float) -> None:
        self.loop = loop
        self.contexts = contexts
        self.protocol_factory = protocol_factory
        self.handshake_timeout = handshake_timeout
        self.pending: set[asyncio.Task] = set()  # handshakes still running
        self.closed = False
        self._sock: socket.socket | None = None
        self._accepting: asyncio.Task | None = None

    async def start(self, host: str, port: int, serve: bool = True) -> int:
        """Listen on host:port (0 = ephemeral); returns the port bound. OSError if it cannot.
        With ``serve`` False nobody is accepted until ``serve()`` (a --workers supervisor binds
        before its workers start, so that they know the port, and serves once they are up)."""
        # the first address the host name gives (the plain port's create_server binds them all)
        family, kind, proto, _, address = socket.getaddrinfo(host or None, port, socket.AF_UNSPEC, socket.SOCK_STREAM,
                                                             0, socket.AI_PASSIVE)[0]
        sock = socket.socket(family, kind, proto)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(address)
            sock.listen(1024)
            sock.setblocking(False)
        except BaseException:
            sock.close()
            raise
        self._sock = sock
        if serve:
            self.serve()
        return sock.getsockname()[1]

    def serve(self) -> None:
        self._accepting = self.loop.create_task(self._accept_loop())

    async def _accept_loop(self) -> None:
        while not self.closed:
            try:
                conn, peer = await self.loop.sock_accept(self._sock)
            except asyncio.CancelledError:
                raise
            except OSError as e:  # out of descriptors, say: say so, breathe, go on
                if self.closed:
                    return
                log.error("cannot accept on the AMQP TLS port: %s", e.strerror or e)
                await asyncio.sleep(0.1)
                continue
            task = self.loop.create_task(self._handshake(conn, peer))
            self.pending.add(task)
            task.add_done_callback(functools.partial(self._settled, conn))

    def _settled(self, sock: socket.socket, task: asyncio.Task) -> None:
        self.pending.discard(task)
        # a task cancelled before its first step never ran _handshake's own clean-up
        if task.cancelled():
            sock.close()

    async def _handshake(self, sock: socket.socket, peer) -> None:
        try:
            await self.loop.connect_accepted_socket(
                self.protocol_factory, sock, ssl=self.contexts.amqp,  # the newest context (reload)
                ssl_handshake_timeout=self.handshake_timeout)
        except asyncio.CancelledError:
            sock.close()
            raise
        except Exception as e:  # whatever the client did: one line, and nothing else disturbed
            log.warning("TLS handshake with %s failed: %s", _peer_text(peer), describe_handshake_error(e),
                        extra={"event": "tls.handshake_failed", "peer": _peer_text(peer)})
            sock.close()

    def close(self) -> None:
        """Stop accepting, and abort the handshakes still running."""
        self.closed = True
        if self._accepting is not None:
            self._accepting.cancel()
        for task in list(self.pending):
            task.cancel()

    async def wait_closed(self) -> None:
        tasks = [t for t in (self._accepting, *self.pending) if t is not None]
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        if self._sock is not None:  # after the accept has let go of it
            self._sock.close()
            self._sock = None
