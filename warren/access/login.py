"""Logging in and naming a vhost: the two checks of every connection's handshake, in one place.

The single-process server's protocol adapters (``warren/protocol/*/adapter.py``, through
``warren/broker/connection.py``) and the ``--workers`` supervisor's ``Greeter``
(``warren/server/workers.py``, which runs each handshake up to connection.open before a worker
replays it) both call these, so a login or a vhost is refused with the same reply, the same
reason in the log and the same login-throttle count whichever process answers:

* ``log_in``: the user a login names, for every protocol's mechanisms: PLAIN and AMQPLAIN (a
  password, ``parse_response``, checked by the user store behind the failed-login throttle,
  ``login_throttle.py``), EXTERNAL (the verified client certificate's user: ``certificate_user``),
  ANONYMOUS, or AMQP 1.0 without a SASL layer (only with ``--anonymous-user``, which names the
  user). A refusal is ``ConnectionAccessRefused`` with RabbitMQ's generic text; the reason is its
  ``log_detail``, for the log only, and ``throttle_delay`` the seconds its answer waits.
* ``unknown_vhost``: the refusal of a vhost that does not exist (530 NOT_ALLOWED);
  ``vhost_of_hostname``: the vhost an AMQP 1.0 open names. The user's permission in the vhost
  and the connection limits are the broker's (``BrokerConnection.open_vhost``), checked in the
  process that serves the vhost.

The mechanisms offered: ``mechanisms_offered``, the node's ``auth_mechanisms`` (RabbitMQ's
setting of that name) narrowed to what one connection can use, which the handshake
(``warren/server/handshake.py`` ``protocol_connection``) puts in connection.start or
sasl-mechanisms; a login with another mechanism is refused here. Users, passwords and the password check are the user store's
(``control.AccessControl.authenticate``).
"""

from __future__ import annotations

from warren.access.errors import LoginRefused
from warren.access.users import is_loopback
from warren.errors import ConnectionAccessRefused, NotAllowed
from warren.spec.fields import FieldDecodeError, decode_shortstr, decode_value

__all__ = ["MECHANISMS", "MECHANISMS_WITH_EXTERNAL", "certificate_user", "check_certificate_login", "log_in",
           "mechanism_rows", "mechanisms_offered", "parse_response", "password_login", "refused", "unknown_vhost", "vhost_of_hostname"]

MECHANISMS = b"PLAIN AMQPLAIN"
# on a TLS connection whose client certificate verified (warren/server/tls.py): the certificate
# login, RabbitMQ's rabbitmq_auth_mechanism_ssl; last, so a client choosing the first it knows
# still picks a password mechanism
MECHANISMS_WITH_EXTERNAL = MECHANISMS + b" EXTERNAL"

# what each protocol family can log in with at all: 0-9-1 (and 0-8, 0-9) has no ANONYMOUS, 0-10
# no EXTERNAL, 1.0 no AMQPLAIN (a table is no SASL response a 1.0 client sends)
USABLE = {"0-9-1": ("PLAIN", "AMQPLAIN", "EXTERNAL"), "0-10": ("PLAIN", "AMQPLAIN", "ANONYMOUS"),
          "1.0": ("PLAIN", "ANONYMOUS", "EXTERNAL")}

# RabbitMQ's descriptions of its mechanisms, as GET /api/nodes shows them (auth_mechanisms)
DESCRIPTIONS = {"PLAIN": "SASL PLAIN authentication mechanism", "AMQPLAIN": "QPid AMQPLAIN mechanism",
                "ANONYMOUS": "SASL ANONYMOUS authentication mechanism",
                "EXTERNAL": "TLS peer verification-based authentication plugin. Used in combination with the "
                            "EXTERNAL SASL mechanism."}


def mechanisms_offered(configured, protocol: str, *, verified_certificate: bool, anonymous: bool) -> tuple[str, ...]:
    """The mechanisms a connection of ``protocol`` ("0-9-1", "0-10" or "1.0") is offered, in the
    order of ``configured`` (``Config.auth_mechanisms``): those the protocol can use, EXTERNAL
    only with ``verified_certificate`` (TLS whose client certificate verified), ANONYMOUS only
    when ``anonymous`` (--anonymous-user names its user). May be empty: then no login succeeds."""
    usable = USABLE[protocol]
    return tuple(m for m in configured if m in usable and (m != "EXTERNAL" or verified_certificate)
                 and (m != "ANONYMOUS" or anonymous))


