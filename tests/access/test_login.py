"""The login and vhost step every handshake takes (warren/access/login.py), on its own: what each
mechanism gives, every refusal's reply and logged reason, the throttle's count and delay; the
single-process adapters and the --workers supervisor both call it, so these hold for both.

SASL responses from hostile clients (``parse_response``; moved here from
tests/broker/test_auth_response.py with the module): whatever the octets, a (user, password) pair or a
ValueError, which the login answers 403 ACCESS_REFUSED as a failed login (issue 16: a malformed
AMQPLAIN response used to leak IndexError/RecursionError, 541)."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings, strategies as st

from tests.spec.test_fields import mutations, nested_table
from warren.access import AccessControl
from warren.access.login import log_in, parse_response, unknown_vhost, vhost_of_hostname
from warren.access.login_throttle import FREE_FAILURES, LoginThrottle
from warren.errors import ConnectionAccessRefused, NotAllowed


def amqplain(**fields) -> bytes:
    out = b""
    for name, value in fields.items():
        v = value.encode()
        out += bytes([len(name)]) + name.encode() + b"S" + struct.pack(">I", len(v)) + v
    return out


GOOD = amqplain(LOGIN="guest", PASSWORD="guest")


def test_a_well_formed_amqplain_response_gives_the_credentials():
    assert parse_response("AMQPLAIN", GOOD) == ("guest", "guest")
    assert parse_response("PLAIN", b"\x00guest\x00secret") == ("guest", "secret")


@pytest.mark.parametrize("response", [
    GOOD[:-3],  # the table cut short (inside the password)
    GOOD + b"\x01nI\x00\x00",  # an integer cut short
    GOOD + b"\x01nZ\x00",  # an unknown type
    GOOD + b"\x20ab",  # a name running past the end
    GOOD + b"\x01nF" + nested_table(5000),  # a 5,000-deep table
    GOOD + b"\x01nT" + b"\xff" * 8,  # a timestamp no datetime can hold
    b"",
    amqplain(PASSWORD="guest"),
    b"\x05LOGINI\x00\x00\x00\x01\x08PASSWORDS\x00\x00\x00\x00",  # LOGIN not a string
], ids=["table-cut", "int-cut", "unknown-type", "name-past-end", "deep-5000", "huge-timestamp", "empty",
        "no-login", "login-int"])
def test_a_malformed_amqplain_response_is_a_value_error(response):
    with pytest.raises(ValueError):
        parse_response("AMQPLAIN", response)


@pytest.mark.parametrize("mechanism, response", [("PLAIN", b"guestguest"), ("PLAIN", b"\x00\xff\xfe\x00pw"),
                                                 ("EXTERNAL", b""), ("FOO", GOOD)])
def test_other_bad_responses_are_value_errors(mechanism, response):
    with pytest.raises(ValueError):
        parse_response(mechanism, response)


@settings(max_examples=500)
@given(st.sampled_from(["AMQPLAIN", "PLAIN"]),
       st.one_of(mutations(GOOD), st.binary(max_size=60), st.binary(max_size=40).map(lambda b: GOOD + b)))
def test_any_response_gives_credentials_or_a_value_error_only(mechanism, response):
    try:
        user, password = parse_response(mechanism, response)
    except ValueError:
        return
    assert isinstance(user, str) and isinstance(password, str)


# --- log_in: every mechanism, every refusal -----------------------------------------------------

PEER = "192.0.2.7"
GENERIC = "Login was refused using authentication mechanism {}. For details see the broker logfile."


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class CertificateLogin:  # what a verified client certificate gives (warren/server/tls.py)
    def __init__(self, name, error=None) -> None:
        self.name, self.error = name, error


@pytest.fixture
def users() -> AccessControl:
    access = AccessControl()  # in memory: guest/guest, loopback-only by default
    access.add_user("alice", "secret")
    return access


def refusal(call) -> ConnectionAccessRefused:
    with pytest.raises(ConnectionAccessRefused) as info:
        call()
    return info.value


def test_password_mechanisms_name_the_user_and_a_refusal_says_why_in_the_log_only(users):
    assert log_in(users, None, "PLAIN", b"\x00alice\x00secret", PEER) == "alice"
    assert log_in(users, None, "AMQPLAIN", amqplain(LOGIN="alice", PASSWORD="secret"), PEER) == "alice"
    e = refusal(lambda: log_in(users, None, "PLAIN", b"\x00alice\x00wrong", PEER))
    assert (e.reply_code, e.text, e.class_id, e.method_id) == (403, GENERIC.format("PLAIN"), 10, 11)
    assert e.log_detail == "login refused for user 'alice': wrong password" and e.throttle_delay == 0.0
    e = refusal(lambda: log_in(users, None, "AMQPLAIN", GOOD[:-3], PEER))
    assert e.text == GENERIC.format("AMQPLAIN") and e.log_detail.startswith("unreadable AMQPLAIN response: ")
    e = refusal(lambda: log_in(users, None, "PLAIN", b"\x00guest\x00guest", PEER))  # loopback-only user
    assert e.log_detail == "login refused for user 'guest': user may only connect via localhost (loopback_users)"


def test_the_throttle_counts_failures_delays_their_answer_then_blocks_the_address(users):
    throttle = LoginThrottle(delay=1.0, limit=FREE_FAILURES + 2, block_time=60.0, clock=Clock())
    wrong = b"\x00alice\x00wrong"
    for _ in range(FREE_FAILURES):
        assert refusal(lambda: log_in(users, throttle, "PLAIN", wrong, PEER)).throttle_delay == 0.0
    e = refusal(lambda: log_in(users, throttle, "PLAIN", wrong, PEER))
    assert e.throttle_delay == 1.0
    assert e.log_detail.endswith(f"; failed login {FREE_FAILURES + 1} from {PEER}: answered after 1s (login throttle)")
    e = refusal(lambda: log_in(users, throttle, "PLAIN", wrong, PEER))
    assert e.throttle_delay == 0.0
    assert e.log_detail.endswith(f"; {FREE_FAILURES + 2} failed logins from {PEER}: its logins are refused for 60s "
                                 "(login throttle)")
    e = refusal(lambda: log_in(users, throttle, "PLAIN", b"\x00alice\x00secret", PEER))  # no password check
    assert e.log_detail == (f"login refused for user 'alice': too many failed logins from {PEER}, "
                            "refused for 60s more (login throttle)")


def test_external_names_the_certificates_user_known_to_the_store(users):
    assert log_in(users, None, "EXTERNAL", b"", PEER, certificate=CertificateLogin("alice")) == "alice"
    details = [refusal(lambda c=c: log_in(users, None, "EXTERNAL", b"", PEER, certificate=c)).log_detail
               for c in (None, CertificateLogin(None, "no CN"), CertificateLogin("mallory"))]
    assert details == ["EXTERNAL login without a verified client certificate (a plain connection, or TLS without "
                       "a client certificate)", "EXTERNAL login refused: no CN",
                       "certificate login refused for user 'mallory': unknown user"]


def test_sasl_anonymous_only_with_an_anonymous_user_and_only_offered_mechanisms():
    users = AccessControl()
    offered = ("PLAIN", "ANONYMOUS")
    assert log_in(users, None, "ANONYMOUS", b"", PEER, offered=offered, anonymous_user="guest") == "guest"
    assert log_in(users, None, "", b"", PEER, offered=("PLAIN",), anonymous_user="guest") == "guest"  # no SASL layer
    details = [refusal(lambda m=m: log_in(users, None, m, b"", PEER, offered=("PLAIN",))).log_detail
               for m in ("ANONYMOUS", "", "EXTERNAL", "CRAM-MD5")]
    assert details == ["ANONYMOUS login is not enabled (--anonymous-user)",
                       "no SASL layer, and ANONYMOUS login is not enabled (--anonymous-user)",
                       "unsupported SASL mechanism 'EXTERNAL' (offered: PLAIN)",
                       "unsupported SASL mechanism 'CRAM-MD5' (offered: PLAIN)"]
    # 0-9-1 (nothing offered to check against) knows no ANONYMOUS: a password mechanism it cannot read
    e = refusal(lambda: log_in(users, None, "ANONYMOUS", b"", PEER, anonymous_user="guest"))
    assert e.log_detail == "unreadable ANONYMOUS response: unsupported mechanism 'ANONYMOUS'"


def test_the_vhost_step():
    e = unknown_vhost("nope", "alice")
    assert isinstance(e, NotAllowed) and (e.reply_code, e.text, e.class_id, e.method_id) == (530, "vhost nope not found",
                                                                                           10, 40)
    assert e.log_detail == "user 'alice' asked for unknown vhost 'nope'"
    assert [vhost_of_hostname(h, "/") for h in (None, "", "vhost:v1", "vhost:", "example.com")] == \
        ["/", "/", "v1", "", "/"]
