"""AMQP 0-9-1 URIs parsed as RabbitMQ parses them (its URI spec and query parameters).

    amqp://user:pass@host:port/vhost?heartbeat=10&connection_timeout=5000

* scheme ``amqp`` (port 5672) or ``amqps`` (TLS, port 5671); user, password and vhost are
  percent-decoded (``%2F`` is ``/``); without user info the user is ``guest``/``guest``;
* the vhost is the path after the first ``/``: none (``amqp://host``) is ``/``, an empty one
  (``amqp://host/``) is the empty name, a second unescaped ``/`` is an error;
* an **empty host** (``amqp://``, ``amqp:///vhost``) is RabbitMQ's direct connection to the
  local node: Warren connects to its own AMQP port over loopback (``Endpoint.local``), as the
  URI's user or, without one, the node's default user (docs/federation.md);
* query parameters: ``heartbeat`` (s), ``connection_timeout`` (ms), ``channel_max``,
  ``frame_max``, ``auth_mechanism`` (``plain``/``amqplain``; ``external`` is refused), and for
  ``amqps`` ``cacertfile``, ``certfile``, ``keyfile``, ``verify`` (``verify_peer``/``verify_none``),
  ``server_name_indication``. Unknown parameters are refused, as RabbitMQ does.

``Endpoint.redacted`` is the URI without its user info, as RabbitMQ shows it in shovel and link
status (``amqp://127.0.0.1/vh``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import parse_qsl, unquote

__all__ = ["Endpoint", "UriError", "parse_uri", "parse_uris"]

DEFAULT_PORTS = {"amqp": 5672, "amqps": 5671}
DEFAULT_HEARTBEAT_S = 10  # RabbitMQ's Erlang client's default for shovels and federation links
DEFAULT_CONNECT_TIMEOUT_S = 30.0
_QUERY = ("heartbeat", "connection_timeout", "channel_max", "frame_max", "auth_mechanism", "cacertfile",
          "certfile", "keyfile", "verify", "server_name_indication", "fail_if_no_peer_cert", "password")


class UriError(ValueError):
    """A URI RabbitMQ would refuse; the message says why."""


@dataclass(frozen=True)
class Endpoint:
    uri: str  # as given (with its password: never logged nor shown)
    scheme: str
    host: str  # "" for the local broker
    port: int
    username: str | None  # None: not given (guest for a remote broker, the default user locally)
    password: str | None
    vhost: str
    heartbeat: int = DEFAULT_HEARTBEAT_S
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT_S
    channel_max: int = 0
    frame_max: int = 0
    mechanism: str = "PLAIN"
    tls: dict = field(default_factory=dict)

    @property
    def local(self) -> bool:
        return self.host == ""

    @property
    def redacted(self) -> str:
        """The URI as given without its user info (what status shows, as RabbitMQ's)."""
        return _without_userinfo(self.uri)


def parse_uris(value, what: str = "uri") -> list[Endpoint]:
    """A string or a non-empty list of strings (a shovel's ``src-uri``, an upstream's ``uri``)."""
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value:
        raise UriError(f"{what} must be a URI or a non-empty list of URIs")
    return [parse_uri(v) for v in value]


def parse_uri(uri) -> Endpoint:
    if not isinstance(uri, str):
        raise UriError(f"a URI must be a string, got {uri!r}")
    scheme, sep, rest = uri.partition("://")
    scheme = scheme.lower()
    if not sep or scheme not in DEFAULT_PORTS:
        raise UriError(f"{_safe(uri)}: the scheme must be amqp:// or amqps://")
    rest, _, query = rest.partition("?")
    authority, slash, path = rest.partition("/")
    userinfo, at, hostport = authority.rpartition("@")
    if not at:
        userinfo, hostport = "", authority
    username = password = None
    if at:
        user, colon, pw = userinfo.partition(":")
        username = unquote(user)
        password = unquote(pw) if colon else ""
    host, port = _host_port(hostport, scheme, uri)
    if not slash:
        vhost = "/"
    else:
        if "/" in path:
            raise UriError(f"{_safe(uri)}: the vhost must be one path segment (escape '/' as %2F)")
        vhost = unquote(path)
    ep = dict(uri=uri, scheme=scheme, host=host, port=port, username=username, password=password, vhost=vhost)
    tls: dict = {}
    for key, value in parse_qsl(query, keep_blank_values=True):
        if key not in _QUERY:
            raise UriError(f"{_safe(uri)}: unknown URI parameter '{key}'")
        if key == "heartbeat":
            ep["heartbeat"] = _int(value, key, uri)
        elif key == "connection_timeout":
            ep["connect_timeout"] = _int(value, key, uri) / 1000
        elif key in ("channel_max", "frame_max"):
            ep[key] = _int(value, key, uri)
        elif key == "auth_mechanism":
            mech = value.split(":")[-1].upper().replace("AMQP_AUTH_MECHANISMS_", "")
            if mech not in ("PLAIN", "AMQPLAIN"):
                raise UriError(f"{_safe(uri)}: auth_mechanism {value!r} is not supported (plain, amqplain)")
            ep["mechanism"] = mech
        elif key != "password":
            tls[key] = value
    if tls and scheme != "amqps":
        raise UriError(f"{_safe(uri)}: TLS parameters need an amqps:// URI")
    return Endpoint(**ep, tls=tls)


def _host_port(hostport: str, scheme: str, uri: str) -> tuple[str, int]:
    port = DEFAULT_PORTS[scheme]
    if hostport.startswith("["):  # [IPv6]:port
        end = hostport.find("]")
        if end < 0:
            raise UriError(f"{_safe(uri)}: unterminated IPv6 address")
        host, rest = hostport[1:end], hostport[end + 1:]
        if rest:
            if not rest.startswith(":"):
                raise UriError(f"{_safe(uri)}: garbage after the IPv6 address")
            port = _port(rest[1:], uri)
        return host, port
    host, colon, p = hostport.partition(":")
    if colon:
        port = _port(p, uri)
    return unquote(host), port


def _port(text: str, uri: str) -> int:
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise UriError(f"{_safe(uri)}: invalid port {text!r}")
    return int(text)


def _int(text: str, key: str, uri: str) -> int:
    if not text.isdigit():
        raise UriError(f"{_safe(uri)}: {key} must be a non-negative integer, got {text!r}")
    return int(text)


def _without_userinfo(uri: str) -> str:
    scheme, sep, rest = uri.partition("://")
    if not sep:
        return uri
    cut = min((i for i in (rest.find("/"), rest.find("?")) if i >= 0), default=len(rest))
    authority = rest[:cut].rpartition("@")[2]
    return f"{scheme}://{authority}{rest[cut:]}"


def _safe(uri: str) -> str:
    """A URI for an error message: without its password."""
    scheme, sep, rest = uri.partition("://")
    if not sep:
        return uri
    authority, slash, tail = rest.partition("/")
    userinfo, at, host = authority.rpartition("@")
    if at:
        user = userinfo.partition(":")[0]
        authority = f"{user}:***@{host}" if ":" in userinfo else f"{user}@{host}"
    return f"{scheme}://{authority}{slash}{tail}"