def mechanism_rows(configured) -> list[dict]:
    """RabbitMQ's ``auth_mechanisms`` of a ``GET /api/nodes`` row: every mechanism Warren knows,
    ``enabled`` when ``configured`` (``Config.auth_mechanisms``) names it; those first, in its order."""
    names = list(configured) + [m for m in DESCRIPTIONS if m not in configured]
    return [{"name": m, "description": DESCRIPTIONS[m], "enabled": m in configured} for m in names]


def parse_response(mechanism: str, response: bytes) -> tuple[str, str]:
    """(username, password) from a start-ok response; ValueError if malformed or unknown.

    Nothing else escapes, whatever the octets (a hostile client chooses them before any login):
    an AMQPLAIN table cut short, an integer cut short or nested 5,000 deep is a ValueError
    (``FieldDecodeError``: decoding is bounded, warren/spec/fields.py), which the session
    answers 403 ACCESS_REFUSED as a failed login, the reason in the log only."""
    if mechanism == "PLAIN":
        parts = response.split(b"\x00")
        if len(parts) != 3:
            raise ValueError("PLAIN response is not authzid\\0user\\0password")
        return parts[1].decode("utf-8"), parts[2].decode("utf-8")
    if mechanism == "AMQPLAIN":
        # a field table's entries without the table's own length prefix (INVENTORY.md §3.5)
        fields: dict = {}
        off = 0
        try:
            while off < len(response):
                name, off = decode_shortstr(response, off)
                value, off = decode_value(response, off)
                fields[name] = value
        except FieldDecodeError as e:
            raise ValueError(f"malformed AMQPLAIN response: {e}") from None
        login, password = fields.get("LOGIN"), fields.get("PASSWORD")
        if not isinstance(login, str) or not isinstance(password, str):
            raise ValueError("AMQPLAIN response lacks LOGIN or PASSWORD")
        return login, password
    raise ValueError(f"unsupported mechanism {mechanism!r}")


def check_certificate_login(access, username: str, peer_host: str | None):
    """The user an EXTERNAL (certificate) login names, from the user store ``access``
    (warren/access), else ``LoginRefused`` with the reason. The certificate has been verified
    already; no password is checked, so users without a password log in this way only. A
    loopback-only user (``loopback_users``) is refused from a remote address, as RabbitMQ
    checks that rule for every mechanism."""
    user = access.user(username)
    if user is None:
        raise LoginRefused(username, LoginRefused.UNKNOWN_USER)
    if username in access.loopback_users and not is_loopback(peer_host):
        raise LoginRefused(username, LoginRefused.LOOPBACK_ONLY)
    return user


def certificate_user(access, login, peer_host: str | None) -> str:
    """The user of an EXTERNAL login on a connection whose TLS session gave ``login`` (a
    ``tls.CertificateLogin``, None without a verified client certificate), known to the user
    store ``access``. A refusal is ``refused`` (RabbitMQ's generic 403), its reason for the log only."""
    if login is None:
        raise refused("EXTERNAL", "EXTERNAL login without a verified client certificate "
                                  "(a plain connection, or TLS without a client certificate)")
    if login.name is None:
        raise refused("EXTERNAL", f"EXTERNAL login refused: {login.error}")
    try:
        check_certificate_login(access, login.name, peer_host)
    except LoginRefused as e:
        raise refused("EXTERNAL", f"certificate login refused for user '{login.name}': {e.reason}") from None
    return login.name


def refused(mechanism: str, detail: str, delay: float = 0.0) -> ConnectionAccessRefused:
    """A refused login: RabbitMQ's 403 on connection.start-ok (10, 11), its text the same for
    every reason; ``detail`` (why) goes to the log only, ``delay`` is the throttle's wait."""
    error = ConnectionAccessRefused(f"Login was refused using authentication mechanism {mechanism}. "
                                    "For details see the broker logfile.", 10, 11)
    error.log_detail = detail
    error.throttle_delay = delay
    return error


