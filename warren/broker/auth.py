"""SASL at connection.start-ok: the mechanisms offered (PLAIN and AMQPLAIN, as RabbitMQ enables
by default; EXTERNAL on verified TLS connections), reading a response into its user name and
password, and the user an EXTERNAL login names.

Users, their passwords and the login check itself are the access store's (``warren/access``:
``AccessControl.authenticate``, which the session, the ``--workers`` supervisor and the HTTP
API all ask).
"""

from __future__ import annotations

from warren.access.errors import LoginRefused
from warren.access.users import is_loopback
from warren.spec.fields import FieldDecodeError, decode_shortstr, decode_value
from warren.errors import ConnectionAccessRefused

__all__ = ["parse_response", "check_certificate_login", "certificate_user", "MECHANISMS", "MECHANISMS_WITH_EXTERNAL"]

MECHANISMS = b"PLAIN AMQPLAIN"
# on a TLS connection whose client certificate verified (warren/server/tls.py): the certificate
# login, RabbitMQ's rabbitmq_auth_mechanism_ssl; last, so a client choosing the first it knows
# still picks a password mechanism
MECHANISMS_WITH_EXTERNAL = MECHANISMS + b" EXTERNAL"


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
    store ``access``. A refusal is RabbitMQ's generic 403 ``ConnectionAccessRefused``; the
    reason is its ``log_detail``, for the log only. Asked by the 0-9-1 session and by the
    --workers supervisor, which runs the handshake of a TLS connection it relays."""
    refused = ConnectionAccessRefused(
        "Login was refused using authentication mechanism EXTERNAL. For details see the broker logfile.", 10, 11)
    if login is None:
        refused.log_detail = ("EXTERNAL login without a verified client certificate "
                              "(a plain connection, or TLS without a client certificate)")
        raise refused
    if login.name is None:
        refused.log_detail = f"EXTERNAL login refused: {login.error}"
        raise refused
    try:
        check_certificate_login(access, login.name, peer_host)
    except LoginRefused as e:
        refused.log_detail = f"certificate login refused for user '{login.name}': {e.reason}"
        raise refused from None
    return login.name