def password_login(users, throttle, mechanism: str, response: bytes, host: str | None) -> str:
    """The user of a PLAIN or AMQPLAIN login, checked against the user store ``users``
    (``authenticate``) and the failed-login throttle ``throttle`` (``login_throttle.py``; None:
    none), else ``refused``. A blocked address is refused without a password check; a failure
    counts in the throttle, which may delay its answer (``throttle_delay``) or block the address."""
    try:
        username, password = parse_response(mechanism, response)
    except ValueError as e:  # a malformed response is a failed login; the reason is logged only
        raise refused(mechanism, f"unreadable {mechanism} response: {e}") from None
    blocked = throttle.blocked_for(host) if throttle is not None else 0.0
    if blocked:  # refused without a password check; the client sees the usual refusal
        raise refused(mechanism, f"login refused for user '{username}': too many failed logins from {host}, "
                                 f"refused for {blocked:.0f}s more (login throttle)")
    try:
        user = users.authenticate(username, password, host)
    except LoginRefused as e:  # the user store says why (warren/access): for the log only
        detail, delay = f"login refused for user '{username}': {e.reason}", 0.0
        verdict = throttle.failed(host) if throttle is not None else None
        if verdict is not None and verdict.blocked:
            detail += (f"; {verdict.failures} failed logins from {host}: its logins are refused "
                       f"for {throttle.block_time:g}s (login throttle)")
        elif verdict is not None and verdict.delay:
            detail += (f"; failed login {verdict.failures} from {host}: answered after "
                       f"{verdict.delay:g}s (login throttle)")
            delay = verdict.delay
        raise refused(mechanism, detail, delay) from None
    return user.name  # the user store's string: one per user, not one per connection


def log_in(users, throttle, mechanism: str, response: bytes, host: str | None, *, certificate=None,
           offered=None, anonymous_user: str | None = None, start_offer: bytes | None = None) -> str:
    """The user a connection's login names, else ``ConnectionAccessRefused`` (``refused``).

    ``certificate``: the TLS session's ``tls.CertificateLogin`` (None without a verified client
    certificate), for EXTERNAL. ``offered``: the SASL mechanisms an AMQP 0-10 or 1.0 connection
    offered (None for 0-9-1, whose start-ok any mechanism name may reach): there ANONYMOUS, or
    ``""`` (1.0 without a SASL layer), logs in as ``anonymous_user`` when it is set, and a
    mechanism not offered is refused. ``start_offer``: what a 0-9-1 (0-8, 0-9) connection.start
    offered, its space-separated mechanisms (None: not checked); another mechanism is refused
    with RabbitMQ's 403 for it, the reason in the log."""
    # compared as text, never encoded: the name a client chose may hold any octets (surrogate escapes)
    if start_offer is not None and mechanism not in start_offer.decode("ascii").split():
        if not (mechanism == "EXTERNAL" and certificate is None):  # certificate_user says why: no certificate
            raise refused(mechanism, f"mechanism {mechanism} is not offered to this connection "
                                     f"(offered: {start_offer.decode() or 'none'}; auth-mechanisms)")
    if offered is not None:
        if mechanism in ("", "ANONYMOUS"):
            if not anonymous_user:
                raise _refused_plainly("ANONYMOUS login is not enabled (--anonymous-user)" if mechanism
                                       else "no SASL layer, and ANONYMOUS login is not enabled (--anonymous-user)")
            if mechanism == "ANONYMOUS" and mechanism not in offered:  # auth-mechanisms leaves it out
                raise _refused_plainly(f"unsupported SASL mechanism 'ANONYMOUS' (offered: {' '.join(offered)})")
            return anonymous_user
        if mechanism not in offered:
            raise _refused_plainly(f"unsupported SASL mechanism {mechanism!r} (offered: {' '.join(offered)})")
    if mechanism == "EXTERNAL":  # offered on TLS with a verified client certificate (warren/server/tls.py)
        return certificate_user(users, certificate, host)
    return password_login(users, throttle, mechanism, response, host)


def _refused_plainly(detail: str) -> ConnectionAccessRefused:
    """A SASL login refused before any user is named (0-10 and 1.0 answer it without this text)."""
    error = ConnectionAccessRefused("login refused", 10, 11)
    error.log_detail = detail
    return error


# --- the vhost of connection.open -------------------------------------------------------------


def unknown_vhost(name: str, username: str | None) -> NotAllowed:
    """The refusal of connection.open (10, 40) naming vhost ``name`` that does not exist."""
    error = NotAllowed(f"vhost {name} not found", 10, 40)
    error.log_detail = f"user '{username}' asked for unknown vhost '{name}'"
    return error


def vhost_of_hostname(hostname: str | None, default: str) -> str:
    """The vhost an AMQP 1.0 open's hostname names: ``vhost:NAME`` (RabbitMQ's convention), else
    ``default`` (``warren/server/handshake.py`` ``default_vhost``)."""
    hostname = hostname or ""
    return hostname[6:] if hostname.startswith("vhost:") else default
